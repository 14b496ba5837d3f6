"""A run against a real Ray head with token authentication (what `ray start --head` of a recent Ray
does): the right token joins and stores the points; a wrong token is one line (status 2) that says
what to set, and nothing is written in the store.

The head is started here (`ray start --head --block` with ``RAY_AUTH_MODE=token``, every port chosen
free, its own temporary folder and HOME) and stopped by its own PID; the runs are `attnlab`
subprocesses, so Ray's in-process token cache never mixes tokens.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.ray, pytest.mark.slow]

HERE = Path(__file__).resolve().parent


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


@pytest.fixture(scope="module")
def auth_head():
    """``(address, token, home)`` of a one-CPU Ray head that requires ``token``."""
    try:
        import ray  # noqa: F401
    except ImportError:
        pytest.skip("ray is not installed (pip install 'attnlab[ray]'): the authenticated-head test needs it")
    exe = Path(sys.executable).parent / "ray"
    if not exe.exists():
        pytest.skip(f"ray is installed without its command line ({exe} missing)")
    root = Path(tempfile.mkdtemp(prefix="atr"))  # short: Ray's unix sockets live under it
    home = root / "home"
    home.mkdir()
    token = secrets.token_hex(16)
    gcs, client, agent, mport = _free_ports(4)
    env = {
        **os.environ,
        "HOME": str(home),
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": token,
        "RAY_USAGE_STATS_ENABLED": "0",
    }
    env.pop("RAY_ADDRESS", None)
    head = subprocess.Popen(
        [
            str(exe),
            "start",
            "--head",
            "--block",
            f"--port={gcs}",
            f"--ray-client-server-port={client}",
            f"--dashboard-agent-listen-port={agent}",
            f"--metrics-export-port={mport}",
            "--num-cpus=1",
            "--include-dashboard=false",
            f"--temp-dir={root / 'ray'}",
            "--disable-usage-stats",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    address = f"127.0.0.1:{gcs}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # the GCS port accepts connections once the head is up
            if head.poll() is not None:
                err = head.stderr.read().decode(errors="replace")[-2000:] if head.stderr else ""
                pytest.fail(f"`ray start --head` exited with status {head.returncode}: {err}")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", gcs)) == 0:
                    break
            time.sleep(0.5)
        else:
            pytest.fail("the Ray head did not open its port within 120 s")
        time.sleep(3)  # the raylet registers with the GCS just after the port opens
        yield address, token, home
    finally:
        if head.poll() is None:
            # the head's processes are this session's process group (start_new_session): SIGTERM, and
            # SIGKILL after 5 s (a graceful `ray start --block` shutdown takes ~30 s)
            os.killpg(head.pid, signal.SIGTERM)
            try:
                head.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            with contextlib.suppress(ProcessLookupError):
                os.killpg(head.pid, signal.SIGKILL)
            head.wait()
        shutil.rmtree(root, ignore_errors=True)


def _attnlab(out: Path, address: str, home: Path, token: str | None, mode: str | None = "token"):
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(
        HOME=str(home),
        RAY_ADDRESS=address,
        RAY_USAGE_STATS_ENABLED="0",
        ATTNLAB_EXTRA_CLAIMS="attnlab_testclaims",
        PYTHONPATH=os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")]),
    )
    if mode is not None:
        env["RAY_AUTH_MODE"] = mode
    if token is not None:
        env["RAY_AUTH_TOKEN"] = token
    argv = [sys.executable, "-m", "attnlab.cli.main", "claims", "run", "test.value"]
    argv += ["--backend", "ray", "--workers", "1", "--out", str(out), "--json"]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)


def test_the_right_token_joins_and_stores_every_point(auth_head, tmp_path):
    address, token, home = auth_head
    p = _attnlab(tmp_path / "ok", address, home, token)
    assert p.returncode == 0, (
        f"a run with the head's token failed (status {p.returncode}): {p.stderr[-1500:]}\n"
        "check that `ray start --head` with RAY_AUTH_MODE=token and RAY_AUTH_TOKEN works on this machine "
        "and that the driver's environment reaches ray.init (engine/backends.py _init_ray)"
    )
    con = sqlite3.connect(tmp_path / "ok" / "attnlab.sqlite")
    n = con.execute("SELECT count(*) FROM points WHERE status = 'ok'").fetchone()[0]
    assert n > 0 and n == con.execute("SELECT count(*) FROM points").fetchone()[0]


def test_a_wrong_token_is_one_line_and_writes_nothing(auth_head, tmp_path):
    """(A missing token fails the same way, after the same ~30 s of Ray's retries; its message is tested
    with a stand-in in test_ray_join.py.)"""
    address, _, home = auth_head
    out = tmp_path / "refused"
    p = _attnlab(out, address, home, secrets.token_hex(16))
    lines = [ln for ln in p.stderr.strip().splitlines() if ln.strip()]
    assert p.returncode == 2, (p.returncode, p.stderr[-1500:])
    last = lines[-1]
    assert last.startswith("error: RAY_ADDRESS: expected") and "RAY_AUTH_TOKEN" in last, last
    assert "Traceback" not in p.stderr, p.stderr[-1500:]
    # nothing written on refusal: no store, no lock, no run row
    assert not out.exists() or not any(out.iterdir()), sorted(x.name for x in out.iterdir())
