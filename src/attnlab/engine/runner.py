"""Sweeps: claims -> points -> backend -> store, with resume and cache as one mechanism.

Points already stored are skipped (a cache hit and a resumed run are the same thing), failed ones
included: a point that raised is a stored result with its error, and ``retry_failed`` computes
those again; ``force`` recomputes everything asked for. Each point is
written as soon as it finishes, so an interrupted run (Ctrl-C, a killed worker) keeps every
finished row and the next run computes only what is missing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attnlab import __version__
from attnlab.engine.backends import BACKENDS, WorkItem, ray_session, run_items
from attnlab.engine.costs import claim_costs
from attnlab.engine.deferred import interrupts_deferred
from attnlab.engine.power import Power, resolving_power
from attnlab.engine.protocol import Claim, Point, Verdict, variant_name
from attnlab.engine.stability import (
    Assessment,
    Stability,
    assess,
    is_seed_variant,
    seed_variant,
    stability_of,
)
from attnlab.engine.store import Store, StoredVerdict
from attnlab.engine.store_lock import StoreLocked, store_lock

__all__ = [
    "RunSummary",
    "ClaimOutcome",
    "StoreLocked",
    "run_claims",
    "decide_rows",
    "decide_run",
    "default_workers",
    "git_revision",
    "outcome_from_stored",
    "outcomes_from_stored",
    "store_lock",
]


DB_NAME = "attnlab.sqlite"


def default_workers() -> int:
    return max(1, os.cpu_count() or 1)


def git_revision() -> str | None:
    """The git revision of the source tree attnlab runs from, if it is a checkout."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"], cwd=here, capture_output=True, text=True
    ).stdout.strip()
    return out.stdout.strip() + ("-dirty" if dirty else "")


@dataclass
class RunSummary:
    """What a run did: how many points were asked for, skipped, computed and failed."""

    total: int = 0
    cached: int = 0
    computed: int = 0
    failed: int = 0
    wall_s: float = 0.0
    per_claim: dict[str, dict[str, int]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "points": self.total,
            "cached": self.cached,
            "computed": self.computed,
            "failed": self.failed,
            "wall_s": round(self.wall_s, 3),
            "per_claim": self.per_claim,
        }


ProgressFn = Callable[[str, Any], None]


def run_claims(
    claims: Sequence[Claim],
    *,
    profile: str = "quick",
    out: str | Path = "results",
    backend: str = "process",
    workers: int | None = None,
    root_seed: int = 0,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
    force: bool = False,
    retry_failed: bool = False,
    device: str = "cpu",
    threads: int | None = None,
    progress: ProgressFn | None = None,
    seeds: Sequence[int] | None = None,
) -> RunSummary:
    """Run every point of ``claims`` at ``profile`` and store the rows in ``<out>/attnlab.sqlite``.

    Parameters
    ----------
    overrides : mapping claim id -> {param: value}
        Parameter overrides per claim (``--set``).
    threads : int, optional
        Threads per point, for torch and for numpy's and scipy's BLAS and OpenMP pools (default: cores /
        workers, at least 1). Pin it to compare backends.
    progress : callable(event, payload), optional
        Called with ``("start", {"total", "todo"})`` and ``("point", StoredPoint)``.
    seeds : sequence of int, optional
        Root seeds to run every claim under (the seed stability of a verdict): each one other than
        ``root_seed`` is stored as the variant ``seed=N``; ``root_seed`` is run only if listed.
    """
    if backend not in BACKENDS:
        raise ValueError(f"--backend: expected one of {', '.join(BACKENDS)}, got {backend!r}")
    workers = workers or default_workers()
    if workers < 1:
        raise ValueError(f"--workers: expected an integer >= 1, got {workers}")
    if threads is None:
        threads = 1 if backend != "serial" else max(1, (os.cpu_count() or 1))
        if backend == "process":
            threads = max(1, (os.cpu_count() or 1) // workers)
    overrides = overrides or {}
    t0 = time.time()
    prov = {"attnlab": __version__, "git": git_revision()}
    summary = RunSummary()
    Store.check_file(Path(out) / DB_NAME)  # a damaged or foreign file is refused before any lock is taken
    # Ray is joined before the store is opened: a refused join (address, token) leaves nothing written
    session = ray_session(workers) if backend == "ray" else contextlib.nullcontext()
    with session, store_lock(out):
        store = Store(Path(out) / DB_NAME)
        try:
            items: list[WorkItem] = []
            runs: list[tuple[Claim, int, list[str], dict[str, Any], str]] = []
            seed_list = [(root_seed, None)]
            if seeds is not None:  # the profile's own seed keeps its own name; the others are variants
                seed_list = [(s, None if s == root_seed else seed_variant(s)) for s in seeds]
            for claim in claims:
                mine = claim.check_overrides(overrides.get(claim.id))
                for seed, variant in seed_list:
                    points: list[Point] = claim.points(profile, seed, mine, device)
                    ids = [p.point_id for p in points]
                    statuses = ("ok",) if retry_failed else ("ok", "failed")
                    done = set() if force else store.done_ids(ids, statuses)
                    todo = [p for p in points if p.point_id not in done]
                    summary.total += len(points)
                    summary.cached += len(points) - len(todo)
                    pc = summary.per_claim.setdefault(claim.id, {"points": 0, "cached": 0})
                    pc["points"] += len(points)
                    pc["cached"] += len(points) - len(todo)
                    run_id = store.start_run(claim.id, profile, seed, mine, ids, backend)
                    runs.append((claim, run_id, ids, mine, variant))
                    items.extend(WorkItem(claim.module, p, threads, prov) for p in todo)
            if progress:
                by_claim: dict[str, int] = {}
                left: dict[str, list[Any]] = {}  # parameters of the points left (per-point cost models)
                for it in items:
                    by_claim[it.point.claim_id] = by_claim.get(it.point.claim_id, 0) + 1
                    left.setdefault(it.point.claim_id, []).append(it.point.params)
                # per-claim points left and stored costs: the ETA prices each claim's points (engine.costs)
                progress(
                    "start",
                    {
                        "total": summary.total,
                        "todo": len(items),
                        "by_claim": by_claim,
                        "cost": claim_costs(
                            store.mean_runtimes(profile, {c.id: c.version for c in claims}), profile, left
                        )[0],
                        "workers": workers if backend != "serial" else 1,
                        # costs are CPU s: at most workers x threads CPU s per wall s, at most the cores
                        "cpu_slots": min(
                            (workers if backend != "serial" else 1) * threads, max(1, os.cpu_count() or 1)
                        ),
                    },
                )
            # closed on the way out (an interrupt while a point is being stored): the backend's teardown,
            # which stops the workers, runs then, not whenever the suspended generator is collected
            with contextlib.closing(run_items(items, backend, workers if backend != "serial" else 1)) as recs:
                for rec in recs:
                    with interrupts_deferred():  # a point is stored whole, then an interrupt stops the run
                        store.write_point(rec)
                    summary.computed += 1
                    summary.failed += rec.status == "failed"
                    if progress:
                        progress("point", rec)
            store.merge_not_testable(_not_testable(claims))
            for claim, run_id, ids, mine, variant in runs:
                store.end_run(run_id)
                if progress:
                    progress("verdict", claim.id)
                decide_run(store, claim, run_id, ids, profile, mine, variant)
        finally:
            summary.wall_s = time.time() - t0
            store.close()
    return summary


def _not_testable(claims: Sequence[Claim]) -> dict[str, dict[str, str]]:
    """Statements an area lists as not testable from the papers' text (``NOT_TESTABLE`` of its package)."""
    import importlib

    out: dict[str, dict[str, str]] = {}
    for pkg in sorted({c.module.rsplit(".", 1)[0] for c in claims}):
        try:
            mod = importlib.import_module(pkg)
        except ImportError:
            continue
        items = getattr(mod, "NOT_TESTABLE", None)
        if isinstance(items, Mapping) and items:
            out[pkg.rsplit(".", 1)[-1]] = {str(k): str(v) for k, v in items.items()}
    return out


def claim_meta(claim: Claim) -> dict[str, Any]:
    """What the report needs to know of a claim, stored with its verdict."""
    return {
        "id": claim.id,
        "kind": claim.kind,
        "paper": claim.paper,
        "statement": claim.statement,
        "description": claim.description,
        "regime": claim.regime,
        "grade": claim.grade,
        "parts": {k: {"grade": p.grade, "what": p.what} for k, p in claim.parts.items()},
        "knobs": {
            k: {"why": kb.why, "values": {pr: kb.values_for(pr) for pr in ("quick", "full")}}
            for k, kb in claim.knobs.items()
        },  # fmt: skip
        "predictions": dict(claim.predictions),
        "controls": {
            k: {"kind": c.kind, "expect": c.expect, "knob": c.knob, "why": c.why}
            for k, c in claim.controls.items()
        },
        "module": claim.module,
    }


def decide_rows(
    claim: Claim, rows: Sequence[Any], profile: str, overrides: Mapping[str, Any] | None = None
) -> tuple[Verdict, Power]:
    """The claim's verdict over its map and the power of its test setting, from a run's rows.

    A verdict function that raises gives an inconclusive verdict naming the error (not fatal).
    """
    try:
        v, test, cells = claim.decide_map(rows, profile, overrides)
        power = resolving_power(claim, rows, test) if rows else Power("n/a", False, reason="no rows")
        if v.status != test.status:  # the map decides: the test cell's power is not the claim's
            word = "map" if v.status == "depends" else "n/a"
            ctrl = power.label.split(" · ", 1)[1] if " · controls" in power.label else ""
            power = dataclasses.replace(
                power, label=word + (f" · {ctrl}" if ctrl else ""), cannot_fail=False, flips={},
                base=v.status, reason=v.regime or v.note,
            )  # fmt: skip
        power = dataclasses.replace(power, cells=[c.to_dict() for c in cells], parts=dict(test.parts))
    except Exception as e:  # noqa: BLE001 - a broken verdict is reported, not fatal
        v = Verdict("inconclusive", {"points": len(rows)}, "-", f"verdict raised {type(e).__name__}: {e}")
        power = Power("n/a", False, reason=v.note)
    return v, power


def decide_run(
    store: Store,
    claim: Claim,
    run_id: int,
    point_ids: Sequence[str],
    profile: str,
    overrides: Mapping[str, Any] | None = None,
    variant: str | None = None,
) -> StoredVerdict:
    """Decide a run from its stored rows (verdict, map, controls, power) and store the verdict.

    ``variant`` names the run (default: from its overrides; ``seed=N`` for a stability run).
    """
    rows = store.rows(point_ids, with_arrays=True)
    missing = len(point_ids) - len(rows)
    v, power = decide_rows(claim, rows, profile, overrides)
    if missing and v.status != "inconclusive":
        v = Verdict(
            "inconclusive",
            dict(v.numbers) | {"missing_points": missing},
            v.tolerance,
            f"{missing} point(s) not computed (interrupted run?); {v.note}",
        )
        power = Power("n/a", False, reason="points missing")
    sv = StoredVerdict(
        run_id=run_id,
        claim_id=claim.id,
        variant=variant if variant is not None else variant_name(overrides),
        profile=profile,
        version=claim.version,
        claim=claim_meta(claim),
        status=v.status,
        numbers=dict(v.numbers),
        tolerance=v.tolerance,
        note=v.note,
        regime=v.regime,
        power=power.to_dict(),
        points=len(rows),
        failed=sum(not r.ok for r in rows),
        missing=missing,
        runtime_s=sum(r.runtime_s for r in rows),
        created="",
        point_ids=list(point_ids),
        overrides=dict(overrides or {}),
    )
    store.write_verdict(sv)
    return sv


@dataclass(frozen=True)
class ClaimOutcome:
    """A claim's stored verdict, as the report and the table show it (no claim code needed)."""

    meta: dict[str, Any]
    profile: str
    variant: str
    version: int
    verdict: Verdict
    power: Power
    points: int
    failed: int
    missing: int
    runtime_s: float
    run_id: int = 0
    point_ids: tuple[str, ...] = ()
    overrides: dict[str, Any] = field(default_factory=dict)
    stability: Stability | None = None
    #: the status the run decided (an unstable verdict is shown as inconclusive)
    stored_status: str = ""

    @property
    def grade(self) -> str:
        return self.meta.get("grade", "") or ("identity" if self.kind == "identity" else "")

    @property
    def assessment(self) -> Assessment:
        return assess(self.grade, self.verdict.status, self.power.to_dict(), self.stability)

    @property
    def id(self) -> str:
        return self.meta["id"]

    @property
    def kind(self) -> str:
        return self.meta["kind"]

    @property
    def paper(self) -> str:
        return self.meta["paper"]

    @property
    def statement(self) -> str:
        return self.meta["statement"]

    @property
    def title(self) -> str:
        """The claim id, with the variant's overrides when it is one."""
        return self.id + (f" [{self.variant}]" if self.variant else "")

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "paper": self.paper,
            "statement": self.statement,
            "profile": self.profile,
            "variant": self.variant,
            "overrides": self.overrides,
            "version": self.version,
            "points": self.points,
            "missing": self.missing,
            "failed": self.failed,
            "runtime_s": round(self.runtime_s, 3),
            **self.verdict.to_dict(),
            "power": self.power.label,
            "cannot_fail": self.power.cannot_fail,
            "power_detail": self.power.to_dict(),
            "grade": self.grade,
            "stored_verdict": self.stored_status or self.verdict.status,
            "stability": (self.stability or Stability()).to_dict(),
            "map": self.power.cells,
            "branch": self.power.branch,
            "band": self.power.band,
            **self.assessment.to_dict(),
        }


def outcomes_from_stored(stored: Sequence[StoredVerdict]) -> tuple[list[ClaimOutcome], list[ClaimOutcome]]:
    """(the profile's own verdicts with their seed stability, the ``--set`` variants) from the store.

    Stability runs (variants ``seed=N``) are folded into the stability of the claim's own verdict; an
    unstable verdict is shown as inconclusive, with the per-seed outcomes in its regime line.
    """
    seeds = [v for v in stored if is_seed_variant(v.variant)]
    own, variants = [], []
    for sv in stored:
        if is_seed_variant(sv.variant):
            continue
        if sv.variant:
            variants.append(outcome_from_stored(sv))
            continue
        st = stability_of(sv, seeds)
        o = outcome_from_stored(sv, st)
        own.append(o)
    return own, variants


def outcome_from_stored(sv: StoredVerdict, stability: Stability | None = None) -> ClaimOutcome:
    """A :class:`ClaimOutcome` from a stored verdict (inconclusive when ``stability`` is unstable)."""
    verdict = Verdict(sv.status, sv.numbers, sv.tolerance, sv.note, sv.regime)  # type: ignore[arg-type]
    power = Power.from_dict(sv.power)
    verdict = dataclasses.replace(verdict, branch=power.branch, band=power.band, parts=power.parts)
    if stability is not None and stability.measured and not stability.stable:
        verdict = dataclasses.replace(
            verdict,
            status="inconclusive",
            regime=f"{stability.label} over root seeds ({stability.per_seed})",
        )
    return ClaimOutcome(
        meta=sv.claim,
        profile=sv.profile,
        variant=sv.variant,
        version=sv.version,
        verdict=verdict,
        power=power,
        points=sv.points,
        failed=sv.failed,
        missing=sv.missing,
        runtime_s=sv.runtime_s,
        run_id=sv.run_id,
        point_ids=tuple(sv.point_ids),
        overrides=sv.overrides,
        stability=stability,
        stored_status=sv.status,
    )
