"""The data stage's settings, and what every source hands the stage: raw pairs per split."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pipelines.config import SettingError
from pipelines.tasks.translation.cleaning import CleaningConfig

SOURCES = ("ddtp", "wmt14", "folder")
TRAIN_TARGETS = ("references", "distilled")


@dataclasses.dataclass
class SourceConfig:
    """Settings of the translation data stage (the pipeline config's ``data`` section)."""

    #: Where the pairs come from: ``ddtp`` (the bundled Debian corpora), ``wmt14`` (tensorflow-datasets) or ``folder``
    #: (your parallel files).
    source: str = "ddtp"
    #: ``<source>-<target>`` in translation direction (``de-en`` reverses the bundled ``en-de``).
    language_pair: str = "en-de"
    #: Where the prepared corpus goes; null: ``data/<source>-<language_pair>`` under run_dir.
    output_dir: str | None = None
    #: The cleaning step's filters (``data.cleaning``).
    cleaning: CleaningConfig = dataclasses.field(default_factory=CleaningConfig)
    #: With ``source: folder``: the directory of parallel files (``<name>.<split>.<lang>``, ``<split>.<lang>`` or
    #: ``<lang>.<split>.txt``).
    folder: str | None = None
    #: With ``source: folder``: which corpus (the files' ``<name>`` prefix) when the folder holds several.
    folder_name: str | None = None
    #: A DDTP rebuild: a local copy of Debian's ``Translation-*`` files to build the corpus from.
    translations_dir: str | None = None
    #: A DDTP rebuild: the Debian mirror to fetch the ``Translation-*`` files from (not with ``translations_dir``).
    mirror: str | None = None
    #: A DDTP rebuild from ``mirror``: the Debian suite whose description translations are fetched.
    suite: str = "bookworm"
    #: With ``source: wmt14``: tensorflow-datasets' data directory; null: its default.
    tfds_data_dir: str | None = None
    #: Keep at most the first N pairs of each split (before cleaning), e.g. to try WMT14 on a subset.
    max_examples: int | None = None
    #: Seconds the connectivity probe waits before a download is declared impossible.
    network_timeout: float = 10.0
    #: The training targets: ``references`` (the translators') or ``distilled`` (the bundled En-De train split as a
    #: teacher translated it, :mod:`pipelines.tasks.translation.distilled`: fewer updates learn more from them).
    #: Validation and test keep their references.
    train_targets: str = "references"
    #: With ``source: folder``: the fraction of train taken (by a hash of the source sentence) for each missing
    #: validation or test split.
    holdout_fraction: float = 0.04

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise SettingError(self, "source", f"must be one of {SOURCES}")
        parts = self.language_pair.split("-")
        if len(parts) != 2 or not all(parts) or parts[0] == parts[1]:
            raise SettingError(self, "language_pair", "must look like 'en-de'")
        if self.source == "folder" and not self.folder:
            raise SettingError(self, "folder", "source 'folder' needs folder: the directory of parallel files")
        if self.max_examples is not None and self.max_examples < 1:
            raise SettingError(self, "max_examples", "must be >= 1")
        if self.train_targets not in TRAIN_TARGETS:
            raise SettingError(self, "train_targets", f"must be one of {TRAIN_TARGETS}")
        if self.train_targets == "distilled" and (self.source, self.language_pair) != ("ddtp", "en-de"):
            raise SettingError(self, "train_targets", "'distilled' targets are the bundled En-De corpus' "
                                                      "(source: ddtp, language_pair: en-de)")
        if self.train_targets == "distilled" and (self.translations_dir or self.mirror):
            raise SettingError(self, "train_targets", "'distilled' targets are the bundled corpus', not a rebuild's")
        if self.translations_dir and self.mirror:
            raise SettingError(self, "mirror", "give translations_dir or mirror, not both")

    @property
    def source_lang(self) -> str:
        return self.language_pair.split("-")[0]

    @property
    def target_lang(self) -> str:
        return self.language_pair.split("-")[1]

    def resolved_output_dir(self) -> Path:
        return Path(self.output_dir or f"data/{self.source}-{self.language_pair}")


@dataclasses.dataclass
class RawSplits:
    """What a source provides: pairs per split, where each came from (for error messages), provenance.

    ``pairs`` has every split of :data:`~pipelines.corpus.SPLITS` and may have some of
    :data:`~pipelines.corpus.EXTRA_SPLITS` (the bundled DDTP corpora's ``test_unseen``).
    """

    pairs: dict[str, Iterable[tuple[str, str]]]
    where: dict[str, str]
    provenance: dict[str, Any]
