"""The sources, where edge lists come from: the Graph500 Kronecker generator (``kronecker``, with its
NumPy-only and CuPy twins ``kronecker_numpy`` and ``kronecker_gpu``), the readers of every registered file
format (``file_sources``: SNAP text, CSV, Matrix Market, Parquet, parsed into chunks by :mod:`breadth.io`)
and two columns of a Dask DataFrame (``dataframe``).  Each returns a lazy
:class:`~breadth.pipeline.edges.EdgeList` of dense ids -- the readers and the DataFrame source through the
relabeling (:mod:`breadth.pipeline.relabel`) -- which :func:`~breadth.pipeline.prepare` turns into shards.
Ids that are dense already come in through :func:`~breadth.pipeline.from_dask_array`, beside the
:class:`~breadth.pipeline.edges.EdgeList` itself.
"""
