"""Claims about real models: one claim per file."""

from attnlab.claims.models import minilm_diversity, principal_angles, training_diversity

CLAIMS = [minilm_diversity.CLAIM, training_diversity.CLAIM, principal_angles.CLAIM]

__all__ = ["CLAIMS"]
