"""Claims about real models: one claim per file."""

from attnlab.claims.models import minilm_diversity, training_diversity

CLAIMS = [minilm_diversity.CLAIM, training_diversity.CLAIM]

__all__ = ["CLAIMS"]
