"""Shared or separate vocabulary: one type for what stands for it (model files, tokenizers, sizes).

Section 5.1 shares one BPE vocabulary between source and target (En-De, and the embeddings tied
to it, section 3.4); the parser of section 6.3 needs one vocabulary for the words and another for
the tree symbols. Every stage that handles "the vocabulary" handles one of the two, so it says
which with a :class:`Vocabulary` of whatever it holds: ``Vocabulary[Path]`` (the SentencePiece
models), ``Vocabulary[SubwordTokenizer]``, ``Vocabulary[int]`` (the sizes the model is built with).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from pipelines.results import StageResult

T = TypeVar("T")
U = TypeVar("U")


@dataclass(frozen=True)
class Vocabulary(StageResult, Generic[T]):
    """``Vocabulary(x)``: one vocabulary for both sides; ``Vocabulary(source, target)``: one each.

    ``source`` and ``target`` are what each side uses (the same object when shared); unpacking
    gives them in that order. ``distinct()`` lists each vocabulary once (the files to write or log).
    ``Vocabulary[str]`` of model files is the vocabulary stage's result.
    """

    source: T
    separate_target: T | None = None

    @property
    def shared(self) -> bool:
        return self.separate_target is None

    @property
    def target(self) -> T:
        return self.source if self.separate_target is None else self.separate_target

    def __iter__(self) -> Iterator[T]:
        return iter((self.source, self.target))

    def distinct(self) -> tuple[T, ...]:
        """``(shared,)`` or ``(source, target)``."""
        return (self.source,) if self.shared else (self.source, self.target)

    def map(self, function: Callable[[T], U]) -> Vocabulary[U]:
        """``function`` applied to each distinct vocabulary; a shared one stays shared (one call)."""
        return Vocabulary(function(self.source), None if self.shared else function(self.target))

    @classmethod
    def of(cls, items: Sequence[T]) -> Vocabulary[T]:
        """From a list of one (shared) or two (source, target) items, as configs and CLIs give them."""
        if isinstance(items, (str, bytes)) or len(items) not in (1, 2):
            raise ValueError(f"a vocabulary is one shared model or [source, target] models, got {items!r}")
        return cls(*items)


def as_vocabulary(value: T | Vocabulary[T]) -> Vocabulary[T]:
    """``value`` itself if it is a :class:`Vocabulary`, else the shared vocabulary of it.

    A tuple or list is refused rather than taken as one shared thing: separate vocabularies are
    said with ``Vocabulary(source, target)``.
    """
    if isinstance(value, Vocabulary):
        return value
    if isinstance(value, (tuple, list)):
        raise TypeError(f"got a {type(value).__name__}: say separate vocabularies with "
                        "Vocabulary(source, target), a shared one with a single value")
    return Vocabulary(value)
