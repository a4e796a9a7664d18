"""Preparation's tunables, in one object: how a graph is prepared, never which graph.

A :class:`PrepareConfig` is built once -- by the API's caller, or from breadth's settings
``breadth.prepare.*`` and ``breadth.shuffle.*`` in Dask's configuration (:meth:`PrepareConfig.from_config`,
the only place they are read; the CLI and :func:`~breadth.pipeline.prepare` called without one build it so)
-- and passed to :func:`~breadth.pipeline.prepare`.  Every field changes where and how the shards are built
(the shuffle's storage tier, the row batch size, the transport of the owners' exchange), never the shards:
they are the same, bit for bit, whatever these are.  ``breadth bench --json`` records it beside the search's
(``prepare_config``).

>>> from breadth.pipeline import PrepareConfig, prepare
>>> cfg = PrepareConfig(tier="disk", batch_entries=1 << 20)
>>> cfg.as_dict()["tier"], cfg.replace(tier=None).tier
('disk', 'disk')
>>> g = prepare(edges, client, config=cfg)                 # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass

from breadth.bfs.settings import Settings, from_config

from .shuffle.memory_plan import TIERS

#: how the memory tier's pieces may reach their owners (:mod:`breadth.pipeline.build.direct_exchange`)
EXCHANGES = ("auto", "direct", "dask")


@dataclass(frozen=True)
class PrepareConfig(Settings):
    """Preparation's tunables (frozen: :meth:`replace` makes changed copies).

    Parameters
    ----------
    tier : {"auto", "memory", "host", "disk"}
        Where the shuffle's pieces wait (:mod:`breadth.pipeline.shuffle.shuffle`): ``"auto"`` chooses from the
        workers' memory limit and the graph's size; the others force a tier (for benchmarks and tests).
    exchange : {"auto", "direct", "dask"}
        How the memory tier's pieces reach their owners (:mod:`breadth.pipeline.build.direct_exchange`):
        ``"direct"`` owner to owner over the ranks' transport, ``"dask"`` through Dask's comm, ``"auto"``
        direct on GPU workers with one owner each, Dask's otherwise.
    batch_entries : int, optional
        Adjacency entries per row batch of the host and disk tiers (None: the largest power of two up to
        2**25 on the CPU, 2**28 on the GPU, whose build fits the memory limit).
    search_order : bool
        Build bottom-up's degree-ordered copy of the rows (:mod:`breadth.bfs.search_order`); False for a
        graph that is stored rather than searched where it was prepared.
    keep_edges : bool
        False hands the edge list's chunks over to the shuffle, each freed as soon as its entries are sent.
    protocol : str
        The owners' transport in the direct exchange: ``"auto"`` (as a search would choose), ``"tcp"``,
        ``"ucx"`` or ``"nccl"``.

    Raises
    ------
    ValueError
        For a ``tier`` or ``exchange`` outside its choices, or a ``batch_entries`` below 1.

    Examples
    --------
    >>> from breadth.pipeline import PrepareConfig
    >>> PrepareConfig(exchange="dask").replace(keep_edges=False)
    PrepareConfig(tier='auto', exchange='dask', batch_entries=None, search_order=True, keep_edges=False, protocol='auto')
    >>> PrepareConfig(tier="ram")
    Traceback (most recent call last):
    ...
    ValueError: tier must be 'auto' or one of ('memory', 'host', 'disk'), got 'ram'
    """

    tier: str = "auto"
    exchange: str = "auto"
    batch_entries: int | None = None
    search_order: bool = True
    keep_edges: bool = True
    protocol: str = "auto"

    #: field -> its setting in Dask's configuration (:mod:`breadth.bfs.settings`; read by :meth:`from_config`)
    SETTINGS = {"tier": "breadth.shuffle.tier", "exchange": "breadth.shuffle.exchange",
                "batch_entries": "breadth.prepare.batch_entries", "search_order": "breadth.prepare.search_order",
                "keep_edges": "breadth.prepare.keep_edges", "protocol": "breadth.prepare.protocol"}
    #: the values a string field may take (the protocol is checked where a session resolves it)
    CHOICES = {"tier": ("auto", *TIERS), "exchange": EXCHANGES}

    def __post_init__(self):
        if self.tier not in self.CHOICES["tier"]:
            raise ValueError(f"tier must be 'auto' or one of {TIERS}, got {self.tier!r}")
        if self.exchange not in EXCHANGES:
            raise ValueError(f"exchange must be one of {', '.join(EXCHANGES)}, got {self.exchange!r}")
        if self.batch_entries is not None and self.batch_entries < 1:
            raise ValueError(f"batch_entries must be >= 1, got {self.batch_entries}")

    @classmethod
    def from_config(cls, **given) -> PrepareConfig:
        """A config of ``given`` fields, the others from breadth's settings.

        ``tier`` and ``exchange`` are ``breadth.shuffle.tier`` and ``breadth.shuffle.exchange``, the other
        fields ``breadth.prepare.<field>``, in Dask's configuration (:mod:`breadth.bfs.settings`): a YAML file
        of Dask's, the environment (``DASK_BREADTH__SHUFFLE__TIER=disk``,
        ``DASK_BREADTH__PREPARE__BATCH_ENTRIES=1048576``) or :func:`dask.config.set`; their defaults are this
        class's.

        Parameters
        ----------
        **given
            Fields set by the caller: they win over the settings; a value of None leaves the setting's.

        Returns
        -------
        PrepareConfig
            ``given``, else the setting, field by field.

        Raises
        ------
        ValueError
            For a setting of the wrong type or outside its choices, naming it and its environment variable,
            or a name under ``breadth.prepare`` or ``breadth.shuffle`` that is no setting.
        TypeError
            For a ``given`` name that is not a field.

        Examples
        --------
        >>> import dask
        >>> from breadth.pipeline import PrepareConfig
        >>> with dask.config.set({"breadth.shuffle.tier": "disk"}):
        ...     cfg = PrepareConfig.from_config(search_order=False)
        >>> cfg.tier, cfg.search_order, cfg.exchange
        ('disk', False, 'auto')
        >>> with dask.config.set({"breadth.shuffle.tier": "ram"}):
        ...     PrepareConfig.from_config()
        Traceback (most recent call last):
        ...
        ValueError: Dask setting breadth.shuffle.tier (DASK_BREADTH__SHUFFLE__TIER) must be one of auto, memory, ...
        """
        return from_config(cls, cls.SETTINGS, cls.CHOICES, given)
