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

import bisect
import dataclasses
import hashlib
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


class SeenPairs:
    """The pairs met so far, as 64-bit digests: ``add`` says whether a pair is new.

    Holding the pairs themselves took memory with the corpus (WMT14's 4.5M pairs, about 1 GB); a
    digest takes 8 bytes, in sorted blocks of about :data:`BLOCK` digests, new digests gathered in
    a set of at most :data:`PENDING` and merged into the blocks they belong to (so a merge never
    copies more than a block at a time). Two different pairs share a BLAKE2b-64 digest with
    probability about ``n**2 / 2**65``: 6e-7 at WMT14's size, and then the second is dropped as a
    duplicate.
    """

    BLOCK = 1 << 19
    PENDING = 1 << 16

    def __init__(self) -> None:
        self.blocks: list = []  # sorted uint64 arrays, each below the next
        self.firsts: list[int] = []  # each block's first digest
        self.pending: set[int] = set()

    def __len__(self) -> int:
        return sum(len(block) for block in self.blocks) + len(self.pending)

    @staticmethod
    def digest(source: str, target: str) -> int:
        # The source's length first, so that no two (source, target) splits of a text collide.
        key = f"{len(source)}:{source}{target}".encode()
        return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little")

    def add(self, source: str, target: str) -> bool:
        """True if the pair was not met before (it is now)."""
        key = self.digest(source, target)
        if key in self.pending:
            return False
        i = bisect.bisect_right(self.firsts, key) - 1
        if i >= 0:
            block = self.blocks[i]
            j = int(block.searchsorted(block.dtype.type(key)))
            if j < len(block) and int(block[j]) == key:
                return False
        self.pending.add(key)
        if len(self.pending) >= self.PENDING:
            self._merge()
        return True

    def _merge(self) -> None:
        import numpy as np

        keys = np.sort(np.fromiter(self.pending, np.uint64, len(self.pending)))
        self.pending = set()
        if not self.blocks:
            self.blocks, self.firsts = [keys], [int(keys[0])]
            return
        owner = np.searchsorted(np.array(self.firsts, dtype=np.uint64), keys, side="right") - 1
        bounds = np.searchsorted(np.maximum(owner, 0), np.arange(len(self.blocks) + 1))
        blocks = []
        for b, block in enumerate(self.blocks):
            part = keys[bounds[b]:bounds[b + 1]]
            if len(part):
                block = np.insert(block, np.searchsorted(block, part), part)
            while len(block) > 2 * self.BLOCK:
                blocks.append(block[:self.BLOCK].copy())
                block = block[self.BLOCK:].copy()
            blocks.append(block)
        self.blocks, self.firsts = blocks, [int(block[0]) for block in blocks]


def clean_stream(
    pairs: Iterable[tuple[str, str]],
    config: CleaningConfig,
    counts: dict[str, int],
    *,
    apply_filters: bool = True,
) -> Iterator[tuple[str, str]]:
    """Normalizes and filters sentence pairs as they come, counting in ``counts`` per reason.

    ``counts`` gets ``input``, one entry per reason in :data:`REASONS` and ``kept``, complete once
    the stream is exhausted. With ``apply_filters=False`` only normalization and the ``empty``
    filter run (see :class:`CleaningConfig` for why test sets are not filtered).
    """
    counts.update({"input": 0, **{reason: 0 for reason in REASONS}, "kept": 0})
    seen = SeenPairs() if apply_filters and config.deduplicate else None
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
            if seen is not None and not seen.add(source, target):
                counts["duplicate"] += 1
                continue
        counts["kept"] += 1
        yield source, target


def clean_pairs(
    pairs: Iterable[tuple[str, str]],
    config: CleaningConfig,
    *,
    apply_filters: bool = True,
) -> tuple[list[tuple[str, str]], dict[str, int]]:
    """:func:`clean_stream` into a list: the kept pairs and the counts per reason."""
    counts: dict[str, int] = {}
    kept = list(clean_stream(pairs, config, counts, apply_filters=apply_filters))
    return kept, counts


def require_nonempty(split: str, pairs: list | int, where: str) -> None:
    """Raises :class:`DataError` naming ``split`` (and ``where`` it came from) if it is empty
    (``pairs``: its pairs, or how many were kept)."""
    if not pairs:
        raise DataError(f"split '{split}' is empty: no sentence pair left in {where}")


def log_counts(split: str, counts: dict[str, int]) -> None:
    """Logs one line of cleaning counts for ``split``."""
    removed = ", ".join(f"{reason}={counts[reason]}" for reason in REASONS)
    logger.info("%s: %d pairs in, %d kept; removed %s", split, counts["input"], counts["kept"],
                removed)
