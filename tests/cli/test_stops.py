"""How a run stops when it cannot go on: SIGTERM (as Ctrl-C, status 143), a full disk (status 74), a
closed standard output (status 2). Each ends with one line, no traceback, and the finished points
stored."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from attnlab.engine.store import Store
from clitools import cli_env


def _default_signals() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _group_gone(pgid: int, wait_s: float = 10.0) -> bool:
    """Whether no process of the run's process group is left (waits for the kernel to reap them)."""
    end = time.monotonic() + wait_s
    while time.monotonic() < end:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def test_sigterm_stops_a_run_as_ctrl_c_does(tmp_path):
    """The worker starting x = 6 sends SIGTERM to the run (``kill PID``, what a scheduler sends first)."""
    out = tmp_path / "res"
    args = ["claims", "run", "test.value", "--backend", "process", "--workers", "2", "--threads", "1"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "attnlab.cli.main", *args, "--set", "sleep=0.2", "--out", str(out)],
        env=cli_env() | {"ATTNLAB_TEST_INTERRUPT_AT": "6", "ATTNLAB_TEST_INTERRUPT_SIGNAL": "TERM"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=_default_signals,
    )
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    assert "Traceback" not in err and "leaked" not in err, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("terminated (SIGTERM): every finished point is stored in") and "resume" in last
    with Store(out / "attnlab.sqlite", readonly=True) as s:
        kept = s.all_points("test.value")
    assert 1 <= len(kept) < 8 and all(p["status"] == "ok" for p in kept)
    assert _group_gone(proc.pid), "a worker outlived the terminated run"


@pytest.fixture
def small_disk(monkeypatch):
    """Stores that fill after a few more pages (SQLite's max_page_count gives the real SQLITE_FULL)."""
    original = Store.__init__

    def init(self, path, readonly=False):
        original(self, path, readonly)
        if not readonly:
            pages = self._con.execute("PRAGMA page_count").fetchone()[0]
            self._con.execute(f"PRAGMA max_page_count = {pages + 4}")

    monkeypatch.setattr(Store, "__init__", init)


@pytest.mark.parametrize("backend", ["serial", "process"])
def test_a_full_disk_ends_the_run_with_one_line(cli, testclaims, small_disk, backend, monkeypatch):
    import threading

    raised = []  # exceptions of background threads (the process pool's manager), which print tracebacks
    monkeypatch.setattr(threading, "excepthook", lambda args: raised.append(args.exc_type.__name__))
    r = cli(
        "claims",
        "run",
        "test.value",
        "--profile",
        "full",
        "--backend",
        backend,
        "--workers",
        "2",
        "--threads",
        "1",
        "--out",
        "res",
    )
    assert r.code == 74, (r.code, r.stderr)
    assert "Traceback" not in r.stderr and "InvalidStateError" not in r.stderr, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("error: store: the disk is full") and "rerun the same command to resume" in last
    for t in threading.enumerate():  # the pool's manager thread ends once it has seen the workers stop
        if t is not threading.current_thread() and "Executor" in type(t).__name__:
            t.join(timeout=30)
    assert raised == [], raised
    stored = int(last.split("; ")[1].split()[0])
    with Store("res/attnlab.sqlite", readonly=True) as s:
        assert len(s.all_points()) == stored < 32


def test_a_closed_stdout_is_one_line(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "attnlab.cli.main", "claims", "list"],
        env=cli_env(),
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
        cwd=tmp_path,
        preexec_fn=lambda: os.close(1),
    )
    assert r.returncode == 2, r.stderr
    assert r.stderr.splitlines() == [
        "error: stdout: expected an open standard output for the results, got 'a closed standard output'"
    ]
