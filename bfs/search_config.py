"""Every tunable and switch of a search, in one object.

A :class:`SearchConfig` is built once -- by the API's caller, or from breadth's settings ``breadth.search.*``
in Dask's configuration (:meth:`SearchConfig.from_config`, the only place they are read; the CLI and a search
called without a config build it so) -- and travels with the session to every rank, where the engines, the
kernels and the transports read their fields.  The Graph500 report's header and ``breadth bench --json``
carry it (:meth:`SearchConfig.as_dict`), so a figure says which switches it was measured with.

>>> from breadth.bfs import SearchConfig, graph500
>>> cfg = SearchConfig(beta=24.0, level_graphs=False)
>>> cfg.as_dict()["beta"], cfg.as_dict()["level_graphs"]
(24.0, False)
>>> res = graph500(g, config=cfg)                 # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass

from .settings import Settings, from_config


@dataclass(frozen=True)
class SearchConfig(Settings):
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
        if self.nccl_poll not in self.CHOICES["nccl_poll"]:
            raise ValueError(f"nccl_poll must be 'spin' or 'sleep', got {self.nccl_poll!r}")
        if self.rank_affinity not in self.CHOICES["rank_affinity"]:
            raise ValueError(f"rank_affinity must be 'worker' or 'all', got {self.rank_affinity!r}")

    #: field -> its setting in Dask's configuration (:mod:`breadth.bfs.settings`; read by :meth:`from_config`)
    SETTINGS = {name: f"breadth.search.{name}" for name in (
        "alpha", "beta", "degree_order", "level_graphs", "graph_caps", "check_rounds", "defer_long_rows",
        "peer_memory", "device_counters", "spec_pairs", "one_round_levels", "nccl_poll", "rank_affinity")}
    #: the values a string field may take
    CHOICES = {"nccl_poll": ("spin", "sleep"), "rank_affinity": ("worker", "all")}

    @classmethod
    def from_config(cls, **given) -> SearchConfig:
        """A config of ``given`` fields, the others from breadth's settings ``breadth.search.*``.

        The settings live in Dask's configuration (:mod:`breadth.bfs.settings`): a YAML file of Dask's,
        ``DASK_BREADTH__SEARCH__<FIELD>`` in the environment (``DASK_BREADTH__SEARCH__LEVEL_GRAPHS=False``,
        ``DASK_BREADTH__SEARCH__GRAPH_CAPS=[16,64]``), or :func:`dask.config.set`; their defaults are this
        class's.

        Parameters
        ----------
        **given
            Fields set by the caller: they win over the settings; a value of None leaves the setting's (so
            that optional arguments pass through).

        Returns
        -------
        SearchConfig
            ``given``, else the setting, field by field.

        Raises
        ------
        ValueError
            For a setting of the wrong type or outside its choices, naming it and its environment variable
            (``DASK_BREADTH__SEARCH__BETA=fast``), or a name under ``breadth.search`` that is no field.
        TypeError
            For a ``given`` name that is not a field.

        Examples
        --------
        >>> import dask
        >>> from breadth.bfs import SearchConfig
        >>> with dask.config.set({"breadth.search.level_graphs": False, "breadth.search.beta": 30}):
        ...     cfg = SearchConfig.from_config(beta=20.0)
        >>> cfg.level_graphs, cfg.beta
        (False, 20.0)
        >>> SearchConfig.from_config() == SearchConfig()
        True
        """
        return from_config(cls, cls.SETTINGS, cls.CHOICES, given)
