"""Which device a job runs on: ``"cpu"``, ``"gpu"`` or ``"auto"`` resolved against what this machine has."""

from __future__ import annotations


def gpu_available() -> bool:
    """True when CuPy imports and sees at least one CUDA device (nothing is imported on CPU installs
    beyond the failed ``import cupy``)."""
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # no CuPy, no driver, no device: all mean "no GPU here"
        return False


def resolve_device(device: str) -> str:
    """``"cpu"``, ``"gpu"`` or ``"auto"`` (GPU when :func:`gpu_available`) -> ``"cpu"`` or ``"gpu"``."""
    if device == "auto":
        return "gpu" if gpu_available() else "cpu"
    if device not in ("cpu", "gpu"):
        raise ValueError(f"device must be 'cpu', 'gpu' or 'auto', got {device!r}")
    return device
