"""The search ranks' transports: one registry (:data:`TRANSPORTS`) of each transport's name, the function that
connects a rank over it, whether it needs GPU ranks, whether it can run here, and where ``"auto"`` picks it.
``protocol=``'s and ``--protocol``'s choices, :func:`~breadth.bfs.engine.session.resolve_protocol` and
:func:`~breadth.bfs.engine.session.make_communicator` are derived from it.

Adding a transport is one module with a :class:`~breadth.bfs.transport.communicator.Communicator` and its
``connect`` function (as :func:`breadth.bfs.transport.tcp.connect`) and one :func:`register_transport` call.
Listing the transports imports none of them (nor NumPy, CuPy or UCX): the ``breadth`` command builds its
``--protocol`` choices from this module.

>>> protocol_choices()
('auto', 'tcp', 'ucx', 'nccl')
>>> TRANSPORTS["nccl"].gpu_only, TRANSPORTS["tcp"].auto
(True, ('cpu', 'gpu', 'shared_gpu'))
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Union

from ..lazy_exports import resolve

#: where the ranks of a session run, as ``"auto"`` tells them apart: CPU ranks, GPU ranks each on its own
#: GPU, GPU ranks of which two share a GPU
PLACEMENTS = ("cpu", "gpu", "shared_gpu")


def _nothing_missing() -> str | None:
    return None


@dataclass(frozen=True)
class Transport:
    """One transport of :data:`TRANSPORTS`.

    Attributes
    ----------
    name : str
        Its ``protocol=`` value and ``--protocol`` choice, e.g. ``"tcp"``.
    title : str
        What messages call it, e.g. ``"TCP"``.
    connect : str or callable
        ``connect(rank, size, session, *, timeout, backend, config) -> Communicator``: joins ``session`` (a
        string every rank of it shares) as ``rank`` of ``size`` (peers found through Dask, giving up after
        ``timeout`` seconds), for ranks on ``backend`` (``"cpu"`` or ``"gpu"``) with the session's
        :class:`~breadth.bfs.search_config.SearchConfig` (or None); given as ``"module:function"``, imported
        only when a rank connects.
    gpu_only : bool
        It moves device buffers only: CPU ranks cannot use it.
    missing : callable
        ``missing() -> str or None``: why it cannot run here (a library that does not load), or None.
    install : str
        What to install where :attr:`missing` says something, for messages (``"pip install 'breadth[ucx]'"``).
    auto : tuple of str
        The :data:`PLACEMENTS` where ``"auto"`` may pick it.
    preference : int
        ``"auto"`` picks, of the transports listing the ranks' placement, the available one of the lowest
        preference (registration order breaks ties).
    """

    name: str
    title: str
    connect: Union[str, Callable]
    gpu_only: bool = False
    missing: Callable[[], str | None] = _nothing_missing
    install: str = ""
    auto: tuple[str, ...] = ()
    preference: int = 100

    def available(self) -> bool:
        """Whether it can run here (:attr:`missing` says nothing)."""
        return self.missing() is None


#: the registered transports, by name, in registration order (the order of ``--protocol``'s choices)
TRANSPORTS: dict[str, Transport] = {}


def register_transport(t: Transport) -> Transport:
    """Add ``t`` to :data:`TRANSPORTS`.

    Parameters
    ----------
    t : Transport
        The new transport.

    Returns
    -------
    Transport
        ``t``.

    Raises
    ------
    ValueError
        Its name is ``"auto"``, ``"self"`` (one rank's, which needs no transport) or taken, or it lists a
        placement not in :data:`PLACEMENTS`, or a GPU-only transport lists ``"cpu"``.

    Examples
    --------
    >>> t = register_transport(Transport("shm", "shared memory", "mypkg.shm:connect"))
    >>> protocol_choices()
    ('auto', 'tcp', 'ucx', 'nccl', 'shm')
    >>> del TRANSPORTS["shm"]
    """
    if t.name in ("auto", "self") or t.name in TRANSPORTS:
        raise ValueError(f"transport {t.name!r} is {'registered already' if t.name in TRANSPORTS else 'reserved'}")
    unknown = [p for p in t.auto if p not in PLACEMENTS] + (["cpu"] if t.gpu_only and "cpu" in t.auto else [])
    if unknown:
        raise ValueError(f"transport {t.name!r}: 'auto' cannot pick it for {unknown[0]!r} ranks")
    TRANSPORTS[t.name] = t
    return t


def protocol_choices() -> tuple[str, ...]:
    """``"auto"`` and the registered transports' names: ``protocol=``'s and ``--protocol``'s choices."""
    return ("auto", *TRANSPORTS)


def get_transport(name: str) -> Transport:
    """The registered transport ``name``; ``ValueError`` naming the choices otherwise.

    >>> get_transport("ucx").title
    'UCX'
    """
    try:
        return TRANSPORTS[name]
    except KeyError:
        raise ValueError(f"unknown protocol {name!r}: expected one of {', '.join(protocol_choices())}") from None


def auto_transport(placement: str) -> Transport:
    """The transport ``"auto"`` runs for ranks of ``placement`` (one of :data:`PLACEMENTS`): of those that list
    it, the available one of the lowest :attr:`~Transport.preference`.

    >>> auto_transport("cpu").name
    'tcp'
    """
    listed = sorted((t for t in TRANSPORTS.values() if placement in t.auto), key=lambda t: t.preference)
    for t in listed:
        if t.available():
            return t
    raise ValueError(f"no transport available for {placement} ranks (of {', '.join(t.name for t in listed)})")


def ucx_available() -> bool:
    """True when ucxx loads (ranks can use :mod:`breadth.bfs.transport.ucx`)."""
    return TRANSPORTS["ucx"].available()


def nccl_available() -> bool:
    """True when CuPy's NCCL binding loads (GPU ranks can use :mod:`breadth.bfs.transport.nccl`)."""
    return TRANSPORTS["nccl"].available()


def _ucx_missing() -> str | None:
    try:
        import ucxx._lib.libucxx  # noqa: F401
    except Exception as e:  # not installed, or a UCX library that fails to load
        return f"{type(e).__name__}: {e}"
    return None


def _nccl_missing() -> str | None:
    try:
        from cupy.cuda import nccl

        return None if nccl.available else "CuPy is built without NCCL"
    except Exception as e:  # no CuPy, no driver, or a CuPy built without NCCL: all mean "no NCCL here"
        return f"{type(e).__name__}: {e}"


# The built-in transports.  "auto": NCCL for GPU ranks on distinct GPUs (its rounds become peer-memory kernels
# where the GPUs reach each other: at scale 27 two H200s search 1.76x as fast as one over NCCL, 0.48x over
# UCX); UCX for GPU ranks of which two share a GPU (NCCL refuses two ranks on one device); TCP for CPU ranks
# (UCX gains nothing there: their level exchange at scale 20 takes 0.9-1.1x as long over UCX as over TCP) and
# wherever the others are missing.
register_transport(Transport("tcp", "TCP", "breadth.bfs.transport.tcp:connect", auto=PLACEMENTS, preference=100))
register_transport(Transport("ucx", "UCX", "breadth.bfs.transport.ucx:connect", missing=_ucx_missing,
                             install="pip install 'breadth[ucx]'", auto=("shared_gpu",), preference=10))
register_transport(Transport("nccl", "NCCL", "breadth.bfs.transport.nccl:connect", gpu_only=True,
                             missing=_nccl_missing,
                             install="install 'breadth[gpu]' (CUDA 12) or 'breadth[gpu-cuda13]'", auto=("gpu",),
                             preference=10))
