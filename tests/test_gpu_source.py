"""The GPU kernels' CUDA C++ parses, checked on the CPU: NVRTC compiles it only on a GPU machine, where a
typo costs a device run.  ``tests/cuda_syntax_shim.h`` declares the CUDA built-ins the sources use (as host
C++), and ``g++ -fsyntax-only`` reads the ``.cu`` files as the installed package carries them
(``bfs/gpu/kernels.cu`` for 32- and 64-bit column ids, the peer-memory round ``bfs/gpu/peer_push.cu``;
``tests/test_bfs_batch.py`` checks ``bfs/gpu/batch_kernels.cu``).  It checks names, types and declarations,
not device semantics.  The kernels the Python side compiles and launches are checked to be defined there,
read without importing the modules (they need CuPy)."""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_KERNEL = re.compile(r'extern\s+"C"\s+__global__\s+void\s+(\w+)\s*\(')


def _kernel_source(name: str = "kernels.cu") -> str:
    """The CUDA source file ``name`` of the installed ``breadth.bfs.gpu``, read as the GPU modules read it."""
    from breadth.bfs.gpu.cuda_source import read

    return read(name)


def _kernel_names(module: str) -> tuple[set[str], set[str]]:
    """Kernel names in ``breadth.bfs.<module>``'s installed source, read without importing it: the names it
    compiles (its ``*KERNELS`` tuple and ``get_function`` arguments) and the names it launches
    (``k["name"]``, ``_kern(...)["name"]``, ``_module(...)["name"]``)."""
    path = importlib.util.find_spec(f"breadth.bfs.{module}").origin
    tree = ast.parse(open(path).read())
    compiled, launched = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "").endswith("KERNELS") for t in node.targets):
            compiled |= set(ast.literal_eval(node.value))
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "get_function"
              and isinstance(node.args[0], ast.Constant)):
            compiled.add(node.args[0].value)
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            v = node.value
            f = v.func if isinstance(v, ast.Call) else None
            called = getattr(f, "id", getattr(f, "attr", None))
            if (isinstance(v, ast.Name) and v.id == "k") or called in ("_kern", "_module"):
                launched.add(node.slice.value)
    return compiled, launched


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
@pytest.mark.parametrize("name,defines", [("kernels.cu", []), ("kernels.cu", ["-DCOL64"]), ("peer_push.cu", [])],
                         ids=["col32", "col64", "peer_memory"])
def test_cuda_source_parses(tmp_path, name, defines):
    src = tmp_path / "kernels.cu"
    src.write_text(f'#include "{os.path.join(ROOT, "tests", "cuda_syntax_shim.h")}"\n' + _kernel_source(name))
    res = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", "-x", "c++", *defines, str(src)],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]


@pytest.mark.parametrize("name,compiler,launchers", [
    ("kernels.cu", "gpu.kernels", ["gpu.kernels", "gpu.backend"]),
    ("peer_push.cu", "transport.peer_memory", ["transport.peer_memory"]),
    ("batch_kernels.cu", "gpu.batch_kernels", ["gpu.batch_kernels"]),
])
def test_installed_cuda_sources_define_every_kernel_the_python_side_launches(name, compiler, launchers):
    """A kernel renamed or dropped in a ``.cu`` file, or a ``.cu`` file missing from the installed package
    (``package-data``), fails here rather than at the first launch on a GPU."""
    defined = set(_KERNEL.findall(_kernel_source(name)))
    compiled, _ = _kernel_names(compiler)
    launched = set().union(*(_kernel_names(m)[1] for m in launchers))
    assert compiled, f"breadth.bfs.{compiler} compiles no kernel of {name}"
    assert not compiled - defined, f"compiled but not defined in {name}: {sorted(compiled - defined)}"
    assert not launched - compiled, f"launched but never compiled: {sorted(launched - compiled)}"


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
    from breadth.pipeline.cluster.gpu_kernel_cache import kernels_digest

    gen = "pipeline/sources/kronecker_gpu.py"
    a = kernels_digest({"bfs/gpu/kernels.cu": b"x", gen: b"y"}, "cupy 14; sm_90")
    assert a == kernels_digest({gen: b"y", "bfs/gpu/kernels.cu": b"x"}, "cupy 14; sm_90")
    assert a != kernels_digest({"bfs/gpu/kernels.cu": b"x2", gen: b"y"}, "cupy 14; sm_90")
    assert a != kernels_digest({"bfs/gpu/kernels.cu": b"x", gen: b"y"}, "cupy 14; sm_100")


def test_kernel_cache_reads_every_kernel_source_from_the_installed_packages():
    """The warm-up's marker digests :data:`KERNEL_SOURCES` as installed, ``.cu`` package data included."""
    from breadth.pipeline.cluster.gpu_kernel_cache import KERNEL_SOURCES, kernel_sources

    sources = kernel_sources()
    assert sorted(sources) == sorted(KERNEL_SOURCES) and all(sources.values())
    assert any(rel.endswith(".cu") for rel in sources)
    assert b'extern "C" __global__ void td_expand(' in sources["bfs/gpu/kernels.cu"]
