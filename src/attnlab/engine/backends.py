"""Execution backends: ``serial``, ``process`` (a local pool) and ``ray`` — one API.

A backend takes a list of work items and yields finished :class:`StoredPoint` records as they
complete; the driver writes each one to the store before asking for the next, so whatever
finished survives an interruption. Every worker pins its torch thread count, and the seed of a
point depends only on the root seed and the point's parameters, so every backend gives the same
numbers.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import platform
import socket
import sys
import time
import traceback
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from attnlab.engine.protocol import Point, Result
from attnlab.engine.store import StoredPoint

__all__ = ["WorkItem", "BACKENDS", "execute", "run_items", "WorkerDied"]

BACKENDS = ("serial", "process", "ray")


class WorkerDied(RuntimeError):
    """A worker process ended without returning its point (killed, out of memory)."""


@dataclass(frozen=True)
class WorkItem:
    """A point plus where to find its claim (module and id), picklable for any backend."""

    module: str
    point: Point
    threads: int
    provenance: dict[str, Any]


def _claim(module: str, claim_id: str):
    """The claim ``claim_id``: from the module of its run function, else from the registry (a claim
    may reuse another module's ``run``)."""
    mod = importlib.import_module(module)
    claims = getattr(mod, "CLAIMS", None) or ([mod.CLAIM] if hasattr(mod, "CLAIM") else [])
    for c in claims:
        if c.id == claim_id:
            return c
    from attnlab.claims import all_claims

    for c in all_claims():
        if c.id == claim_id:
            return c
    raise LookupError(f"claim {claim_id!r} not found in module {module!r} nor in the registry")


def _utc(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t)) + f".{int((t % 1) * 1000):03d}"


def execute(item: WorkItem) -> StoredPoint:
    """Run one point in this process; an exception becomes a ``failed`` record with its error."""
    import numpy as np
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(item.threads)
    p = item.point
    t0, c0 = time.time(), time.process_time()  # wall and this process's CPU time (all its threads)
    status, metrics, arrays, error = "ok", {}, {}, None
    # numpy's and scipy's BLAS and OpenMP pools too, not only torch's: a worker imports numpy before it
    # reads OMP_NUM_THREADS, and numpy's OpenBLAS then takes every core (sixteen threads per worker on a
    # 16-core machine, whatever --threads said)
    limits = threadpool_limits(limits=item.threads)
    try:
        claim = _claim(item.module, p.claim_id)
        res = claim.run(p)
        if isinstance(res, dict):
            res = Result(metrics=res.get("metrics", {}), arrays=res.get("arrays", {}))
        metrics = dict(res.metrics)
        arrays = {k: np.asarray(v) for k, v in res.arrays.items()}
    except Exception as e:  # noqa: BLE001 - a failing point is data, not a crash
        status = "failed"
        tb = traceback.format_exception(type(e), e, e.__traceback__)
        error = f"{type(e).__name__}: {e}\n" + "".join(tb[-4:])
    finally:
        limits.restore_original_limits()
    t1, c1 = time.time(), time.process_time()
    prov = dict(item.provenance)
    prov.update(
        torch=torch.__version__,
        device=p.device,
        dtype=str(metrics.get("dtype", "float64")),
        threads=torch.get_num_threads(),
        python=platform.python_version(),
        pid=os.getpid(),
    )
    return StoredPoint(
        point_id=p.point_id,
        claim_id=p.claim_id,
        profile=p.profile,
        params=dict(p.params),
        seed=p.seed,
        version=p.version,
        status=status,
        metrics=metrics,
        error=error,
        provenance=prov,
        runtime_s=t1 - t0,
        host=socket.gethostname(),
        started=_utc(t0),
        ended=_utc(t1),
        arrays=arrays,
        cpu_s=c1 - c0,
    )


def _exit_with_parent(parent: int) -> None:
    """End this worker when its driver dies (SIGKILL included): no orphan keeps computing.

    On Linux the kernel delivers SIGKILL at the parent's death (``PR_SET_PDEATHSIG``); everywhere, a
    daemon thread also checks once a second that the parent is still this process's parent.
    """
    import threading

    if sys.platform.startswith("linux"):
        try:
            import ctypes
            import signal

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG = 1
        except (OSError, AttributeError):  # pragma: no cover - no prctl: the watchdog remains
            pass
    if os.getppid() != parent:  # the parent died before the signal was armed
        os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, name="attnlab-parent-watchdog", daemon=True).start()


def _init_worker(threads: int, parent: int | None = None) -> None:
    import signal

    import torch

    # Ctrl-C in a terminal reaches the whole process group: the run stops in the parent, which stops the
    # workers. A worker that took the SIGINT itself would raise KeyboardInterrupt wherever it was (inside
    # np.savez, a ZipFile left half-written raised ValueError instead, and the run ended as an internal
    # error, exit 2) and report it as its point's exception, racing the parent's own interrupt.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if parent is not None:
        _exit_with_parent(parent)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # libraries loaded later
        os.environ.setdefault(var, str(threads))
    torch.set_num_threads(threads)


def run_items(items: Sequence[WorkItem], backend: str, workers: int) -> Iterator[StoredPoint]:
    """Yield a finished record for every item (in completion order)."""
    if not items:
        return
    if backend == "serial":
        yield from _run_serial(items)
    elif backend == "process":
        yield from _run_process(items, workers)
    elif backend == "ray":
        yield from _run_ray(items, workers)
    else:
        raise ValueError(f"--backend: expected one of {', '.join(BACKENDS)}, got {backend!r}")


def _run_serial(items: Sequence[WorkItem]) -> Iterator[StoredPoint]:
    import torch

    before = torch.get_num_threads()
    try:
        for it in items:
            yield execute(it)
    finally:
        torch.set_num_threads(before)


def _run_process(items: Sequence[WorkItem], workers: int) -> Iterator[StoredPoint]:
    import multiprocessing as mp
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    ctx = mp.get_context("spawn")  # fork after torch has started threads can deadlock
    pool = ProcessPoolExecutor(
        max_workers=workers,
        mp_context=ctx,
        initializer=_init_worker,
        initargs=(items[0].threads, os.getpid()),
    )
    pending = {pool.submit(execute, it): it for it in items}
    try:
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                it = pending.pop(fut)
                try:
                    yield fut.result()
                except BrokenProcessPool as e:
                    raise WorkerDied(
                        f"a worker process died while computing {it.point.claim_id} {dict(it.point.params)}"
                    ) from e
    finally:
        procs = list((getattr(pool, "_processes", None) or {}).values())
        if pending:
            _quiet_teardown(pool)
        for fut in pending:
            fut.cancel()
        pool.shutdown(wait=not pending, cancel_futures=True)
        if pending:  # interrupted: do not wait for running points, stop the workers
            for proc in procs:
                if proc.is_alive():
                    proc.terminate()


def _quiet_teardown(pool: Any) -> None:
    """Keep the pool's manager thread quiet while an interrupted pool is torn down.

    On seeing its workers stopped, the manager thread of CPython 3.11 sets an error on every pending
    item and raises InvalidStateError for those already cancelled, a thread traceback on stderr after
    the run's own one-line message. The points it concerns are not stored and a rerun computes them, so
    that thread's exceptions are dropped (those of any other thread still reach the hook as before).
    """
    import threading

    thread = getattr(pool, "_executor_manager_thread", None)
    if thread is None:
        return
    previous = threading.excepthook

    def hook(args: Any) -> None:
        if args.thread is not thread:
            previous(args)

    threading.excepthook = hook


#: What to do when a Ray head refuses this driver's token (Ray's token authentication, on by default in
#: recent releases).
RAY_AUTH_HINT = (
    "set RAY_AUTH_TOKEN to the cluster's token (print it on the head with `ray get-auth-token`), or "
    "RAY_AUTH_TOKEN_PATH to a file holding it, with RAY_AUTH_MODE=token"
)


def _join_ray(ray: Any, address: str | None, kwargs: dict[str, Any]) -> None:
    """``ray.init`` with one clear line when the address cannot be used: a ``ray://`` address without
    Ray's client (grpcio), or a head that refuses the token."""
    if address and address.startswith("ray://"):
        try:
            import grpc  # noqa: F401 - Ray's client needs it
        except ImportError:
            raise ValueError(
                f"RAY_ADDRESS: expected an address this installation can reach (a ray:// address needs "
                f"Ray's client: pip install 'attnlab[ray]', which installs ray[client]), got {address!r}"
            ) from None
    try:
        ray.init(**kwargs)
    except Exception as e:  # noqa: BLE001 - Ray raises several types for a refused token
        text = f"{type(e).__name__}: {e}"
        if "AuthenticationError" in text or "InvalidAuthToken" in text or "auth token" in text.lower():
            raise ValueError(
                f"RAY_ADDRESS: expected a Ray cluster that accepts this process's token, got {address!r} "
                f"(the head refused it: {RAY_AUTH_HINT})"
            ) from None
        if isinstance(e, ConnectionError) and address:
            # a head with token authentication and no (or a wrong) token looks the same from here
            raise ValueError(
                f"RAY_ADDRESS: expected a Ray cluster this process can join, got {address!r} (no connection: "
                "check that the head runs and the address and port are right; if the head uses token "
                f"authentication, {RAY_AUTH_HINT})"
            ) from None
        raise


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as e:  # pragma: no cover - depends on the extra
        raise ValueError(
            "--backend: expected 'ray' to be installed (pip install 'attnlab[ray]'), got ray missing"
        ) from e
    return ray


@contextlib.contextmanager
def ray_session(workers: int) -> Iterator[None]:
    """Join the Ray cluster of ``RAY_ADDRESS`` (or start a local one of ``workers`` CPUs) for the length
    of a run, and leave it at the end. The runner enters this before it opens the store, so a join that
    is refused (bad address, missing or wrong token) ends the run with nothing written. Already joined
    (by the caller): nothing is done."""
    ray = _import_ray()
    if ray.is_initialized():
        yield
        return
    _init_ray(ray, workers)
    try:
        yield
    finally:
        ray.shutdown()


def _init_ray(ray: Any, workers: int) -> None:
    address = os.environ.get("RAY_ADDRESS")
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
    if address:
        kwargs["address"] = address
    else:
        kwargs["num_cpus"] = workers
    # the workers must import attnlab (and any extra claim modules) like the driver does
    env = {k: os.environ[k] for k in ("ATTNLAB_EXTRA_CLAIMS", "PYTHONPATH") if k in os.environ}
    paths = [p for p in sys.path if p and os.path.isdir(p)]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    kwargs["runtime_env"] = {"env_vars": env}
    _join_ray(ray, address, kwargs)


def _run_ray(items: Sequence[WorkItem], workers: int) -> Iterator[StoredPoint]:
    ray = _import_ray()
    started_here = False
    if not ray.is_initialized():
        _init_ray(ray, workers)
        started_here = True
    # a task lost with its worker or node (not an error in the point: execute() catches those) is
    # retried elsewhere, so a dying node loses no finished point and the run completes
    remote = ray.remote(num_cpus=1, max_retries=3)(execute)
    refs = {remote.remote(it): it for it in items}
    try:
        while refs:
            done, _ = ray.wait(list(refs), num_returns=1)
            for ref in done:
                it = refs.pop(ref)
                try:
                    yield ray.get(ref)
                except (
                    ray.exceptions.WorkerCrashedError,
                    ray.exceptions.NodeDiedError,
                    ray.exceptions.ObjectLostError,
                ) as e:
                    raise WorkerDied(
                        f"a Ray worker or node died (retries exhausted) while computing {it.point.claim_id}"
                    ) from e
    finally:
        for ref in refs:
            ray.cancel(ref, force=True)
        if started_here:
            ray.shutdown()
