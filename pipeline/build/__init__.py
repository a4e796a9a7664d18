"""The build: each owner turns the entries the shuffle delivered to it into its CSR shard, one row batch at
a time (``build_owner``), in memory or written to files and mapped back (``shard_files``, so that a worker
never holds a shard larger than its memory).  Where each worker holds one owner and the pieces wait in
memory (by default on GPU workers), ``direct_exchange`` instead sends the chunks' pieces rank to rank over
the ranks' own transport (NCCL between GPUs) and builds each shard from what its rank holds and receives.
The shards stay on their workers; :func:`~breadth.pipeline.prepare` gathers their summaries into a
:class:`~breadth.bfs.sharded_graph.ShardedGraph` for the search or the store.
"""
