"""The GPU kernels' CUDA C++ parses, checked on the CPU: NVRTC compiles it only on a GPU machine, where a
typo costs a device run.  ``tests/cuda_syntax_shim.h`` declares the CUDA built-ins the source uses (as
host C++), and ``g++ -fsyntax-only`` reads the source as ``bfs/gpu/kernels.py`` embeds it, for 32- and
64-bit column ids, and the peer-memory round of ``bfs/transport/peer_memory.py``.  It checks names, types and
declarations, not device semantics."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _kernel_source(module: str = "gpu/kernels") -> str:
    """``_SOURCE`` of bfs/<module>.py, read without importing the module (it needs CuPy)."""
    tree = ast.parse(open(os.path.join(ROOT, "bfs", module + ".py")).read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "_SOURCE" for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"bfs/{module}.py has no _SOURCE")


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
@pytest.mark.parametrize("module,defines", [("gpu/kernels", []), ("gpu/kernels", ["-DCOL64"]),
                                            ("transport/peer_memory", [])],
                         ids=["col32", "col64", "peer_memory"])
def test_cuda_source_parses(tmp_path, module, defines):
    src = tmp_path / "kernels.cu"
    src.write_text(f'#include "{os.path.join(ROOT, "tests", "cuda_syntax_shim.h")}"\n' + _kernel_source(module))
    res = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", "-x", "c++", *defines, str(src)],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]


def test_shim_catches_a_redeclaration(tmp_path):
    """The check can fail: a kernel whose parameter is redeclared in its body (the error NVRTC gave on
    the GPU machine once) is refused."""
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed")
    bad = _kernel_source().replace("i64 step, i64 n,", "i64 stride, i64 n,", 1)
    assert bad != _kernel_source()
    src = tmp_path / "bad.cu"
    src.write_text(f'#include "{os.path.join(ROOT, "tests", "cuda_syntax_shim.h")}"\n' + bad)
    res = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", "-x", "c++", str(src)], capture_output=True, text=True)
    assert res.returncode != 0 and "stride" in res.stderr


def test_kernel_cache_marker_names_one_version_of_the_kernels_and_one_toolchain():
    from breadth.pipeline.gpu_kernel_cache import kernels_digest

    a = kernels_digest({"bfs/gpu/kernels.py": b"x", "pipeline/kronecker_gpu.py": b"y"}, "cupy 14; sm_90")
    assert a == kernels_digest({"pipeline/kronecker_gpu.py": b"y", "bfs/gpu/kernels.py": b"x"}, "cupy 14; sm_90")
    assert a != kernels_digest({"bfs/gpu/kernels.py": b"x2", "pipeline/kronecker_gpu.py": b"y"}, "cupy 14; sm_90")
    assert a != kernels_digest({"bfs/gpu/kernels.py": b"x", "pipeline/kronecker_gpu.py": b"y"}, "cupy 14; sm_100")
