"""The ``folder`` source: a user's parallel text files, held-out splits carved from train if missing."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pipelines.corpus import EXTRA_SPLITS, SPLITS, sha256_file
from pipelines.tasks.translation.cleaning import read_parallel
from pipelines.tasks.translation.ddtp import split_of
from pipelines.tasks.translation.sources.config import RawSplits, SourceConfig
from pipelines.textfiles import DataError

logger = logging.getLogger(__name__)

#: The file names of each split. ``test_unseen`` (optional, never carved from train) is a second test split,
#: as the bundled corpora have: a prepared corpus' folder (``pipelines.corpus``) reads back with all its splits.
SPLIT_ALIASES = {"train": ("train",), "validation": ("validation", "valid", "dev"), "test": ("test",),
                 "test_unseen": ("test_unseen",)}


def find_folder_files(folder: str | Path, source_lang: str, target_lang: str,
                      name: str | None = None) -> dict[str, tuple[Path, Path]]:
    """``{split: (source file, target file)}`` found in ``folder``.

    Layouts: ``<name>.<split>.<lang>``, ``<split>.<lang>`` or tfds.TranslateFolder's
    ``<lang>.<split>.txt``; ``name`` chooses among several corpora in one folder.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise DataError(f"{folder}: not a directory")
    alias_to_split = {alias: split for split, aliases in SPLIT_ALIASES.items() for alias in aliases}
    found: dict[tuple[str, str], dict[str, Path]] = {}  # (name, split) -> {lang: path}
    for path in sorted(folder.iterdir()):
        parts = path.name.split(".")
        if not path.is_file() or len(parts) < 2:
            continue
        if parts[-1] == "txt" and len(parts) == 3 and parts[1] in alias_to_split:
            prefix, split, lang = "", alias_to_split[parts[1]], parts[0]  # tfds.TranslateFolder
        elif parts[-2] in alias_to_split:
            prefix, split, lang = ".".join(parts[:-2]), alias_to_split[parts[-2]], parts[-1]
        else:
            continue
        if lang in (source_lang, target_lang):
            found.setdefault((prefix, split), {})[lang] = path
    prefixes = sorted({prefix for prefix, _ in found})
    if name is not None:
        prefixes = [p for p in prefixes if p == name]
    if not prefixes:
        raise DataError(f"{folder}: no parallel files for {source_lang}-{target_lang} "
                        f"{'named ' + repr(name) + ' ' if name else ''}(expected e.g. "
                        f"<name>.train.{source_lang} and <name>.train.{target_lang})")
    if len(prefixes) > 1:
        raise DataError(f"{folder}: several corpora {prefixes}; choose one with folder_name")
    prefix = prefixes[0]
    files: dict[str, tuple[Path, Path]] = {}
    for split in (*SPLITS, *EXTRA_SPLITS):
        sides = found.get((prefix, split))
        if not sides:
            continue
        for lang in (source_lang, target_lang):
            if lang not in sides:
                other = next(iter(sides.values()))
                raise DataError(f"{other} has no {lang} counterpart in {folder}")
        files[split] = (sides[source_lang], sides[target_lang])
    if "train" not in files:
        raise DataError(f"{folder}: no train split for {source_lang}-{target_lang}")
    return files


def _files(config: SourceConfig) -> dict[str, tuple[Path, Path]]:
    return find_folder_files(config.folder, config.source_lang, config.target_lang, config.folder_name)


class HeldOutSplit:
    """The pairs of one split carved out of a folder's train files by a hash of the source
    sentence (:func:`~pipelines.tasks.translation.ddtp.split_of`, as for DDTP, so that no source
    sentence is in two splits): the files are read again each time it is iterated, so no split is
    held in memory."""

    def __init__(self, paths: tuple[Path, Path], split: str, missing: list[str], fraction: float):
        self.paths, self.split, self.missing, self.fraction = paths, split, missing, fraction

    def __iter__(self) -> Iterator[tuple[str, str]]:
        for pair in read_parallel(*self.paths):
            split = split_of(pair[0], self.fraction, self.fraction)
            if (split if split in self.missing else "train") == self.split:
                yield pair


def raw_splits(config: SourceConfig, workdir: Path) -> RawSplits:
    files = _files(config)
    where = {split: f"{src} / {tgt}" for split, (src, tgt) in files.items()}
    pairs: dict[str, Iterable] = {split: read_parallel(*paths) for split, paths in files.items()}
    missing = [split for split in SPLITS if split not in files]
    if missing:
        logger.warning("%s: no %s split; taking %.0f%% of train for each, by source hash",
                       config.folder, " or ".join(missing), 100 * config.holdout_fraction)
        for split in ("train", *missing):
            pairs[split] = HeldOutSplit(files["train"], split, missing, config.holdout_fraction)
        for split in missing:
            where[split] = f"{where['train']} (held out by source hash)"
    return RawSplits(pairs, where, {"origin": f"folder {Path(config.folder).resolve()}"})


def input_fingerprint(config: SourceConfig) -> dict[str, Any]:
    """Checksums of the folder's files: an edited file makes a rerun prepare the corpus again."""
    return {p.name: sha256_file(p) for paths in _files(config).values() for p in paths}
