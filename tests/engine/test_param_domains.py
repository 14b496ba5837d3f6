"""Parameter domains (engine/params.py): intervals with open or closed ends, caps, list lengths, allowed
strings, per-position domains, DOMAINS along the bases, the generic checks and multi-field costs."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

import pytest

from attnlab.engine.params import Cost, In, Interval, Items, OneOf, check_costs, check_params, domain_of


@dataclasses.dataclass(frozen=True)
class Base:
    n: int = 16
    dt: Annotated[float, In("(0, 1]")] = 0.05
    t1: float = 2.0
    beta: float = 1.0
    tol: Annotated[float, In("[0, inf]")] = 0.0
    strengths: tuple[float, ...] = (1.0,)
    shape: tuple[int, ...] = (1, 2)
    name: str = "sine"
    setting: tuple[Any, ...] = (8, "a")
    rtol: float | None = None

    DOMAINS = {
        "n": In("[2, inf)", cap=4096),
        "strengths": In("(0, inf)", length="[1, 3]"),
        "shape": In("[1, inf)", length="[2, 2]"),
        "name": OneOf("sine", "radial"),
        "setting": Items(In("[1, inf)"), OneOf("a", "b")),
        "rtol": In("(0, 1)"),
    }
    COSTS = (Cost("n * n * t1 / dt", 1e9, "scores"),)


@dataclasses.dataclass(frozen=True)
class Child(Base):
    n: int = 32  # a subclass changes a default and keeps the domains


GOOD = [
    ("n", 2),
    ("dt", 1),
    ("tol", float("inf")),
    ("strengths", [0.5, 3]),
    ("name", "radial"),
    ("rtol", None),
]
BAD = [
    ("n", 1, "--set n: expected an integer in [2, inf), got 1"),
    (
        "n",
        5000,
        "--set n: expected an integer in [2, inf), at most 4096 (a cap on one point's work), got 5000",
    ),
    ("n", 2**70, "the store's integer range"),
    ("dt", 0, "--set dt: expected a number in (0, 1], got 0"),
    ("dt", 1.5, "in (0, 1]"),
    ("dt", float("nan"), "a finite number in (0, 1]"),
    ("beta", float("inf"), "--set beta: expected a finite number, got inf"),
    ("strengths", [], "a list whose length is in [1, 3]"),
    ("strengths", [1, 2, 3, 4], "a list whose length is in [1, 3]"),
    ("strengths", [1, -1], "a list of numbers in (0, inf), got [1, -1] (item 1: -1)"),
    ("shape", [1, 2, 3], "a list of 2 values"),
    ("shape", [1, 0], "a list of integers in [1, inf)"),
    ("name", "nope", "one of 'sine', 'radial', got 'nope'"),
    ("setting", [0, "a"], "an integer in [1, inf) at position 0"),
    ("setting", [3, "z"], "one of 'a', 'b' at position 1"),
    ("rtol", 1.0, "a number in (0, 1), got 1.0"),
]


@pytest.mark.parametrize("cls", [Base, Child])
@pytest.mark.parametrize("name, value", GOOD)
def test_values_inside_their_domain_pass(cls, name, value):
    assert check_params(cls, {name: value})[name] == value


@pytest.mark.parametrize("cls", [Base, Child])
@pytest.mark.parametrize("name, value, message", BAD, ids=[f"{n}={v!r}"[:30] for n, v, _ in BAD])
def test_values_outside_their_domain_are_one_line_naming_field_domain_and_value(cls, name, value, message):
    with pytest.raises(ValueError) as info:
        check_params(cls, {name: value})
    text = str(info.value)
    assert message in text and text.startswith(f"--set {name}:") and "\n" not in text


def test_intervals_parse_their_ends():
    assert 0 not in Interval.parse("(0, 1]") and 1 in Interval.parse("(0, 1]")
    assert Interval.parse("[0, inf]").allows_inf and not Interval.parse("[0, inf)").allows_inf
    for bad in ("0, 1", "[1, 0]", "(a, 1)"):
        with pytest.raises(ValueError, match="domain: expected an interval"):
            In(bad)


def test_a_domains_key_that_names_no_field_is_refused():
    @dataclasses.dataclass(frozen=True)
    class Typo:
        n: int = 1
        DOMAINS = {"m": In("[1, inf)")}

    with pytest.raises(ValueError, match="DOMAINS of .*Typo: expected a field name"):
        domain_of(Typo)


def test_costs_cap_work_of_several_fields_together():
    check_costs(Base, {"n": 100, "t1": 1.0, "dt": 0.01})  # 1e6 scores
    with pytest.raises(
        ValueError, match=r"--set dt, n, t1: expected n \* n \* t1 / dt <= 1000000000 \(scores"
    ):
        check_costs(Child, {"n": 4000, "t1": 100.0, "dt": 0.01})
    check_costs(Base, {"n": 100})  # a missing name: nothing to say
    with pytest.raises(ValueError, match="cost: expected an arithmetic expression"):
        Cost("__import__('os').system('x')", 1.0)
