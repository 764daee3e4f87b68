"""The text a teacher translates: the bundled English pool, or a folder of your own untranslated text.

``source: ddtp`` reads the shipped pool (:mod:`pipelines.tasks.translation.ddtp_monolingual`: Debian
descriptions that are the source of no En-De pair, every package and sentence of the evaluation splits
excluded when it was built). ``source: folder`` reads every file of ``folder`` (plain, ``.xz``, ``.bz2``
or ``.gz``; one sentence or paragraph a line) through the same filters the bundled pool went through:
normalised as the corpus builder normalises, empty and over-long lines and repeats dropped, and, given
a parallel corpus, any line that holds a sentence of its evaluation splits left out (a folder's lines have
no packages to exclude by; its training sources stay, for sequence-level distillation). Every file is
checked to be UTF-8 text before any line is used: a file that is not gets one line naming it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from pipelines.config import SettingError
from pipelines.corpus import Corpus
from pipelines.tasks.translation.cleaning import CleaningConfig, normalize_text
from pipelines.tasks.translation.ddtp_monolingual import POOL_DIR, evaluation_exclusions, holds_a_sentence, read_pool
from pipelines.textfiles import DataError, open_binary, read_lines

POOL_SOURCES = ("ddtp", "folder")
#: Bytes read from the start of a file to tell text from binary (a NUL byte is never in text).
_SNIFF = 1 << 16


@dataclasses.dataclass
class PoolConfig:
    """Where the untranslated text comes from (the ``synthesize`` stage's ``pool`` section)."""

    #: ``ddtp``: the bundled English pool; ``folder``: every file of ``folder``, a sentence or paragraph a line.
    source: str = "ddtp"
    #: With ``source: folder``: the directory of text files.
    folder: str | None = None
    #: Keep the first N lines after filtering (null: all), e.g. to synthesize a part first.
    max_lines: int | None = None

    def __post_init__(self) -> None:
        if self.source not in POOL_SOURCES:
            raise SettingError(self, "source", f"must be one of {POOL_SOURCES}")
        if self.source == "folder" and not self.folder:
            raise SettingError(self, "folder", "source 'folder' needs folder: the directory of untranslated text")
        if self.max_lines is not None and (isinstance(self.max_lines, bool) or self.max_lines < 1):
            raise SettingError(self, "max_lines", "must be a positive integer or null")


def pool_files(config: PoolConfig) -> list[Path]:
    """The pool's files, each checked to be UTF-8 text (a ``DataError`` naming the first that is not)."""
    if config.source == "ddtp":
        return [POOL_DIR / "pool.en.xz"]
    folder = Path(config.folder).expanduser()
    if not folder.is_dir():
        raise DataError(f"{folder}: pool.folder is not a directory")
    files = sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith("."))
    if not files:
        raise DataError(f"{folder}: pool.folder holds no files")
    for path in files:
        check_text_file(path)
    return files


def check_text_file(path: Path) -> None:
    """Raises a one-line ``DataError`` naming ``path`` unless it reads as UTF-8 text."""
    try:
        with open_binary(path) as handle:
            head = handle.read(_SNIFF)
    except (OSError, EOFError, ValueError) as err:  # a corrupt .xz / .gz / .bz2
        raise DataError(f"{path}: not a text file ({err})") from None
    nul = head.find(bytes(1))
    if nul >= 0:
        raise DataError(f"{path}: not a text file (a NUL byte at byte {nul}); the pool is text, "
                        "one sentence or paragraph a line")
    for _ in read_lines(path):  # names the line of the first invalid UTF-8
        pass


def load_pool(config: PoolConfig, corpus: Corpus | None = None) -> list[str]:
    """The pool's lines, filtered (see the module's docstring), in file order."""
    files = pool_files(config)
    if config.source == "ddtp":
        lines = read_pool(POOL_DIR)
    else:
        lines = _filtered(files, corpus)
    return lines[: config.max_lines] if config.max_lines else lines


def _filtered(files: list[Path], corpus: Corpus | None) -> list[str]:
    # Training sources stay: their translations are sequence-level distillation's pairs.
    held_sentences = evaluation_exclusions(corpus)[2] if corpus is not None else frozenset()
    max_words = CleaningConfig().max_words
    seen: set[str] = set()
    kept = []
    for path in files:
        for line in read_lines(path):
            text = normalize_text(line)
            if text and text not in seen and len(text.split()) <= max_words:
                seen.add(text)
                kept.append(text)
    if held_sentences:
        kept = [text for text, held in zip(kept, holds_a_sentence(kept, held_sentences)) if not held]
    return kept
