"""How BFS ranks talk: the :class:`~breadth.bfs.transport.communicator.Communicator` interface the engines
call, and its transports side by side -- TCP sockets (:mod:`.tcp`), UCX (:mod:`.ucx`), NCCL between GPUs
(:mod:`.nccl`, with peer-memory rounds over NVLink, :mod:`.peer_memory`), one GPU alone (:mod:`.solo_gpu`)
-- plus the wire format the host transports share (:mod:`.wire_format`) and the registry of transports that
sessions and the ``breadth`` command choose from (:mod:`.registry`).  CuPy, UCX and NCCL are imported
only by the transport that uses them, when it connects.
"""
