"""How the ``breadth`` command reports a failure: one line on stderr and an exit status, never a traceback.

    breadth: error: <what went wrong, naming the file, line, column or option, and what was expected>

Exit statuses: 2 for usage errors (bad options, found before any work), 1 for everything else (bad input,
a failed search, a lost worker), 130 after Ctrl-C and 143 after SIGTERM (a batch scheduler's cancel).  The
worker logs of a failed Dask task and Python tracebacks are shown only with ``--verbose``: they are the
developers' business, not the user's.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
import traceback
from typing import Callable


class UsageError(Exception):
    """An option that cannot work, found before any work (exit status 2)."""


class CommandError(Exception):
    """A failure to report as one line (exit status 1)."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread so that the same clean-up as Ctrl-C runs."""


EXIT_USAGE, EXIT_FAILURE, EXIT_INTERRUPT, EXIT_TERMINATED = 2, 1, 130, 143


def one_line(exc: BaseException) -> str:
    """The message of ``exc`` as one line: its first non-empty line, else its type's name.

    Exceptions raised on Dask workers reach the client as themselves (the readers' errors pickle by
    message), so their first line is the reader's own ``FILE:LINE: what``; a lost worker or rank names the
    worker.  Wrapped causes (a rank's error) are already folded into the wrapper's message."""
    text = str(exc).strip()
    if type(exc).__name__ == "KilledWorker":  # distributed.scheduler.KilledWorker: a task took its worker down
        return (f"a worker died while running a task ({text.splitlines()[0] if text else 'KilledWorker'}); "
                "the most common cause is a memory limit too small for the chunk size (see --memory-limit)")
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    if not first:
        return type(exc).__name__
    if isinstance(exc, (OSError, ValueError, RuntimeError, CommandError, UsageError)) or "error" in first.lower():
        return first
    return f"{type(exc).__name__}: {first}"


@contextlib.contextmanager
def _sigterm_as_interrupt():
    def handler(signum, frame):
        raise Terminated()

    try:
        old = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread (called from a test's thread): leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def hold_signals() -> Callable[[], None]:
    """Hold SIGINT and SIGTERM back until the returned ``release()`` is called, which then acts on a held
    SIGTERM (:class:`Terminated`).  For starting a local Dask cluster: one interrupted half-way leaves
    workers it can neither use nor close.

    SIGINT is *ignored* meanwhile: an ignored signal stays ignored in the processes started, so a Ctrl-C at
    the terminal, which signals the whole process group, never reaches the workers (which would print
    tracebacks of their own); their nanny ends them.  A Ctrl-C during the second or two of start-up is
    therefore dropped, and the next one ends the command.  SIGTERM is recorded instead: workers must
    still die of it."""
    pending: list[int] = []
    try:
        old_term = signal.signal(signal.SIGTERM, lambda signum, frame: pending.append(signum))
        old_int = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread: leave signals alone
        return lambda: None

    def release() -> None:
        signal.signal(signal.SIGTERM, old_term)
        signal.signal(signal.SIGINT, old_int)
        if pending:
            raise Terminated()

    return release


def quiet_logs(verbose: bool) -> int:
    """The level below which Dask's logs are hidden, in this process and in the workers it starts:
    warnings with ``--verbose``, otherwise only critical messages (a failed task's ``Compute Failed``
    block is an error, and the one line says what failed)."""
    level = logging.WARNING if verbose else logging.CRITICAL
    logging.getLogger("distributed").setLevel(level)
    return level


def report_failures(fn: Callable[[], int], verbose: bool = False, resumable: bool = False) -> int:
    """Run ``fn`` (a command) and turn whatever escapes it into one ``breadth: error:`` line and an exit
    status; with ``verbose`` the traceback is printed first.  ``resumable``: the command writes a store,
    which the same command line finishes after an interruption (said in the interruption's line)."""
    again = "; run the same command again to finish the store" if resumable else ""
    try:
        with _sigterm_as_interrupt():
            return fn()
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
