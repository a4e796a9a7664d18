"""The ``breadth`` command (``cli``: ``bench``, ``generate``, ``ingest``, ``bfs``, ``info``): its flags
checked before any work (``cli_checks``; ``cli_sources`` for the search's sources), its cluster started
and sized to ``--memory-limit`` (``cli_cluster``), the commands that write, read and search stores
(``cli_store``), a bench's figure (``bench_plot``), every failure as one line (``cli_errors``) and only the
imports a command needs (``command_imports``).  It drives the other rooms in turn: a cluster
(:mod:`breadth.pipeline.cluster`), a source (:mod:`breadth.pipeline.sources`),
:func:`~breadth.pipeline.prepare`, then the store (:mod:`breadth.io`) or the search (:mod:`breadth.bfs`).
"""
