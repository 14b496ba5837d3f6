"""Grades, open-knob maps, deciding branches, bands, seed stability and the decisive count."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

from attnlab.engine.power import resolving_power
from attnlab.engine.protocol import Cell, Claim, Grid, Row, Verdict, combine_cells
from attnlab.engine.runner import decide_rows, run_claims
from attnlab.engine.stability import MAX_FLIP, Stability, assess, headline, stability_of
from attnlab.engine.store import Store

sys.path.insert(0, str(Path(__file__).resolve().parent))
import attnlab_mapclaims as mc  # noqa: E402

KNOBBED, AGREES, COIN, BRANCHES = mc.CLAIMS


def _rows(claim: Claim, profile: str = "quick", seed: int = 0) -> list[Row]:
    """Compute every point in-process (what the engine would store)."""
    out = []
    for p in claim.points(profile, seed):
        r = claim.run(p)
        out.append(Row(p.point_id, p.params, "ok", r.metrics))
    return out


def _v(status: str) -> Verdict:
    return Verdict(status, {}, "-")


# ----------------------------------------------------------------------------------- grades
def test_every_shipped_claim_declares_its_grade():
    from attnlab.claims import all_claims

    claims = all_claims()
    undeclared = [c.id for c in claims if c.grade not in ("identity", "numerics", "evidence")]
    assert not undeclared
    assert all(c.grade == "identity" for c in claims if c.kind == "identity")


def test_grade_is_checked():
    with pytest.raises(ValueError, match="grade: expected one of identity, numerics, evidence"):
        dataclasses.replace(KNOBBED, grade="proof")
    with pytest.raises(ValueError, match="an identity claim"):
        dataclasses.replace(KNOBBED, kind="identity", grade="evidence")


# ----------------------------------------------------------------------------------- maps
def test_combine_cells_holds_fails_depends_inconclusive():
    h, f, i = _v("holds"), _v("fails"), _v("inconclusive")
    assert combine_cells(h, []) is h
    assert combine_cells(h, [Cell("c", 1, h, True), Cell("c", 2, h)]).status == "holds"
    assert combine_cells(f, [Cell("c", 1, f, True), Cell("c", 2, f)]).status == "fails"
    d = combine_cells(f, [Cell("c", 1, h), Cell("c", 2, f, True), Cell("c", 4, i)])
    assert d.status == "depends"
    assert "holds for c = 1" in d.note and "fails for c = 2" in d.note and "inconclusive for c = 4" in d.note
    # agreeing cells with one that cannot decide: not a word for the claim
    u = combine_cells(h, [Cell("c", 1, h, True), Cell("c", 2, i)])
    assert u.status == "inconclusive" and "not every cell" in u.regime


def test_knob_cells_run_the_test_grid_with_one_field_changed():
    pts = KNOBBED.points("quick")
    cells = sorted({p.cell for p in pts})
    # the test value 1.0 is the test setting's own cell: not run twice
    assert cells == ["", "scale=1.01", "scale=2.0"]
    assert sum(p.cell == "scale=2.0" for p in pts) == 2  # the grid's two seeds
    assert all(p.p.scale == 2.0 for p in pts if p.cell == "scale=2.0")
    # the full profile maps one value more
    assert "scale=3.0" in {p.cell for p in KNOBBED.points("full")}


def test_a_knob_that_is_an_axis_of_the_test_grid_is_refused():
    with pytest.raises(ValueError, match="knobs scale: expected a field the test grid holds at one value"):
        dataclasses.replace(KNOBBED, grids={"quick": Grid({"scale": [1.0, 2.0]}), "full": Grid()})


def test_map_depends_where_cells_disagree_and_holds_where_they_agree():
    v, power = decide_rows(KNOBBED, _rows(KNOBBED), "quick")
    assert v.status == "depends"
    statuses = {c["value"]: c["status"] for c in power.cells}
    # independent: the data's mean is 1 + (scale - 1)/2, so |mean - 1| < 3% exactly for scale < 1.06
    assert statuses == {1.0: "holds", 1.01: "holds", 2.0: "fails"}
    assert power.label.startswith("map") and not power.flips
    v2, power2 = decide_rows(AGREES, _rows(AGREES), "quick")
    assert v2.status == "holds" and len(power2.cells) == 2
    assert "Map: holds for scale = 1.0, 1.01" in v2.note


def test_a_knob_mapped_at_another_profile_only_leaves_this_one_unmapped():
    from attnlab.engine.protocol import Knob

    only_full = dataclasses.replace(
        AGREES, id="test.full-only", knobs={"scale": Knob({"full": [1.0, 2.0]}, "s")}
    )
    assert {p.cell for p in only_full.points("quick")} == {""}
    v, power = decide_rows(only_full, _rows(only_full), "quick")
    assert v.status == "holds" and power.cells == []
    v, power = decide_rows(only_full, _rows(only_full, "full"), "full")
    assert v.status == "depends" and {c["value"]: c["status"] for c in power.cells} == {
        1.0: "holds",
        2.0: "fails",
    }


# ----------------------------------------------------------------------------------- branches, bands
def test_power_shows_the_band_and_counts_controls_through_the_deciding_branch():
    rows = _rows(BRANCHES)
    test = BRANCHES.decide(rows)
    assert (test.status, test.branch, test.band) == ("holds", "band", 0.03)
    p = resolving_power(BRANCHES, rows, test)
    # mean ≈ 1 with noise 1e-3/√64: a target 5% off leaves the 3% band (2%-off stays inside it)
    assert p.flips["target"] == {"+": 0.05, "-": 0.05}
    assert "(band 3%)" in p.label
    assert p.controls["shifted"]["as_designed"] and p.controls["shifted"]["same_branch"]
    assert p.controls["empty"]["as_designed"] and not p.controls["empty"]["same_branch"]
    assert p.controls["empty"]["branch"] == "size-0"
    assert "1 through 'band'" in p.label


def test_a_conjunction_is_decided_by_each_of_its_checks():
    """A test holding through every check of a conjunction is decided by each: a control failing through
    any one of them (named by that check) counts; a part of a name, another rule or no branch does not."""
    from attnlab.engine.power import same_branch

    assert same_branch("atom+law+split", "law") and same_branch("atom+law+split", "atom+law+split")
    assert same_branch("band", "band") and not same_branch("band", "size-0")
    assert not same_branch("atom+law+split", "at") and not same_branch("atom+law+split", "outside")
    assert not same_branch("", "") and not same_branch("atom+law", "")
    # a plain name is not split: "law" as the test's branch is not decided by a control through "atom"
    assert not same_branch("law", "atom")


# ----------------------------------------------------------------------------------- decisive
def _power(flip, band, controls=None, branch="band"):
    flips = {"x": {"+": flip, "-": flip}} if flip is not False else {}
    return {"flips": flips, "band": band, "controls": controls or {}, "branch": branch}


STABLE = Stability({0: "holds", 1: "holds", 2: "holds", 3: "holds"}, True)


def test_decisive_needs_evidence_stability_and_power_at_its_own_resolution():
    assert assess("evidence", "holds", _power(0.05, 0.03), STABLE).decisive
    # the flip must be within 10% of the prediction and wider than the band
    a = assess("evidence", "holds", _power(0.25, 0.03), STABLE)
    assert not a.decisive and "smallest flip 25%" in a.lacks[0]
    assert MAX_FLIP == 0.10
    a = assess("evidence", "holds", _power(0.05, 0.08), STABLE)
    assert not a.decisive and "within its band 8%" in a.lacks[0]
    a = assess("evidence", "holds", _power(0.05, None), STABLE)
    assert not a.decisive and "no band stated" in a.lacks[0]
    # numerics, undeclared, unmeasured stability, unstable
    assert assess("numerics", "holds", _power(0.05, 0.03), STABLE).category == "numerics"
    assert "no grade declared" in assess("", "holds", _power(0.05, 0.03), STABLE).lacks
    a = assess("evidence", "holds", _power(0.05, 0.03), None)
    assert not a.decisive and any("not measured" in x for x in a.lacks)
    bad = Stability({0: "holds", 1: "fails"}, False)
    a = assess("evidence", "inconclusive", _power(0.05, 0.03), bad)
    assert a.category == "inconclusive" and "unstable" in a.lacks[0]
    assert assess("evidence", "depends", {}, STABLE).category == "depends"


def test_controls_decide_only_through_the_deciding_branch():
    same = {"neg": {"expect": "fails", "as_designed": True, "same_branch": True}}
    other = {"neg": {"expect": "fails", "as_designed": True, "same_branch": False}}
    assert assess("evidence", "holds", _power(False, None, same), STABLE).decisive
    a = assess("evidence", "holds", _power(False, None, other), STABLE)
    assert not a.decisive and "through 'band'" in a.lacks[0]
    # a control of the same outcome as the verdict cannot show that it could have come out otherwise
    pos = {"pos": {"expect": "holds", "as_designed": True, "same_branch": True}}
    assert (
        "no control that must come out 'fails'"
        in assess("evidence", "holds", _power(False, None, pos), STABLE).lacks[0]
    )


def test_headline_counts_per_paper():
    a_dec = assess("evidence", "holds", _power(0.05, 0.03), STABLE)
    a_num = assess("numerics", "holds", _power(0.05, 0.03), STABLE)
    counts = headline([("A", a_dec), ("A", a_num), ("B", a_dec)])
    assert counts == {"A": {"claims": 2, "decisive": 1, "numerics": 1}, "B": {"claims": 1, "decisive": 1}}


# ----------------------------------------------------------------------------------- stability
def test_stability_runs_are_seed_variants_and_an_unstable_verdict_shows_inconclusive(tmp_path):
    # find a base seed whose four root seeds disagree, computed independently of the engine: the
    # verdict holds exactly when the point's derived seed is even
    def parity(s):
        return COIN.points("quick", s)[0].seed % 2

    base = next(b for b in range(50) if len({parity(b + k) for k in range(4)}) == 2)
    expect = {base + k: ("holds" if parity(base + k) == 0 else "fails") for k in range(4)}
    out = tmp_path / "res"
    run_claims([COIN, AGREES], out=out, backend="serial", root_seed=base, seeds=[base + k for k in range(4)])
    with Store(out / "attnlab.sqlite", readonly=True) as st:
        every = st.latest_verdicts()
    variants = sorted(v.variant for v in every if v.claim_id == COIN.id)
    assert variants == ["", *(f"seed={base + k}" for k in range(1, 4))]
    seeds = [v for v in every if v.variant]
    coin_base = next(v for v in every if v.claim_id == COIN.id and not v.variant)
    s = stability_of(coin_base, seeds)
    assert s.outcomes == expect and s.stable is False
    n_h = sum(v == "holds" for v in expect.values())
    assert s.label == (
        f"unstable (holds {n_h} · fails {4 - n_h})"
        if expect[base] == "holds"
        else f"unstable (fails {4 - n_h} · holds {n_h})"
    )
    agrees = stability_of(next(v for v in every if v.claim_id == AGREES.id and not v.variant), seeds)
    assert agrees.label == "stable 4/4"
    # the report's outcomes: unstable shown inconclusive, the decided status kept
    from attnlab.report import collect_outcomes

    outs = {o.id: o for o in collect_outcomes(out)}
    assert set(outs) == {COIN.id, AGREES.id}  # seed variants are folded into stability, not listed
    assert outs[COIN.id].verdict.status == "inconclusive"
    assert outs[COIN.id].stored_status == expect[base]
    assert "unstable" in outs[COIN.id].verdict.regime
    assert outs[AGREES.id].stability.label == "stable 4/4"
    # a seed variant of another claim version is stale: not counted
    old = [dataclasses.replace(v, version=0) for v in seeds]
    assert not stability_of(coin_base, old).measured


# ----------------------------------------------------------------------------------- command line
@pytest.fixture()
def cli(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from attnlab.cli.main import main

    here = Path(__file__).resolve().parent
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(here))
    monkeypatch.setenv("ATTNLAB_EXTRA_CLAIMS", "attnlab_mapclaims")
    monkeypatch.setenv("PYTHONPATH", str(here))
    monkeypatch.setenv("COLUMNS", "200")
    runner = CliRunner()

    def run(*argv: str):
        with runner.isolation() as (out, err, _):
            code = main([str(a) for a in argv])
            sys.stdout.flush()
            sys.stderr.flush()
            return code, out.getvalue().decode(), err.getvalue().decode()

    return run


def test_stability_command_dry_run_json_and_power_from_a_store_without_the_claims(cli, tmp_path, monkeypatch):
    import json

    code, out, _ = cli("claims", "stability", "test.knob-agrees", "--seeds", "2", "--dry-run", "--json",
                       "--backend", "serial")  # fmt: skip
    assert code == 0
    dry = json.loads(out)
    # 2 test points + 2 cell points per root seed, three root seeds, nothing stored yet
    assert dry["points"] == 12 and dry["to_compute"] == 12
    assert not (tmp_path / "results").exists()  # a dry run writes nothing
    code, out, _ = cli(
        "claims", "stability", "test.knob-agrees", "--seeds", "2", "--json", "--backend", "serial"
    )
    assert code == 0
    got = json.loads(out)
    assert got["seeds"] == [0, 1, 2]
    assert got["claims"][0]["label"] == "stable 3/3" and got["unstable"] == []
    # resumable: a second call computes nothing
    code, out, _ = cli(
        "claims", "stability", "test.knob-agrees", "--seeds", "2", "--json", "--backend", "serial"
    )
    assert json.loads(out)["summary"]["computed"] == 0
    for bad, arg in ((["--seeds", "0"], "--seeds"), (["--seeds", "99"], "--seeds")):
        code, _, err = cli("claims", "stability", "test.knob-agrees", *bad)
        assert code == 2 and arg in err
    code, _, err = cli("claims", "stability")
    assert code == 2 and "one claim id or --all" in err
    for bad in (["--all", "--only", ""], ["--all", "--only", "nope."], ["test.coin", "--only", "test."]):
        code, _, err = cli("claims", "stability", *bad, "--dry-run")
        assert code == 2 and "--only" in err
    code, out, _ = cli("claims", "stability", "--all", "--only", "test.kno", "--dry-run", "--json")
    assert {c["id"] for c in json.loads(out)["claims"]} == {"test.knobbed", "test.knob-agrees"}
    # claims power re-decides with the claim's code ...
    code, out, _ = cli("claims", "power", "--all", "--json")
    rec = json.loads(out)["claims"][0]
    assert (rec["id"], rec["source"], rec["grade"], rec["verdict"]) == (
        "test.knob-agrees", "re-decided", "evidence", "holds"
    )  # fmt: skip
    assert rec["stability"]["label"] == "stable 3/3" and len(rec["map"]) == 2 and rec["branch"] == "band"
    # ... and reads the store alone when the claim is not registered (another attnlab, a plug-in not loaded)
    monkeypatch.setenv("ATTNLAB_EXTRA_CLAIMS", "")
    code, out, _ = cli("claims", "power", "--all", "--json")
    assert code == 0
    rec2 = json.loads(out)["claims"][0]
    assert rec2["source"] == "store" and rec2["grade"] == "evidence" and rec2["verdict"] == "holds"
    assert rec2["stability"] == rec["stability"] and rec2["map"] == rec["map"] and rec2["band"] == 0.03
    # flips of 5% (the band is 3%), stable, evidence: decisive in both readings
    assert rec["decisive"] and rec2["decisive"]
    assert json.loads(out)["decisive"] == {"A": {"claims": 1, "decisive": 1}}


def test_report_shows_grade_stability_map_and_branch(cli, tmp_path):
    code, _, _ = cli("claims", "run", "test.knobbed", "--backend", "serial")
    assert code == 0
    code, out, _ = cli("report")
    assert code == 0 and "decisive verdicts per paper: A 0/1 (1 depends)" in out.replace("\n", " ")
    html = (tmp_path / "results" / "report.html").read_text()
    assert "depends" in html and "open knob" in html and "scale=2.0" not in html  # cells by value
    assert "<td>2.0</td>" in html and "deciding branch:</b> band" in html
    assert "seed stability:</b> not measured" in html and "Grade:</b> evidence" in html
    md = (tmp_path / "results" / "report.md").read_text()
    assert "| `test.knobbed` | evidence | **depends** |" in md
