"""The ``breadth`` command line: argument errors and a small end-to-end benchmark."""

import json
import os
import subprocess
import sys

import pytest


def _run(*args, timeout=300, env=None):
    return subprocess.run([sys.executable, "-m", "breadth.pipeline.cli.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=None if env is None else {**os.environ, **env})


@pytest.mark.parametrize("args,needle", [
    (["bench", "--scale", "0"], "--scale must be in 1..40, got 0"),
    (["bench", "--scale", "41"], "--scale must be in 1..40, got 41"),
    (["bench", "--scale", "10", "--roots", "0"], "--roots must be >= 1, got 0"),
    (["bench", "--scale", "10", "--workers", "0"], "--workers must be >= 1, got 0"),
    (["bench", "--scale", "ten"], "--scale must be an integer, got 'ten'"),
])
def test_bad_arguments_exit_2_with_one_line(args, needle):
    r = _run(*args)
    assert r.returncode == 2
    assert needle in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_bench_end_to_end(tmp_path):
    """Also: breadth's settings from the environment reach the preparation and the search, and the JSON
    records both configs that ran."""
    out = tmp_path / "r.json"
    r = _run("bench", "--scale", "10", "--roots", "8", "--json", str(out),
             env={"DASK_BREADTH__SHUFFLE__TIER": "disk", "DASK_BREADTH__SEARCH__BETA": "30"})
    assert r.returncode == 0, r.stderr[-2000:]
    assert "SCALE: 10" in r.stdout and "bfs  harmonic_mean_TEPS:" in r.stdout
    data = json.loads(out.read_text())
    assert data["valid"] and len(data["roots"]) == 8
    assert data["statistics"]["teps"]["harmonic_mean"] > 0
    assert not (tmp_path / "r.json.tmp").exists()
    prep, search = (json.loads(data["header"][k]) for k in ("prepare_config", "search_config"))
    assert prep["tier"] == "disk" and prep["exchange"] == "auto" and search["beta"] == 30.0


def test_a_bad_setting_is_one_line_before_any_work():
    r = _run("bench", "--scale", "10", env={"DASK_BREADTH__SEARCH__BETA": "fast"}, timeout=60)
    assert r.returncode == 1
    assert r.stderr.strip().splitlines() == [
        "breadth: error: Dask setting breadth.search.beta (DASK_BREADTH__SEARCH__BETA) must be a number, got 'fast'"]


def test_bench_2d_records_bytes(tmp_path):
    out = tmp_path / "r.json"
    r = _run("bench", "--scale", "10", "--roots", "4", "--workers", "4", "--threads", "1", "--partition", "2d",
             "--json", str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    data = json.loads(out.read_text())
    assert data["valid"] and data["header"]["partition"] == "2d 2x2"
    for row in data["roots"]:  # every rank's bytes, per search and per level
        assert row["bytes_sent"] == sum(lv["bytes_all_ranks"] for lv in row["levels"]) > 0
    assert data["statistics"]["bytes_sent"]["mean"] > 0


def test_a_bare_timeout_is_explained():
    """Dask's comms raise TimeoutError() without a message when a worker does not answer: the one line says
    what that means instead of printing "TimeoutError" alone (as a 2^30 ingest under a limit once did)."""
    from breadth.pipeline.cli.cli_errors import one_line

    line = one_line(TimeoutError())
    assert "did not answer" in line and "--memory-limit" in line
    assert one_line(TimeoutError("connect to tcp://x timed out")) == "connect to tcp://x timed out"


def test_a_full_disk_says_where_to_make_room():
    import errno

    from breadth.pipeline.cli.cli_errors import one_line

    line = one_line(OSError("Not enough free space to write 1073740336 bytes after offset 0"))
    assert line.startswith("a disk is full: Not enough free space") and "--spill-dir" in line
    line = one_line(OSError(errno.ENOSPC, "No space left on device", "/spill/part-3.npy"))
    assert "(/spill/part-3.npy)" in line and "--spill-dir" in line


def test_warnings_are_one_line_each():
    """A warning on the client (here: a scale-3 graph has fewer vertices of degree >= 1 than the 64 roots
    asked for) is one ``breadth: warning:`` line, not Python's file, line and source."""
    r = _run("bench", "--scale", "3", "--workers", "1", "--threads", "1")
    assert r.returncode == 0, r.stderr[-2000:]
    lines = [ln for ln in r.stderr.splitlines() if "warning" in ln.lower()]
    assert lines and all(ln.startswith("breadth: warning: graph has only ") for ln in lines), r.stderr
    assert "UserWarning" not in r.stderr and "warnings.warn" not in r.stderr
