"""Every tunable and switch of a search, in one object.

A :class:`SearchConfig` is built once -- by the API's caller, by the CLI, or from the environment's
``BREADTH_*`` overrides (:meth:`SearchConfig.from_env`, the only place they are read) -- and travels with
the session to every rank, where the engines, the kernels and the transports read their fields.  The
Graph500 report's header and ``breadth bench --json`` carry it (:meth:`SearchConfig.as_dict`), so a figure
says which switches it was measured with.

>>> from breadth.bfs import SearchConfig, graph500
>>> cfg = SearchConfig(beta=24.0, level_graphs=False)
>>> cfg.as_dict()["beta"], cfg.as_dict()["level_graphs"]
(24.0, False)
>>> res = graph500(g, config=cfg)                 # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class SearchConfig:
    """A search's tunables (all ranks use the same).

    * ``alpha``, ``beta``: the direction rule (bottom-up once the frontier's edges exceed the unexplored
      edges / ``alpha``; top-down again below n / ``beta`` vertices).  ``alpha`` None: the backend's
      default (:meth:`breadth.bfs.engine.engine.Engine.default_alpha`).
    * ``degree_order``: bottom-up scans a shard's degree-ordered rows where it has them (CPU).
    * ``level_graphs``: GPU ranks with device rounds replay each level as a captured CUDA graph
      (:mod:`breadth.bfs.gpu.level_graphs`); False queues every level from Python.
    * ``graph_caps``: ``(small, large)`` row capacities of the captured top-down rounds (None: the
      defaults; tests force the second round with small ones).  ``check_rounds``: verify every captured
      round against an exact one (slow; for tests).
    * ``defer_long_rows``: GPU bottom-up hands long rows to a warp each (False: one lane a row).
    * ``peer_memory``: GPU ranks that can write each other's memory (NVLink) do their captured rounds
      through it instead of NCCL.
    * ``device_counters``: GPU ranks with device rounds keep the level's counters on the device (the
      device engine); False runs the host-counter engine.
    * ``spec_pairs``: the device engine's speculative top-down pair capacity (None: its default).
    * ``one_round_levels``: GPU ranks over a communicator with capped rounds (UCX) run every level in one
      round (:mod:`breadth.bfs.engine.one_round_levels`); False: two, as over NCCL uncaptured.
    * ``nccl_poll``: ``"spin"`` or ``"sleep"`` between NCCL completion queries.
    * ``rank_affinity``: ``"worker"`` (the worker's CPUs) or ``"all"`` (a rank thread may run anywhere).
    """

    alpha: float | None = None
    beta: float = 18.0
    degree_order: bool = True
    level_graphs: bool = True
    graph_caps: tuple[int, int] | None = None
    check_rounds: bool = False
    defer_long_rows: bool = True
    peer_memory: bool = True
    device_counters: bool = True
    spec_pairs: int | None = None
    one_round_levels: bool = True
    nccl_poll: str = "spin"
    rank_affinity: str = "worker"

    def __post_init__(self):
        if self.nccl_poll not in ("spin", "sleep"):
            raise ValueError(f"nccl_poll must be 'spin' or 'sleep', got {self.nccl_poll!r}")
        if self.rank_affinity not in ("worker", "all"):
            raise ValueError(f"rank_affinity must be 'worker' or 'all', got {self.rank_affinity!r}")

    #: the environment's overrides, field -> variable (read only by :meth:`from_env`)
    ENV = {"alpha": "BREADTH_ALPHA", "beta": "BREADTH_BETA", "degree_order": "BREADTH_DEGREE_ORDER",
           "level_graphs": "BREADTH_LEVEL_GRAPHS", "graph_caps": "BREADTH_GRAPH_CAPS",
           "check_rounds": "BREADTH_CHECK_ROUNDS", "defer_long_rows": "BREADTH_BU_LONG",
           "peer_memory": "BREADTH_PEER_MEMORY", "device_counters": "BREADTH_DEVICE_COUNTERS",
           "spec_pairs": "BREADTH_SPEC_PAIRS", "one_round_levels": "BREADTH_ONE_ROUND_LEVELS",
           "nccl_poll": "BREADTH_NCCL_POLL",
           "rank_affinity": "BREADTH_RANK_AFFINITY"}

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **given) -> SearchConfig:
        """A config of ``given`` fields, the others from ``BREADTH_*`` variables where set (``environ``,
        default ``os.environ``), else the defaults.  Booleans read ``"0"`` as off and anything else as on;
        ``BREADTH_GRAPH_CAPS`` is ``"small,large"``.

        >>> SearchConfig.from_env({"BREADTH_LEVEL_GRAPHS": "0"}, beta=20.0).level_graphs
        False
        """
        env = os.environ if environ is None else environ
        kw = dict(given)
        types = {f.name: f.type for f in dataclasses.fields(cls)}
        for name, var in cls.ENV.items():
            if name in kw or var not in env:
                continue
            text = env[var]
            t = types[name]
            if t == "bool":
                kw[name] = text != "0"
            elif name == "graph_caps":
                small, large = (int(x) for x in text.split(","))
                kw[name] = (small, large)
            elif name in ("alpha", "beta"):
                kw[name] = float(text)
            elif name == "spec_pairs":
                kw[name] = int(text)
            else:
                kw[name] = text
        return cls(**kw)

    def replace(self, **changes) -> SearchConfig:
        """A copy with ``changes`` (fields left as None keep this config's value)."""
        return dataclasses.replace(self, **{k: v for k, v in changes.items() if v is not None})

    def as_dict(self) -> dict:
        """The fields as JSON-ready values (for reports and benchmark files)."""
        d = dataclasses.asdict(self)
        d["graph_caps"] = list(self.graph_caps) if self.graph_caps else None
        return d
