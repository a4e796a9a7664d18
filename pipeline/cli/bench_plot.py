"""The figure of ``breadth bench --plot FILE.png``, drawn from the benchmark's JSON (``Graph500Result.to_dict``).

Panels: TEPS per root (with the harmonic mean); frontier size per level and time per level, one line per
search, each level's marker showing its direction (top-down or bottom-up); and, when the graph has
several ranks, rank 0's local (kernel) vs exchange (communication and counters) time per level, median
over the searches.  A batched run (``--batch``) draws each batch's levels once: its roots share them.
Needs matplotlib (the ``plot`` extra); it is imported only here.
"""

from __future__ import annotations

import numpy as np

_DIRECTION = {"td": ("o", "tab:blue", "top-down"), "bu": ("s", "tab:orange", "bottom-up")}


def _searches(rows: list[dict]) -> list[list[dict]]:
    """The per-level records of each search (each batch once in a batched run)."""
    seen, out = set(), []
    for r in rows:
        key = ("batch", r["batch"]) if "batch" in r else ("root", len(out))
        if key not in seen:
            seen.add(key)
            out.append(r.get("levels", []))
    return out


def _per_level(ax, searches: list[list[dict]], value, ylabel: str, log: bool) -> None:
    for levels in searches:
        if not levels:
            continue
        d = [lv["depth"] for lv in levels]
        ax.plot(d, [value(lv) for lv in levels], color="0.7", lw=0.8, zorder=1)
        for dirn, (marker, color, _) in _DIRECTION.items():
            pts = [(lv["depth"], value(lv)) for lv in levels if lv["direction"] == dirn]
            if pts:
                ax.scatter(*zip(*pts), marker=marker, color=color, s=14, zorder=2)
    for dirn, (marker, color, label) in _DIRECTION.items():
        ax.scatter([], [], marker=marker, color=color, label=label)
    ax.set_xlabel("level")
    ax.set_ylabel(ylabel)
    if log:
        ax.set_yscale("symlog" if any(value(lv) <= 0 for s in searches for lv in s) else "log")
    ax.legend(loc="best", fontsize=8)


def plot_bench(result: dict, path: str) -> None:
    """Draw ``result`` (a Graph500 result as a dict, as ``--json`` writes it) into the PNG ``path``.

    >>> plot_bench(graph500(g).to_dict(), "bench.png")   # doctest: +SKIP
    """
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed, none opened
    import matplotlib.pyplot as plt

    rows = result["roots"]
    header = result.get("header", {})
    ranks = int(header.get("num_ranks", 1))
    searches = _searches(rows)
    batched = any("batch" in r for r in rows)
    from matplotlib.ticker import MaxNLocator

    fig, grid = plt.subplots(2, 2, figsize=(12, 8), dpi=100)
    axes = grid.ravel()
    if ranks == 1:
        axes[3].axis("off")
    for ax in axes[1:]:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    what = f"scale {header['SCALE']}" if "SCALE" in header else str(header.get("graph", "graph"))
    fig.suptitle(f"breadth bench: {what}, {ranks} rank(s), {len(rows)} roots"
                 + (", batched (MS-BFS)" if batched else ""), fontsize=11)

    teps = np.array([r["nedge"] / r["time"] for r in rows if r["time"] > 0])
    ax = axes[0]
    ax.bar(np.arange(teps.size), teps / 1e9, color="tab:green", width=0.8)
    if teps.size:
        hm = teps.size / np.sum(1.0 / teps)
        ax.axhline(hm / 1e9, color="k", lw=1, ls="--", label=f"harmonic mean {hm / 1e9:.3g} GTEPS")
        ax.legend(loc="lower right", fontsize=8)
    ax.set_xlabel("root" + (" (time = batch time / batch size)" if batched else ""))
    ax.set_ylabel("GTEPS")
    ax.set_title("TEPS per root")

    _per_level(axes[1], searches, lambda lv: lv["frontier"],
               "frontier ((vertex, root) pairs)" if batched else "frontier (vertices)", log=True)
    axes[1].set_title("frontier size per level")
    _per_level(axes[2], searches, lambda lv: 1e3 * (lv["local_s"] + lv["exchange_s"]), "ms", log=True)
    axes[2].set_title("time per level")

    if ranks > 1:
        ax = axes[3]
        depth = max((lv["depth"] for s in searches for lv in s), default=0)
        local = [np.median([lv["local_s"] for s in searches for lv in s if lv["depth"] == d] or [0]) for d in
                 range(1, depth + 1)]
        exch = [np.median([lv["exchange_s"] for s in searches for lv in s if lv["depth"] == d] or [0]) for d in
                range(1, depth + 1)]
        x = np.arange(1, depth + 1)
        ax.bar(x - 0.2, 1e3 * np.array(local), width=0.4, label="local (kernels)", color="tab:purple")
        ax.bar(x + 0.2, 1e3 * np.array(exch), width=0.4, label="exchange (+ counters)", color="tab:gray")
        ax.set_xlabel("level")
        ax.set_ylabel("ms (median over searches, rank 0)")
        ax.set_title("local vs exchange per level")
        ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, format="png")
    plt.close(fig)
