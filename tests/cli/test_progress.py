"""Progress off a terminal: log lines with done/total, rate and ETA (what `make run > log 2>&1` shows)."""

from __future__ import annotations

import json
import time

import pytest


def test_log_ticker_line_reads_done_total_rate_eta(monkeypatch):
    from attnlab.cli.common import LogTicker

    t = LogTicker("computing", total=200, unit="points", every=3600)  # no periodic line in this test
    try:
        t._t0 -= 10.0  # as if started 10 s ago: 50 points in 10 s = 5 points/s, 150 left = 30 s
        t.update(advance=50)
        line = t.line()
    finally:
        t.close()
    assert line.startswith("computing: 50/200 (25%), ")
    rate = float(line.split(", ")[1].split()[0])
    assert rate == pytest.approx(5.0, rel=0.05)  # elapsed grows by microseconds between the two reads
    assert line.endswith("ETA 30 s")
    no_total = LogTicker("solving", every=3600)
    no_total.close()
    assert no_total.line().startswith("solving: ") and "elapsed" in no_total.line()


def test_task_progress_writes_periodic_lines_off_a_terminal(monkeypatch, capsys):
    from attnlab.cli.common import TaskProgress, err_console

    monkeypatch.setenv("ATTNLAB_PROGRESS_EVERY", "0.01")
    assert not err_console.is_terminal  # pytest captures stderr
    with TaskProgress("Adam", total=10) as bar:
        bar.update(done=4)
        deadline = time.monotonic() + 20
        while "Adam: 4/10" not in capsys.readouterr().err and time.monotonic() < deadline:
            time.sleep(0.02)
        bar.update(done=10)
    # the thread wrote at least one line of the form "Adam: 4/10 (40%), R steps/s, ETA ..."
    assert time.monotonic() < deadline


def test_claims_run_logs_progress_when_stderr_is_a_file(cli, tmp_path):
    r = cli("claims", "run", "test.value", "--backend", "serial", "--out", str(tmp_path / "res"), "--json")
    assert r.code == 0, r.stderr
    assert json.loads(r.stdout)["summary"]["computed"] == 8
    lines = r.stderr.splitlines()
    assert lines[0] == "8 points: 0 stored already, 8 to compute"
    assert any(ln.startswith("computing") and ": 8/8 (100%)" in ln and "points/s" in ln for ln in lines), (
        lines
    )


def test_flow_simulate_step_progress_and_same_trajectory_as_one_call(cli, monkeypatch):
    """Segmented integration (for progress) keeps the single call's fixed step: same final energy."""
    import torch

    from attnlab.core.seeding import derive_seed, generator
    from attnlab.dynamics import Heads, Record, init, simulate

    monkeypatch.setenv("ATTNLAB_PROGRESS_EVERY", "0.001")
    args = [
        "--n",
        "8",
        "--d",
        "3",
        "--heads",
        "2",
        "--beta",
        "1",
        "--time",
        "2",
        "--batch",
        "4",
        "--dt",
        "0.07",
    ]
    r = cli("flow", "simulate", *args, "--records", "7", "--json")
    assert r.code == 0, r.stderr
    out = r.json()
    assert out["steps"] == 29  # ceil(2 / 0.07)
    spec = Heads.random_symmetric(
        2, 3, generator=generator(derive_seed(0, "heads")), kind="usa", combine="sum"
    )
    x0 = init.uniform(batch=4, n=8, d=3, seed=derive_seed(0, "tokens"), dtype=torch.float64)
    ref = simulate(spec, x0, beta=1.0, t1=2.0, dt=0.07, record=Record(observables=("energy",)))
    le = ref.observables["log_energy_total"][-1].double()  # (B,)
    # the same 29 RK4 steps of the same h in the same order: equal to rounding (1e-12 relative)
    assert out["log_energy_end"] == pytest.approx(float(le.mean()), rel=1e-12)
