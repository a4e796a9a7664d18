import time, os, sys, cupy as cp, numpy as np, cudf
from breadth.pipeline import hash_relabel_gpu as H
from breadth.io.cudf_edges import device_edges
files = sorted(os.path.join(sys.argv[1], f) for f in os.listdir(sys.argv[1]))[:4]
def T(name, f, *a, **k):
    cp.cuda.Device().synchronize(); t=time.perf_counter(); r=f(*a, **k); cp.cuda.Device().synchronize()
    print(f"{name:28s} {1e3*(time.perf_counter()-t):8.1f} ms", flush=True); return r
for rep in range(2):
    print("--- rep", rep)
    df = T("read 4 files (2^26 rows)", cudf.read_parquet, files, columns=["src","dst"])
    e, st = T("device_edges", device_edges, df, "src", "dst", "x")
    flat = e.ravel()
    u, inv = T("cp.unique inverse 2^27", cp.unique, flat, return_inverse=True)
    T("cp.sort 2^27", cp.sort, flat)
    T("cp.argsort 2^27", cp.argsort, flat)
    T("cudf factorize 2^27", lambda: cudf.Series(flat).factorize())
    sp = T("chunk_split P=1", H.chunk_split, e, 1, np.dtype(np.int64))
    sp2 = T("chunk_split P=2", H.chunk_split, e, 2, np.dtype(np.int64))
    part = T("owner_part (1 piece)", H.owner_part, np.dtype(np.int64), sp[2][0])
    part4 = T("owner_part (4 pieces)", H.owner_part, np.dtype(np.int64), sp[2][0], sp[2][0][::2], sp[2][0][1::2], sp[2][0][::3])
    lk = T("lookup_piece", H.lookup_piece, part, 0, sp[2][0])
    d = T("chunk_dense", H.chunk_dense, sp, lk)
    T("minmax (chunk_meta)", lambda: (int(e.min()), int(e.max())))
