"""How the ``breadth`` command reports a failure: one line on stderr and an exit status, never a traceback.

    breadth: error: <what went wrong, naming the file, line, column or option, and what was expected>

Exit statuses: 2 for usage errors (bad options, found before any work), 1 for everything else (bad input,
a failed search, a lost worker), 130 after Ctrl-C and 143 after SIGTERM (a batch scheduler's cancel).  The
worker logs of a failed Dask task and Python tracebacks are shown only with ``--verbose``: they are the
developers' business, not the user's; so are the lines after the first of a long refusal (a store's
differing parameters), which the traceback shows.

The readers, the store and the Graph500 driver suggest settings in their messages as tokens,
``{overwrite=True}`` (:mod:`breadth.bfs.advice`), which the Python API renders with its keywords;
:data:`KEYWORD_FLAGS` is where the command line renders them with its flags instead (``use --overwrite``).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import signal
import sys
import threading
import traceback
from typing import Callable


class UsageError(Exception):
    """An option that cannot work, found before any work (exit status 2)."""


class CommandError(Exception):
    """A failure to report as one line (exit status 1)."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread so that the same clean-up as Ctrl-C runs."""


EXIT_USAGE, EXIT_FAILURE, EXIT_INTERRUPT, EXIT_TERMINATED = 2, 1, 130, 143

#: the ``breadth`` flags that set each keyword of :data:`breadth.bfs.advice.KEYWORDS`: a flag that takes the
#: value (``--format csv``, or the flag alone where the message leaves the value to the user), or, for a keyword
#: whose values are separate flags, the flag of each value (as the message writes it)
KEYWORD_FLAGS: dict[str, str | dict[str, str]] = {
    "format": "--format", "src": "--src", "dst": "--dst", "ids": "--ids", "min_component": "--min-component",
    "header": {"True": "--header", "False": "--no-header"},
    "extra_columns": {"'ignore'": "--extra-columns"},
    "overwrite": {"True": "--overwrite"},
}


def _flag(keyword: str, value: str) -> str:
    flag = KEYWORD_FLAGS.get(keyword)
    if isinstance(flag, dict):
        return flag.get(value, f"{keyword}={value}")
    if flag is None:  # a keyword without a flag: the API's words, rather than nothing
        return f"{keyword}={value}"
    value = value.strip("'\"")
    return f"{flag} {value}" if value else flag


def cli_text(exc: BaseException) -> str:
    """The message of ``exc`` (an error or a warning) in the command line's words: the setting tokens of
    :mod:`breadth.bfs.advice` rendered as ``use --flag`` (its ``str()`` where it has none).

    >>> from breadth.io.errors import MissingColumnError
    >>> cli_text(MissingColumnError("p.parquet: cannot tell the source/target columns; {src=,dst=} to name them"))
    'p.parquet: cannot tell the source/target columns; use --src and --dst to name them'
    """
    template = getattr(exc, "template", None)
    if not isinstance(template, str):
        return str(exc)
    from breadth.bfs.advice import TOKEN, settings

    return TOKEN.sub(lambda m: "use " + " and ".join(_flag(k, v) for k, v in settings(m.group(1))), template)


def one_line(exc: BaseException) -> str:
    """The message of ``exc`` as one line: its first non-empty line, else its type's name.

    Exceptions raised on Dask workers reach the client as themselves (the readers' errors pickle by
    message), so their first line is the reader's own ``FILE:LINE: what``; a lost worker or rank names the
    worker.  Wrapped causes (a rank's error) are already folded into the wrapper's message."""
    text = cli_text(exc).strip()
    if type(exc).__name__ == "KilledWorker":  # distributed.scheduler.KilledWorker: a task took its worker down
        return (f"a worker died while running a task ({text.splitlines()[0] if text else 'KilledWorker'}); "
                "the most common cause is a memory limit too small for the chunk size (see --memory-limit)")
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    if isinstance(exc, TimeoutError) and not first:  # a bare one from Dask's comms: a worker did not answer
        return ("a worker did not answer within Dask's timeout (busy spilling, swapping or stuck); raise "
                "--memory-limit, or rerun with --verbose to see where")
    if not first:
        return type(exc).__name__
    if isinstance(exc, OSError) and (exc.errno == errno.ENOSPC or first.startswith("Not enough free space")):
        # NumPy's message for a full disk names neither the file nor the way out
        where = f" ({exc.filename})" if exc.filename else ""
        return (f"a disk is full{where}: {first}; free space there, or point --spill-dir at a disk with room "
                "(the shuffle's disk tier and the store write there)")
    if isinstance(exc, (OSError, ValueError, RuntimeError, CommandError, UsageError)) or "error" in first.lower():
        return first
    return f"{type(exc).__name__}: {first}"


@contextlib.contextmanager
def _signals_as_exceptions():
    """SIGINT raises ``KeyboardInterrupt`` and SIGTERM :class:`Terminated` in the main thread, so that the
    same clean-up runs for both, until the command has caught one (``state["caught"]``): later ones are
    ignored, so none escapes while the command exits (Python would then end by SIGINT, status -2).

    Python drops an exception raised while a garbage-collection callback or a ``__del__`` runs (Dask has
    such callbacks) and reports it to ``sys.unraisablehook`` instead: the command would go on, its workers
    killed by the same signal.  The hook therefore sends a dropped interruption's signal again, until it
    lands where it can end the command.  Once the command has caught one, the hook reports nothing, also after
    this returns: an object the signal cut short in its ``__init__`` (a Dask Future without its ``_cleared``)
    fails in its ``__del__`` as the exception's frames go, which would print a traceback after the
    command's one line."""
    state = {"caught": False}

    def on_signal(signum, frame):
        if not state["caught"]:
            raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()

    def unraisable(info):
        if isinstance(info.exc_value, KeyboardInterrupt):  # Terminated included
            if not state["caught"]:  # from another thread: a signal raised inside this hook is dropped too
                sig = signal.SIGTERM if isinstance(info.exc_value, Terminated) else signal.SIGINT
                again = threading.Timer(0.05, os.kill, (os.getpid(), sig))
                again.daemon = True
                again.start()
            return
        if not state["caught"]:
            previous_hook(info)

    try:
        old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    except ValueError:  # not the main thread (called from a test's thread): leave signals alone
        yield state
        return
    previous_hook, sys.unraisablehook = sys.unraisablehook, unraisable
    try:
        yield state
    finally:
        if not state["caught"]:  # after an interruption the command is exiting: the handlers stay (late
            # signals ignored), and so does the hook (the finalizers of what the signal cut short unreported)
            sys.unraisablehook = previous_hook
            for s, h in old.items():
                signal.signal(s, h)


def hold_signals() -> Callable[[], None]:
    """Ignore SIGINT and SIGTERM until the returned ``release()`` is called.  For starting a local Dask
    cluster: one interrupted half-way leaves workers it can neither use nor close.

    An ignored signal stays ignored in the processes started meanwhile, so the workers never see a Ctrl-C
    at the terminal or a batch system's SIGTERM, both of which signal the whole process group (dying of
    them, workers print tracebacks and log lines of their own); this process handles them and its nannies
    stop the workers (a request, then SIGKILL).  A signal during the second or two of start-up is dropped;
    the next one ends the command."""
    try:
        old = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    except ValueError:  # not the main thread: leave signals alone
        return lambda: None

    def release() -> None:
        for s, h in old.items():
            signal.signal(s, h)

    return release


def quiet_logs(verbose: bool) -> int:
    """The level below which Dask's logs are hidden, in this process and in the workers it starts:
    warnings with ``--verbose``, otherwise only critical messages (a failed task's ``Compute Failed``
    block is an error, and the one line says what failed).  Workers read the level from ``DASK_LOGGING``
    as they import Dask, before their nanny could set it, which also covers their Tornado loop's
    messages while they close after an interruption."""
    level = logging.WARNING if verbose else logging.CRITICAL
    logging.getLogger("distributed").setLevel(level)
    if not verbose:
        os.environ.setdefault("DASK_LOGGING", '{"distributed": "critical", "tornado": "critical", '
                                              '"tornado.application": "critical", "bokeh": "critical"}')
    return level


def warnings_as_lines() -> None:
    """Python warnings raised in this process (fewer roots than asked, shards without bottom-up's degree
    order, a reader's :class:`~breadth.io.errors.InputNotice`) as one ``breadth: warning:`` line each on
    stderr, in the command line's words (:func:`cli_text`), without the file, line and source that Python
    prints by default."""
    import warnings

    def show(message, category, filename, lineno, file=None, line=None):
        sys.stderr.write(f"breadth: warning: {cli_text(message) if isinstance(message, Warning) else message}\n")

    warnings.showwarning = show


def report_failures(fn: Callable[[], int], verbose: bool = False, resumable: bool = False) -> int:
    """Run ``fn`` (a command) and turn whatever escapes it into one ``breadth: error:`` line and an exit
    status; with ``verbose`` the traceback is printed first.  ``resumable``: the command writes a store,
    which the same command line finishes after an interruption (said in the interruption's line)."""
    again = "; run the same command again to finish the store" if resumable else ""
    try:
        with _signals_as_exceptions() as state:
            try:
                return fn()
            except KeyboardInterrupt:  # Terminated included: from now on further signals are ignored
                state["caught"] = True
                raise
    except Terminated:
        sys.stderr.write(f"breadth: error: terminated (SIGTERM){again}\n")
        return EXIT_TERMINATED
    except KeyboardInterrupt:
        sys.stderr.write(f"breadth: error: interrupted{again}\n")
        return EXIT_INTERRUPT
    except UsageError as e:
        if verbose:
            traceback.print_exc()
        sys.stderr.write(f"breadth: error: {one_line(e)}\n")
        return EXIT_USAGE
    except Exception as e:  # noqa: BLE001 - the command line's last word: one line, never a traceback
        if verbose:
            traceback.print_exc()
        sys.stderr.write(f"breadth: error: {one_line(e)}\n")
        return EXIT_FAILURE
