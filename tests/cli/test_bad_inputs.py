"""Every bad input: exit status 2, one line on stderr naming the argument, no traceback, nothing written.

The table runs in process (``main`` under typer's runner, milliseconds a case); a few cases also run as
real subprocesses, the way a user meets them. Sizes are judged against a memory cap of 8 GB
(``ATTNLAB_MEMORY_LIMIT``) so that the size guards fire the same way on any machine.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from clitools import parse_json, run_cli

MEM_CAP = str(8 * 10**9)

HDI = ["ensemble", "hdi", "--d", "8", "--heads", "3", "--dk", "2"]
DEC = ["ensemble", "decompose", "--n", "20", "--queries", "5", "--reps", "4"]
BSTAR = ["flow", "beta-star", "--heads", "2", "--n", "32"]
EQ = ["flow", "equiangular", "--n", "32", "--beta", "1", "--strengths", "1"]
SIM = ["flow", "simulate", "--n", "8", "--d", "3", "--heads", "2", "--beta", "1", "--time", "1"]
SE = ["highdim", "se", "--alpha", "0.3", "--nodes", "64"]
TH = ["highdim", "thresholds"]
TR = ["highdim", "train", "--d", "8", "--max-steps", "20"]
SP = ["highdim", "spectrum", "--d", "8", "--nodes", "64", "--max-steps", "20"]
RUN = ["claims", "run", "test.value", "--backend", "serial"]
REP = ["reproduce", "--only", "test.value", "--backend", "serial"]

# (argv, the argument the error line must name); "afile" is a regular file and "adir" a folder in
# the working folder, "afile/x" therefore a path under a file.
CASES: list[tuple[list[str], str]] = [
    # ---- top level
    (["nosuchcommand"], "nosuchcommand"),
    (["claims", "bogus"], "bogus"),
    (["ensemble", "hdi", "--frobnicate"], "--frobnicate"),
    # ---- ensemble hdi
    ([*HDI[:2], "--d", "-5", "--heads", "3", "--dk", "2"], "--d"),
    ([*HDI[:2], "--d", "0", "--heads", "3", "--dk", "2"], "--d"),
    ([*HDI[:2], "--d", "abc", "--heads", "3", "--dk", "2"], "--d"),
    ([*HDI[:2], "--d", "1.5", "--heads", "3", "--dk", "2"], "--d"),
    ([*HDI[:2], "--heads", "3", "--dk", "2"], "--d"),
    ([*HDI[:2], "--d", "8", "--dk", "2"], "--heads"),
    ([*HDI[:4], "--heads", "1", "--dk", "2"], "--heads"),
    ([*HDI[:4], "--heads", "0", "--dk", "2"], "--heads"),
    ([*HDI[:4], "--heads", "3", "--dk", "0"], "--dk"),
    ([*HDI[:4], "--heads", "3", "--dk", "9"], "--dk"),
    ([*HDI, "--layout", "weird"], "--layout"),
    ([*HDI[:4], "--heads", "5", "--dk", "4", "--layout", "orthogonal"], "--layout"),
    ([*HDI, "--seed", "-1"], "--seed"),
    ([*HDI, "--seed", "99999999999999999999999"], "--seed"),
    ([*HDI[:2], "--d", "100000000", "--heads", "12", "--dk", "32"], "--d"),
    # ---- ensemble decompose
    ([*DEC, "--n", "1"], "--n"),
    ([*DEC, "--n", "-4"], "--n"),
    ([*DEC, "--queries", "0"], "--queries"),
    ([*DEC, "--reps", "1"], "--reps"),
    ([*DEC, "--reps", "many"], "--reps"),
    ([*DEC, "--target", "nope"], "target"),
    ([*DEC, "--noise", "-1"], "--noise"),
    ([*DEC, "--noise", "nan"], "--noise"),
    ([*DEC, "--c", "0"], "--c"),
    ([*DEC, "--kernel", "nope"], "--kernel"),
    ([*DEC, "--weights", "nope"], "--weights"),
    ([*DEC, "--layout", "nope"], "--layout"),
    ([*DEC, "--layout", "controlled"], "--angle"),
    ([*DEC, "--layout", "controlled", "--angle", "120"], "--angle"),
    ([*DEC, "--heads", "0"], "--heads"),
    ([*DEC, "--dk", "9"], "--dk"),
    ([*DEC, "--d", "0"], "--d"),
    ([*DEC, "--seed", "-2"], "--seed"),
    ([*DEC, "--reps", "1000000000", "--queries", "1000"], "--reps"),
    # ---- flow beta-star
    ([*BSTAR[:2], "--heads", "0", "--n", "8"], "--heads"),
    ([*BSTAR[:2], "--heads", "2", "--n", "1"], "--n"),
    ([*BSTAR, "--strength", "0"], "--strength"),
    ([*BSTAR, "--strength", "-1"], "--strength"),
    ([*BSTAR, "--strength", "inf"], "--strength"),
    ([*BSTAR[:2], "--heads", "2", "--n", "x"], "--n"),
    # ---- flow equiangular
    ([*EQ, "--n", "1"], "--n"),
    ([*EQ, "--beta", "-1"], "--beta"),
    ([*EQ, "--beta", "1e308"], "--beta"),
    ([*EQ, "--beta", "nan"], "--beta"),
    ([*EQ, "--strengths", ""], "--strengths"),
    ([*EQ, "--strengths", "1,x"], "--strengths"),
    ([*EQ, "--strengths", "0"], "--strengths"),
    ([*EQ, "--strengths", "1,-1"], "--strengths"),
    ([*EQ, "--target", "0"], "--target"),
    ([*EQ, "--target", "1"], "--target"),
    ([*EQ, "--target", "1.5"], "--target"),
    ([*EQ, "--scale", "2"], "--scale"),
    # ---- flow simulate
    ([*SIM, "--n", "1"], "--n"),
    ([*SIM, "--d", "0"], "--d"),
    ([*SIM, "--heads", "0"], "--heads"),
    ([*SIM, "--beta", "-1"], "--beta"),
    ([*SIM, "--kind", "gelu"], "--kind"),
    ([*SIM, "--time", "0"], "--time"),
    ([*SIM, "--time", "-1"], "--time"),
    ([*SIM, "--time", "inf"], "--time"),
    ([*SIM, "--batch", "0"], "--batch"),
    ([*SIM, "--method", "leapfrog"], "--method"),
    ([*SIM, "--dt", "0"], "--dt"),
    ([*SIM, "--dt", "-0.1"], "--dt"),
    ([*SIM, "--space", "torus"], "--space"),
    ([*SIM, "--combine", "max"], "--combine"),
    ([*SIM, "--dtype", "float16"], "--dtype"),
    ([*SIM, "--device", "tpu"], "--device"),
    ([*SIM, "--seed", "-1"], "--seed"),
    ([*SIM, "--records", "0"], "--records"),
    ([*SIM, "--max-steps", "0"], "--max-steps"),
    ([*SIM, "--time", "1e9", "--dt", "1e-9"], "--dt"),
    ([*SIM, "--figure", "afile/x.png"], "--figure"),
    ([*SIM, "--figure", "adir"], "--figure"),
    ([*SIM, "--figure", "fig.txt"], "--figure"),
    ([*SIM, "--batch", "100000000"], "--batch"),
    ([*SIM[:-2], "--time", "5", "--method", "adaptive", "--max-steps", "2"], "--max-steps"),
    # ---- highdim se / thresholds
    ([*SE, "--alpha", "-1"], "--alpha"),
    ([*SE, "--alpha", "0"], "--alpha"),
    ([*SE, "--alpha", "abc"], "--alpha"),
    ([*SE, "--kappa0", "0"], "--kappa0"),
    ([*SE, "--noise", "-1"], "--noise"),
    ([*SE, "--tokens", "1"], "--tokens"),
    ([*SE, "--lam", "-0.1"], "--lam"),
    ([*SE, "--beta", "0"], "--beta"),
    ([*SE, "--beta0", "nan"], "--beta0"),
    ([*SE, "--nodes", "4"], "--nodes"),
    ([*SE, "--nodes", "100000000000"], "--nodes"),
    (["highdim", "se"], "--alpha"),
    ([*TH, "--kappa0", "-1"], "--kappa0"),
    ([*TH, "--noise", "-0.5"], "--noise"),
    ([*TH, "--noise", "1e-20"], "--noise"),  # below the resolved floor of the interpolation threshold
    ([*TH, "--tokens", "0"], "--tokens"),
    # ---- highdim train
    ([*TR, "--d", "1"], "--d"),
    ([*TR, "--d", "0"], "--d"),
    ([*TR, "--alpha", "0"], "--alpha"),
    ([*TR, "--alpha", "1e-5"], "--alpha"),
    ([*TR[:2], "--d", "10", "--alpha", "1e9"], "--alpha"),
    ([*TR, "--task", "nope"], "--task"),
    ([*TR, "--kappa", "0"], "--kappa"),
    ([*TR, "--max-steps", "0"], "--max-steps"),
    ([*TR, "--seed", "-1"], "--seed"),
    ([*TR, "--device", "tpu"], "--device"),
    ([*TR, "--lam", "-1"], "--lam"),
    ([*TR, "--tokens", "1"], "--tokens"),
    # ---- highdim spectrum
    ([*SP, "--out", "afile/x.png"], "--out"),
    ([*SP, "--out", "spec.jpg"], "--out"),
    ([*SP, "--d", "1"], "--d"),
    ([*SP, "--alpha", "0"], "--alpha"),
    ([*SP, "--nodes", "0"], "--nodes"),
    ([*SP, "--max-steps", "0"], "--max-steps"),
    ([*SP[:2], "--d", "100000", "--alpha", "50"], "--alpha"),
    # ---- claims run / reproduce
    (["claims", "run", "NOPE"], "ID"),
    (["claims", "run"], "ID"),
    ([*RUN, "--profile", "huge"], "--profile"),
    ([*RUN[:3], "--backend", "mpi"], "--backend"),
    ([*RUN, "--workers", "0"], "--workers"),
    ([*RUN, "--workers", "two"], "--workers"),
    ([*RUN, "--seed", "-3"], "--seed"),
    ([*RUN, "--seed", "99999999999999999999999"], "--seed"),
    ([*RUN, "--threads", "0"], "--threads"),
    ([*RUN, "--threads", "-3"], "--threads"),
    ([*RUN, "--out", "afile"], "--out"),
    ([*RUN, "--out", "afile/res"], "--out"),
    ([*RUN, "--out", "/proc/forbidden"], "--out"),
    ([*RUN, "--device", "tpu"], "--device"),
    ([*RUN, "--set", "novalue"], "--set"),
    ([*RUN, "--set", "nope=1"], "--set"),
    ([*RUN, "--frobnicate"], "--frobnicate"),
    (["reproduce", "--only", "zzz"], "--only"),
    ([*REP, "--profile", "huge"], "--profile"),
    ([*REP, "--seed", "99999999999999999999999"], "--seed"),
    ([*REP, "--threads", "0"], "--threads"),
    ([*REP, "--workers", "-1"], "--workers"),
    ([*REP, "--out", "/proc/forbidden"], "--out"),
    ([*REP, "--set", "nope=1"], "--set"),
    # ---- report / results
    (["report", "--out", "/nonexistent/folder"], "--out"),
    (["results", "list", "--out", "/nonexistent/folder"], "--out"),
    (["results", "export", "--csv", "x.csv", "--out", "/nonexistent/folder"], "--out"),
    (["results", "export", "--out", "adir"], "--csv"),
    # ---- inspect (the cases that are already refused before any work)
    (["inspect", "/nonexistent/folder"], "path"),
    (["inspect", "--dtype", "float16", "--no-text"], "--dtype"),
]

IDS = [" ".join(a)[:80] for a, _ in CASES]


def _listing(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def _setup(folder: Path) -> set[str]:
    (folder / "afile").write_text("not a folder\n")
    (folder / "adir").mkdir()
    return _listing(folder)


def test_the_table_is_large_and_covers_every_command():
    assert len(CASES) >= 100
    groups = ("ensemble", "flow", "highdim", "claims", "results")
    commands = {tuple(a[:2]) if a[0] in groups else a[0] for a, _ in CASES}
    for c in [("ensemble", "hdi"), ("ensemble", "decompose"), ("flow", "beta-star"), ("flow", "equiangular")]:
        assert c in commands
    for c in [("flow", "simulate"), ("highdim", "se"), ("highdim", "thresholds"), ("highdim", "train")]:
        assert c in commands
    for c in [
        ("highdim", "spectrum"),
        ("claims", "run"),
        "reproduce",
        "report",
        ("results", "list"),
        "inspect",
    ]:
        assert c in commands


@pytest.mark.parametrize("argv, argument", CASES, ids=IDS)
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_bad_input_in_process(cli, argv, argument, as_json, monkeypatch):
    monkeypatch.setenv("ATTNLAB_MEMORY_LIMIT", MEM_CAP)
    before = _setup(Path.cwd())
    r = cli(*argv, *(["--json"] if as_json else []))
    assert r.code == 2, (r.code, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("error: ") and argument in lines[0], lines[0]
    if as_json:
        err = r.json()["error"]
        assert set(err) == {"argument", "expected", "got", "message"}
        assert lines[0] == f"error: {err['message']}"
    else:
        assert r.stdout == ""
    after = _listing(Path.cwd())
    assert after == before, f"bad input wrote {sorted(after - before)}"


# The same contract as a user meets it: a fresh interpreter, the console script's exit status.
SUBPROCESS_CASES = [
    (
        [*HDI[:2], "--d", "100000000", "--heads", "12", "--dk", "32"],
        "--d: expected a size that fits in memory",
    ),
    ([*EQ, "--beta", "1e308"], "--beta: expected"),
    ([*SIM, "--time", "1e9", "--dt", "1e-9"], "--dt: expected at most --max-steps"),
    ([*SIM, "--figure", "afile/x.png"], "--figure: expected a path in a folder"),
    ([*TR[:2], "--d", "10", "--alpha", "1e9"], "--alpha: expected a size that fits in memory"),
    ([*SP, "--out", "afile/x.png"], "--out: expected a path in a folder"),
    ([*RUN, "--threads", "0"], "--threads: expected an integer in [1, 1024]"),
    ([*RUN, "--out", "/proc/forbidden"], "--out: expected a path this user may write"),
    (
        ["reproduce", "--seed", "99999999999999999999999"],
        "--seed: expected an integer <= 9223372036854775807",
    ),
    (["claims", "run", "test.value", "--workers", "two"], "--workers: expected a valid integer, got 'two'"),
]


@pytest.mark.parametrize(
    "argv, needle", SUBPROCESS_CASES, ids=[" ".join(a)[:60] for a, _ in SUBPROCESS_CASES]
)
def test_bad_input_subprocess(argv, needle, tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNLAB_MEMORY_LIMIT", MEM_CAP)  # run_cli passes the environment on
    before = _setup(tmp_path)
    as_json = len(argv) % 2 == 0  # half of them with --json
    r = run_cli(*argv, *(["--json"] if as_json else []), cwd=tmp_path)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert needle in lines[0], lines[0]
    if as_json:
        assert parse_json(r.stdout)["error"]["message"] == lines[0].removeprefix("error: ")
    else:
        assert r.stdout == ""
    assert _listing(tmp_path) == before
