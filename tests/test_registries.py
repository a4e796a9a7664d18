"""A format or a transport is one module and one registration: a toy format registered here is recognised
by ``detect_format``, read by ``read_edges``, offered by ``breadth ingest --format`` and checked against the
format-specific flags; a toy transport registered here is ``"auto"``'s pick for CPU ranks, offered by
``--protocol``, and carries a search."""

from __future__ import annotations

import numpy as np
import pytest

from breadth.io.formats import FORMATS, InputFormat, detect_format, format_choices, register_format
from breadth.io.paths import expand_paths
from breadth.io.text_parser import TextOptions, read_text_file_chunks

from conftest import scipy_levels


# -- a toy input format: tab-separated "target<TAB>source[<TAB>anything]" lines, ';' comments -----------------

def read_tsv2(paths, *, directed: bool = False, on_bad_lines: str = "error", chunk_bytes: int = 1 << 20,
              client=None):
    """The toy format's reader: io's text chunks (its own column order and comment character), made an edge
    list by pipeline's relabeling, as the built-in text readers do."""
    from breadth.pipeline.relabel.relabel import edge_list_from_parts

    files = expand_paths(paths)
    opts = TextOptions(sep=ord("\t"), src_idx=1, dst_idx=0, max_fields=0, comments=b";", on_bad_lines=on_bad_lines)
    parts = [c for f in files for c in read_text_file_chunks(f, opts, chunk_bytes)]
    return edge_list_from_parts(parts, client, directed=directed, source={"kind": "tsv2", "path": ",".join(files)})


@pytest.fixture
def tsv2():
    fmt = register_format(InputFormat("tsv2", "TSV2", read_tsv2, suffixes=(".tsv2",),
                                      sniff=lambda head: head.startswith(b";tsv2")))
    yield fmt
    del FORMATS["tsv2"]


_TSV2 = ";tsv2 target first\n20\t10\t0.5\n30\t20\t1\n; a comment\n10\t30\t2\n40\t30\t2\n"
_ARCS = np.array([[10, 20], [20, 30], [30, 10], [30, 40]])  # (source, target)


def test_a_registered_format_is_detected_and_read(tmp_path, lclient, tsv2):
    from breadth.pipeline import read_edges

    named, unnamed = tmp_path / "g.tsv2", tmp_path / "g.data"
    named.write_text(_TSV2)
    unnamed.write_text(_TSV2)
    assert detect_format(str(named)) == detect_format(str(unnamed)) == detect_format("x.tsv2.gz") == "tsv2"
    assert detect_format(str(tmp_path / "x.tsv")) == "snap"  # a suffix is matched whole
    assert format_choices()[-1] == "tsv2"
    for path in (named, unnamed):
        el = read_edges(str(path), directed=True, client=lclient)
        assert (el.num_vertices, el.num_edges, el.source["kind"]) == (4, 4, "tsv2")
        np.testing.assert_array_equal(np.asarray(el.id_map)[el.edges.compute()], _ARCS)
    with pytest.raises(ValueError, match="src/dst columns apply to csv and parquet input, not tsv2"):
        read_edges(str(named), src="a", client=lclient)
    with pytest.raises(ValueError, match="extra_columns= applies to snap input, not tsv2"):
        read_edges(str(named), extra_columns="ignore", client=lclient)


def test_the_cli_offers_a_format_registered_before_its_parser_is_built(tmp_path, tsv2):
    from breadth.pipeline.cli import cli_checks
    from breadth.pipeline.cli.cli import build_parser
    from breadth.pipeline.cli.cli_errors import UsageError
    from breadth.pipeline.shuffle.memory_plan import plan_reading

    path = tmp_path / "g.tsv2"
    path.write_text(_TSV2)
    args = build_parser().parse_args(["ingest", str(path), "--format", "tsv2", "--out", str(tmp_path / "s")])
    cli_checks.ingest_inputs(args)  # no format-specific flag given
    args = build_parser().parse_args(["ingest", str(path), "--extra-columns", "--out", str(tmp_path / "s")])
    with pytest.raises(UsageError, match=r"--extra-columns applies to SNAP text input, and .*g.tsv2 is TSV2"):
        cli_checks.ingest_inputs(args)
    # a text format: read in byte ranges that the memory plan sizes
    assert plan_reading(1 << 30, [str(path)], 1, 1).chunk_bytes > 0


def test_register_format_refuses_a_claimed_name_or_suffix():
    with pytest.raises(ValueError, match="registered already"):
        register_format(InputFormat("csv", "CSV again", read_tsv2))
    with pytest.raises(ValueError, match="suffix '.mtx' is mtx's"):
        register_format(InputFormat("mtx2", "MTX2", read_tsv2, suffixes=(".mtx",)))
    with pytest.raises(ValueError, match="parquet is the directory format"):
        register_format(InputFormat("orc", "ORC", read_tsv2, directory=True))
    assert list(FORMATS) == ["snap", "csv", "mtx", "parquet"]


# -- a toy transport: TCP's mesh, connected through its own entry (which counts the ranks it connects) --------

CONNECTED: list[int] = []


def connect_counted(rank, size, session, *, timeout, backend="cpu", config=None):
    from breadth.bfs.transport.tcp import TCPCommunicator

    CONNECTED.append(rank)
    return TCPCommunicator.connect(rank, size, session, timeout=timeout)


def test_a_registered_transport_is_autos_pick_and_carries_a_search(lclient):
    from breadth.bfs import bfs
    from breadth.bfs.engine.session import resolve_protocol
    from breadth.bfs.transport.registry import TRANSPORTS, Transport, register_transport
    from breadth.pipeline import kronecker, prepare
    from breadth.pipeline.cli import cli_checks
    from breadth.pipeline.cli.cli import build_parser
    from breadth.pipeline.cli.cli_errors import UsageError

    register_transport(Transport("counted", "counted TCP", connect_counted, auto=("cpu",), preference=1))
    register_transport(Transport("absent", "absent", connect_counted, missing=lambda: "no such library",
                                 install="pip install absent"))
    try:
        assert resolve_protocol("auto", "cpu", 2) == "counted"
        assert resolve_protocol("auto", "gpu", 2) in ("nccl", "tcp")  # not listed for GPU ranks
        assert build_parser().parse_args(["bench", "--scale", "8", "--protocol", "counted"]).protocol == "counted"
        cli_checks.protocol("counted", "cpu")
        with pytest.raises(UsageError, match=r"--protocol absent: .*\(no such library\); pip install absent"):
            cli_checks.protocol("absent", "cpu")
        scale = 9
        edges = kronecker(scale, seed=3).edges.compute(scheduler="sync")
        g = prepare(kronecker(scale, seed=3), lclient, nparts=2)
        root = int(edges[0, 0])
        CONNECTED.clear()
        res = bfs(g, root)
        assert sorted(CONNECTED) == [0, 1]  # both ranks connected through the registered entry
        np.testing.assert_array_equal(res.level, scipy_levels(edges, 1 << scale, root))
        g.release()
    finally:
        del TRANSPORTS["counted"], TRANSPORTS["absent"]
    assert resolve_protocol("auto", "cpu", 2) == "tcp"
