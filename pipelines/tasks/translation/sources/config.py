"""The data stage's settings, and what every source hands the stage: raw pairs per split."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pipelines.config import SettingError
from pipelines.tasks.translation.cleaning import CleaningConfig

SOURCES = ("ddtp", "wmt14", "folder")


@dataclasses.dataclass
class SourceConfig:
    """Settings of the translation data stage (the pipeline config's ``data`` section).

    ``language_pair`` is ``<source>-<target>`` in translation direction (``de-en`` reverses the
    bundled ``en-de``). ``output_dir`` defaults to ``data/<source>-<language_pair>``.
    ``max_examples`` keeps at most the first N pairs of each split (before cleaning), e.g. to
    try WMT14 on a subset. ``network_timeout`` bounds the connectivity probe (seconds).
    """

    source: str = "ddtp"
    language_pair: str = "en-de"
    output_dir: str | None = None
    cleaning: CleaningConfig = dataclasses.field(default_factory=CleaningConfig)
    folder: str | None = None
    folder_name: str | None = None
    translations_dir: str | None = None
    mirror: str | None = None
    suite: str = "bookworm"
    tfds_data_dir: str | None = None
    max_examples: int | None = None
    network_timeout: float = 10.0
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
