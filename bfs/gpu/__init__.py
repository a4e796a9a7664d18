"""The level steps on GPUs: the CUDA C++ kernels (``.cu`` files in this package, compiled by NVRTC through
``cupy.RawModule``) and the Python that launches them -- the engine's backend, the batched kernels, and
levels captured as CUDA graphs (:mod:`.level_graphs`).  Importing a module here imports CuPy (but
:mod:`.level_graphs`, whose host-side decisions are tested on CPUs).
"""
