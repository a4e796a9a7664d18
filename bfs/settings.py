"""breadth's settings: the ``breadth`` namespace of Dask's configuration, one place for every tunable.

Their defaults ship as ``breadth.yaml`` beside this module and are added to ``dask.config`` when
:mod:`breadth.bfs` is first imported (:func:`load_defaults`, as Dask's own libraries add theirs), so Dask
reads a value from any of its three places:

* a YAML file of Dask's configuration (``~/.config/dask/*.yaml``), under ``breadth:``;
* the environment: ``DASK_BREADTH__SEARCH__BETA=30`` (Dask parses the value as a Python literal);
* code: ``dask.config.set({"breadth.search.level_graphs": False})``.

Two objects carry them: :class:`~breadth.bfs.search_config.SearchConfig` (``breadth.search.*``) and
:class:`~breadth.pipeline.prepare_config.PrepareConfig` (``breadth.prepare.*`` and ``breadth.shuffle.*``),
each built by its ``from_config`` (:func:`read`), which checks every value and names the setting of a bad
one.

>>> import dask
>>> from breadth.bfs.settings import read
>>> from breadth.bfs import SearchConfig
>>> with dask.config.set({"breadth.search.beta": 30}):
...     read(SearchConfig, SearchConfig.SETTINGS)["beta"]
30.0
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any, TypeVar

#: the defaults' file, shipped in the package
DEFAULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "breadth.yaml")
#: the sections of the ``breadth`` namespace
SECTIONS = ("search", "prepare", "shuffle")


def load_defaults() -> None:
    """Add :data:`DEFAULTS` to Dask's configuration (values already set -- a YAML file of Dask's, the
    environment, :func:`dask.config.set` -- keep theirs)."""
    import dask.config
    import yaml

    with open(DEFAULTS) as f:
        dask.config.update_defaults(yaml.safe_load(f))


def env_name(key: str) -> str:
    """The environment variable that sets Dask setting ``key``.

    >>> env_name("breadth.search.level_graphs")
    'DASK_BREADTH__SEARCH__LEVEL_GRAPHS'
    """
    return "DASK_" + key.upper().replace(".", "__")


def _what(key: str) -> str:
    return f"Dask setting {key} ({env_name(key)})"


def _coerce(key: str, kind: str, value: Any, choices: tuple | None) -> Any:
    """``value`` of setting ``key`` as a field of type ``kind`` (the dataclass annotation's text)."""
    if value is None and kind.endswith(" | None"):
        return None
    base = kind.removesuffix(" | None")
    if base == "bool":
        # 0 and 1 too: DASK_BREADTH__SEARCH__LEVEL_GRAPHS=0 is Python's literal 0
        if isinstance(value, bool) or (isinstance(value, int) and value in (0, 1)):
            return bool(value)
        raise ValueError(f"{_what(key)} must be true or false, got {value!r}")
    if base == "float":
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise ValueError(f"{_what(key)} must be a number{' or null' if kind != base else ''}, got {value!r}")
    if base == "int":
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return int(value)
        raise ValueError(f"{_what(key)} must be an integer >= 0{' or null' if kind != base else ''}, "
                         f"got {value!r}")
    if base == "tuple[int, int]":
        if (isinstance(value, (list, tuple)) and len(value) == 2
                and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value)):
            return (int(value[0]), int(value[1]))
        raise ValueError(f"{_what(key)} must be two integers > 0, [small, large], or null, got {value!r}")
    if base == "str":
        if isinstance(value, str) and (choices is None or value in choices):
            return value
        what = f"one of {', '.join(choices)}" if choices else "a string"
        raise ValueError(f"{_what(key)} must be {what}, got {value!r}")
    raise TypeError(f"no reader for a setting of type {kind!r} ({key})")


def _section(name: str) -> dict[str, Any]:
    """The settings under ``breadth.NAME``, their names with underscores (Dask takes ``level-graphs`` and
    ``level_graphs`` alike)."""
    import dask.config

    got = dask.config.get(f"breadth.{name}", None) or {}
    if not isinstance(got, Mapping):
        raise ValueError(f"Dask setting breadth.{name} must be a mapping of settings, got {got!r}")
    return {str(k).replace("-", "_"): v for k, v in got.items()}


def _check_namespace() -> None:
    import dask.config

    top = dask.config.get("breadth", None) or {}
    if not isinstance(top, Mapping):
        raise ValueError(f"Dask setting breadth must be a mapping of sections ({', '.join(SECTIONS)}), got {top!r}")
    unknown = sorted(str(k) for k in top if str(k).replace("-", "_") not in SECTIONS)
    if unknown:
        raise ValueError(f"Dask setting breadth.{unknown[0]} ({env_name('breadth.' + unknown[0])}) is not a "
                         f"section of breadth's settings ({', '.join('breadth.' + s for s in SECTIONS)})")


def read(cls, keys: Mapping[str, str], choices: Mapping[str, tuple] | None = None) -> dict[str, Any]:
    """The current value of every setting of dataclass ``cls``, checked.

    Parameters
    ----------
    cls : type
        A dataclass whose fields the settings set (their annotations say the type of each).
    keys : Mapping of str to str
        Field name -> its Dask key (``"breadth.search.beta"``).
    choices : Mapping of str to tuple, optional
        Field name -> the values a string field may take.

    Returns
    -------
    dict
        Field name -> value, converted to the field's type (``30`` -> ``30.0`` for a float).

    Raises
    ------
    ValueError
        One line naming the setting and its environment variable: a value of the wrong type or outside its
        choices, or a name under ``breadth.*`` that is no setting (a misspelt ``DASK_BREADTH__SEARCH__BETTA``
        would otherwise be ignored).

    Examples
    --------
    >>> import dask
    >>> from breadth.bfs import SearchConfig
    >>> with dask.config.set({"breadth.search.nccl_poll": "busy"}):
    ...     read(SearchConfig, SearchConfig.SETTINGS, SearchConfig.CHOICES)
    Traceback (most recent call last):
    ...
    ValueError: Dask setting breadth.search.nccl_poll (DASK_BREADTH__SEARCH__NCCL_POLL) must be one of spin, ...
    """
    _check_namespace()
    kinds = {f.name: str(f.type) for f in dataclasses.fields(cls)}
    sections: dict[str, dict[str, Any]] = {}
    for key in keys.values():
        name = key.split(".")[1]
        if name not in sections:
            sections[name] = _section(name)
    for name, values in sections.items():
        known = {k.split(".")[2] for k in keys.values() if k.split(".")[1] == name}
        for k in sorted(values):
            if k not in known:
                key = f"breadth.{name}.{k}"
                raise ValueError(f"{_what(key)} is not one of breadth's settings (breadth.{name}: "
                                 f"{', '.join(sorted(known))})")
    out = {}
    for field, key in keys.items():
        section, leaf = key.split(".")[1:]
        if leaf in sections[section]:  # absent only where the defaults were left out of Dask's configuration
            out[field] = _coerce(key, kinds[field], sections[section][leaf], (choices or {}).get(field))
    return out


def from_config(cls, keys: Mapping[str, str], choices: Mapping[str, tuple] | None, given: dict):
    """``cls(**fields)``: ``given`` fields where not None, the others from the settings (:func:`read`)."""
    fields = read(cls, keys, choices)
    fields.update({k: v for k, v in given.items() if v is not None})
    return cls(**fields)


_S = TypeVar("_S", bound="Settings")


class Settings:
    """What :class:`~breadth.bfs.search_config.SearchConfig` and :class:`~breadth.pipeline.prepare_config.
    PrepareConfig` share: frozen dataclasses of settings, changed by copies and written into reports."""

    def replace(self: _S, **changes) -> _S:
        """A copy with some fields changed.

        Parameters
        ----------
        **changes
            New field values; a value of None keeps this config's (so that optional arguments pass through).

        Returns
        -------
        Settings
            The copy, of this config's class.

        Raises
        ------
        TypeError
            For a name that is not a field.

        Examples
        --------
        >>> from breadth.bfs import SearchConfig
        >>> SearchConfig(beta=24.0).replace(beta=None, alpha=10.0)
        SearchConfig(alpha=10.0, beta=24.0, ...)
        """
        return dataclasses.replace(self, **{k: v for k, v in changes.items() if v is not None})

    def as_dict(self) -> dict:
        """The fields as JSON-ready values (for reports and benchmark files).

        Returns
        -------
        dict
            Field name -> value; a tuple as a list (an empty one as None).

        Examples
        --------
        >>> from breadth.bfs import SearchConfig
        >>> SearchConfig(graph_caps=(64, 1024)).as_dict()["graph_caps"], SearchConfig().as_dict()["beta"]
        ([64, 1024], 18.0)
        """
        out = dataclasses.asdict(self)
        return {k: (list(v) or None) if isinstance(v, tuple) else v for k, v in out.items()}
