"""The SPMD search: one engine per rank over its shard, driven by a session on the rank's Dask worker.

:mod:`.engine` is the direction-optimizing engine (counts read on the host), :mod:`.device_engine` the same
levels with the counters kept on the GPU, :mod:`.batch_engine` up to 64 searches in one pass (MS-BFS); the
kernels they call are named by :mod:`.backend` and :mod:`.batch_backend` (CPU or GPU).  :mod:`.session`
runs the ranks' tasks and builds their communicators; :mod:`.search` and :mod:`.batch_search` are the
client's ``bfs`` and ``bfs_batch``.  :mod:`.levels` is the level loop every engine runs, :mod:`.direction` the
direction rule it applies to their counts.
"""
