"""The README's examples run as written, and the commands it and docs/ show exist.

The rule for Python blocks: every ```` ```python ```` block of README.md is a complete script and is run,
unless its first line is a comment starting with ``# not run`` (code that needs a GPU, or a fragment).
Each block runs as a saved script (``python block.py`` in a fresh process, in a temporary directory),
and the first block also the way a notebook cell runs: its source executed in the ``__main__`` namespace
of a fresh ``python -c`` process, which has no file.  Every run must exit 0 within ``TIMEOUT_S``.

The ``breadth ...`` lines of the ```` ```bash ```` blocks of README.md and docs/*.md must parse with the
CLI's own parser (no cluster is started), every ``--option`` that README.md and docs/cli.md name must be
an option of some ``breadth`` command (or of the few other tools they show: ``OTHER_TOOLS``), and
docs/cli.md's section of each command must list exactly that command's options.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
TIMEOUT_S = 240  # a few seconds each with Numba's cache warm; a cold cache compiles the kernels first
NOT_RUN = "# not run"
#: options of other tools that README.md or docs/cli.md show beside breadth's (dask worker, benchmarks)
OTHER_TOOLS = {"--nworkers", "--nthreads", "--gap-bfs"}


def _blocks(path: Path, lang: str) -> list[str]:
    """The bodies of the ```LANG fenced blocks of ``path``, in order."""
    return re.findall(rf"^```{lang}[ \t]*\n(.*?)^```[ \t]*$", path.read_text(), flags=re.M | re.S)


def _python_blocks() -> list[str]:
    return [b for b in _blocks(README, "python") if not b.lstrip().startswith(NOT_RUN)]


def _run(args: list[str], cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(args, cwd=cwd, input=stdin, capture_output=True, text=True, timeout=TIMEOUT_S,
                              env=os.environ.copy())
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{' '.join(args)} did not end within {TIMEOUT_S} s; its output:\n{e.stdout}\n{e.stderr}")


def test_readme_has_python_blocks() -> None:
    assert len(_python_blocks()) >= 2, "README.md should show the Python API in runnable blocks"


@pytest.mark.parametrize("index", range(len(_python_blocks())))
def test_python_block_runs_as_a_script(index: int, tmp_path: Path) -> None:
    script = tmp_path / f"readme_block_{index}.py"
    script.write_text(_python_blocks()[index])
    proc = _run([sys.executable, str(script)], tmp_path)
    assert proc.returncode == 0, f"README python block {index} as a script exited {proc.returncode}:\n{proc.stderr}"


def test_first_python_block_runs_as_a_notebook_cell(tmp_path: Path) -> None:
    cell = "import sys; exec(compile(sys.stdin.read(), '<cell>', 'exec'))"  # __main__ without a __file__
    proc = _run([sys.executable, "-c", cell], tmp_path, stdin=_python_blocks()[0])
    assert proc.returncode == 0, f"README's first python block as a notebook cell exited {proc.returncode}:\n" \
                                 f"{proc.stderr}"


def _parser() -> argparse.ArgumentParser:
    from breadth.pipeline.cli.cli import build_parser

    return build_parser()


def _command_options() -> dict[str, set[str]]:
    sub = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {name: {s for a in p._actions for s in a.option_strings if s.startswith("--") and s != "--help"}
            for name, p in sub.choices.items()}


def _command_lines() -> list[tuple[str, str]]:
    lines = []
    for path in [README, *sorted(DOCS.glob("*.md"))]:
        for block in _blocks(path, "bash"):
            lines += [(path.name, ln.strip()) for ln in block.splitlines() if ln.strip().startswith("breadth ")]
    return lines


def test_docs_show_breadth_commands() -> None:
    assert len(_command_lines()) >= 10


@pytest.mark.parametrize("where,line", _command_lines())
def test_shown_command_parses(where: str, line: str) -> None:
    argv = shlex.split(line, comments=True)[1:]
    try:
        args = _parser().parse_args(argv)
    except SystemExit as e:
        pytest.fail(f"{where}: `{line}` does not parse (exit {e.code})")
    assert args.cmd == argv[0]


@pytest.mark.parametrize("doc", ["README.md", "docs/cli.md"])
def test_named_options_exist(doc: str) -> None:
    known = set().union(*_command_options().values()) | OTHER_TOOLS | {"--help", "--version"}
    named = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", (ROOT / doc).read_text()))
    assert named - known == set(), f"{doc} names options that no breadth command has"


def test_cli_doc_lists_every_option_of_every_command() -> None:
    text = (DOCS / "cli.md").read_text()
    sections = dict(re.findall(r"^## breadth (\w+)\n(.*?)(?=^## |\Z)", text, flags=re.M | re.S))
    for cmd, options in _command_options().items():
        assert cmd in sections, f"docs/cli.md has no section '## breadth {cmd}'"
        listed = set(re.findall(r"^- `(--[a-z][a-z0-9-]*)", sections[cmd], flags=re.M))
        assert listed == options, (f"docs/cli.md's breadth {cmd}: missing {sorted(options - listed)}, "
                                   f"not options of the command {sorted(listed - options)}")
