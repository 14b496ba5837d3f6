"""``attnlab highdim se/sweep --gamma G --d D``: the power-law target of docs/highdim.md C6, its options
checked, and ``se --readout``: the fixed point's law of Ŝ read on the target's exact and on Gaussian
logits."""

from __future__ import annotations

from attnlab.cli.common import TaskProgress, UsageError

__all__ = ["law_readout", "power_law_target"]


def power_law_target(gamma: float | None, d: int | None, readout: bool, tokens: int, seed: int):
    """The power-law target of ``se --gamma G --d D`` (None without --gamma), its options checked."""
    from attnlab.core.validation import check_int, check_real

    if gamma is None:
        for name, value in (("--d", d), ("--readout", readout or None)):
            if value is not None:
                raise UsageError(name, "to come with --gamma (a power-law target)", value)
        return None
    check_real("--gamma", gamma, min=0.0, min_open=True, max=100.0)
    if d is None:
        raise UsageError("--d", "an integer of at least 2 with --gamma (the target's dimension)", "nothing")
    # the readout holds draws of d × d matrices and blocks of 8192 × 2 × d tokens in float64
    check_int("--d", d, min=2, max=4000)
    check_int("--seed", seed, min=0)
    if readout and tokens != 2:
        raise UsageError("--readout", "--tokens 2 (the Gaussian read-out is the two-token formula)", tokens)
    from attnlab.highdim import power_law_spectrum

    return power_law_spectrum(d, gamma)


def law_readout(s, fp, seed: int) -> dict:
    """``se --readout``: the fixed point's law of Ŝ read on exact and Gaussian logits, and the target's own
    error ``e0`` (the target read at β0) on exact logits and by the Gaussian formula."""
    import dataclasses

    from attnlab.core.seeding import derive_seed, generator
    from attnlab.highdim import readout_excess, target_error
    from attnlab.highdim.two_token import two_token_test_error

    with TaskProgress("reading the law's draws on exact logits", total=None, unit="draws"):
        r = readout_excess(
            s, fp.delta, fp.eps, fp.eta, draws=8, samples=8000, generator=generator(derive_seed(seed, "law"))
        )
        e0, e0_se = target_error(
            s.target, s.noise, beta0=s.beta0, samples=100_000, generator=generator(derive_seed(seed, "e0"))
        )
    # the Gaussian e0: the two-token formula at q = m = Q0 with the student read at β0 (zero at β0 = 0, where
    # labels and prediction are both uniform)
    e0_gauss = two_token_test_error(dataclasses.replace(s, beta=s.beta0), s.q0, s.q0) if s.beta0 > 0 else 0.0
    return {
        "readout": {
            "exact": r.exact,
            "exact_stderr": r.exact_se,
            "gaussian": r.gaussian,
            "gaussian_stderr": r.gaussian_se,
            "ratio": r.ratio,
            "ratio_stderr": r.ratio_se,  # NaN (null in the JSON) where an excess is zero
            "q": r.q,
            "m": r.m,
            "draws": r.draws,
            "samples": r.samples,
        },
        "e0_exact": e0,
        "e0_exact_stderr": e0_se,
        "e0_gaussian": e0_gauss,
    }
