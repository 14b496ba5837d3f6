"""flow.radial-shadow: the rule, its opposed-heads control, and real quick points."""

from attnlab.claims.flow.radial_shadow import CLAIM
from attnlab.engine.power import resolving_power
from attnlab.engine.protocol import Row
from attnlab.report.figures.flow import FIGURES


def _main(space, viol, agree=1.0, control=""):
    params = {"mode": "main", "space": space, "beta": 4.0, **({"control": control} if control else {})}
    m = {"violations": viol, "violations_head1": viol, "trials": 100, "violation_rate": viol / 100,
         "form1": 0.9, "form2": 0.5, "form3": 0.1, "form1_agrees": agree}  # fmt: skip
    return Row(f"{space}{control}", params, "ok", m)


def test_rule_and_control():
    v = CLAIM.decide([_main("flat", 0), _main("sphere", 3)])
    assert v.status == "holds" and v.branch == "flat vs sphere"
    v = CLAIM.decide([_main("flat", 1), _main("sphere", 3)])  # flat must be monotone
    assert v.status == "fails" and v.branch == "flat vs sphere"
    assert CLAIM.decide([_main("flat", 0), _main("sphere", 0)]).status == "fails"  # no shadow effect seen
    v = CLAIM.decide([_main("flat", 0), _main("sphere", 3, agree=0.9)])
    assert v.status == "fails" and v.branch == "form 1 ⇔ sign"
    # the control breaks orthogonality: flat falls (and form 1 ⇔ sign no longer applies), decided first
    rows = [_main("flat", 0), _main("sphere", 3), _main("flat", 5, control="opposed-heads")]
    rows.append(_main("sphere", 3, agree=0.0, control="opposed-heads"))
    c = resolving_power(CLAIM, rows).controls["opposed-heads"]
    assert c["as_designed"] and c["same_branch"]


def test_real_points():
    rows = []
    for p in CLAIM.points("quick", overrides={"batch": 128, "head_draws": 1, "beta": [4.0]}, controls=False):
        if p.params["mode"] == "main" or p.params["construction"] == "scalar":
            r = CLAIM.run(p)
            rows.append(Row(p.point_id, p.params, "ok", r.metrics))
    v = CLAIM.decide(rows)
    assert v.numbers["flat_violation_rate"] == 0.0 and v.numbers["form1_equals_sign_fraction"] == 1.0
    for r in rows:
        for r1, rany in r.metrics.get("rates", {}).values():
            assert 0.0 <= r1 <= rany <= 1.0
    assert FIGURES[CLAIM.id](rows)
