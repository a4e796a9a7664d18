"""Relabeling: a source's raw chunks of original vertex ids (sparse integers, uint64, strings) become edge
chunks of dense ids ``0..n-1``, with a map back.  ``relabel`` reads each chunk's id kind and range and picks
the path: a lookup table for int64 ids over a small span (``id_table``, its chunks' ids merged by
``sorted_merge``), or hash owners for every other kind (``hash_relabel``; its steps ``hashed_factorize``,
``string_chunks``, ``sorted_merge``, ``sorted_string_merge`` and ``chunk_densify`` on the CPU,
``hash_relabel_gpu`` on the GPU), whose ids reach their owners through the shuffle's id exchange
(:mod:`breadth.pipeline.shuffle`).  It hands the file readers and the DataFrame source
(:mod:`breadth.pipeline.sources`) an :class:`~breadth.pipeline.edges.EdgeList` of dense ids for
:func:`~breadth.pipeline.prepare`.
"""
