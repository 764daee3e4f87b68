"""The ``ddtp`` source: the bundled Debian description translations, or a rebuild from Debian's files."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pipelines.corpus import Corpus, sha256_file
from pipelines.tasks.translation import ddtp
from pipelines.tasks.translation.sources.config import RawSplits, SourceConfig
from pipelines.textfiles import DataError


def english_pair(config: SourceConfig) -> str:
    """The DDTP pair (``en-xx``) behind ``config.language_pair`` (either direction)."""
    langs = (config.source_lang, config.target_lang)
    if "en" not in langs:
        raise DataError(f"DDTP pairs English with another language; got {config.language_pair}")
    return "-".join(sorted(langs, key=lambda lang: lang != "en"))


def oriented_pairs(corpus: Corpus, config: SourceConfig) -> dict[str, Iterable[tuple[str, str]]]:
    """``corpus``'s pairs per split in ``config.language_pair``'s direction (reversed if need be)."""
    if (corpus.source_lang, corpus.target_lang) == (config.source_lang, config.target_lang):
        reverse = False
    elif (corpus.target_lang, corpus.source_lang) == (config.source_lang, config.target_lang):
        reverse = True
    else:
        raise DataError(f"{corpus.directory} holds {corpus.language_pair}, not {config.language_pair}")

    def pairs(split: str) -> Iterator[tuple[str, str]]:
        for a, b in corpus.pairs(split):
            yield (b, a) if reverse else (a, b)

    return {split: pairs(split) for split in corpus.splits}


def raw_splits(config: SourceConfig, workdir: Path) -> RawSplits:
    pair = english_pair(config)
    other = pair.split("-")[1]
    if config.translations_dir or config.mirror:
        if config.mirror:
            translations = ddtp.fetch_translation_files(
                config.mirror, config.suite, ["en", other], workdir / "raw", timeout=config.network_timeout)
        else:
            translations = {lang: ddtp.find_translation_file(config.translations_dir, lang)
                            for lang in ("en", other)}
        corpus = ddtp.build(translations, workdir / "build", [pair], suite=config.suite, compress=False)[pair]
        origin = f"rebuilt from {config.mirror or config.translations_dir} ({config.suite})"
    else:
        corpus = ddtp.shipped_corpus(pair)
        origin = f"bundled {ddtp.SHIPPED_DIR.name}/{pair}"
    where = {split: f"{corpus.path(split, 'en')} / {corpus.path(split, other)}" for split in corpus.splits}
    provenance = {"origin": origin, "build": corpus.manifest.get("provenance", {}),
                  "build_cleaning": corpus.manifest.get("cleaning", {})}
    pairs = oriented_pairs(corpus, config)
    if config.train_targets == "distilled":
        from pipelines.tasks.translation.distilled import DISTILLED_DIR, MANIFEST, TARGETS, distilled_pairs

        pairs["train"] = distilled_pairs(pairs["train"])
        where["train"] = f"{corpus.path('train', 'en')} / {DISTILLED_DIR / TARGETS}"
        provenance["train_targets"] = json.loads((DISTILLED_DIR / MANIFEST).read_text("utf-8"))
    return RawSplits(pairs, where, provenance)


def input_fingerprint(config: SourceConfig) -> dict[str, Any] | None:
    """Checksums of the shipped corpus or the local Translation files (None from a mirror)."""
    pair = english_pair(config)
    if config.translations_dir:
        return {lang: sha256_file(ddtp.find_translation_file(config.translations_dir, lang))
                for lang in pair.split("-")}
    if config.mirror:
        return None
    fingerprint = {"shipped": ddtp.shipped_corpus(pair).fingerprint()}
    if config.train_targets == "distilled":
        from pipelines.tasks.translation.distilled import DISTILLED_DIR, TARGETS

        fingerprint["distilled"] = sha256_file(DISTILLED_DIR / TARGETS)
    return fingerprint
