"""GPU workers get the GPUs the caller sees: with ``CUDA_VISIBLE_DEVICES`` set (here to the GPU's UUID, as a
batch scheduler may set it), both kinds of local GPU cluster hand that entry to their workers, not an index.

Skipped (not faked) without CuPy, dask-cuda or a CUDA device, as on CI; run on a GPU machine.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from conftest import gpu_module

cp, pytestmark = gpu_module()
pytest.importorskip("dask_cuda", reason="dask-cuda is not installed")

from breadth.pipeline.cluster.cluster import local_cuda_cluster  # noqa: E402


def _seen():
    import cupy

    return os.environ["CUDA_VISIBLE_DEVICES"], int(cupy.arange(4).sum())


@pytest.mark.parametrize("ranks_per_gpu", [1, 2])
def test_workers_get_the_callers_device_entries(monkeypatch, ranks_per_gpu):
    uuid = subprocess.run(["nvidia-smi", "--query-gpu=uuid", "--format=csv,noheader", "-i", "0"],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert uuid.startswith(("GPU-", "MIG-")), uuid
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", uuid)
    client = local_cuda_cluster(workers=ranks_per_gpu, ranks_per_gpu=ranks_per_gpu, mps=False)
    try:
        seen = client.run(_seen)
    finally:
        cluster = client.cluster
        client.close()
        cluster.close()
    assert len(seen) == ranks_per_gpu
    assert all(v == (uuid, 6) for v in seen.values()), seen
