"""The examples in the library's docstrings run as written.

Every module of ``breadth.bfs``, ``breadth.io`` and ``breadth.pipeline`` that imports on this machine is
searched for doctests; an example that needs a cluster, a GPU or a file marks itself ``# doctest: +SKIP``.
Modules that need CuPy at import are skipped where CuPy is missing (they are collected on a GPU machine).
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

PACKAGES = ("breadth.bfs", "breadth.io", "breadth.pipeline")


def _modules() -> list[str]:
    names = []
    for pkg_name in PACKAGES:
        pkg = importlib.import_module(pkg_name)
        names.append(pkg_name)
        names += [m.name for m in pkgutil.walk_packages(pkg.__path__, prefix=pkg_name + ".")]
    return sorted(names)


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples(name: str) -> None:
    try:
        module = importlib.import_module(name)
    except ImportError as e:
        if "cupy" in str(e).lower() or "cudf" in str(e).lower() or "ucxx" in str(e).lower():
            pytest.skip(f"{name} needs {e.name or 'a GPU library'} at import")
        raise
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in finder.find(module, name):  # each example sees its module's names, as `python -m doctest`
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} docstring examples in {name} failed"
