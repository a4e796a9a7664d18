"""The private MPS daemon's choices where none can be started (this machine and CI have no NVIDIA driver, or
the test hides it): ``mps="auto"`` warns and goes on without, ``True`` names the missing program in one line, a
caller's own daemon (``CUDA_MPS_PIPE_DIRECTORY`` set) is joined rather than replaced.  The daemon itself is
started and its workers checked in ``tests/test_gpu_shared_ranks.py`` on a GPU machine."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from breadth.pipeline.cluster.gpu_sharing import CONTROL, MpsUnavailable, PrivateMps, start_for_shared_gpus


@pytest.fixture
def no_driver_tools(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no nvidia-cuda-mps-control on it
    monkeypatch.delenv("CUDA_MPS_PIPE_DIRECTORY", raising=False)


def test_required_mps_names_the_missing_program(no_driver_tools):
    with pytest.raises(MpsUnavailable) as e:
        start_for_shared_gpus(True)
    assert CONTROL in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(MpsUnavailable):
        PrivateMps.start()


def test_auto_goes_on_without_mps_and_says_why(no_driver_tools):
    with pytest.warns(RuntimeWarning, match="without MPS.*nvidia-cuda-mps-control"):
        assert start_for_shared_gpus("auto") is None
    assert start_for_shared_gpus(False) is None


def test_a_callers_own_daemon_is_left_to_them(no_driver_tools, monkeypatch, recwarn):
    monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", "/tmp/their-mps")
    assert start_for_shared_gpus("auto") is None  # the workers inherit the variable and join theirs
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


def test_bad_setting():
    with pytest.raises(ValueError, match="mps must be True, False or 'auto'"):
        start_for_shared_gpus("yes")


def test_daemons_of_processes_that_died_are_reaped(tmp_path):
    """A daemon's folder names the process that started it: one whose process has gone (killed outright) is
    stopped and removed by the next start on the machine; a living process's, or a folder without an id, stay."""
    from breadth.pipeline.cluster.gpu_sharing import OWNER, PREFIX, reap_stale

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    folders = {}
    for name, pid in (("dead", int(dead.stdout)), ("alive", os.getpid()), ("making", None)):
        root = tmp_path / (PREFIX + name)
        (root / "pipe").mkdir(parents=True)
        if pid is not None:
            (root / OWNER).write_text(f"{pid}\n")
        folders[name] = root
    assert reap_stale(str(tmp_path)) == [str(folders["dead"])]
    assert not folders["dead"].exists() and folders["alive"].exists() and folders["making"].exists()
