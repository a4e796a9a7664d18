"""The level steps on CPUs: Numba kernels over NumPy arrays of one rank's shard -- top-down, bottom-up and
frontier conversions of one search, their batched (64 searches a word) counterparts, and the word
primitives (:mod:`.bit_ops`) Numba lacks.
"""
