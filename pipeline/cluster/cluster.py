"""Connecting to a Dask cluster, or starting the embedded default: a local cluster on this machine."""

from __future__ import annotations

import logging
import os
from contextlib import contextmanager

from breadth.bfs.dask_workers import worker_addresses, workers_info  # noqa: F401  (this module's API too)

from breadth.bfs.device_choice import gpu_available, resolve_device  # noqa: F401  (this module's API too)

SCHEDULER_TIMEOUT_S = 10.0  # how long connect() waits for an existing scheduler to answer


def local_cluster(workers: int = 1, threads_per_worker: int | None = None, protocol: str = "tcp",
                  memory_limit: str | int = "auto", local_directory: str | None = None,
                  silence_logs: int = logging.WARNING, breadth_only: bool = False):
    """Start a ``distributed.LocalCluster`` of CPU worker processes on this machine; a Client connected to it.

    Each worker is one BFS rank.  Its Numba thread pool gets ``threads_per_worker`` threads through
    ``NUMBA_NUM_THREADS``, in the environment the worker process is spawned with (Dask's
    ``distributed.nanny.pre-spawn-environ``, applied again when a worker restarts): a spawned worker first
    imports the caller's main module, and a script that imports breadth at its top loads Numba there,
    before the nanny's own ``env`` would reach the process.  The workers' memory comes from the kernel in
    small pages and, without a ``memory_limit`` of the caller's, arrays up to 32 MiB from the C heap, where
    freed memory is used again (:func:`worker_memory_environ`).  Without a ``memory_limit``, every worker
    also brings Numba up (its first dispatch, about 0.3 s) on a thread of its own as it starts, while the
    caller sets up, instead of in its first task (:mod:`breadth.pipeline.cluster.numba_warm_up`); under a limit a
    job may have to do without Numba.  The cluster has no dashboard.  The scheduler, which runs in the
    caller's process, keeps what a search leaves behind bounded (:func:`scheduler_memory_settings`): many
    searches in one process do not grow it.

    Parameters
    ----------
    workers : int, default 1
        Worker processes (BFS ranks), at least 1.
    threads_per_worker : int, optional
        Default ``cores // workers``, at least 1: a BFS rank runs its kernels on all of its worker's
        threads, and more threads than cores only makes them wait on each other (two workers of two threads
        on two cores make a scale-20 search about six times slower).
    protocol : str, default "tcp"
        Dask's comms between the processes (``"tcp"``, or ``"ucx"`` with the ``ucx`` extra, which also
        sets UCX's progress mode, :func:`ucx_progress_environ`).  The search ranks pick their own transport.
    memory_limit : str or int, default "auto"
        Per worker, in bytes or as ``"300MB"``; past it Dask's nanny ends the worker.  ``"auto"``: Dask's
        share of the machine's memory.
    local_directory : str, optional
        Where workers spill task outputs (Dask's local directory); default Dask's.
    silence_logs : int, default logging.WARNING
        Dask log messages below this level are hidden (the CLI hides all but critical).
    breadth_only : bool, default False
        The workers run breadth's tasks only (the CLI's clusters): a worker that has closed ends without
        the interpreter's teardown (0.2 s less in the cluster's close, :mod:`breadth.pipeline.cluster.worker_exit`),
        and Numba's first dispatch skips its BLAS probe, which imports SciPy's linalg where SciPy is
        installed (0.23 s of each worker's first chunk, :mod:`breadth.pipeline.cluster.numba_blas`).

    Returns
    -------
    distributed.Client
        Connected to the new cluster (``client.cluster``); closing the client and the cluster ends the
        workers.

    Raises
    ------
    ValueError
        ``workers < 1``.

    Examples
    --------
    >>> from breadth.pipeline import kronecker, local_cluster, prepare
    >>> client = local_cluster(workers=2, threads_per_worker=1)             # doctest: +SKIP
    >>> g = prepare(kronecker(16, seed=1), client)                          # doctest: +SKIP
    >>> client.close(); client.cluster.close()                              # doctest: +SKIP
    """
    from distributed import Client, LocalCluster

    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    import dask

    threads = threads_per_worker or max(1, (os.cpu_count() or 1) // workers)
    config, scheduler_extensions, worker_extensions = scheduler_memory_settings()
    with _spawn_environ(NUMBA_NUM_THREADS=str(threads), **ucx_progress_environ(protocol),
                        **worker_memory_environ(limited=memory_limit != "auto")), dask.config.set(config):
        cluster = LocalCluster(n_workers=workers, threads_per_worker=threads, processes=True, protocol=protocol,
                               memory_limit=memory_limit, dashboard_address=None, local_directory=local_directory,
                               # no dashboard; the scheduler's small HTTP server on a free port, not 8787,
                               # which a user's own Dask or Jupyter often holds ("Port 8787 is already in use")
                               scheduler_kwargs={"dashboard": False, "dashboard_address": ":0",
                                                 "extensions": scheduler_extensions},
                               extensions=worker_extensions, silence_logs=silence_logs,
                               plugins=_worker_plugins(breadth_only, warm_numba=memory_limit == "auto"))
        client = Client(cluster)
    return client


#: entries each of Dask's logs for developers keeps (its ``distributed.admin.low-level-log-length``, 1000 by
#: default) in a cluster of :func:`local_cluster`
LOG_ENTRIES = 100


def scheduler_memory_settings() -> tuple[dict, dict, dict]:
    """``(Dask config, scheduler extensions, worker extensions)`` of :func:`local_cluster`: what makes its
    scheduler's memory stay flat however many searches run, where Dask's defaults grow it.

    * No spans (Dask's ``SpansSchedulerExtension`` and its worker side): the scheduler keeps every span, and
      the task groups it aggregates, for the cluster's life (dask/distributed#7977), and a search opens two
      (its ranks' tasks, then its results'): 10.5 KiB a search, one worker, scale 10, from the 500th search
      to the 1000th.  Spans feed the dashboard's fine performance metrics; these clusters have no dashboard.
    * :data:`LOG_ENTRIES` entries in each of Dask's logs for developers (the scheduler's events by topic,
      its transition log): a search logs two ``update-graph`` events in each of two topics, and with Dask's
      1000 entries the process held 6.9 MiB more after 500 searches than with 100 (the logs full then).
      The event breadth reads (a nanny's memory event, :mod:`breadth.bfs.worker_loss`) is the last of its
      topic.

    Measured together (one worker, scale 10, this 2-core machine): 0.2-1.2 KiB a search from the 100th
    search to the 1000th, against 10-30 KiB with Dask's defaults.
    """
    from distributed.scheduler import DEFAULT_EXTENSIONS as SCHEDULER
    from distributed.worker import DEFAULT_EXTENSIONS as WORKER

    config = {"distributed.admin.low-level-log-length": LOG_ENTRIES}
    return (config, {k: v for k, v in SCHEDULER.items() if k != "spans"},
            {k: v for k, v in WORKER.items() if k != "spans"})


def _worker_plugins(breadth_only: bool, warm_numba: bool) -> tuple:
    """The plugins every worker of :func:`local_cluster` starts with (before it registers, and again when its
    nanny restarts it), in this order: the BLAS probe's mark must precede Numba's first dispatch.
    ``warm_numba`` only without a memory limit of the caller's: under one, a job may run NumPy kernels
    alone because Numba's ~110 MiB would not fit (``prepare(jit=False)``, the CLI's smallest limits)."""
    plugins = []
    if breadth_only:
        from .numba_blas import SkipBlasProbe
        from .worker_exit import QuickExit

        plugins += [SkipBlasProbe(), QuickExit()]
    if warm_numba:
        from .numba_warm_up import WarmNumba

        plugins.append(WarmNumba())
    return tuple(plugins)


#: glibc's mmap threshold for workers without a memory limit: arrays below it come from the C heap
HEAP_ARRAYS_BELOW = 32 << 20  # glibc's largest


def worker_memory_environ(limited: bool) -> dict[str, str]:
    """How CPU worker processes get their memory (a variable the user has set wins):

    * ``NUMPY_MADVISE_HUGEPAGE=0``: NumPy otherwise asks the kernel for transparent huge pages on every array
      of 4 MiB or more, and a fresh huge page costs far more to fault in than its 512 small ones where the
      kernel compacts memory on such faults or the hypervisor has taken freed memory back: on a 2-core VM,
      touching 1 GiB of fresh memory takes three to five times as long with huge pages, and without them a
      fresh cluster ingests 2^24 sparse-id tuples, or prepares a Kronecker scale-20 graph, in about half the
      time, with the same BFS times.
    * ``MALLOC_MMAP_THRESHOLD_`` of :data:`HEAP_ARRAYS_BELOW`, unless ``limited`` (a memory limit of the
      caller's, under which Dask's own setting stands): Dask's workers set ``MALLOC_TRIM_THRESHOLD_``, which
      also turns off glibc's adaptive mmap threshold, so every array of 128 KiB or more is a fresh mapping,
      faulted in page by page and unmapped when freed -- a chunk's arrays cost their page faults again for
      every chunk.  With the threshold, an ingest of 2^26 web-crawl tuples on 2 workers faults in about 40 %
      less memory per worker and takes about 12 % less time, for a peak RSS 15-20 % higher (freed heap
      memory waits for its next use)."""
    env = {"NUMPY_MADVISE_HUGEPAGE": "0"}
    if not limited:
        env["MALLOC_MMAP_THRESHOLD_"] = str(HEAP_ARRAYS_BELOW)
    return {k: v for k, v in env.items() if k not in os.environ}


def ucx_progress_environ(protocol: str) -> dict[str, str]:
    """The UCX progress settings of a cluster whose Dask comms run over UCX (``protocol`` "ucx"/"ucxx"),
    for its worker processes and this one; nothing for other protocols, and a variable the user has set
    keeps its value.

    distributed-ucxx's default ("blocking" progress without Python futures) waits on each UCX request
    by polling it from the event loop (``wait_yield``), and a Dask worker always has receives pending, so
    its event loop spins and holds the GIL much of the time: a search rank's thread in that worker then
    waits for the GIL after every exchange: with two workers sharing an H100, the worker's main thread is
    busy 61 % of the time and a raw ucxx host round trip between their ranks takes about five times as long
    as on a TCP cluster.  UCX's own progress thread with completions
    delivered as Python futures leaves the loop idle.
    """
    if protocol not in ("ucx", "ucxx"):
        return {}
    want = {"UCXPY_PROGRESS_MODE": "thread", "UCXPY_ENABLE_PYTHON_FUTURE": "1"}
    return {k: v for k, v in want.items() if k not in os.environ}


@contextmanager
def _spawn_environ(**env: str):
    """Worker processes spawned inside get ``env`` from their first instruction on (their nannies keep it
    for restarts); the calling process's own variables are as they were afterwards.  Dask's nanny writes
    its pre-spawn variables into the caller's ``os.environ`` before each spawn, and a variable already set
    there would win over the configuration: both are undone on the way out."""
    import dask

    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        with dask.config.set({f"distributed.nanny.pre-spawn-environ.{k}": v for k, v in env.items()}):
            yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def local_cuda_cluster(workers: int | None = None, protocol: str = "tcp", threads_per_worker: int = 1,
                       local_directory: str | None = None, ranks_per_gpu: int = 1, mps: bool | str = "auto",
                       **kw):
    """One Dask worker per GPU of this machine (dask-cuda ``LocalCUDACluster``); a Client connected to it.

    Each worker sees only its own GPU (``CUDA_VISIBLE_DEVICES`` rotated), so CuPy's device 0 on worker ``r``
    is GPU ``r`` of those this process sees: a caller's own ``CUDA_VISIBLE_DEVICES`` (a batch scheduler's
    allocation, indices or UUIDs) is kept.  CuPy allocates from its own pool on the workers even where RMM
    is installed (:func:`breadth.bfs.gpu.backend.use_cupy_pool`), and each worker brings CuPy's kernel
    machinery up as it starts.  The first start on a machine compiles the GPU kernels, saying so on stderr
    (:mod:`breadth.pipeline.cluster.gpu_kernel_cache`).  Install with the ``gpu`` extra (CUDA 12) or
    ``gpu-cuda13`` (CUDA 13).

    Parameters
    ----------
    workers : int, optional
        Worker processes; default (and at most) every visible GPU times ``ranks_per_gpu``.
    protocol : str, default "tcp"
        Dask's comms between the processes (``"tcp"``, or ``"ucx"`` with the ``ucx`` extra).
    threads_per_worker : int, default 1
        Threads per worker.
    local_directory : str, optional
        Where workers spill task outputs (Dask's local directory); default Dask's.
    ranks_per_gpu : int, default 1
        Workers per GPU, at least 1.  More than one gives plain Dask workers, without dask-cuda's device
        memory limit (which refuses to share a GPU), each allowed an equal share of host memory: several
        search ranks on one GPU, to run multi-rank code (transports that move device buffers between
        processes, partitionings) on a one-GPU machine.  NCCL refuses two ranks on one GPU; the search's
        ``protocol="auto"`` picks UCX or TCP for them.
    mps : bool or "auto", default "auto"
        For ``ranks_per_gpu > 1``: the workers are clients of a private MPS daemon
        (:mod:`breadth.pipeline.cluster.gpu_sharing`), started here and stopped when the cluster closes, so that
        their kernels share one context instead of the GPU switching between them at every device wait
        (two ranks on one H100, scale 22: the search's small levels take half the time).  ``"auto"`` uses
        the caller's own daemon where ``CUDA_MPS_PIPE_DIRECTORY`` is set and goes on without MPS, with a
        warning, where no daemon can be started; ``True`` requires one; ``False`` never starts one.
    **kw
        Passed to ``LocalCUDACluster`` (one worker per GPU): e.g. ``device_memory_limit`` (bytes, or a
        string such as ``"8GB"``; default dask-cuda's 80 % of the GPU), where a worker starts moving task
        outputs to host memory and to which preparation sizes its shuffle
        (:func:`~breadth.pipeline.shuffle.shuffle.cluster_memory`), ``memory_limit``, ``silence_logs``.  Shared GPUs
        take ``silence_logs`` only.

    Returns
    -------
    distributed.Client
        Connected to the new cluster; ``client.cluster.mps`` is the running MPS daemon, or None.

    Raises
    ------
    ImportError
        dask-cuda (or CuPy) is not installed.
    RuntimeError
        No CUDA device is visible.
    ValueError
        ``ranks_per_gpu < 1``.
    MpsUnavailable
        ``mps=True`` and no private MPS daemon could be started (a ``RuntimeError``).

    Examples
    --------
    >>> from breadth.pipeline.cluster.cluster import local_cuda_cluster
    >>> client = local_cuda_cluster()                       # doctest: +SKIP
    >>> len(client.scheduler_info()["workers"])  # an 8-GPU machine   # doctest: +SKIP
    8
    >>> client = local_cuda_cluster(ranks_per_gpu=2)        # doctest: +SKIP
    """
    from distributed import Client

    try:
        from dask_cuda import LocalCUDACluster
    except ImportError as e:
        raise ImportError("device='gpu' on a local cluster needs dask-cuda: pip install 'breadth[gpu]' "
                          "(CUDA 12) or 'breadth[gpu-cuda13]' (CUDA 13)") from e
    import cupy

    ngpu = cupy.cuda.runtime.getDeviceCount()
    if ngpu < 1:
        raise RuntimeError("device='gpu': no CUDA device is visible")
    if ranks_per_gpu < 1:
        raise ValueError(f"ranks_per_gpu must be >= 1, got {ranks_per_gpu}")
    n = min(workers or ngpu * ranks_per_gpu, ngpu * ranks_per_gpu)
    with _spawn_environ(**ucx_progress_environ(protocol)):
        if ranks_per_gpu == 1:
            cluster = LocalCUDACluster(CUDA_VISIBLE_DEVICES=visible_devices(ngpu)[:n], n_workers=n,
                                       threads_per_worker=threads_per_worker, protocol=protocol,
                                       dashboard_address=None, local_directory=local_directory, **kw)
            cluster.mps = None  # one worker per GPU: nothing to share
        else:
            from .gpu_sharing import start_for_shared_gpus

            daemon = start_for_shared_gpus(mps)
            try:
                cluster = _shared_gpu_cluster(n, visible_devices(ngpu), ranks_per_gpu, threads_per_worker, protocol,
                                              local_directory, kw.get("silence_logs", logging.WARNING), daemon)
            except BaseException:
                if daemon is not None:
                    daemon.stop()
                raise
        client = Client(cluster)
    client.run(_start_gpu_worker)
    from .gpu_kernel_cache import ensure_compiled

    ensure_compiled(client)  # once per machine: a job's first timings never include NVRTC
    return client


def visible_devices(ngpu: int, environ: dict | None = None) -> list:
    """The GPUs this process sees, as ``CUDA_VISIBLE_DEVICES`` entries for worker processes: the caller's own
    entries (indices, ``GPU-``/``MIG-`` UUIDs) where the variable is set, else ``0 .. ngpu-1``; at most ``ngpu``
    (CUDA stops at the first entry it cannot use).

    >>> visible_devices(2, {"CUDA_VISIBLE_DEVICES": "2, 3"})
    ['2', '3']
    >>> visible_devices(2, {})
    [0, 1]
    """
    env = os.environ if environ is None else environ
    if "CUDA_VISIBLE_DEVICES" not in env:
        return list(range(ngpu))
    return [d.strip() for d in env["CUDA_VISIBLE_DEVICES"].split(",") if d.strip()][:ngpu]


def _shared_gpu_cluster(n: int, devices: list, per_gpu: int, threads: int, protocol: str,
                        local_directory: str | None, silence_logs: int, mps=None):
    """``n`` worker processes, ``per_gpu`` on each GPU of ``devices`` (``CUDA_VISIBLE_DEVICES`` entries; worker
    ``i`` sees ``devices[i // per_gpu]`` as its device 0): workers ``2k`` and ``2k + 1`` share a GPU when
    ``per_gpu`` is 2.  Each may use an equal
    share of the host's memory, as dask-cuda's workers do (Dask's "auto" would give a one-thread worker
    only its thread's share, and Dask counts the device arrays a task holds against that limit).  With
    ``mps`` (a :class:`~breadth.pipeline.cluster.gpu_sharing.PrivateMps`) the workers are its clients, and closing
    the cluster stops it."""
    import psutil
    from distributed import Nanny, Scheduler, SpecCluster

    class SharedGpuCluster(SpecCluster):
        mps = None

        async def _close(self):
            try:
                await super()._close()
            finally:  # after the workers (MPS clients) have gone
                if self.mps is not None:
                    self.mps.stop()

    env = dict(mps.env) if mps is not None else {}
    workers = {f"gpu{i // per_gpu}-{i % per_gpu}": {
        "cls": Nanny, "options": {"nthreads": threads, "env": {"CUDA_VISIBLE_DEVICES": str(devices[i // per_gpu]),
                                                               **env},
                                  "protocol": protocol, "local_directory": local_directory,
                                  "memory_limit": psutil.virtual_memory().total // n,
                                  "silence_logs": silence_logs}}
        for i in range(n)}
    scheduler = {"cls": Scheduler, "options": {"protocol": protocol, "dashboard": False, "dashboard_address": ":0"}}
    cluster = SharedGpuCluster(workers=workers, scheduler=scheduler, silence_logs=silence_logs)
    cluster.mps = mps
    return cluster


def _start_gpu_worker() -> None:
    """A GPU worker's set-up, once per process: CuPy allocates from its own pool, and CuPy's kernel
    machinery is brought up by one element-wise kernel, one reduction and one sort.  The first of each in a
    process costs CuPy ~0.45 s, ~0.03 s and ~0.03 s (H200, warm kernel cache; later kernels load from the
    cache in under a millisecond), which a job's first timed step would otherwise pay: a fresh ingest's
    relabeling or a fresh search's construction.  Here it is part of starting the cluster, like importing CuPy."""
    import cupy

    from breadth.bfs.gpu.backend import use_cupy_pool

    use_cupy_pool()
    a = cupy.arange(1024, dtype=cupy.int64)
    int((cupy.sort(a ^ 5) + 1).max())


def connect(scheduler: str | None = None, workers: int = 1, device: str = "cpu",
            timeout: float = SCHEDULER_TIMEOUT_S, **kw):
    """A Client of an existing Dask cluster, or of a new local one.

    Parameters
    ----------
    scheduler : str, optional
        The address of a running scheduler (e.g. ``"tcp://host:8786"``).  ``None``: start a local cluster
        on this machine -- CPU worker processes (:func:`local_cluster`), or one dask-cuda worker per GPU
        (:func:`local_cuda_cluster`) when ``device`` resolves to ``"gpu"``.
    workers : int, default 1
        Worker processes of a local cluster (BFS ranks); at most the GPU count for GPU workers.
    device : {"cpu", "gpu", "auto"}, default "cpu"
        The local cluster's kind; ``"auto"``: GPU workers where CuPy sees a device.
    timeout : float, default 10.0
        Seconds to wait for an existing scheduler.
    **kw
        For a local CPU cluster, :func:`local_cluster`'s keywords; for GPU workers ``protocol``,
        ``silence_logs``, ``memory_limit``, ``device_memory_limit`` and ``local_directory``.

    Returns
    -------
    distributed.Client

    Raises
    ------
    ConnectionError
        ``scheduler`` did not answer within ``timeout`` seconds (the message names the address).
    ValueError
        ``device`` is not one of the three, or ``workers < 1`` for a local CPU cluster.
    ImportError, RuntimeError
        GPU workers without dask-cuda or without a visible device (see :func:`local_cuda_cluster`).

    Examples
    --------
    >>> from breadth.pipeline import connect
    >>> client = connect("tcp://scheduler:8786")            # doctest: +SKIP
    >>> client = connect(workers=2)                         # doctest: +SKIP
    """
    if scheduler:
        from distributed import Client

        try:
            return Client(scheduler, timeout=f"{timeout}s")
        except (OSError, TimeoutError) as e:
            raise ConnectionError(f"no Dask scheduler answered at {scheduler} within {timeout:g} s "
                                  f"({type(e).__name__})") from None
    if resolve_device(device) == "gpu":
        limits = {k: kw[k] for k in ("memory_limit", "device_memory_limit", "local_directory") if kw.get(k)}
        return local_cuda_cluster(workers=workers, protocol=kw.get("protocol", "tcp"),
                                  silence_logs=kw.get("silence_logs", logging.WARNING), **limits)
    return local_cluster(workers=workers, **kw)
