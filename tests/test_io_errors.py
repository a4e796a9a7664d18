"""A corpus of malformed inputs, each with its specific error naming file, line and offending text."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys

import pytest

from conftest import data_file


@pytest.fixture(scope="module")
def lclient():
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None)
    c = Client(cluster)
    yield c
    c.close()
    cluster.close()


def _write(tmp_path, name, data: bytes):
    p = tmp_path / name
    p.write_bytes(data)
    return str(p)


# (file name, content, reader kwargs, error class name, text the message must contain)
CORPUS = [
    ("nonnum.txt", b"# h\n1 2\n3 x7\n", {}, "NonNumericIdError", ":3: non-numeric vertex id: '3 x7'"),
    ("float.txt", b"1 2\n2.5 3\n", {}, "NonNumericIdError", ":2: non-numeric vertex id: '2.5 3'"),
    ("neg.txt", b"1 2\r\n-3 4\r\n", {}, "NegativeIdError", ":2: negative vertex id: '-3 4'"),
    ("big.txt", b"1 2\n99999999999999999999 1\n", {}, "IdRangeError", ":2: vertex id exceeds the uint64 range (expected an integer in 0..2**64-1)"),
    ("few.txt", b"1 2\n\n5\n", {}, "BadLineError", ":3: too few fields: '5'"),
    ("extra.txt", b"1 2\n1 2 3\n", {}, "BadLineError", ":2: unexpected extra fields"),
    ("empty.txt", b"", {}, "EmptyInputError", "no edges in"),
    ("comments.txt", b"# only\n% comments\n\n", {}, "EmptyInputError", "no edges in"),
    ("e.csv", b"a,b\n1,2\n3,4,5\n", {"src": "a", "dst": "b"}, "BadLineError", ":3: unexpected extra fields"),
    ("m.csv", b"a,b\n1,2\n", {"src": "from", "dst": "b"}, "MissingColumnError", "no source column 'from'"),
    ("n.csv", b"a,b\n1,2\n3,abc\n", {}, "NonNumericIdError", ":3: non-numeric vertex id: '3,abc'"),
    ("t.mtx", b"%%MatrixMarket matrix coordinate pattern general\n3 3 3\n1 2\n2 3\n", {}, "TruncatedInputError",
     "declares 3 entries but holds 2"),
    ("r.mtx", b"%%MatrixMarket matrix coordinate pattern general\n3 3 2\n1 2\n4 3\n", {}, "IdRangeError",
     ":4: vertex id outside the declared range: '4 3'"),
    ("z.mtx", b"%%MatrixMarket matrix coordinate pattern general\n3 3 1\n0 2\n", {}, "IdRangeError", ":3:"),
    ("d.mtx", b"%%MatrixMarket matrix array real general\n3 3\n", {}, "UnknownFormatError", "'array' format"),
    ("bin.dat", b"\x00\x01\x02garbage", {}, "UnknownFormatError", "cannot recognise the format"),
]


@pytest.mark.parametrize("name,data,kw,err,needle", CORPUS, ids=[c[0] for c in CORPUS])
def test_malformed_input_specific_error(tmp_path, lclient, name, data, kw, err, needle):
    import breadth.io as bio
    import breadth.pipeline as bpl

    path = _write(tmp_path, name, data)
    with pytest.raises(getattr(bio, err)) as ei:
        bpl.read_edges(path, client=lclient, **kw)
    msg = str(ei.value)
    assert needle in msg
    assert type(ei.value).__name__ == err
    if ":" in needle and needle.startswith(":"):
        assert msg.startswith(path)  # names the file


def test_unknown_format_name_and_parquet_errors(tmp_path, lclient):
    import pyarrow as pa
    import pyarrow.parquet as pq

    import breadth.io as bio
    import breadth.pipeline as bpl

    with pytest.raises(bio.UnknownFormatError, match="unknown format 'xml'"):
        bpl.read_edges(_write(tmp_path, "g.txt", b"1 2\n"), format="xml")
    pq.write_table(pa.table({"s": [1, 2], "t": [2, 3], "w": [0.5, 1.0]}), tmp_path / "p.parquet")
    with pytest.raises(bio.MissingColumnError, match="no target column 'dst'.*columns are"):
        bpl.read_parquet(str(tmp_path / "p.parquet"), src="s", dst="dst", client=lclient)
    with pytest.raises(bio.MissingColumnError, match="cannot tell the source/target"):
        bpl.read_parquet(str(tmp_path / "p.parquet"), client=lclient)
    with pytest.raises(bio.NonNumericIdError, match="column 'w' has type double"):
        bpl.read_parquet(str(tmp_path / "p.parquet"), src="s", dst="w", client=lclient)
    pq.write_table(pa.table({"src": [1, -2], "dst": [2, 3]}), tmp_path / "neg.parquet")
    with pytest.raises(bio.NegativeIdError, match="negative vertex id -2"):
        bpl.read_parquet(str(tmp_path / "neg.parquet"), client=lclient)
    with pytest.raises(FileNotFoundError, match="nothere.txt: no such file"):
        bpl.read_edges(str(tmp_path / "nothere.txt"))


def test_truncated_gzip(tmp_path, lclient):
    import breadth.io as bio
    import breadth.pipeline as bpl

    data = data_file("facebook_combined.txt.gz").read_bytes()
    path = _write(tmp_path, "cut.txt.gz", data[: len(data) // 2])
    with pytest.raises(bio.TruncatedInputError, match="cut.txt.gz: compressed stream is damaged or truncated"):
        bpl.read_edges(path, client=lclient)


def test_line_numbers_across_byte_ranges_and_gzip(tmp_path, lclient):
    import breadth.io as bio
    import breadth.pipeline as bpl

    lines = [f"{i}\t{i + 1}\r\n" for i in range(5000)]
    lines[3776] = "3776\tbad\r\n"  # line 3778 of the file below (two header lines)
    text = ("# a\n# b\n" + "".join(lines)).encode()
    plain = _write(tmp_path, "l.txt", text)
    gz = tmp_path / "l.txt.gz"
    with gzip.open(gz, "wb") as f:
        f.write(text)
    for path, cb in ((plain, 1000), (plain, 1 << 20), (str(gz), 1000)):
        with pytest.raises(bio.NonNumericIdError, match=r"l\.txt(\.gz)?:3779: non-numeric vertex id: '3776\\tbad'"):
            bpl.read_snap(path, client=lclient, chunk_bytes=cb)


@pytest.mark.parametrize("policy", ["skip", "warn"])
def test_skip_and_warn_count_bad_lines(tmp_path, lclient, policy):
    import breadth.pipeline as bpl

    path = _write(tmp_path, "s.txt", b"1 2\nfoo bar\n2 3\n-1 5\n3 4\n7\n")
    el = bpl.read_snap(path, client=lclient, on_bad_lines=policy)
    assert el.num_edges == 3 and el.num_vertices == 4
    assert el.source["skipped_lines"] == 3
    assert [b[1] for b in el.source["bad_lines"]] == [2, 4, 6]


def _cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "breadth.pipeline.cli.cli", *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd)


def test_failed_ingest_leaves_no_store(tmp_path):
    bad = _write(tmp_path, "bad.txt", b"1 2\n3 x\n")
    out = tmp_path / "s.store"
    r = _cli("ingest", bad, "--out", str(out), "--threads", "1")
    assert r.returncode == 1
    assert r.stderr.strip().splitlines()[-1] == f"breadth: error: {bad}:2: non-numeric vertex id: '3 x'"
    assert not out.exists()
    assert [p for p in os.listdir(tmp_path) if p.startswith("s.store")] == []
    r = _cli("ingest", bad, "--out", str(out), "--on-bad-lines", "skip", "--threads", "1")
    assert r.returncode == 0, r.stderr
    assert "1 bad line(s) skipped" in r.stdout and f"skipped {bad}:2" in r.stdout
    assert (out / "manifest.json").exists()
    r = _cli("ingest", bad, "--format", "xml", "--out", str(tmp_path / "x"))
    assert r.returncode == 2 and "invalid choice: 'xml'" in r.stderr
