"""Translation (paper sections 5-6.2): parallel corpora in, BLEU and chrF out."""

from .task import TranslationTask

__all__ = ["TranslationTask"]
