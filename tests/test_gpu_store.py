"""A stored graph loaded onto GPU workers searches as the same graph prepared on them in memory: the same
levels and per-level directions, and the same kernels as the engines describe them (device arrays,
degree-ordered bottom-up rows, captured levels).  Skipped where CuPy or a CUDA device is absent."""

from __future__ import annotations

import os

import numpy as np
import pytest

from conftest import closing, gpu_module

cp, pytestmark = gpu_module()

DATA = os.path.join(os.path.dirname(__file__), "data")


@pytest.fixture(scope="module")
def gclient():
    from breadth.pipeline.cluster.cluster import local_cuda_cluster

    yield from closing(local_cuda_cluster(workers=1))


def _directions(result) -> list[list[str]]:
    return [[lv["direction"] for lv in row["levels"]] for row in result.rows]


def test_a_stored_graph_on_the_gpu_takes_the_in_memory_kernels(gclient, tmp_path):
    from breadth.bfs import bfs, graph500
    from breadth.io import load_store, write_store
    from breadth.pipeline import kronecker, prepare

    mem = prepare(kronecker(16, seed=2, device="gpu"), gclient, device="gpu")
    path = str(tmp_path / "k16.store")
    write_store(prepare(kronecker(16, seed=2), gclient, search_order=False), path)  # written from the CPU
    stored = load_store(path, gclient, device="gpu")
    assert stored.backend == "gpu"
    a, b = (graph500(g, nroots=8, seed=5) for g in (mem, stored))
    assert a.valid and b.valid
    assert [r["nedge"] for r in a.rows] == [r["nedge"] for r in b.rows]
    assert _directions(a) == _directions(b) and "bu" in sum(_directions(a), [])
    assert a.engines == b.engines
    assert a.engines[0]["arrays"] == "device" and a.engines[0]["bottom_up_rows"] == "degree-ordered"
    np.testing.assert_array_equal(bfs(mem, 7).level, bfs(stored, 7).level)
    mem.release()
    stored.release()


def test_a_first_format_store_loads_onto_the_gpu(gclient):
    from breadth.bfs import bfs
    from breadth.io import load_store
    from breadth.pipeline import kronecker, prepare

    old = load_store(os.path.join(DATA, "store-v1-kron7"), gclient, device="gpu")
    new = prepare(kronecker(7, seed=1), gclient)
    np.testing.assert_array_equal(bfs(old, 5).level, bfs(new, 5).level)
    old.release()
    new.release()
