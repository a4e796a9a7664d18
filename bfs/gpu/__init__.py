"""The level steps on GPUs: the CUDA C++ kernels (``.cu`` files in this package, compiled by NVRTC through
``cupy.RawModule``) and the Python that launches them -- the engine's backend, the batched kernels, and
levels captured as CUDA graphs (:mod:`.level_graphs`).  The modules that launch kernels import CuPy when
they are imported; :mod:`.cuda_source` and :mod:`.level_graphs` (whose host-side decisions are tested on
CPUs) do not.
"""
