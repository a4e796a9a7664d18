"""The shuffle to owners: each edge chunk's task cuts its tuples into per-owner pieces and leaves them in a
storage tier (``shuffle_tiers``: the workers' memory, row batches in host memory, or files on disk), chosen
from the workers' memory limit and the graph's size (``memory_plan``, which also sizes chunks and batches
for the CLI's ``--memory-limit``).  ``shuffle`` runs the chunk tasks and hands each owner's task the parcels
of every chunk, which it opens as an :class:`~breadth.pipeline.shuffle.shuffle_tiers.Inbox` and reads one
row batch at a time to build its shard (:mod:`breadth.pipeline.build`); the relabeling's id shuffle
(:func:`~breadth.pipeline.shuffle.shuffle.exchange`) moves ids to their hash owners (:mod:`breadth.pipeline.relabel`)
through the same tiers.
"""
