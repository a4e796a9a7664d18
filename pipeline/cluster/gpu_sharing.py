"""Ranks that share a GPU run as clients of a private MPS daemon (CUDA's Multi-Process Service).

Without MPS, two processes on one GPU time-slice it: each holds a context of its own, and the GPU switches
between them.  Two search ranks on one GPU reach their device waits at the same moments, and each such wait
then costs a context switch: a tiny kernel and its synchronisation take 12-15 µs in one process, about
275 µs in each of two processes doing it in step, whatever the kind of wait (one H100).  MPS runs the clients' kernels in one shared context, so nothing
switches: the same wait takes about 15 µs, and two ranks on one H100 search a scale-22 graph's small levels
in about half the time.

:class:`PrivateMps` starts a control daemon of this process's own: its pipe and log folders are in a new
temporary folder, and only the processes given :meth:`PrivateMps.env` (the cluster's workers) connect to
it -- every other CUDA process on the machine, this one included, stays outside.
``nvidia-cuda-mps-control`` comes with the NVIDIA driver; no setting of the GPU is changed (a GPU in an
exclusive compute mode, where MPS needs its own set-up by an administrator, makes the probe fail, and
``mps="auto"`` then goes on without).

>>> mps = PrivateMps.start()            # doctest: +SKIP
>>> mps.env["CUDA_MPS_PIPE_DIRECTORY"]  # doctest: +SKIP
'/tmp/breadth-mps-.../pipe'
>>> mps.stop()                          # doctest: +SKIP
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile
import weakref

CONTROL = "nvidia-cuda-mps-control"
PREFIX = "breadth-mps-"  # a daemon's folder in the temporary directory
OWNER = "owner.pid"  # in that folder: the id of the process that started the daemon
#: the probe: one CUDA context made through the daemon (which starts its server), with the driver API only
_PROBE = ("import ctypes, sys\n"
          "cu = ctypes.CDLL('libcuda.so.1')\n"
          "dev, ctx = ctypes.c_int(), ctypes.c_void_p()\n"
          "for step, call in (('cuInit', lambda: cu.cuInit(0)),\n"
          "                   ('cuDeviceGet', lambda: cu.cuDeviceGet(ctypes.byref(dev), 0)),\n"
          "                   ('cuCtxCreate', lambda: cu.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev))):\n"
          "    err = call()\n"
          "    if err:\n"
          "        sys.exit(f'{step} returned CUDA error {err}')\n"
          "cu.cuCtxDestroy_v2(ctx)\n")
PROBE_TIMEOUT_S = 60.0


class MpsUnavailable(RuntimeError):
    """No private MPS daemon could be started here (the message says why, in one line)."""


class PrivateMps:
    """A running private MPS control daemon; :meth:`stop` ends it (and its server) and removes its folders.

    It is also stopped when this object is collected or the interpreter exits, whichever comes first.  A
    process killed outright leaves its daemon behind, idle; the next :meth:`start` on the machine stops every
    daemon whose starting process has gone (its folder holds that process's id)."""

    def __init__(self, root: str):
        self.root = root
        self.env = _folders(root)
        self._finalizer = weakref.finalize(self, _quit, dict(self.env), root)

    @classmethod
    def start(cls) -> PrivateMps:
        """Start the daemon, and check with one CUDA context that clients get served; raises
        :class:`MpsUnavailable` (the daemon stopped again) where either fails."""
        exe = shutil.which(CONTROL)
        if exe is None:
            raise MpsUnavailable(f"{CONTROL} is not on PATH (it comes with the NVIDIA driver)")
        reap_stale(tempfile.gettempdir())
        mps = cls(tempfile.mkdtemp(prefix=PREFIX))
        for d in mps.env.values():
            os.mkdir(d)
        with open(os.path.join(mps.root, OWNER), "w") as f:
            f.write(f"{os.getpid()}\n")
        try:
            r = subprocess.run([exe, "-d"], env=mps._daemon_environ(), capture_output=True, text=True, timeout=30)
            if r.returncode:
                raise MpsUnavailable(f"{CONTROL} -d exited with {r.returncode}: {_last_line(r)}")
            p = subprocess.run([sys.executable, "-c", _PROBE], env=mps._daemon_environ(), capture_output=True,
                               text=True, timeout=PROBE_TIMEOUT_S)
            if p.returncode:
                raise MpsUnavailable(f"a CUDA context through the MPS daemon failed: {_last_line(p)} "
                                     f"(the daemon's log: {mps.env['CUDA_MPS_LOG_DIRECTORY']})")
        except BaseException:
            mps.stop()
            raise
        return mps

    def _daemon_environ(self) -> dict[str, str]:
        # the daemon and the probe see every GPU: the workers' CUDA_VISIBLE_DEVICES entries (the caller's own
        # entries, or indices) then name the same GPUs for the daemon as for the caller
        env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
        env.update(self.env)
        return env

    def servers(self) -> list[str]:
        """The daemon's running servers (their process ids): one once a client has made its context."""
        r = subprocess.run([CONTROL], input="get_server_list\n", env=self._daemon_environ(), capture_output=True,
                           text=True, timeout=30)
        return r.stdout.split()

    def stop(self) -> None:
        """End the daemon and its server (after their clients have gone) and remove the folders; idempotent."""
        self._finalizer()

    @property
    def running(self) -> bool:
        return self._finalizer.alive


def reap_stale(tmp: str) -> list[str]:
    """Stop the private daemons under ``tmp`` whose starting process is no longer alive and remove their
    folders; the folders so removed."""
    gone = []
    for root in glob.glob(os.path.join(tmp, PREFIX + "*")):
        try:
            with open(os.path.join(root, OWNER)) as f:
                pid = int(f.read())
        except (OSError, ValueError):
            continue  # being made (the id comes right after the folder), or not ours
        if _alive(pid):
            continue
        _quit(_folders(root), root)
        gone.append(root)
    return gone


def _folders(root: str) -> dict[str, str]:
    """The MPS variables naming a daemon's pipe and log folders under ``root``."""
    return {"CUDA_MPS_PIPE_DIRECTORY": os.path.join(root, "pipe"), "CUDA_MPS_LOG_DIRECTORY": os.path.join(root, "log")}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _quit(env: dict[str, str], root: str) -> None:
    try:
        subprocess.run([CONTROL], input="quit\n", env={**os.environ, **env}, capture_output=True, text=True,
                       timeout=30)
    except (OSError, subprocess.SubprocessError):
        pass  # nothing running, or it would not answer: the folders still go
    shutil.rmtree(root, ignore_errors=True)


def _last_line(r: subprocess.CompletedProcess) -> str:
    text = (r.stderr or r.stdout or "").strip().splitlines()
    return text[-1] if text else "no output"


def start_for_shared_gpus(mps: bool | str) -> PrivateMps | None:
    """The daemon for a cluster whose workers share GPUs: ``mps`` ``"auto"`` starts one unless the caller's
    environment already names an MPS pipe folder (their own daemon, which the workers then join) and goes
    on without where none can be started (with a warning); ``True`` requires it (:class:`MpsUnavailable`);
    ``False`` never starts one."""
    if mps not in (True, False, "auto"):
        raise ValueError(f"mps must be True, False or 'auto', got {mps!r}")
    if mps is False or (mps == "auto" and "CUDA_MPS_PIPE_DIRECTORY" in os.environ):
        return None
    try:
        return PrivateMps.start()
    except MpsUnavailable as e:
        if mps is True:
            raise
        import warnings

        warnings.warn(f"ranks share GPUs without MPS, each device wait paying a context switch: {e}",
                      RuntimeWarning, stacklevel=3)
        return None
