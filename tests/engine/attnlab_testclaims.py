"""Claims used by the engine tests (registered through ATTNLAB_EXTRA_CLAIMS)."""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import torch

from attnlab.engine.protocol import Claim, Grid, Point, Result, Verdict


def _value_run(point: Point) -> Result:
    at = os.environ.get("ATTNLAB_TEST_INTERRUPT_AT")
    if at is not None and int(point["x"]) == int(at):
        if os.environ.get("ATTNLAB_TEST_INTERRUPT_SIGNAL") == "TERM":
            os.kill(os.getppid(), signal.SIGTERM)  # `kill PID` of the run, as a scheduler does before SIGKILL
        else:
            os.killpg(os.getpgid(0), signal.SIGINT)  # Ctrl-C in a terminal: SIGINT to the whole process group
        time.sleep(30)  # the run stops here
    time.sleep(float(point.params.get("sleep", 0.0)))
    g = point.generator()
    A = torch.randn(64, 64, generator=g, dtype=torch.float64)  # (64, 64)
    v = float((A @ A.T).trace()) * float(point["x"]) + float(point.params.get("shift", 0.0))
    return Result(metrics={"value": v, "x": point["x"]}, arrays={"curve": np.arange(int(point["x"]) + 1) * v})


def _value_verdict(rows) -> Verdict:
    ok = [r for r in rows if r.ok]
    total = sum(r.metrics["value"] for r in ok)
    status = "holds" if ok and len(ok) == len(rows) else "inconclusive"
    return Verdict(status, {"sum": total, "points": len(ok)}, "all points ok", "")


def _value_figures(rows):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    for r in rows:
        if r.ok:
            ax.plot(r.arrays["curve"])
    ax.set_xlabel("index")
    ax.set_ylabel("value")
    return {"curves": fig}


def _flaky_run(point: Point) -> Result:
    if point["x"] == 3:
        raise ValueError("boom at x=3")
    return Result(metrics={"value": float(point["x"]) ** 2})


def _flaky_verdict(rows) -> Verdict:
    failed = sum(not r.ok for r in rows)
    return Verdict("fails" if failed else "holds", {"failed": failed}, "no failure", "")


CLAIMS = [
    Claim(
        id="test.value",
        kind="identity",
        paper="A",
        statement="a test claim",
        version=1,
        grids={
            "quick": Grid({"x": list(range(8))}, fixed={"sleep": 0.0, "shift": 0.0}),
            "full": Grid({"x": list(range(16))}, fixed={"sleep": 0.0, "shift": 0.0}, seeds=2),
        },
        run=_value_run,
        verdict=_value_verdict,
    ),
    Claim(
        id="test.flaky",
        kind="theorem",
        paper="B",
        statement="a claim with one failing point",
        version=1,
        grids={"quick": Grid({"x": list(range(6))}), "full": Grid({"x": list(range(6))})},
        run=_flaky_run,
        verdict=_flaky_verdict,
    ),
]

#: Figures of the test claims (registered through ATTNLAB_EXTRA_FIGURES, like an area's figure module).
FIGURES = {"test.value": _value_figures}
