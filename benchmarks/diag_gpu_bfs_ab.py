"""A/B of one GPU's scale-26 search: RMM pool on or off (fresh process each), 16 validated roots."""
import json, subprocess, sys


def one(pool: str) -> dict:
    from breadth.bfs import graph500
    from breadth.pipeline import kronecker, prepare
    from breadth.pipeline.cluster import local_cuda_cluster

    kw = {} if pool == "default" else {"rmm_pool_size": None}
    client = local_cuda_cluster(workers=1, **kw)
    g = prepare(kronecker(26, seed=1, device="gpu"), client, device="gpu")

    shard = client.gather(g.shards)[0]
    meta = {"columns": str(shard.columns.dtype), "fields": sorted(k for k, v in vars(shard).items() if v is not None)}
    res = graph500(g, nroots=16, seed=2)
    return {"pool": pool, "teps": res.harmonic_mean_teps, "valid": res.valid, "construction": g.construction_time,
            "shard": meta}


if __name__ == "__main__":
    if sys.argv[1] == "--one":
        print(json.dumps(one(sys.argv[2])))
    else:
        for pool in sys.argv[1:]:
            r = subprocess.run([sys.executable, __file__, "--one", pool], capture_output=True, text=True)
            print(r.stdout.strip().splitlines()[-1] if r.returncode == 0 else r.stderr[-1500:], flush=True)
