"""Inputs that were misread in silence or answered with an internal error, and headlines that hid what drove
them: each case says what it read or refused in one line naming the CLI flag (the Python API's errors name
its keywords), and the Graph500 report says when a few roots reached almost nothing.

The command-line cases run :func:`breadth.pipeline.cli.cli.main` in this process: each one is refused before
any cluster starts, so none waits on workers; the cases that need reading use a small in-process cluster.
"""

from __future__ import annotations

import gzip
import os
import time
import warnings
import zlib

import numpy as np
import pytest

from conftest import data_file


def _cli(capsys, monkeypatch, *args) -> tuple[int, str, str]:
    """``breadth ARGS`` in this process: exit status, stdout, stderr."""
    from breadth.pipeline.cli.cli import main

    monkeypatch.setenv("DASK_LOGGING", os.environ.get("DASK_LOGGING", "{}"))  # main's setdefault, undone after
    try:
        status = main([str(a) for a in args])
    except SystemExit as e:  # the parser's own refusals
        status = e.code
    out, err = capsys.readouterr()
    return status, out, err


def _one_line(status: int, err: str, want: int, *needles: str) -> str:
    assert status == want, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("breadth: error: "), err
    assert "Traceback" not in err
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """A generated store (dense ids, no id map) and an ingested one (integer ids through an int64 map)."""
    from breadth.pipeline.cli.cli import main

    d = tmp_path_factory.mktemp("faults")
    (d / "g.txt").write_text("1 2\n2 3\n3 1\n10 11\n")
    assert main(["generate", "--scale", "5", "--threads", "1", "--out", str(d / "k.store")]) == 0
    assert main(["ingest", str(d / "g.txt"), "--threads", "1", "--out", str(d / "g.store")]) == 0
    return d


# -- silent misreads ------------------------------------------------------------------------------------------

def test_string_csv_first_row_taken_as_header_is_said(tmp_path, lclient):
    import breadth.pipeline as bpl
    from breadth.io import InputNotice

    p = tmp_path / "s.csv"
    p.write_text("alice,bob\nbob,carol\n")
    with pytest.warns(InputNotice, match=r"s\.csv: first row 'alice,bob' taken as a header.*pass header=False"):
        el = bpl.read_csv(str(p), ids="str", client=lclient)
    assert (el.num_vertices, el.num_edges) == (2, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said: no notice
        el = bpl.read_csv(str(p), ids="str", header=False, client=lclient)
        assert (el.num_vertices, el.num_edges) == (3, 2)
        named = tmp_path / "n.csv"
        named.write_text("Source,Target\nbob,carol\n")  # a documented column pair is a header, nothing to say
        assert bpl.read_csv(str(named), ids="str", client=lclient).num_edges == 1
        numeric = tmp_path / "i.csv"
        numeric.write_text("from,to\n1,2\n")  # integer ids: a row of names cannot be an edge
        assert bpl.read_csv(str(numeric), client=lclient).num_edges == 1


def test_integer_csv_first_row_half_numeric_is_a_bad_line_not_a_header(tmp_path, lclient):
    import breadth.io as bio
    import breadth.pipeline as bpl

    p = tmp_path / "h.csv"
    p.write_text("1,x\n2,3\n")
    with pytest.raises(bio.NonNumericIdError, match=r"h\.csv:1: non-numeric vertex id: '1,x'"):
        bpl.read_csv(str(p), client=lclient)


def test_parquet_columns_that_are_no_documented_pair_are_named(tmp_path, lclient):
    import pyarrow as pa
    import pyarrow.parquet as pq

    import breadth.pipeline as bpl
    from breadth.io import InputNotice

    pq.write_table(pa.table({"alpha": [1, 2, 3], "beta": [2, 3, 4]}), tmp_path / "ab.parquet")
    with pytest.warns(InputNotice, match=r"ab\.parquet: columns 'alpha' and 'beta' are not a known source/target "
                                         r"pair; read 'alpha' as the source and 'beta' as the target.*pass src="):
        el = bpl.read_parquet(str(tmp_path / "ab.parquet"), client=lclient)
    assert el.num_edges == 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        bpl.read_parquet(str(tmp_path / "ab.parquet"), src="alpha", dst="beta", client=lclient)


def test_cli_header_flags_and_notices_name_flags(tmp_path, capsys, monkeypatch):
    from breadth.io import InputNotice
    from breadth.pipeline.cli.cli import build_parser
    from breadth.pipeline.cli.cli_errors import cli_text

    ingest = next(a for a in build_parser()._actions if a.dest == "cmd").choices["ingest"]
    flags = {s for a in ingest._actions for s in a.option_strings}
    assert {"--header", "--no-header"} <= flags
    status, _, err = _cli(capsys, monkeypatch, "ingest", tmp_path / "x.csv", "--header", "--no-header",
                          "--out", tmp_path / "x.store")
    assert status == 2 and "--no-header" in err and "not allowed with" in err
    text = cli_text(InputNotice("s.csv: first row 'a,b' taken as a header; {header=False} if it is an edge"))
    assert text == "s.csv: first row 'a,b' taken as a header; use --no-header if it is an edge"


def test_every_suggested_keyword_has_a_flag():
    from breadth.bfs.advice import KEYWORDS, AdvisedValueError
    from breadth.pipeline.cli.cli_errors import KEYWORD_FLAGS, cli_text

    assert set(KEYWORD_FLAGS) == set(KEYWORDS)
    e = AdvisedValueError("{format=csv}; {extra_columns='ignore'}; {src=,dst=}; {header=True}; {min_component=}; "
                          "{a=b} {ids='str'}")
    assert str(e) == ("pass format=csv; pass extra_columns='ignore'; pass src= and dst=; pass header=True; "
                      "pass min_component=; {a=b} pass ids='str'")
    assert cli_text(e) == ("use --format csv; use --extra-columns; use --src and --dst; use --header; "
                           "use --min-component; {a=b} use --ids str")


# -- internal errors ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,data,flags,status,needles", [
    ("e.txt", b"1 2\n2 3\n", ["--ids", "str"], 2, ["--ids str", "CSV", "e.txt", "SNAP"]),
    ("e.txt", b"1 2\n2 3\n", ["--no-header"], 2, ["--no-header", "CSV", "e.txt"]),
    ("e.txt", b"1 2\n2 3\n", ["--src", "a"], 2, ["--src/--dst", "CSV or Parquet", "e.txt"]),
    ("e.csv", b"1,2\n2,3\n", ["--extra-columns"], 2, ["--extra-columns", "SNAP", "e.csv"]),
    ("bin.dat", b"\x00\x01\x02garbage", [], 1, ["bin.dat", "cannot recognise the format", "use --format"]),
])
def test_flags_that_do_not_fit_the_input_are_refused_before_reading(tmp_path, capsys, monkeypatch, name, data, flags,
                                                                    status, needles):
    p = tmp_path / name
    p.write_bytes(data)
    t0 = time.perf_counter()
    got, _, err = _cli(capsys, monkeypatch, "ingest", p, *flags, "--out", tmp_path / "s.store")
    line = _one_line(got, err, status, *needles)
    assert "=" not in line.split(": ", 2)[2].replace("'", "")  # no keyword= of the API
    assert time.perf_counter() - t0 < 5 and not (tmp_path / "s.store").exists()


def test_reader_keywords_of_another_format_are_value_errors(tmp_path):
    import breadth.pipeline as bpl

    p = tmp_path / "e.txt"
    p.write_text("1 2\n")
    with pytest.raises(ValueError, match=r"ids= applies to csv input, not snap"):
        bpl.read_edges(str(p), ids="str")


def test_bench_on_a_store_without_edges_is_one_line(tmp_path, capsys, monkeypatch, lclient):
    from breadth.bfs import graph500
    from breadth.io.shard_store import write_store
    from breadth.pipeline import from_dask_array, prepare

    g = prepare(from_dask_array(np.array([[0, 0]]), 1), lclient)
    with pytest.raises(ValueError, match="no edges"):
        graph500(g, nroots=4)
    write_store(g, str(tmp_path / "loop.store"))
    t0 = time.perf_counter()
    status, _, err = _cli(capsys, monkeypatch, "bench", tmp_path / "loop.store")
    _one_line(status, err, 1, "loop.store", "no edges")
    assert time.perf_counter() - t0 < 5  # refused from the manifest: no cluster


def _intact_lines(path) -> int:
    """Lines that zlib inflates before the stream fails, fed 256 bytes at a time (as ``zcat | wc -l``)."""
    data, n = path.read_bytes(), 0
    d = zlib.decompressobj(31)
    try:
        for i in range(0, len(data), 256):
            n += d.decompress(data[i:i + 256]).count(b"\n")
    except zlib.error:  # a damaged stream (a cut one just ends)
        pass
    return n


def test_damaged_gzip_names_the_lines_read(tmp_path, lclient):
    import breadth.io as bio
    import breadth.pipeline as bpl

    data = bytearray(data_file("facebook_combined.txt.gz").read_bytes())
    cut = tmp_path / "cut.txt.gz"
    cut.write_bytes(data[:100_000])
    bad = bytearray(data)
    for i in range(100_000, 100_050):
        bad[i] ^= 0x55
    dmg = tmp_path / "dmg.txt.gz"
    dmg.write_bytes(bytes(bad))
    for path in (cut, dmg):
        lines = _intact_lines(path)
        assert lines > 30_000
        with pytest.raises(bio.TruncatedInputError, match=rf"{path.name}: compressed stream is damaged or truncated "
                                                          rf"after line {lines}:"):
            bpl.read_snap(str(path), client=lclient)
    csv = tmp_path / "cut.csv.gz"
    with gzip.open(csv, "wb") as f:
        f.write(b"".join(f"n{i},n{i + 1}\n".encode() for i in range(200_000)))
    csv.write_bytes(csv.read_bytes()[:200_000])
    with pytest.raises(bio.TruncatedInputError, match=rf"after line {_intact_lines(csv)}:"):
        bpl.read_csv(str(csv), ids="str", header=False, client=lclient)


@pytest.mark.parametrize("given,shown", [("1KB", "1KB"), ("1500000", "1500KB"), ("200MiB", "200MiB"),
                                         ("123", "123 bytes")])
def test_memory_limit_is_echoed_as_given(capsys, monkeypatch, given, shown):
    status, _, err = _cli(capsys, monkeypatch, "bench", "--scale", "8", "--memory-limit", given)
    _one_line(status, err, 2, f"--memory-limit {shown} is below the minimum")


def test_reading_errors_name_flags_in_the_cli_and_keywords_in_the_api(tmp_path, lclient):
    import pyarrow as pa
    import pyarrow.parquet as pq

    import breadth.io as bio
    import breadth.pipeline as bpl
    from breadth.pipeline.cli.cli_errors import one_line

    snap = tmp_path / "w.txt"
    snap.write_text("1 2 5\n")
    with pytest.raises(bio.BadLineError) as ei:
        bpl.read_snap(str(snap), client=lclient)
    assert "pass extra_columns='ignore'" in str(ei.value)
    assert one_line(ei.value) == f"{snap}:1: unexpected extra fields: '1 2 5'; use --extra-columns to ignore them"
    pq.write_table(pa.table({"a": [1], "b": [2], "c": [3]}), tmp_path / "abc.parquet")
    with pytest.raises(bio.MissingColumnError) as ei:
        bpl.read_parquet(str(tmp_path / "abc.parquet"), client=lclient)
    assert "pass src= and dst=" in str(ei.value)
    assert "use --src and --dst" in one_line(ei.value) and "src=" not in one_line(ei.value)
    with pytest.raises(bio.UnknownFormatError) as ei:
        bpl.read_edges([str(snap), str(tmp_path / "abc.parquet")])
    assert "pass format=" in str(ei.value) and "use --format" in one_line(ei.value)


def test_store_refusals_are_one_short_line_naming_overwrite(stores, capsys, monkeypatch):
    from breadth.io.errors import StoreError
    from breadth.io.shard_store import check_store
    from breadth.pipeline.cli.cli_errors import one_line

    with pytest.raises(StoreError) as ei:
        check_store(str(stores / "g.store"), {"command": "generate", "scale": 5, "edgefactor": 16, "seed": 1})
    assert "pass overwrite=True" in str(ei.value).splitlines()[0]
    assert "edgefactor" in str(ei.value)  # the details, after the first line
    status, _, err = _cli(capsys, monkeypatch, "generate", "--scale", "5", "--out", stores / "g.store")
    line = _one_line(status, err, 1, "written by breadth ingest", "use --overwrite")
    assert len(line) < 250 and "overwrite=" not in line
    status, _, err = _cli(capsys, monkeypatch, "generate", "--scale", "5", "--out", stores / "g.store", "--verbose")
    assert status == 1 and "edgefactor: absent before, 16 now" in err  # the details, with --verbose
    assert one_line(StoreError("x exists; {overwrite=True} to replace it")) == "x exists; use --overwrite to replace it"


# -- roots checked before the cluster -----------------------------------------------------------------------

@pytest.mark.parametrize("store,root,needles", [
    ("k.store", "32", ["--root 32", "not in the graph", "0..31"]),
    ("k.store", "-1", ["--root -1", "not in the graph"]),
    ("k.store", "abc", ["--root abc", "expected an integer"]),
    ("g.store", "99999999999999999999999", ["--root 99999999999999999999999", "not in the graph"]),
    ("g.store", "x1", ["--root x1", "expected an integer"]),
])
def test_roots_out_of_range_are_refused_before_the_cluster(stores, tmp_path, capsys, monkeypatch, store, root,
                                                           needles):
    t0 = time.perf_counter()
    status, _, err = _cli(capsys, monkeypatch, "bfs", stores / store, "--root", "1", "--root", root,
                          "--out", tmp_path / "r")
    _one_line(status, err, 2, *needles)
    assert time.perf_counter() - t0 < 5 and not os.listdir(tmp_path)


# -- honest headlines ---------------------------------------------------------------------------------------

def _result(nedges, times):
    from breadth.bfs.graph500.driver import Graph500Result

    rows = [{"root": i, "time": t, "nedge": e, "reached": e, "validate_time": 0.0, "violations": None}
            for i, (e, t) in enumerate(zip(nedges, times))]
    return Graph500Result({"graph": "g"}, rows)


def test_report_says_when_a_few_roots_reached_almost_nothing():
    res = _result([948_464] * 63 + [4], [0.07] * 63 + [0.0016])
    rep = res.report()
    notes = [ln for ln in rep.splitlines() if ln.startswith("note:")]
    assert len(notes) == 1, rep
    note = notes[0]
    assert "1 of 64 roots reached at most 4 edges" in note and "median_TEPS" in note and "harmonic_mean" in note
    assert "min_component='giant'" in note
    assert "--min-component giant" in res.report(option="--min-component giant")
    assert res.to_dict()["small_searches"]["roots"] == 1
    even = _result([1000, 900, 1100, 1000], [0.01] * 4)
    assert "note:" not in even.report() and even.to_dict()["small_searches"]["roots"] == 0


def _components_graph(lclient):
    """A 200-vertex star (the giant component: searches of two levels) and 40 separate edges (2-vertex
    components)."""
    from breadth.pipeline import from_dask_array, prepare

    star = np.stack([np.zeros(199, np.int64), np.arange(1, 200)], axis=1)
    pairs = 200 + np.arange(80).reshape(40, 2)
    return prepare(from_dask_array(np.concatenate([star, pairs]), 280), lclient)


def test_graph500_min_component_takes_roots_from_large_components(lclient):
    from breadth.bfs import choose_roots, graph500

    g = _components_graph(lclient)
    try:
        default = choose_roots(g, 16, 3)  # Graph500's rule, graph500()'s roots by default: degree >= 1
        assert any(default >= 200)
        giant = graph500(g, nroots=16, seed=3, validate=True, min_component="giant")
        assert giant.valid and len(giant.rows) == 16
        assert all(r["root"] < 200 and r["reached"] == 200 for r in giant.rows)
        assert "root_rule" in giant.header and "note:" not in giant.report()
        batched = graph500(g, nroots=16, seed=3, validate=False, min_component="giant", batch=True)
        assert [r["root"] for r in batched.rows] == [r["root"] for r in giant.rows]
        sized = graph500(g, nroots=8, seed=3, validate=False, min_component=2)
        assert [r["root"] for r in sized.rows] == default[:8].tolist()
        with pytest.raises(ValueError, match="min_component"):
            graph500(g, nroots=1, validate=False, min_component=1000)
        with pytest.raises(ValueError, match="min_component"):
            graph500(g, nroots=4, validate=False, min_component="huge")
    finally:
        g.release()


@pytest.mark.parametrize("value", ["0", "lots"])
def test_cli_min_component_values(capsys, monkeypatch, value):
    status, _, err = _cli(capsys, monkeypatch, "bench", "--scale", "8", "--min-component", value)
    _one_line(status, err, 2, "--min-component must be giant or an integer >= 1", repr(value))
