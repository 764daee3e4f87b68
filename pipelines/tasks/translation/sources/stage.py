"""The data stage: a source's raw splits, cleaned, written as a prepared corpus unless one is up to date."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import tempfile
from itertools import islice
from pathlib import Path
from typing import Any

from tqdm import tqdm

from pipelines.config import ConfigError, load_config
from pipelines.corpus import EXTRA_SPLITS, SPLITS, prepared_provenance, write_corpus
from pipelines.tasks.translation.cleaning import clean_pairs, log_counts, require_nonempty
from pipelines.tasks.translation.sources import ddtp, folder, wmt14
from pipelines.tasks.translation.sources.config import SourceConfig
from pipelines.textfiles import DataError

logger = logging.getLogger(__name__)

#: Each source module gives ``raw_splits(config, workdir)`` and ``input_fingerprint(config)``.
SOURCE_MODULES = {"ddtp": ddtp, "wmt14": wmt14, "folder": folder}


def _request(config: SourceConfig) -> dict[str, Any]:
    """The settings that determine the output (everything but where it goes)."""
    request = dataclasses.asdict(config)
    request.pop("output_dir")
    request["cleaning"]["filter_splits"] = list(config.cleaning.filter_splits)
    return request


def _up_to_date(output_dir: Path, request: dict[str, Any], fingerprint: dict | None) -> bool:
    stage = prepared_provenance(output_dir, "download")
    if stage is None:
        return False
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
    source = SOURCE_MODULES[config.source]
    output_dir = config.resolved_output_dir()
    request = _request(config)
    # Checksums of the inputs where they are cheap to get (None: the settings suffice).
    fingerprint = source.input_fingerprint(config)
    if _up_to_date(output_dir, request, fingerprint):
        logger.info("%s is prepared and verified; nothing to do", output_dir)
        return output_dir
    with tempfile.TemporaryDirectory(prefix="download-") as tmp:
        raw = source.raw_splits(config, Path(tmp))
        splits: dict[str, list[tuple[str, str]]] = {}
        counts: dict[str, dict[str, int]] = {}
        # The source's optional splits (the bundled corpora's test_unseen) come through as they are.
        for split in (*SPLITS, *(s for s in EXTRA_SPLITS if s in raw.pairs)):
            pairs = raw.pairs[split]
            if config.max_examples is not None:
                pairs = islice(pairs, config.max_examples)
            pairs = tqdm(pairs, desc=f"{config.source} {split}", unit=" pairs", mininterval=2.0, leave=False,
                         disable=None)
            kept, counts[split] = clean_pairs(pairs, config.cleaning,
                                              apply_filters=split in config.cleaning.filter_splits)
            log_counts(f"{config.source} {config.language_pair} {split}", counts[split])
            require_nonempty(split, kept, raw.where[split])
            splits[split] = kept
        provenance = {**raw.provenance, "download": {"request": request, "inputs": fingerprint}}
        write_corpus(output_dir, config.source_lang, config.target_lang, splits,
                     source=config.source, cleaning=counts, provenance=provenance)
    return output_dir


def main(argv: list[str] | None = None) -> int:
    """CLI: ``python -m pipelines.tasks.translation.sources CONFIG.yaml [--section data]``."""
    parser = argparse.ArgumentParser(prog="python -m pipelines.tasks.translation.sources",
                                     description="Prepare a translation corpus (bundled DDTP, WMT14 or a folder).")
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
