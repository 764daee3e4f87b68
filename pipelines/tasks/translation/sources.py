"""The translation task's data stage: fetch or read a parallel corpus, clean it, write the prepared layout.

Sources (``SourceConfig.source``), all producing the layout of :mod:`pipelines.corpus`:

* ``ddtp`` (default, no network): the En-De / En-Fr corpora bundled in ``pipelines/tasks/translation/corpora/ddtp``
  (built from Debian's description translations by :mod:`pipelines.tasks.translation.ddtp`). With
  ``translations_dir`` (local ``Translation-<lang>`` files) or ``mirror`` + ``suite`` (a Debian
  mirror) the corpus is rebuilt from the raw files instead.
* ``wmt14``: the paper's WMT 2014 data (Section 5.1) through tensorflow-datasets
  (``wmt14_translate/de-en``, ``fr-en``); the download servers are probed with a short timeout
  first so that an offline machine fails at once with a clear message.
* ``folder``: a user's parallel text files, named ``<name>.<split>.<lang>`` (e.g.
  ``news.train.en``), ``<split>.<lang>`` or, as ``tfds.TranslateFolder`` expects,
  ``<lang>.<split>.txt``. Splits ``train``, ``validation`` (or ``valid``/``dev``) and ``test``;
  a missing validation or test split is carved out of train by a hash of the source sentence.

Every split is cleaned (:mod:`pipelines.tasks.translation.cleaning`) with counts per reason stored in the manifest.
A rerun with the same settings whose output verifies against its manifest does no work.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
import tempfile
from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path
from typing import Any

from tqdm import tqdm

from pipelines.config import ConfigError, load_config
from pipelines.corpus import SPLITS, Corpus, require_network, sha256_file, write_corpus
from pipelines.tasks.translation.cleaning import (
    CleaningConfig,
    clean_pairs,
    log_counts,
    read_parallel,
    require_nonempty,
)
from pipelines.textfiles import DataError

logger = logging.getLogger(__name__)

SOURCES = ("ddtp", "wmt14", "folder")
#: Languages paired with English in tfds' ``wmt14_translate`` configs.
WMT14_LANGUAGES = ("cs", "de", "fr", "hi", "ru")
SPLIT_ALIASES = {"train": ("train",), "validation": ("validation", "valid", "dev"),
                 "test": ("test",)}


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
            raise ValueError(f"source must be one of {SOURCES}, got {self.source!r}")
        parts = self.language_pair.split("-")
        if len(parts) != 2 or not all(parts) or parts[0] == parts[1]:
            raise ValueError(f"language_pair must look like 'en-de', got {self.language_pair!r}")
        if self.source == "folder" and not self.folder:
            raise ValueError("source 'folder' needs folder: the directory of parallel files")
        if self.max_examples is not None and self.max_examples < 1:
            raise ValueError(f"max_examples must be >= 1, got {self.max_examples}")
        if self.translations_dir and self.mirror:
            raise ValueError("give translations_dir or mirror, not both")

    @property
    def source_lang(self) -> str:
        return self.language_pair.split("-")[0]

    @property
    def target_lang(self) -> str:
        return self.language_pair.split("-")[1]

    def resolved_output_dir(self) -> Path:
        return Path(self.output_dir or f"data/{self.source}-{self.language_pair}")


@dataclasses.dataclass
class _RawSplits:
    """What a source provides: pairs per split, a description of where each came from."""

    pairs: dict[str, Iterable[tuple[str, str]]]
    where: dict[str, str]
    provenance: dict[str, Any]


# --- ddtp -------------------------------------------------------------------------------------


def _orient(corpus: Corpus, config: SourceConfig) -> bool:
    """Whether ``corpus`` must be read reversed to give ``config.language_pair``."""
    if (corpus.source_lang, corpus.target_lang) == (config.source_lang, config.target_lang):
        return False
    if (corpus.target_lang, corpus.source_lang) == (config.source_lang, config.target_lang):
        return True
    raise DataError(f"{corpus.directory} holds {corpus.language_pair}, not {config.language_pair}")


def _corpus_splits(corpus: Corpus, config: SourceConfig) -> dict[str, Iterable]:
    reverse = _orient(corpus, config)

    def pairs(split: str) -> Iterator[tuple[str, str]]:
        for a, b in corpus.pairs(split):
            yield (b, a) if reverse else (a, b)

    return {split: pairs(split) for split in SPLITS}


def _ddtp_splits(config: SourceConfig, workdir: Path) -> _RawSplits:
    from pipelines.tasks.translation import ddtp

    english_pair = _english_pair(config)
    other = english_pair.split("-")[1]
    if config.translations_dir or config.mirror:
        if config.mirror:
            translations = ddtp.fetch_translation_files(
                config.mirror, config.suite, ["en", other], workdir / "raw",
                timeout=config.network_timeout)
        else:
            translations = {lang: ddtp.find_translation_file(config.translations_dir, lang)
                            for lang in ("en", other)}
        corpus = ddtp.build(translations, workdir / "build", [english_pair], suite=config.suite,
                            compress=False)[english_pair]
        origin = f"rebuilt from {config.mirror or config.translations_dir} ({config.suite})"
    else:
        corpus = ddtp.shipped_corpus(english_pair)
        origin = f"bundled {ddtp.SHIPPED_DIR.name}/{english_pair}"
    where = {split: f"{corpus.path(split, 'en')} / {corpus.path(split, other)}"
             for split in SPLITS}
    provenance = {"origin": origin, "build": corpus.manifest.get("provenance", {}),
                  "build_cleaning": corpus.manifest.get("cleaning", {})}
    return _RawSplits(_corpus_splits(corpus, config), where, provenance)


# --- wmt14 ------------------------------------------------------------------------------------


def wmt14_builder(config: SourceConfig):
    """The tfds builder of ``wmt14_translate/<xx>-en`` for ``config.language_pair``."""
    import tensorflow_datasets as tfds

    langs = {config.source_lang, config.target_lang}
    other = (langs - {"en"}).pop() if "en" in langs else None
    if other not in WMT14_LANGUAGES:
        raise DataError(f"WMT14 in tensorflow-datasets pairs English with one of "
                        f"{WMT14_LANGUAGES}; got {config.language_pair}")
    return tfds.builder(f"wmt14_translate/{other}-en", data_dir=config.tfds_data_dir)


def wmt14_urls(builder) -> list[str]:
    """The URLs ``builder.download_and_prepare()`` fetches (from tfds' WMT sub-dataset table)."""
    from tensorflow_datasets.translate import wmt

    source = builder.builder_config.language_pair[0]
    urls: list[str] = []
    for names in builder.subsets.values():
        for name in names:
            for url in wmt.DATASET_MAP[name].get_url(source):
                if url not in urls:
                    urls.append(url)
    return urls


def _wmt14_splits(config: SourceConfig) -> _RawSplits:
    import tensorflow_datasets as tfds

    builder = wmt14_builder(config)
    if not builder.is_prepared():
        urls = wmt14_urls(builder)
        require_network(urls, timeout=config.network_timeout, what=f"download {builder.name}")
        logger.info("downloading and preparing %s into %s (several GB, hours)", builder.name,
                    builder.data_dir)
        builder.download_and_prepare()
    tfds_splits = {"train": "train", "validation": "validation", "test": "test"}

    def pairs(split: str) -> Iterator[tuple[str, str]]:
        dataset = builder.as_dataset(split=tfds_splits[split], shuffle_files=False)
        for example in tfds.as_numpy(dataset):
            yield (example[config.source_lang].decode("utf-8"),
                   example[config.target_lang].decode("utf-8"))

    name = f"{builder.name}/{builder.builder_config.name}"
    where = {split: f"tfds {name} split '{split}'" for split in SPLITS}
    provenance = {"origin": f"tensorflow-datasets {name} {builder.version}",
                  "data_dir": str(builder.data_dir)}
    return _RawSplits({s: pairs(s) for s in SPLITS}, where, provenance)


# --- folder -----------------------------------------------------------------------------------


def find_folder_files(folder: str | Path, source_lang: str, target_lang: str,
                      name: str | None = None) -> dict[str, tuple[Path, Path]]:
    """``{split: (source file, target file)}`` found in ``folder`` (layouts: module docstring)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise DataError(f"{folder}: not a directory")
    alias_to_split = {alias: split for split, aliases in SPLIT_ALIASES.items()
                      for alias in aliases}
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
    for split in SPLITS:
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


def _folder_splits(config: SourceConfig) -> _RawSplits:
    from pipelines.tasks.translation.ddtp import split_of

    files = find_folder_files(config.folder, config.source_lang, config.target_lang,
                              config.folder_name)
    where = {split: f"{src} / {tgt}" for split, (src, tgt) in files.items()}
    pairs: dict[str, Iterable] = {split: read_parallel(*paths) for split, paths in files.items()}
    missing = [split for split in SPLITS if split not in files]
    if missing:
        # Held-out splits taken from train by a hash of the source sentence, as for DDTP, so
        # that no source sentence is in two splits.
        logger.warning("%s: no %s split; taking %.0f%% of train for each, by source hash",
                       config.folder, " or ".join(missing), 100 * config.holdout_fraction)
        train = list(pairs["train"])
        fractions = {"validation": config.holdout_fraction, "test": config.holdout_fraction}
        assigned: dict[str, list] = {split: [] for split in SPLITS}
        for pair in train:
            split = split_of(pair[0], fractions["validation"], fractions["test"])
            assigned[split if split in missing else "train"].append(pair)
        pairs["train"] = assigned["train"]
        for split in missing:
            pairs[split] = assigned[split]
            where[split] = f"{where['train']} (held out by source hash)"
    return _RawSplits(pairs, where, {"origin": f"folder {Path(config.folder).resolve()}"})


# --- the stage --------------------------------------------------------------------------------


def _request(config: SourceConfig) -> dict[str, Any]:
    """The settings that determine the output (everything but where it goes)."""
    request = dataclasses.asdict(config)
    request.pop("output_dir")
    request["cleaning"]["filter_splits"] = list(config.cleaning.filter_splits)
    return request


def _english_pair(config: SourceConfig) -> str:
    """The DDTP pair (``en-xx``) behind ``config.language_pair`` (either direction)."""
    langs = (config.source_lang, config.target_lang)
    if "en" not in langs:
        raise DataError(f"DDTP pairs English with another language; got {config.language_pair}")
    return "-".join(sorted(langs, key=lambda lang: lang != "en"))


def _input_fingerprint(config: SourceConfig) -> dict[str, Any] | None:
    """Checksums of the inputs where they are cheap to get (None: the settings suffice).

    A rerun redoes the stage when they change: a new shipped corpus, edited folder files.
    """
    if config.source == "ddtp":
        from pipelines.tasks.translation import ddtp

        english_pair = _english_pair(config)
        if config.translations_dir:
            return {lang: sha256_file(ddtp.find_translation_file(config.translations_dir, lang))
                    for lang in english_pair.split("-")}
        if config.mirror:
            return None
        return {"shipped": ddtp.shipped_corpus(english_pair).fingerprint()}
    if config.source == "folder":
        files = find_folder_files(config.folder, config.source_lang, config.target_lang,
                                  config.folder_name)
        return {p.name: sha256_file(p) for paths in files.values() for p in paths}
    return None


def _up_to_date(output_dir: Path, request: dict[str, Any], fingerprint: dict | None) -> bool:
    if not (output_dir / "manifest.json").is_file():
        return False
    try:
        corpus = Corpus.load(output_dir)
    except DataError as err:
        logger.warning("existing corpus in %s is not trusted (%s); preparing it again",
                       output_dir, err)
        return False
    stage = corpus.manifest.get("provenance", {}).get("download", {})
    if stage.get("request") != request:
        logger.info("%s was prepared with other settings; preparing it again", output_dir)
        return False
    if fingerprint is not None and stage.get("inputs") != fingerprint:
        logger.info("the inputs of %s changed; preparing it again", output_dir)
        return False
    return True


def prepare_corpus(config: SourceConfig) -> Path:
    """Runs the data stage; returns the directory of the prepared corpus.

    Work is skipped when ``output_dir`` already holds a corpus that verifies against its
    manifest and was made with the same settings (and, for ``ddtp``/``folder``, the same input
    files). Raises :class:`DataError` for malformed input and ``ConnectionError`` when a
    network source is unreachable.
    """
    output_dir = config.resolved_output_dir()
    request = _request(config)
    fingerprint = _input_fingerprint(config)
    if _up_to_date(output_dir, request, fingerprint):
        logger.info("%s is prepared and verified; nothing to do", output_dir)
        return output_dir
    with tempfile.TemporaryDirectory(prefix="download-") as tmp:
        if config.source == "ddtp":
            raw = _ddtp_splits(config, Path(tmp))
        elif config.source == "wmt14":
            raw = _wmt14_splits(config)
        else:
            raw = _folder_splits(config)
        splits: dict[str, list[tuple[str, str]]] = {}
        counts: dict[str, dict[str, int]] = {}
        for split in SPLITS:
            pairs = raw.pairs[split]
            if config.max_examples is not None:
                pairs = islice(pairs, config.max_examples)
            pairs = tqdm(pairs, desc=f"{config.source} {split}", unit=" pairs", mininterval=2.0,
                         leave=False)
            kept, counts[split] = clean_pairs(
                pairs, config.cleaning, apply_filters=split in config.cleaning.filter_splits)
            log_counts(f"{config.source} {config.language_pair} {split}", counts[split])
            require_nonempty(split, kept, raw.where[split])
            splits[split] = kept
        provenance = dict(raw.provenance)
        provenance["download"] = {"request": request, "inputs": fingerprint}
        write_corpus(output_dir, config.source_lang, config.target_lang, splits,
                     source=config.source, cleaning=counts, provenance=provenance)
    return output_dir


def main(argv: list[str] | None = None) -> int:
    """CLI: ``python -m pipelines.tasks.translation.sources CONFIG.yaml [--section data]``."""
    parser = argparse.ArgumentParser(prog="python -m pipelines.tasks.translation.sources",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("config", type=Path, help="YAML file with SourceConfig settings")
    parser.add_argument("--section", default=None, help="top-level section of the YAML file")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    try:
        config = load_config(SourceConfig, args.config, section=args.section)
        output_dir = prepare_corpus(config)
    except (ConfigError, DataError, ConnectionError) as err:
        logger.error("%s", err)
        return 1
    logger.info("prepared corpus: %s", output_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
