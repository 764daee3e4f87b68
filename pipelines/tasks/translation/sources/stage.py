"""The data stage: a source's raw splits, cleaned, written as a prepared corpus unless one is up to date."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import tempfile
from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path
from typing import Any

from pipelines.config import ConfigError, load_config
from pipelines.corpus import EXTRA_SPLITS, SPLITS, prepared_provenance, write_corpus
from pipelines.prepared import refuse_other_settings
from pipelines.progress import counted
from pipelines.tasks.translation.cleaning import clean_stream, log_counts, require_nonempty
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


def check_prepared(config: SourceConfig) -> None:
    """:func:`refuse_other_settings` for ``config``'s output directory: what the stage refuses,
    said before any work (``flows.preflight``)."""
    refuse_other_settings(config.resolved_output_dir(), "download", _request(config))


def up_to_date(config: SourceConfig) -> bool:
    """Whether ``config``'s output directory holds a corpus that verifies against its manifest and
    was made with these settings (and, for ``ddtp``/``folder``, these input files): the stage
    then does no work."""
    return _up_to_date(config.resolved_output_dir(), _request(config),
                       SOURCE_MODULES[config.source].input_fingerprint(config))


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


def cleaned(pairs: Iterable[tuple[str, str]], config: SourceConfig, split: str, where: str,
            counts: dict[str, int]) -> Iterator[tuple[str, str]]:
    """One split's pairs as the stage writes them: at most ``max_examples``, cleaned (counts in
    ``counts``), its progress shown; an empty split raises :class:`DataError` once it is read."""
    if config.max_examples is not None:
        pairs = islice(pairs, config.max_examples)
    pairs = counted(pairs, f"{config.source} {config.language_pair} {split}")
    yield from clean_stream(pairs, config.cleaning, counts, apply_filters=split in config.cleaning.filter_splits)
    log_counts(f"{config.source} {config.language_pair} {split}", counts)
    require_nonempty(split, counts["kept"], where)


def prepare_corpus(config: SourceConfig) -> Path:
    """Runs the data stage; returns the directory of the prepared corpus.

    Work is skipped when ``output_dir`` already holds a corpus that verifies against its
    manifest and was made with the same settings (and, for ``ddtp``/``folder``, the same input
    files); one made with other settings is refused (:func:`check_prepared`). Each split streams
    from the source through the cleaning into its files (:func:`~pipelines.corpus.write_corpus`),
    so memory does not grow with the corpus. Raises :class:`DataError` for malformed input,
    :class:`ConfigError` for a corpus of other settings and ``ConnectionError`` when a network
    source is unreachable.
    """
    source = SOURCE_MODULES[config.source]
    output_dir = config.resolved_output_dir()
    request = _request(config)
    # Checksums of the inputs where they are cheap to get (None: the settings suffice).
    check_prepared(config)
    fingerprint = source.input_fingerprint(config)
    if _up_to_date(output_dir, request, fingerprint):
        logger.info("%s is prepared and verified; nothing to do", output_dir)
        return output_dir
    with tempfile.TemporaryDirectory(prefix="download-") as tmp:
        raw = source.raw_splits(config, Path(tmp))
        counts: dict[str, dict[str, int]] = {}
        # The source's optional splits (the bundled corpora's test_unseen) come through as they are.
        names = (*SPLITS, *(s for s in EXTRA_SPLITS if s in raw.pairs))
        splits = {split: cleaned(raw.pairs[split], config, split, raw.where[split], counts.setdefault(split, {}))
                  for split in names}
        provenance = {**raw.provenance, "download": {"request": request, "inputs": fingerprint}}
        # counts fills as the splits are written; write_corpus puts it in the manifest last.
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
