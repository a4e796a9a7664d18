"""Word primitives for Numba kernels that Numba does not offer: count-trailing-zeros, population count,
a cache prefetch hint, and streaming stores with their fence.

The batched search walks the set bits of 64-bit visit words (one bit per search): ``ctz`` is LLVM's
``cttz``, one instruction (``tzcnt``) where a loop over the bits would take up to 63 steps; ``popcount`` is
``ctpop`` (``popcnt``).  ``prefetch`` (LLVM's ``prefetch``) asks for a line that a scan will read a few
steps later, for scans whose reads are random (:mod:`breadth.bfs.cpu.batch_results`).  ``stream_store``
writes an element past the caches (LLVM's ``!nontemporal`` store: ``movnti`` on x86), for outputs written
once in whole cache lines and too large to stay cached: a normal store first reads the line it writes
(half the traffic of a pure write); ``store_fence`` orders a thread's streaming stores before whatever
follows it (they are weakly ordered), and ends every loop body that streams.

>>> import numba, numpy as np
>>> @numba.njit
... def lowest(w):
...     return ctz(w), popcount(w)
>>> lowest(np.uint64(12))
(2, 2)
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


def _word_op(name: str, *flags: int):
    """Codegen of a call to LLVM's ``name`` on the argument as a 64-bit word (then ``flags`` as i1
    constants), returning the intrinsic's 64-bit result."""
    i64, i1 = ir.IntType(64), ir.IntType(1)

    def codegen(context, builder, signature, args):
        x64 = context.cast(builder, args[0], signature.args[0], types.uint64)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(i64, [i64] + [i1] * len(flags)), name)
        return builder.call(fn, [x64] + [ir.Constant(i1, f) for f in flags])

    return codegen


@intrinsic
def ctz(typingctx, x):
    """Index of the lowest set bit of a 64-bit word (64 for zero), as int64."""
    if not isinstance(x, types.Integer):
        return None
    return types.int64(x), _word_op("llvm.cttz.i64", 0)  # 0: zero is defined (64), not poison


@intrinsic
def popcount(typingctx, x):
    """Number of set bits of a 64-bit word, as int64 (LLVM's ``ctpop``: one ``popcnt``)."""
    if not isinstance(x, types.Integer):
        return None
    return types.int64(x), _word_op("llvm.ctpop.i64")


@intrinsic
def prefetch(typingctx, arr, idx):
    """Hint the cache to load ``arr[idx]`` (LLVM's ``prefetch``, read, high locality); no effect on results.
    ``arr``: a C-contiguous array (``idx`` its flat element index), ``idx`` an integer."""
    if not isinstance(arr, types.Array) or not isinstance(idx, types.Integer):
        return None
    sig = types.none(arr, idx)

    def codegen(context, builder, signature, args):
        arr_t, idx_t = signature.args
        arr_v, idx_v = args
        ary = context.make_array(arr_t)(context, builder, arr_v)
        idx_v = context.cast(builder, idx_v, idx_t, types.intp)
        ptr = builder.gep(ary.data, [idx_v])
        i8p = builder.bitcast(ptr, ir.IntType(8).as_pointer())
        i32 = ir.IntType(32)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(),
                                                                             [ir.IntType(8).as_pointer(), i32, i32,
                                                                              i32]), "llvm.prefetch.p0i8")
        builder.call(fn, [i8p, ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def stream_store(typingctx, arr, idx, val):
    """``arr[idx] = val`` past the caches (LLVM's ``!nontemporal`` store).  ``arr``: a C-contiguous array
    (``idx`` its flat element index); end the writing thread's work with :func:`store_fence`."""
    if not isinstance(arr, types.Array) or not isinstance(idx, types.Integer):
        return None
    sig = types.none(arr, idx, val)

    def codegen(context, builder, signature, args):
        arr_t, idx_t, val_t = signature.args
        arr_v, idx_v, val_v = args
        ary = context.make_array(arr_t)(context, builder, arr_v)
        ptr = builder.gep(ary.data, [context.cast(builder, idx_v, idx_t, types.intp)])
        store = builder.store(context.cast(builder, val_v, val_t, arr_t.dtype), ptr)
        store.set_metadata("nontemporal", builder.module.add_metadata([ir.Constant(ir.IntType(32), 1)]))
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def store_fence(typingctx):
    """A full memory fence (``mfence`` on x86): this thread's :func:`stream_store` writes are visible to every
    thread before its later ones (a parallel loop's join alone does not promise that for streaming stores)."""
    def codegen(context, builder, signature, args):
        builder.fence("seq_cst")
        return context.get_dummy_value()

    return types.none(), codegen
