"""Package namespaces whose public names load on first use.

Why: Dask starts worker processes by *spawning* them, and a spawned process first re-imports the parent's
main module -- for the ``breadth`` console script, ``breadth.pipeline.cli.cli`` and so the ``breadth.pipeline``
package.  If that package imported its modules eagerly, every worker would import Numba (and pandas,
pyarrow, the kernels ...) before its nanny sets ``NUMBA_NUM_THREADS``: Numba then fixes its thread pool at
the machine's core count, a later compile fails with "Cannot set NUMBA_NUM_THREADS to a different value",
and an idle worker holds twice the memory it needs.  With lazy namespaces, ``import breadth.pipeline``
costs nothing and a worker imports only the modules its tasks use.

Several public names are also module names (``breadth.bfs.graph500`` is a sub-package and the function
its driver defines).  Importing a submodule makes the import system set the package attribute of the same
name to the module; :class:`LazyPackage` keeps the exported function there instead, as an eager ``from
.graph500.driver import graph500`` would.  The submodule itself stays importable (``from
breadth.bfs.graph500.driver import ...``).

>>> install(__name__, {"graph500": ".graph500.driver"})         # doctest: +SKIP
"""

from __future__ import annotations

import importlib
import sys
import types


class LazyPackage(types.ModuleType):
    """A package module whose exported names (``_lazy_exports``: name -> relative module) import on first
    access, and are never replaced by a submodule of the same name."""

    _lazy_exports: dict[str, str]

    def __getattr__(self, name: str):
        exports = self.__dict__.get("_lazy_exports", {})
        if name not in exports:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(exports[name], self.__name__), name)
        self.__dict__[name] = value
        return value

    def __setattr__(self, name: str, value) -> None:
        exports = self.__dict__.get("_lazy_exports", {})
        if name in exports and isinstance(value, types.ModuleType) and value.__name__ == f"{self.__name__}.{name}":
            return  # a submodule named like an export: the package attribute stays the export
        super().__setattr__(name, value)

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(self.__dict__.get("_lazy_exports", {})))


def install(package: str, exports: dict[str, str]) -> None:
    """Make ``package`` (a ``__name__``, called from its ``__init__``) a :class:`LazyPackage` exporting
    ``exports``: public name -> module relative to the package that defines it."""
    module = sys.modules[package]
    module.__class__ = LazyPackage
    module.__dict__["_lazy_exports"] = dict(exports)


def resolve(ref):
    """The object a registry entry names: ``ref`` itself when it is not a string, else ``"module:name"``
    imported (``name`` may be dotted: ``"pkg.mod:Class.method"``).  Registries name their entries' code this
    way so that listing them imports nothing, and a lower layer can name a higher layer's function without
    importing it.

    >>> resolve("os.path:join")("a", "b")
    'a/b'
    >>> resolve(len) is len
    True
    """
    if not isinstance(ref, str):
        return ref
    module, _, name = ref.partition(":")
    value = importlib.import_module(module)
    for part in name.split("."):
        value = getattr(value, part)
    return value
