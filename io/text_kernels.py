"""The Numba kernels of :mod:`breadth.io.text_parser`: newline search and the one-pass edge-line parser.

A module of their own so that importing the text readers does not import Numba: the client of a
``breadth ingest`` of Parquet files imports the readers' module (every format's) but parses no text, and
``import numba`` would cost it about 0.25 s on 2 cores (most of the client's start before the cluster's).
The task that parses a block imports this module, on the worker.
"""

from __future__ import annotations

import numba
import numpy as np

from .errors import (KIND_FEW_FIELDS, KIND_EXTRA_FIELDS, KIND_NEGATIVE, KIND_NON_NUMERIC, KIND_OK,
                     KIND_OUT_OF_RANGE, KIND_OVERFLOW)

INT64_MAX = np.iinfo(np.int64).max
UINT64_MAX = np.iinfo(np.uint64).max

@numba.njit(nogil=True, cache=True)
def count_newlines(buf):
    n = 0
    for i in range(buf.size):
        if buf[i] == 10:
            n += 1
    return n


@numba.njit(nogil=True, cache=True)
def find_byte(buf, b):
    """Index of the first ``b`` in ``buf``, or -1."""
    for i in range(buf.size):
        if buf[i] == b:
            return i
    return -1


@numba.njit(nogil=True, cache=True)
def rfind_byte(buf, b):
    """Index of the last ``b`` in ``buf``, or -1."""
    for i in range(buf.size - 1, -1, -1):
        if buf[i] == b:
            return i
    return -1


_U0 = np.uint64(0)
_U10 = np.uint64(10)
_UMAX = np.uint64(UINT64_MAX)


@numba.njit(nogil=True, cache=True)
def _parse_int(buf, fs, fe, base, limit):
    """(value, kind) of the decimal integer in buf[fs:fe] (no surrounding blanks), as uint64.

    Everything is uint64 (``base``/``limit`` too): Numba turns mixed int64/uint64 arithmetic into
    float64, which would round ids above 2**53."""
    if fs >= fe:
        return _U0, KIND_FEW_FIELDS
    neg = False
    p = fs
    if buf[p] == 45:  # '-'
        neg = True
        p += 1
    elif buf[p] == 43:  # '+'
        p += 1
    if p >= fe:
        return _U0, KIND_NON_NUMERIC
    v = _U0
    overflow = False
    for q in range(p, fe):
        c = buf[q]
        if c < 48 or c > 57:
            return _U0, KIND_NON_NUMERIC
        d = np.uint64(c) - np.uint64(48)
        if v > (_UMAX - d) // _U10:
            overflow = True
        else:
            v = v * _U10 + d
    if neg and (v != _U0 or overflow):
        return _U0, KIND_NEGATIVE
    if overflow:
        return _U0, KIND_OVERFLOW
    if v < base or v > limit:
        return _U0, KIND_OUT_OF_RANGE
    return v - base, KIND_OK


@numba.njit(nogil=True, cache=True)
def parse_edges(buf, sep, src_idx, dst_idx, max_fields, comments, base, limit, skip_bad, out, bad_pos, bad_kind):
    """Parse edge lines of ``buf`` (uint8) into ``out`` (uint64 ``(cap, 2)``).

    ``sep``: -1 for whitespace runs or commas, else one delimiter byte.  ``src_idx``/``dst_idx``: field
    numbers of the endpoints; ``max_fields`` > 0 makes lines with more fields bad.  Ids must lie in
    ``[base, limit]`` (uint64) and are stored minus ``base`` (1 for Matrix Market).  Returns
    ``(rows, nbad, big)``, ``big`` true when some stored id exceeds the int64 range; with ``skip_bad``
    false parsing stops at the first bad line (``nbad == 1``).  The first ``bad_pos.size`` bad lines'
    start offsets and kind codes land in ``bad_pos``/``bad_kind``.
    """
    n = buf.size
    need = max(src_idx, dst_idx) + 1
    rows = 0
    nbad = 0
    big = False
    i64max = np.uint64(INT64_MAX)
    i = 0
    while i < n:
        ls = i
        e = i
        while e < n and buf[e] != 10:
            e += 1
        le = e
        if le > ls and buf[le - 1] == 13:
            le -= 1
        i = e + 1
        p = ls
        while p < le and (buf[p] == 32 or buf[p] == 9):
            p += 1
        if p == le:
            continue
        is_comment = False
        for c in comments:
            if buf[p] == c:
                is_comment = True
        if is_comment:
            continue
        nf = 0
        kind = KIND_OK
        u = _U0
        v = _U0
        while True:
            fs = p
            if sep < 0:
                while p < le and buf[p] != 32 and buf[p] != 9 and buf[p] != 44:
                    p += 1
            else:
                while p < le and buf[p] != sep:
                    p += 1
            fe = p
            while fe > fs and (buf[fe - 1] == 32 or buf[fe - 1] == 9):
                fe -= 1
            if kind == KIND_OK and (nf == src_idx or nf == dst_idx):
                val, k = _parse_int(buf, fs, fe, base, limit)
                if k != KIND_OK:
                    kind = k
                elif nf == src_idx:
                    u = val
                else:
                    v = val
                if nf == src_idx and nf == dst_idx:
                    v = u
            nf += 1
            if p >= le:
                break
            if sep < 0:
                while p < le and (buf[p] == 32 or buf[p] == 9):
                    p += 1
                if p < le and buf[p] == 44:
                    p += 1
                    while p < le and (buf[p] == 32 or buf[p] == 9):
                        p += 1
                elif p >= le:
                    break
            else:
                p += 1
                while p < le and (buf[p] == 32 or buf[p] == 9):
                    p += 1
        if kind == KIND_OK and nf < need:
            kind = KIND_FEW_FIELDS
        if kind == KIND_OK and max_fields > 0 and nf > max_fields:
            kind = KIND_EXTRA_FIELDS
        if kind != KIND_OK:
            if nbad < bad_pos.size:
                bad_pos[nbad] = ls
                bad_kind[nbad] = kind
            nbad += 1
            if not skip_bad:
                return rows, nbad, big
            continue
        out[rows, 0] = u
        out[rows, 1] = v
        if u > i64max or v > i64max:
            big = True
        rows += 1
    return rows, nbad, big
