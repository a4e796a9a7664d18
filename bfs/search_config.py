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
    """A search's tunables, the same on every rank (frozen: :meth:`replace` makes changed copies).

    The defaults are the fast path; the boolean switches turn one of its techniques off, to measure what
    it gains or to work around a machine that lacks it.

    Parameters
    ----------
    alpha : float, optional
        The direction rule: bottom-up once the frontier's edges exceed the unexplored edges / ``alpha``.
        None: the backend's default (:meth:`breadth.bfs.engine.engine.Engine.default_alpha`); 0 never goes
        bottom-up.
    beta : float
        Top-down again once the frontier shrinks below ``n / beta`` vertices.
    degree_order : bool
        Bottom-up scans a shard's rows ordered by decreasing neighbour degree where it has them.
    level_graphs : bool
        GPU ranks with device rounds replay each level as a captured CUDA graph
        (:mod:`breadth.bfs.gpu.level_graphs`); False queues every level from Python.
    graph_caps : tuple of int, optional
        ``(small, large)`` pair rows per peer of the captured top-down rounds (None: the defaults; tests
        force the second round with small ones).
    check_rounds : bool
        Verify that every rank read the same counters after every captured level (slow; for tests).
    defer_long_rows : bool
        GPU bottom-up hands long rows to a warp each (False: one lane a row).
    peer_memory : bool
        GPU ranks of one host that can map each other's memory (CUDA IPC, over NVLink between GPUs) do their
        rounds through it instead of NCCL calls or UCX device messages.
    device_counters : bool
        GPU ranks with device rounds keep the level's counters on the device (the device engine); False
        runs the host-counter engine.
    spec_pairs : int, optional
        The device engine's speculative top-down pair capacity, in (vertex, parent) pairs (None: its
        default; 0: always the exact two-round level).
    one_round_levels : bool
        GPU ranks over a communicator with capped rounds (UCX) run every level in one round
        (:mod:`breadth.bfs.engine.one_round_levels`); False: two.
    nccl_poll : str
        ``"spin"`` (busy-poll a while first) or ``"sleep"`` (yield at once) between NCCL completion queries.
    rank_affinity : str
        ``"worker"`` (a rank thread runs on its worker's CPUs) or ``"all"`` (anywhere the process may).

    Raises
    ------
    ValueError
        For an unknown ``nccl_poll`` or ``rank_affinity``.

    Examples
    --------
    >>> from breadth.bfs import SearchConfig
    >>> cfg = SearchConfig(beta=24.0)
    >>> cfg.replace(alpha=30.0).alpha, cfg.alpha, cfg.level_graphs
    (30.0, None, True)
    >>> SearchConfig(nccl_poll="busy")
    Traceback (most recent call last):
    ...
    ValueError: nccl_poll must be 'spin' or 'sleep', got 'busy'
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
        """A config of ``given`` fields, the others from the environment's ``BREADTH_*`` variables.

        Parameters
        ----------
        environ : Mapping of str to str, optional
            Where to read the variables (default ``os.environ``); :attr:`ENV` names each field's.  Booleans
            read ``"0"`` as off and anything else as on; ``BREADTH_GRAPH_CAPS`` is ``"small,large"``.
        **given
            Fields set by the caller: they win over the environment.

        Returns
        -------
        SearchConfig
            ``given``, else the variable where set, else the default, field by field.

        Raises
        ------
        ValueError
            For a variable that does not parse (``BREADTH_BETA=fast``) or a value out of its choices.

        Examples
        --------
        >>> from breadth.bfs import SearchConfig
        >>> cfg = SearchConfig.from_env({"BREADTH_LEVEL_GRAPHS": "0", "BREADTH_BETA": "30"}, beta=20.0)
        >>> cfg.level_graphs, cfg.beta
        (False, 20.0)
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
        """A copy with some fields changed.

        Parameters
        ----------
        **changes
            New field values; a value of None keeps this config's (so that optional arguments pass through).

        Returns
        -------
        SearchConfig
            The copy.

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
            Field name -> value; ``graph_caps`` as a list (or None).

        Examples
        --------
        >>> from breadth.bfs import SearchConfig
        >>> SearchConfig(graph_caps=(64, 1024)).as_dict()["graph_caps"]
        [64, 1024]
        """
        d = dataclasses.asdict(self)
        d["graph_caps"] = list(self.graph_caps) if self.graph_caps else None
        return d
