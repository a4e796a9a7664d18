"""Which transport a session picks, and the UCX progress settings a local cluster on UCX starts with."""

from __future__ import annotations

import pytest

from breadth.bfs.engine.session import resolve_protocol
from breadth.bfs.transport.registry import ucx_available
from breadth.pipeline.cluster.cluster import ucx_progress_environ


def test_ucx_cluster_gets_a_progress_thread(monkeypatch):
    monkeypatch.delenv("UCXPY_PROGRESS_MODE", raising=False)
    monkeypatch.delenv("UCXPY_ENABLE_PYTHON_FUTURE", raising=False)
    assert ucx_progress_environ("ucx") == {"UCXPY_PROGRESS_MODE": "thread", "UCXPY_ENABLE_PYTHON_FUTURE": "1"}
    assert ucx_progress_environ("ucxx") == ucx_progress_environ("ucx")
    assert ucx_progress_environ("tcp") == {}


def test_user_ucx_settings_win(monkeypatch):
    monkeypatch.setenv("UCXPY_PROGRESS_MODE", "polling")
    monkeypatch.delenv("UCXPY_ENABLE_PYTHON_FUTURE", raising=False)
    assert ucx_progress_environ("ucx") == {"UCXPY_ENABLE_PYTHON_FUTURE": "1"}


@pytest.mark.parametrize("shared", [False, True])
def test_auto_protocol(shared):
    assert resolve_protocol("auto", "cpu", 3, shared) == "tcp"
    assert resolve_protocol("auto", "gpu", 1, shared) == "self"
    assert resolve_protocol("tcp", "gpu", 2, shared) == "tcp"


def test_ranks_sharing_a_gpu_never_get_nccl():
    # NCCL refuses two ranks on one device: UCX moves their device buffers where ucxx imports, else TCP
    assert resolve_protocol("auto", "gpu", 2, shared_gpu=True) == ("ucx" if ucx_available() else "tcp")


def test_gpu_workers_keep_the_callers_visible_devices():
    """A batch scheduler's allocation (``CUDA_VISIBLE_DEVICES=2,3`` or UUIDs) names the GPUs the workers get, in
    its order; without the variable, the GPUs by index."""
    from breadth.pipeline.cluster.cluster import visible_devices

    assert visible_devices(2, {"CUDA_VISIBLE_DEVICES": "2,3"}) == ["2", "3"]
    assert visible_devices(1, {"CUDA_VISIBLE_DEVICES": "GPU-8f1e, GPU-77aa"}) == ["GPU-8f1e"]  # one usable
    assert visible_devices(3, {}) == [0, 1, 2]
