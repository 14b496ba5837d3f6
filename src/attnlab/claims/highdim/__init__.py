"""Claims of paper C (docs/highdim.md C): single-head tied attention in high dimensions, one claim per
file."""

from attnlab.claims.highdim import (
    emergence,
    error_coefficients,
    error_decomposition,
    factorised_beats_frobenius,
    interpolation_threshold,
    large_sample,
    nuclear_norm,
    outliers_generalisation,
    perfect_recovery,
    scaling_law,
    seq2seq,
    spectrum,
    temperature,
    theory_vs_adam,
    tokens,
    training_loss,
    width,
)

CLAIMS = [
    theory_vs_adam.CLAIM,
    factorised_beats_frobenius.CLAIM,
    spectrum.CLAIM,
    interpolation_threshold.CLAIM,
    perfect_recovery.CLAIM,
    error_decomposition.CLAIM,
    error_coefficients.CLAIM,
    emergence.CLAIM,
    scaling_law.CLAIM,
    large_sample.VARIANCE,
    large_sample.BIAS,
    seq2seq.CLAIM,
    tokens.CLAIM,
    temperature.CLAIM,
    width.CLAIM,
    nuclear_norm.CLAIM,
    outliers_generalisation.CLAIM,
    training_loss.CLAIM,
]

__all__ = ["CLAIMS"]
