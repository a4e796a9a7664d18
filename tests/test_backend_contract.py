"""The backend contract (:class:`breadth.bfs.engine.backend.Backend` and its capabilities): the engines ask a backend
for nothing it does not declare, test declared flags rather than probe, and the CPU and GPU backends implement what
they declare (the GPU's read from its source: CuPy is not needed)."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

import breadth.bfs as bfs_pkg
from breadth.bfs.engine.backend import CAPABILITIES, AsyncLevels, Backend, DeviceChecks, cpu_backend, members

ROOT = Path(bfs_pkg.__file__).parent
#: the code that drives a backend: the engines and validation (which asks for the device checks)
DRIVERS = sorted((ROOT / "engine").glob("*.py")) + [ROOT / "graph500" / "validate.py"]
DECLARED = members(Backend) | members(AsyncLevels) | members(DeviceChecks)


def _holders(trees) -> set[str]:
    """Attribute names that hold a backend: ``X.NAME = get_backend(...)`` somewhere in the drivers."""
    out = set()
    for tree in trees:
        for node in ast.walk(tree):
            if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                    and getattr(node.value.func, "id", getattr(node.value.func, "attr", None)) == "get_backend"):
                out |= {t.attr for t in node.targets if isinstance(t, ast.Attribute)}
    return out


def _backend_uses(tree, holders: set[str]) -> list[tuple[str, int, str]]:
    """``(kind, line, name)`` for every attribute read on a backend (``kind`` "attr"), every ``hasattr``/
    ``getattr`` on one ("probe") and every ``isinstance`` against a backend class ("isinstance").  A backend is
    ``X.NAME`` for a holder ``NAME``, or a local name bound to one (``b = self.b``, ``s, b = ..., e.b``)."""
    found = []
    for fn in [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))] + [tree]:
        local: set[str] = set()

        def is_backend(e) -> bool:
            return (isinstance(e, ast.Attribute) and e.attr in holders) or (isinstance(e, ast.Name) and e.id in local)

        for node in ast.walk(fn):
            if isinstance(node, ast.Assign):
                for tgt in node.targets:
                    pairs = (zip(tgt.elts, node.value.elts) if isinstance(tgt, ast.Tuple) and
                             isinstance(node.value, ast.Tuple) else [(tgt, node.value)])
                    local |= {t.id for t, v in pairs if isinstance(t, ast.Name) and is_backend(v)}
        for node in ast.walk(fn):
            if isinstance(node, ast.Attribute) and is_backend(node.value):
                found.append(("attr", node.lineno, node.attr))
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                if node.func.id in ("hasattr", "getattr") and node.args and is_backend(node.args[0]):
                    found.append(("probe", node.lineno, ast.unparse(node)))
                if node.func.id == "isinstance" and "Backend" in ast.unparse(node.args[1]):
                    found.append(("isinstance", node.lineno, ast.unparse(node)))
    return sorted(set(found))


@pytest.fixture(scope="module")
def uses():
    trees = {p: ast.parse(p.read_text()) for p in DRIVERS}
    holders = _holders(trees.values())
    assert {"b", "rb", "tb"} <= holders  # the engine's backend, and the 2D engine's row and top-down ones
    return {p.relative_to(ROOT).as_posix(): _backend_uses(t, holders) for p, t in trees.items()}


def test_drivers_ask_only_for_declared_names(uses):
    undeclared = [f"{path}:{line} {name}" for path, found in uses.items() for kind, line, name in found
                  if kind == "attr" and name not in DECLARED]
    assert not undeclared, f"backend names the protocol does not declare: {undeclared}"
    seen = {name for found in uses.values() for _, _, name in found}
    # (the walk finds the single, device and one-round engines' calls, and validation's)
    assert {"top_down_step", "bottom_up_step", "claim_pairs_async", "top_down_g", "row_violations"} <= seen


def test_drivers_test_flags_never_probe(uses):
    probes = [f"{path}:{line} {code}" for path, found in uses.items() for kind, line, code in found
              if kind != "attr"]
    assert not probes, probes


def _params(fn) -> list[str]:
    sig = inspect.signature(fn)
    return [n for n, p in sig.parameters.items() if n != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]


def test_cpu_backend_implements_what_it_declares():
    b = cpu_backend()
    missing = sorted(n for n in members(Backend) if not hasattr(b, n))
    assert not missing, missing
    for flag, protocol in CAPABILITIES.items():
        assert isinstance(getattr(b, flag), bool), flag
        if getattr(b, flag) and protocol is not None:
            assert members(protocol) <= set(dir(b)), flag
    for name in members(Backend):
        declared = vars(Backend).get(name)
        impl = getattr(type(b), name, None)
        if inspect.isfunction(declared) and inspect.isfunction(impl):  # (Numba kernels carry no signature)
            assert set(_params(declared)) <= set(_params(impl)), name


def _class_names(path: Path, cls: str) -> tuple[dict[str, ast.AST], dict[str, object]]:
    """A class's own names (methods, class attributes) as AST nodes, and its class-level constants."""
    tree = ast.parse(path.read_text())
    node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    names, consts = {}, {}
    for item in node.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names[item.name] = item
        elif isinstance(item, ast.Assign):
            for t in item.targets:
                if isinstance(t, ast.Name):
                    names[t.id] = item
                    if isinstance(item.value, ast.Constant):
                        consts[t.id] = item.value.value
    return names, consts


def test_gpu_backend_implements_what_it_declares():
    """Read from ``bfs/gpu/backend.py`` (no CuPy here): every required name, every flag declared, every method of
    the capabilities it declares, each accepting the parameters the protocol names."""
    names, consts = _class_names(ROOT / "gpu" / "backend.py", "GpuBackend")
    missing = sorted(members(Backend) - set(names))
    assert not missing, missing
    wanted = set(members(Backend))
    for flag, protocol in CAPABILITIES.items():
        assert isinstance(consts.get(flag), bool), f"GpuBackend does not declare {flag}"
        if consts[flag] and protocol is not None:
            assert members(protocol) <= set(names), sorted(members(protocol) - set(names))
            wanted |= members(protocol)
    assert consts["async_levels"] and consts["checks_on_device"]  # (what the device engine and checks rely on)
    for name in sorted(wanted):
        node = names[name]
        proto = next(vars(p).get(name) for p in (Backend, AsyncLevels, DeviceChecks) if name in members(p))
        if isinstance(node, ast.FunctionDef) and inspect.isfunction(proto):
            has = {a.arg for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs}
            assert set(_params(proto)) <= has, (name, sorted(set(_params(proto)) - has))


def test_batch_kernels_match_and_cover_the_batched_engine():
    """The batched engine's kernel sets (:mod:`breadth.bfs.engine.batch_backend`): the CPU's and the GPU's (read
    from its source) name the same things, and the batched engine and its drivers ask for nothing else."""
    from breadth.bfs.engine.batch_backend import cpu_batch_kernels

    cpu = set(vars(cpu_batch_kernels()))
    tree = ast.parse((ROOT / "gpu" / "batch_kernels.py").read_text())
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "gpu_batch_kernels")
    call = next(n for n in ast.walk(fn) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "SimpleNamespace")
    assert {kw.arg for kw in call.keywords} == cpu
    asked = set()
    for path in ("engine/batch_engine.py", "engine/batch_search.py", "graph500/driver.py"):
        for node in ast.walk(ast.parse((ROOT / path).read_text())):
            # BatchEngine.k (``self.k``, ``engine.k``) and its local alias ``k``
            if isinstance(node, ast.Attribute) and ((isinstance(node.value, ast.Attribute) and node.value.attr == "k")
                                                    or (isinstance(node.value, ast.Name) and node.value.id == "k")):
                asked.add(node.attr)
    assert {"top_down_step", "bottom_up_step", "finish_touched", "validation"} <= asked
    assert asked <= cpu, sorted(asked - cpu)
