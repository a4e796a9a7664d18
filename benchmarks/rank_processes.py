"""Run a diagnostic's ranks as spawned processes (one GPU each, no Dask) and write what they report.

Shared by ``diag_graphs.py`` and ``diag_peer.py``: each rank function takes its own arguments followed by
a queue, on which it puts its result dict before it returns.
"""

from __future__ import annotations

import sys

from results_file import write_json


def run_ranks(ctx, target, rank_args: list[tuple], stall: float, json_path: str) -> None:
    """Start ``target(*rank_args[r], queue)`` for every rank in ``ctx`` (a multiprocessing context), wait at
    most ``6 * stall`` seconds for each, kill what still runs, write ``{"ranks", "exitcodes"}`` to
    ``json_path`` and exit with 0 only when every rank exited with 0."""
    q = ctx.Queue()
    procs = [ctx.Process(target=target, args=tuple(a) + (q,)) for a in rank_args]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=6 * stall)
    out = []
    while not q.empty():
        out.append(q.get())
    codes = [p.exitcode for p in procs]
    for p in procs:
        if p.is_alive():
            p.kill()
    write_json(json_path, {"ranks": out, "exitcodes": codes})
    print("exit codes", codes, flush=True)
    sys.exit(0 if all(c == 0 for c in codes) else 1)
