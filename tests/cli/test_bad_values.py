"""Bad values, paths, stores and environments: exit status 2, one line naming the argument, nothing written.

The companion of ``test_bad_inputs.py``: there the options' ranges, here what lies behind them — each
``Params`` field's domain and caps under ``--set``, integers beyond 64 bits, special files (a FIFO,
``/dev/full``), empty values, stores that are empty, foreign or have a damaged write-ahead log, and the
``ATTNLAB_*`` variables. Each case names its category; every case runs in process, in a folder holding
a valid store (``store``), a 0-byte one (``empty``), another application's SQLite file (``foreign``), a
store whose write-ahead log is cut (``cutwal``), a FIFO, a text file and a 0-byte ``.gguf``; after the
command, the folder must hold exactly what it held (no lock, no ``-shm``, no output).
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import sqlite3
from pathlib import Path

import pytest

from attnlab.engine.store import Store, StoredPoint

MEM_CAP = str(8 * 10**9)
HUGE = "1" + "0" * 400  # an integer of 401 digits
LONG = "x" * 5000

FLOW = ["claims", "run", "flow.energy-monotone", "--backend", "serial"]
EQR = ["claims", "run", "flow.equiangular-rates", "--backend", "serial"]
NWI = ["claims", "run", "ensemble.nw-identity", "--backend", "serial"]
BUDGET = ["claims", "run", "ensemble.budget-law", "--backend", "serial"]
RUN = ["claims", "run", "test.value", "--backend", "serial"]
SIM = ["flow", "simulate", "--n", "8", "--d", "3", "--heads", "2", "--beta", "1", "--time", "1"]
CONFIG_BAD = '["random",null,"gaussian","uniform","nope",100]'

# (category, argv, the argument the error line must name, environment)
CASES: list[tuple[str, list[str], str, dict[str, str]]] = [
    # ---- a Params field's domain under --set: non-finite, out of range, empty, wrong length, choices
    ("domain: not finite", [*FLOW, "--set", "beta=NaN"], "--set beta", {}),
    ("domain: not finite", [*FLOW, "--set", "beta=Infinity"], "--set beta", {}),
    ("domain: not finite", [*FLOW, "--set", "beta=-Infinity"], "--set beta", {}),
    ("domain: range", [*FLOW, "--set", "n=-5"], "--set n", {}),
    ("domain: range", [*FLOW, "--set", "heads=0"], "--set heads", {}),
    ("domain: open end", [*FLOW, "--set", "dt=0"], "--set dt", {}),
    ("domain: range, in an axis", [*FLOW, "--set", "n=16,-5"], "--set n", {}),
    ("cap: work of one point", [*FLOW, "--set", "t1=1e12"], "--set t1", {}),
    ("cap: work of one point", [*FLOW, "--set", "batch=10000000000"], "--set batch", {}),
    ("cap: work of one point", [*FLOW, "--set", f"batch={HUGE}"], "--set batch", {}),
    (
        "cost: several fields together",
        [*FLOW, "--set", "batch=100000", "--set", "n=100000"],
        "--set batch",
        {},
    ),
    ("domain: list empty", [*EQR, "--set", "strengths=[]"], "--set strengths", {}),
    ("domain: list element", [*EQR, "--set", "strengths=[-1,0.5]"], "--set strengths", {}),
    ("domain: list element", [*EQR, "--set", "strengths=[1,NaN]"], "--set strengths", {}),
    ("domain: list with a hole", [*EQR, "--set", "strengths=1,,2"], "--set strengths", {}),
    ("domain: list length", [*NWI, "--set", "shape=[1,2]"], "--set shape", {}),
    ("domain: list element", [*NWI, "--set", "shape=[8,4,2,1,0]"], "--set shape", {}),
    ("domain: allowed strings", [*BUDGET, "--set", "target=nope"], "--set target", {}),
    ("domain: allowed strings", [*BUDGET, "--set", "kernel="], "--set kernel", {}),
    ("domain: long string", [*BUDGET, "--set", f"target={LONG}"], "--set target", {}),
    (
        "domain: tuple position",
        [*BUDGET[:2], "ensemble.decomposition", "--set", f"config={CONFIG_BAD}"],
        "--set config",
        {},
    ),
    ("domain: open interval", [*BUDGET[:2], "highdim.spectrum", "--set", "rtol=2"], "--set rtol", {}),
    (
        "domain: Literal choices",
        [*BUDGET[:2], "highdim.theory-vs-adam", "--set", "optimizer=sgd"],
        "--set optimizer",
        {},
    ),
    (
        "cap: work of one point",
        [*BUDGET[:2], "models.training-diversity", "--set", "n_layers=100"],
        "--set n_layers",
        {},
    ),
    ("domain: generic, no Params", [*RUN, "--set", "shift=NaN"], "--set shift", {}),
    (
        "domain: via reproduce",
        ["reproduce", "--only", "flow.energy-monotone", "--set", "dt=0"],
        "--set dt",
        {},
    ),
    # ---- run options with caps
    ("cap: run option", [*RUN, "--threads", "100000"], "--threads", {}),
    ("cap: run option", [*RUN, "--workers", "100000"], "--workers", {}),
    # ---- integers beyond 64 bits, and the option a size refusal names
    ("huge integer", ["ensemble", "hdi", "--d", HUGE, "--heads", "3", "--dk", "2"], "--d", {}),
    ("huge integer", [*SIM[:4], HUGE, *SIM[6:]], "--d", {}),
    (
        "huge integer",
        ["ensemble", "decompose", "--n", str(2**63), "--queries", "5", "--reps", "4"],
        "--n",
        {},
    ),
    ("size names its cause", [*SIM[:4], "1000000", *SIM[6:]], "--d", {}),
    ("size names its cause", ["flow", "beta-star", "--heads", "10000000000", "--n", "32"], "--heads", {}),
    ("size names its cause", ["highdim", "se", "--alpha", "1e308", "--nodes", "64"], "--alpha", {}),
    # ---- special and empty paths
    ("special file", ["results", "export", "--csv", "/dev/full", "--out", "store"], "--csv", {}),
    ("special file", ["results", "export", "--csv", "fifo", "--out", "store"], "--csv", {}),
    ("special file", ["inspect", "fifo"], "path", {}),
    ("not a checkpoint", ["inspect", "notes.txt"], "path", {}),
    ("not a checkpoint", ["inspect", "model.gguf"], "path", {}),
    ("not a checkpoint", ["inspect", LONG], "path", {}),
    ("not a checkpoint", ["inspect", "evil", "--no-text"], "checkpoint", {}),
    ("empty value", ["highdim", "spectrum", "--d", "8", "--nodes", "64", "--out", ""], "--out", {}),
    ("empty value", ["reproduce", "--only", ""], "--only", {}),
    ("empty value", ["reproduce", "--only="], "--only", {}),
    ("empty value", [*SIM, "--figure", ""], "--figure", {}),
    (
        "empty value",
        ["flow", "equiangular", "--n", "32", "--beta", "1", "--strengths", "1,,2"],
        "--strengths",
        {},
    ),
    (
        "unknown claim, store untouched",
        ["results", "export", "--csv", "x.csv", "--out", "store", "--claim", "NOPE"],
        "--claim",
        {},
    ),
    (
        "unknown claim, store untouched",
        ["results", "list", "--out", "store", "--claim", "NOPE"],
        "--claim",
        {},
    ),
    ("special file", ["inspect", "minilm", "--csv", "fifo"], "--csv", {}),
    ("unwritable folder", ["report", "--out", "store", "--to", "/proc/x"], "--to", {}),
    # ---- stores that are not usable: refused before any lock or side file
    ("store: 0 bytes", [*RUN, "--out", "empty"], "store", {}),
    (
        "store: 0 bytes",
        ["reproduce", "--only", "test.value", "--backend", "serial", "--out", "empty"],
        "store",
        {},
    ),
    ("store: foreign SQLite", [*RUN, "--out", "foreign"], "store", {}),
    ("store: foreign SQLite", ["results", "list", "--out", "foreign"], "store", {}),
    ("store: cut write-ahead log", [*RUN, "--out", "cutwal"], "write-ahead log", {}),
    ("store: cut write-ahead log", ["results", "list", "--out", "cutwal"], "write-ahead log", {}),
    ("store: cut write-ahead log", ["report", "--out", "cutwal", "--to", "rep"], "write-ahead log", {}),
    # ---- the environment
    ("environment", ["claims", "list"], "ATTNLAB_EXTRA_CLAIMS", {"ATTNLAB_EXTRA_CLAIMS": "no_such_mod"}),
    ("environment", ["claims", "list"], "ATTNLAB_EXTRA_CLAIMS", {"ATTNLAB_EXTRA_CLAIMS": "json"}),
    (
        "environment",
        ["report", "--out", "store"],
        "ATTNLAB_EXTRA_FIGURES",
        {"ATTNLAB_EXTRA_FIGURES": "no_such_mod"},
    ),
    (
        "environment",
        ["ensemble", "hdi", "--d", "8", "--heads", "3", "--dk", "2"],
        "ATTNLAB_MEMORY_LIMIT",
        {"ATTNLAB_MEMORY_LIMIT": "abc"},
    ),
    (
        "environment",
        ["ensemble", "hdi", "--d", "8", "--heads", "3", "--dk", "2"],
        "ATTNLAB_MEMORY_LIMIT",
        {"ATTNLAB_MEMORY_LIMIT": "-1"},
    ),
]

IDS = [f"{cat}: {' '.join(a)[:60]}" for cat, a, _, _ in CASES]


def _point(i: int) -> StoredPoint:
    return StoredPoint(
        point_id=f"p{i}",
        claim_id="test.value",
        profile="quick",
        params={"x": i},
        seed=i,
        version=1,
        status="ok",
        metrics={"value": float(i)},
        error=None,
        provenance={},
        runtime_s=0.01,
        host="h",
        started="",
        ended="",
        arrays={},
    )


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> Path:
    """A valid store, and a copy whose write-ahead log holds three points and is then cut in half."""
    base = tmp_path_factory.mktemp("stores")
    with Store(base / "store" / "attnlab.sqlite") as s:
        for i in range(3):
            s.write_point(_point(i))
    live = Store(base / "live" / "attnlab.sqlite")
    live._con.execute("PRAGMA wal_autocheckpoint=0")  # the points stay in the log, as after a crash
    for i in range(3):
        live.write_point(_point(i))
    (base / "cutwal").mkdir()
    shutil.copy(base / "live" / "attnlab.sqlite", base / "cutwal" / "attnlab.sqlite")
    wal = (base / "live" / "attnlab.sqlite-wal").read_bytes()
    (base / "cutwal" / "attnlab.sqlite-wal").write_bytes(wal[: len(wal) // 2])
    live.close()
    return base


EVIL_CONFIG = {"model_type": "bert", "hidden_size": 8, "num_attention_heads": 2, "num_hidden_layers": 1}


class _Evil:
    def __reduce__(self):
        return (os.system, ("touch PWNED",))


def _listing(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def _setup(folder: Path, stores: Path) -> set[str]:
    shutil.copytree(stores / "store", folder / "store")
    shutil.copytree(stores / "cutwal", folder / "cutwal")
    (folder / "empty").mkdir()
    (folder / "empty" / "attnlab.sqlite").write_bytes(b"")
    (folder / "foreign").mkdir()
    con = sqlite3.connect(folder / "foreign" / "attnlab.sqlite")
    con.execute("CREATE TABLE notes (x)")
    con.commit()
    con.close()
    os.mkfifo(folder / "fifo")
    (folder / "notes.txt").write_text("not a model\n")
    (folder / "model.gguf").write_bytes(b"")
    (folder / "evil").mkdir()  # a checkpoint whose weights are a pickle that would run a command
    (folder / "evil" / "config.json").write_text(json.dumps(EVIL_CONFIG))
    (folder / "evil" / "pytorch_model.bin").write_bytes(pickle.dumps(_Evil(), protocol=4))
    return _listing(folder)


def test_the_table_covers_every_category_of_bad_value():
    cats = {c.split(":")[0] for c, _, _, _ in CASES}
    assert {"domain", "cap", "huge integer", "special file", "empty value", "store", "environment"} <= cats
    assert len(CASES) >= 55


@pytest.mark.parametrize("category, argv, argument, env", CASES, ids=IDS)
def test_bad_value_in_process(cli, stores, category, argv, argument, env, monkeypatch):
    monkeypatch.setenv("ATTNLAB_MEMORY_LIMIT", MEM_CAP)
    before = _setup(Path.cwd(), stores)
    r = cli(*argv, env=env or None)
    assert r.code == 2, (category, r.code, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("error: ") and argument in lines[0], lines[0]
    assert len(lines[0]) < 400, "the line echoes a long value whole"
    assert r.stdout == ""
    after = _listing(Path.cwd())
    assert after == before, f"a refused command wrote {sorted(after - before)}"


def test_a_store_with_a_cut_log_is_not_read_as_empty(stores):
    """The intact log holds three points; cut, it is refused rather than read as none."""
    from attnlab.engine.store import StoreError

    with pytest.raises(StoreError, match="write-ahead log .* damaged or truncated .* move"):
        Store(stores / "cutwal" / "attnlab.sqlite", readonly=True)
    with pytest.raises(StoreError, match="write-ahead log"):
        Store(stores / "cutwal" / "attnlab.sqlite")
    assert len((stores / "cutwal" / "attnlab.sqlite-wal").read_bytes()) > 0  # left as it was


def test_a_readonly_store_without_a_log_creates_no_side_file(stores, tmp_path):
    shutil.copytree(stores / "store", tmp_path / "s")
    before = _listing(tmp_path)
    with Store(tmp_path / "s" / "attnlab.sqlite", readonly=True) as s:
        assert len(s.all_points()) == 3
    assert _listing(tmp_path) == before
