"""Reading and cleaning parallel text: normalization, filters with per-reason counts, input errors.

Every source of the ``download`` stage (DDTP, WMT14, a user's folder) goes through this module, so
that all corpora obey the same contract:

* text is Unicode NFKC-normalized and its whitespace collapsed to single spaces. This is what
  makes ``detokenize(tokenize(s)) == s`` exact with SentencePiece's ``identity`` normalization
  rule: the tokenizer never has to change the text, because the corpus is already in the form
  SentencePiece would produce;
* pairs are removed for a reason, and each reason is counted (``empty``, ``too_long``,
  ``length_ratio``, ``duplicate``), in the spirit of Moses' ``clean-corpus-n.perl``;
* malformed input fails with a :class:`DataError` that names the file (and line, where there is
  one): the two sides of a corpus with different line counts, bytes that are not UTF-8, a split
  with no example left.
"""

from __future__ import annotations

import dataclasses
import logging
import unicodedata
from collections.abc import Iterable, Iterator
from pathlib import Path

from pipelines.config import SettingError
from pipelines.textfiles import DataError, count_lines, read_lines

logger = logging.getLogger(__name__)

#: Removal reasons, in the order the filters are applied; a pair is counted under the first one.
REASONS = ("empty", "too_long", "length_ratio", "duplicate")


@dataclasses.dataclass
class CleaningConfig:
    """Settings of the cleaning step (one pass over each split, counts kept per reason).

    Words are whitespace-separated, as in Moses' ``clean-corpus-n.perl``. Empty pairs are dropped
    from every split, since they cannot be translated; the other filters apply to ``filter_splits``
    only, so that a test set such as newstest2014 stays complete and its BLEU comparable.
    """

    #: NFKC-normalise the text and collapse whitespace.
    normalize: bool = True
    #: Drop a pair with more than this many words on either side.
    max_words: int = 200
    #: Drop a pair whose longer side has more than this many times the words of the shorter.
    max_length_ratio: float = 3.0
    #: Drop repeated pairs.
    deduplicate: bool = True
    #: The splits the length, ratio and duplicate filters apply to.
    filter_splits: tuple[str, ...] = ("train",)

    def __post_init__(self) -> None:
        if self.max_words < 1:
            raise SettingError(self, "max_words", "must be >= 1")
        if self.max_length_ratio < 1.0:
            raise SettingError(self, "max_length_ratio", "must be >= 1")
        self.filter_splits = tuple(self.filter_splits)


def normalize_text(text: str) -> str:
    """NFKC normalization followed by whitespace collapse (``str.split`` semantics).

    ``str.split()`` without arguments splits on every Unicode whitespace, including the line
    and paragraph separators (U+2028, U+2029, U+0085) that would otherwise break the
    one-sentence-per-line layout for readers that use ``str.splitlines``.
    """
    return " ".join(unicodedata.normalize("NFKC", text).split())


def read_parallel(source_path: str | Path, target_path: str | Path) -> Iterator[tuple[str, str]]:
    """Yields aligned ``(source, target)`` lines of two files, one sentence per line.

    The line counts are compared before anything is yielded, so a misaligned corpus fails
    before any work is done, with an error naming both files and both counts.
    """
    source_path, target_path = Path(source_path), Path(target_path)
    n_source, n_target = count_lines(source_path), count_lines(target_path)
    if n_source != n_target:
        raise DataError(
            f"mismatched line counts: {source_path} has {n_source} lines but {target_path} has "
            f"{n_target} lines; the two sides of a parallel corpus must align line by line"
        )
    yield from zip(read_lines(source_path), read_lines(target_path), strict=True)


def clean_pairs(
    pairs: Iterable[tuple[str, str]],
    config: CleaningConfig,
    *,
    apply_filters: bool = True,
) -> tuple[list[tuple[str, str]], dict[str, int]]:
    """Normalizes and filters sentence pairs; returns the kept pairs and counts per reason.

    The counts dict has ``input``, one entry per reason in :data:`REASONS` and ``kept``. With
    ``apply_filters=False`` only normalization and the ``empty`` filter run (see
    :class:`CleaningConfig` for why test sets are not filtered).
    """
    counts = {"input": 0, **{reason: 0 for reason in REASONS}, "kept": 0}
    kept: list[tuple[str, str]] = []
    seen: set[tuple[str, str]] = set()
    for source, target in pairs:
        counts["input"] += 1
        if config.normalize:
            source, target = normalize_text(source), normalize_text(target)
        if not source.strip() or not target.strip():
            counts["empty"] += 1
            continue
        if apply_filters:
            n_source, n_target = len(source.split()), len(target.split())
            if max(n_source, n_target) > config.max_words:
                counts["too_long"] += 1
                continue
            if max(n_source, n_target) / min(n_source, n_target) > config.max_length_ratio:
                counts["length_ratio"] += 1
                continue
            if config.deduplicate:
                if (source, target) in seen:
                    counts["duplicate"] += 1
                    continue
                seen.add((source, target))
        kept.append((source, target))
    counts["kept"] = len(kept)
    return kept, counts


def require_nonempty(split: str, pairs: list, where: str) -> None:
    """Raises :class:`DataError` naming ``split`` (and ``where`` it came from) if it is empty."""
    if not pairs:
        raise DataError(f"split '{split}' is empty: no sentence pair left in {where}")


def log_counts(split: str, counts: dict[str, int]) -> None:
    """Logs one line of cleaning counts for ``split``."""
    removed = ", ".join(f"{reason}={counts[reason]}" for reason in REASONS)
    logger.info("%s: %d pairs in, %d kept; removed %s", split, counts["input"], counts["kept"],
                removed)
