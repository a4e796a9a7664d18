"""Graph500 statistics and the reference implementation's ``name: value`` report."""

from __future__ import annotations

import math

import numpy as np

ORDER = ("min", "firstquartile", "median", "thirdquartile", "max")


def order_statistics(x) -> dict[str, float]:
    """min, quartiles, median and max as the reference computes them (means of the two middle items)."""
    s = np.sort(np.asarray(x, np.float64))
    n = s.size
    return {
        "min": float(s[0]),
        "firstquartile": float((s[(n - 1) // 4] + s[n // 4]) / 2),
        "median": float((s[(n - 1) // 2] + s[n // 2]) / 2),
        "thirdquartile": float((s[n - 1 - (n - 1) // 4] + s[n - 1 - n // 4]) / 2),
        "max": float(s[-1]),
    }


def statistics(x, rate: bool = False) -> dict[str, float]:
    """Order statistics plus mean and stddev; for rates (TEPS) the harmonic mean and its stddev."""
    x = np.asarray(x, np.float64)
    n = x.size
    out = order_statistics(x)
    out["mean"] = float(x.mean())
    out["stddev"] = float(x.std(ddof=1)) if n > 1 else 0.0
    if rate:
        inv = 1.0 / x
        hm = n / inv.sum()
        out["harmonic_mean"] = float(hm)
        # the reference's estimate: stddev of 1/x, propagated to hm, over n - 1
        out["harmonic_stddev"] = float(math.sqrt(((inv - 1.0 / hm) ** 2).sum()) / max(n - 1, 1) * hm * hm)
    return out


def report_lines(header: dict, times, nedges, validate_times=None) -> list[str]:
    """The reference ``name: value`` lines: header fields, then time, nedge and TEPS statistics."""
    times = np.asarray(times, np.float64)
    nedges = np.asarray(nedges, np.float64)
    teps = nedges / times
    lines = [f"{k}: {v}" for k, v in header.items()]
    st = statistics(times)
    lines += [f"bfs  {k}_time: {st[k]:.17e}" for k in (*ORDER, "mean", "stddev")]
    st = statistics(nedges)
    lines += [f"{k}_nedge: {st[k]:.17e}" for k in (*ORDER, "mean", "stddev")]
    st = statistics(teps, rate=True)
    lines += [f"bfs  {k}_TEPS: {st[k]:.17e}" for k in ORDER]
    lines += [f"bfs  harmonic_mean_TEPS: {st['harmonic_mean']:.17e}",
              f"bfs  harmonic_stddev_TEPS: {st['harmonic_stddev']:.17e}"]
    if validate_times is not None and len(validate_times):
        st = statistics(validate_times)
        lines += [f"bfs  {k}_validate: {st[k]:.17e}" for k in (*ORDER, "mean", "stddev")]
    return lines
