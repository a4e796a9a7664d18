"""The array kernels beneath the shuffle and the build: cutting an edge chunk into one
:class:`~breadth.pipeline.kernels.piece.Piece` of ``[row, column]`` entries per owner (``partition``),
grouping an owner's entries by row batch (``batch_sort``) and building CSR rows from such entries
(``build_csr``), each in three twins -- Numba on the CPU, NumPy alone (``build_csr_numpy``, for workers that
never load Numba) and CuPy on the GPU (``build_csr_gpu``).  :func:`~breadth.pipeline.kernels.array_backend.backend`
binds one set for a worker's device: the shuffle's chunk tasks (:mod:`breadth.pipeline.shuffle`) call its
split, the owners (:mod:`breadth.pipeline.build`) its batch sort and CSR build.  Nothing here knows of Dask
or of the shuffle's tiers: arrays in, arrays and shards out.
"""
