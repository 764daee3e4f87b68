"""The ``wmt14`` source: the paper's WMT 2014 data (Section 5.1) through tensorflow-datasets."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

from pipelines.corpus import SPLITS, require_network
from pipelines.tasks.translation.sources.config import RawSplits, SourceConfig
from pipelines.textfiles import DataError

logger = logging.getLogger(__name__)

#: Languages paired with English in tfds' ``wmt14_translate`` configs.
WMT14_LANGUAGES = ("cs", "de", "fr", "hi", "ru")


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


def raw_splits(config: SourceConfig, workdir: Path) -> RawSplits:
    """The tfds splits, downloaded first if need be (after probing the servers: offline fails at once)."""
    import tensorflow_datasets as tfds

    builder = wmt14_builder(config)
    if not builder.is_prepared():
        urls = wmt14_urls(builder)
        require_network(urls, timeout=config.network_timeout, what=f"download {builder.name}")
        logger.info("downloading and preparing %s into %s (several GB, hours)", builder.name, builder.data_dir)
        builder.download_and_prepare()

    def pairs(split: str) -> Iterator[tuple[str, str]]:
        dataset = builder.as_dataset(split=split, shuffle_files=False)
        for example in tfds.as_numpy(dataset):
            yield (example[config.source_lang].decode("utf-8"), example[config.target_lang].decode("utf-8"))

    name = f"{builder.name}/{builder.builder_config.name}"
    where = {split: f"tfds {name} split '{split}'" for split in SPLITS}
    provenance = {"origin": f"tensorflow-datasets {name} {builder.version}", "data_dir": str(builder.data_dir)}
    return RawSplits({split: pairs(split) for split in SPLITS}, where, provenance)


def input_fingerprint(config: SourceConfig) -> None:
    """None: tfds' name and version (in the settings and provenance) identify the data."""
    return None
