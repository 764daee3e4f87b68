"""Builder of the bundled En-De / En-Fr corpora from Debian's description translations (DDTP).

Input: the Debian archive's ``dists/<suite>/main/i18n/Translation-<lang>`` index files (plain,
``.xz``, ``.bz2`` or ``.gz``; read by :mod:`pipelines.tasks.translation.ddtp_files`).
The builder joins the English file with the other language on it, pairs summary with summary and paragraph ``i``
with paragraph ``i`` (descriptions whose paragraph counts differ are skipped), cleans the pairs
(:mod:`pipelines.tasks.translation.cleaning`), and splits them deterministically by a hash of the English sentence,
so that no English sentence occurs in two splits. A second test split, ``test_unseen``, holds out
whole packages (:mod:`pipelines.tasks.translation.ddtp_packages`): it is carved out of what the
sentence hash put in train, so validation and test stay as they were. The output is the layout of
:mod:`pipelines.corpus`, xz-compressed, with ``<split>.packages`` files naming each line's packages.

The shipped copies under ``pipelines/tasks/translation/corpora/ddtp/`` were made by this module's CLI; rebuild or
check them with::

    python -m pipelines.tasks.translation.ddtp --translations-dir DIR            # rebuild in place
    python -m pipelines.tasks.translation.ddtp --translations-dir DIR --check    # compare, write nothing
    python -m pipelines.tasks.translation.ddtp --mirror http://deb.debian.org/debian --suite bookworm

where ``DIR`` holds ``Translation-en``, ``Translation-de`` and ``Translation-fr``.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import logging
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pipelines.config import SettingError
from pipelines.corpus import (
    MANIFEST,
    SPLITS,
    Corpus,
    sha256_file,
    write_corpus,
)
from pipelines.tasks.translation.cleaning import CleaningConfig, clean_pairs, log_counts
from pipelines.tasks.translation.ddtp_files import (  # noqa: F401  (part of this module's API)
    Description,
    align_descriptions,
    fetch_translation_files,
    find_translation_file,
    parse_translation_file,
)
from pipelines.tasks.translation.ddtp_packages import PACKAGE_SALT, UNSEEN_SPLIT, package_split, sentence_groups
from pipelines.textfiles import DataError

logger = logging.getLogger(__name__)

#: Where the corpora built from Debian bookworm ship inside the package.
SHIPPED_DIR = Path(__file__).resolve().parent / "corpora" / "ddtp"
SHIPPED_PAIRS = ("en-de", "en-fr")
DEFAULT_SUITE = "bookworm"
#: Salt of the split hash; changing it reshuffles every split, so it is versioned.
SPLIT_SALT = "ddtp-split-v1"


@dataclasses.dataclass
class DdtpBuildConfig:
    """Settings of the DDTP builder; the defaults made the shipped corpora.

    The cleaning filters apply to every split (``filter_splits`` = all) because the corpus is
    cleaned as one pool before it is split. ``validation_fraction`` and ``test_fraction`` are
    fractions of the English-hash space: about 4% of the English sentences each (~1,300 En-De
    pairs). ``unseen_fraction`` of the package units are held out as ``test_unseen`` (0: no such
    split); sentences of ``unseen_max_groups`` or more package groups count as boilerplate
    (see :mod:`pipelines.tasks.translation.ddtp_packages`).
    """

    cleaning: CleaningConfig = dataclasses.field(
        default_factory=lambda: CleaningConfig(filter_splits=SPLITS))
    validation_fraction: float = 0.04
    test_fraction: float = 0.04
    unseen_fraction: float = 0.05
    unseen_max_groups: int = 5

    def __post_init__(self) -> None:
        if not (0 < self.validation_fraction and 0 < self.test_fraction
                and self.validation_fraction + self.test_fraction < 1):
            raise ValueError("validation_fraction and test_fraction must be > 0 and sum to < 1")
        if not 0 <= self.unseen_fraction < 1:
            raise SettingError(self, "unseen_fraction", "must be in [0, 1)")


def split_of(english: str, validation_fraction: float, test_fraction: float) -> str:
    """The split of a pair, from a salted sha256 of its English side alone.

    Depending only on the English text, every pair with the same English sentence lands in the
    same split (no English sentence is shared across splits), and a sentence keeps its split when
    the corpus is rebuilt from a newer suite.
    """
    digest = hashlib.sha256(f"{SPLIT_SALT}|{english}".encode()).digest()
    u = int.from_bytes(digest[:8], "big") / 2**64
    if u < test_fraction:
        return "test"
    if u < test_fraction + validation_fraction:
        return "validation"
    return "train"


def build_pair(
    english: dict[str, Description],
    other: dict[str, Description],
    language_pair: str,
    output_dir: str | Path,
    config: DdtpBuildConfig,
    *,
    provenance: dict[str, Any] | None = None,
    compress: bool = True,
) -> Corpus:
    """Aligns, cleans, splits and writes one language pair (xz-compressed) to ``output_dir``.

    ``compress=False`` writes plain text with the same ``text_sha256`` values (faster, for tests).
    """
    source_lang, target_lang = language_pair.split("-")
    raw_pairs, align_stats = align_descriptions(english, other)
    logger.info("%s: %d aligned pairs (%s)", language_pair, len(raw_pairs),
                ", ".join(f"{name} {count:,}" for name, count in align_stats.items()))
    pairs, counts = clean_pairs(raw_pairs, config.cleaning)
    log_counts(language_pair, counts)
    held = None
    if config.unseen_fraction > 0:
        held = package_split(sentence_groups(english, other), config.unseen_fraction,
                             config.unseen_max_groups, sentences=(en for en, _ in pairs))
    splits: dict[str, list[tuple[str, str]]] = {split: [] for split in (*SPLITS, UNSEEN_SPLIT)}
    for en, xx in pairs:
        split = split_of(en, config.validation_fraction, config.test_fraction)
        if split == "train" and held is not None and held.is_held_out(en):
            split = UNSEEN_SPLIT
        splits[split].append((en, xx))
    if not splits[UNSEEN_SPLIT]:
        del splits[UNSEEN_SPLIT]
        logger.warning("%s: no package held out; the corpus has no %s split", language_pair, UNSEEN_SPLIT)
    for split in SPLITS:
        if not splits[split]:
            raise DataError(f"split '{split}' of {language_pair} is empty")
    provenance = dict(provenance or {})
    provenance.update({
        "alignment": align_stats,
        "split": {"salt": SPLIT_SALT, "validation_fraction": config.validation_fraction,
                  "test_fraction": config.test_fraction},
        "cleaning_config": dataclasses.asdict(config.cleaning),
    })
    side_files = {}
    if held is not None:
        provenance["unseen_split"] = {
            "salt": PACKAGE_SALT, "fraction": config.unseen_fraction, "max_groups": config.unseen_max_groups,
            "test_unseen_packages": len({g for en, _ in splits.get(UNSEEN_SPLIT, []) for g in held.groups[en]}),
            **held.stats}
        side_files = {f"{split}.packages": [held.label(en) for en, _ in split_pairs]
                      for split, split_pairs in splits.items()}
    return write_corpus(output_dir, source_lang, target_lang, splits, source="ddtp", cleaning={"all": counts},
                        provenance=provenance, compress=compress, side_files=side_files)


def build(
    translations: dict[str, Path],
    output_dir: str | Path,
    language_pairs: Sequence[str] = SHIPPED_PAIRS,
    config: DdtpBuildConfig | None = None,
    *,
    suite: str = DEFAULT_SUITE,
    compress: bool = True,
) -> dict[str, Corpus]:
    """Builds ``output_dir/<pair>/`` for every ``en-xx`` pair from ``{lang: Translation file}``."""
    config = config or DdtpBuildConfig()
    for pair in language_pairs:
        src, _, tgt = pair.partition("-")
        if src != "en" or not tgt:
            raise DataError(f"DDTP pairs are English-to-X (en-xx); got {pair!r}")
    english = parse_translation_file(translations["en"])
    corpora = {}
    for pair in language_pairs:
        lang = pair.split("-")[1]
        if lang not in translations:
            raise DataError(f"no Translation-{lang} file given for {pair}")
        other = parse_translation_file(translations[lang])
        provenance = {
            "origin": f"Debian {suite} main/i18n Translation files (DDTP)",
            "input_files": {
                Path(translations[k]).name: sha256_file(translations[k]) for k in ("en", lang)
            },
        }
        corpora[pair] = build_pair(english, other, pair, Path(output_dir) / pair, config,
                                   provenance=provenance, compress=compress)
    return corpora


def shipped_corpus(language_pair: str = "en-de") -> Corpus:
    """The bundled corpus for ``language_pair`` (``en-de`` or ``en-fr``), checksums verified."""
    if language_pair not in SHIPPED_PAIRS:
        raise DataError(f"no bundled DDTP corpus for {language_pair!r}; bundled: {SHIPPED_PAIRS}")
    return Corpus.load(SHIPPED_DIR / language_pair)


def render_readme(corpora: dict[str, Corpus], suite: str = DEFAULT_SUITE) -> str:
    """The provenance README of the shipped corpora, checksums included."""
    lines = [
        "# Bundled DDTP corpora (En-De, En-Fr)",
        "",
        "Parallel English-German and English-French text built by `pipelines/tasks/translation/ddtp.py` from the",
        f"Debian archive's `dists/{suite}/main/i18n/Translation-{{en,de,fr}}` index files: package",
        "descriptions and their translations by the Debian Description Translation Project",
        "(DDTP, https://ddtp.debian.org/). Summary is paired with summary, paragraph i with",
        "paragraph i of descriptions that share a `Description-md5`; text is NFKC-normalized with",
        "whitespace collapsed, cleaned (empty, > 200 words, word-length ratio > 3, duplicates),",
        "and split by a salted sha256 of the English side (about 4% validation, 4% test), so no",
        "English sentence occurs in two splits.",
        "",
        "`test_unseen` is a second test split of whole packages nobody trained on: package names",
        "are reduced to a stem (`libfoo1`, `libfoo-dev`, `foo-data`, `python3-foo` -> `foo`), stems",
        "that share their own sentences are joined into units, and a salted sha256 of each unit",
        "holds about 5% of them out. Their sentences that the sentence hash put in train form",
        "`test_unseen`, so `validation` and `test` are unchanged and no sentence of a held-out package",
        "is in `train`, except boilerplate used by 5 or more stems (\"This package contains the",
        "documentation.\"), which keeps its sentence-hash split. `<split>.packages` gives, per line,",
        "the stems of the English sentence (`*` for boilerplate); see",
        "`pipelines/tasks/translation/ddtp_packages.py`.",
        "",
        "Licence: the text is each package's own description and the Debian translators' work;",
        "no single licence is stated in the Translation files. It is distributed by Debian as",
        "part of its archive; cite DDTP and check the individual packages before reuse beyond",
        "research and testing.",
        "",
        "Rebuild (bit-identical text, from the bookworm files; `DIR` holds",
        "`Translation-en.xz`, `Translation-de.xz`, `Translation-fr.xz`):",
        "",
        "    python -m pipelines.tasks.translation.ddtp --translations-dir DIR",
        "    python -m pipelines.tasks.translation.ddtp --translations-dir DIR --check   # verify only",
        "",
        "or fetch the files from a mirror (needs internet):",
        "",
        f"    python -m pipelines.tasks.translation.ddtp --mirror http://deb.debian.org/debian --suite {suite}",
        "",
        "Each `<pair>/manifest.json` lists the counts, the cleaning counts per reason and the",
        "sha256 of every file (`sha256` of the .xz file, `text_sha256` of its decompressed text).",
        "",
    ]
    for pair, corpus in sorted(corpora.items()):
        manifest = corpus.manifest
        lines.append(f"## {pair}")
        lines.append("")
        counts = manifest["counts"]
        lines.append("Pairs: " + ", ".join(f"{s} {counts[s]:,}" for s in corpus.splits)
                     + f" (total {sum(counts.values()):,}).")
        unseen = manifest["provenance"].get("unseen_split")
        if unseen and UNSEEN_SPLIT in counts:
            lines.append(f"`{UNSEEN_SPLIT}`: {unseen['test_unseen_packages']:,} package stems of "
                         f"{unseen['held_out_units']:,} held-out units (of {unseen['units']:,}); "
                         f"{unseen['shared_sentences']:,} boilerplate sentences.")
        inputs = manifest["provenance"].get("input_files", {})
        if inputs:
            lines.append("")
            lines.append("Input files (sha256):")
            lines.append("")
            for name, digest in sorted(inputs.items()):
                lines.append(f"    {digest}  {name}")
        lines.append("")
        lines.append("Shipped files (sha256 of the .xz file / of the decompressed text):")
        lines.append("")
        for name, entry in sorted(manifest["files"].items()):
            lines.append(f"    {entry['sha256']}  {name}")
            lines.append(f"    {entry['text_sha256']}  {name.removesuffix('.xz')}")
        lines.append("")
    return "\n".join(lines)


def compare_corpora(built: Corpus, shipped: Corpus) -> list[str]:
    """Manifest keys whose content differs between two builds.

    Compared: counts, text checksums, cleaning counts, settings. Ignored: whether and how the
    files are compressed (xz bytes depend on the liblzma version) and the names/checksums of
    the input files.
    """
    def comparable(manifest: dict[str, Any]) -> dict[str, Any]:
        m = json.loads(json.dumps(manifest))
        m["files"] = {name.removesuffix(".xz"): {"lines": entry["lines"],
                                                 "text_sha256": entry["text_sha256"]}
                      for name, entry in m["files"].items()}
        # The same text may come from a .bz2 of a mirror or the .xz of a local copy.
        m.get("provenance", {}).pop("input_files", None)
        return m

    a, b = comparable(built.manifest), comparable(shipped.manifest)
    return [key for key in sorted(set(a) | set(b)) if a.get(key) != b.get(key)]


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: rebuild (or ``--check``) the shipped corpora from Translation files or a mirror."""
    parser = argparse.ArgumentParser(prog="python -m pipelines.tasks.translation.ddtp", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--translations-dir", type=Path,
                        help="directory holding Translation-en/-de/-fr[.xz|.bz2|.gz]")
    source.add_argument("--mirror", help="Debian mirror URL, e.g. http://deb.debian.org/debian")
    parser.add_argument("--suite", default=DEFAULT_SUITE, help="Debian suite (default %(default)s)")
    parser.add_argument("--pairs", nargs="+", default=list(SHIPPED_PAIRS))
    parser.add_argument("--output-dir", type=Path, default=SHIPPED_DIR,
                        help="where <pair>/ directories go (default: the shipped location)")
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help="download cache for --mirror (default: a temporary directory)")
    parser.add_argument("--check", action="store_true",
                        help="build into a temporary directory and compare with --output-dir")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    langs = ["en"] + [p.split("-")[1] for p in args.pairs]
    with tempfile.TemporaryDirectory() as tmp:
        if args.mirror:
            translations = fetch_translation_files(args.mirror, args.suite, langs,
                                                   args.cache_dir or Path(tmp) / "cache")
        else:
            translations = {lang: find_translation_file(args.translations_dir, lang)
                            for lang in langs}
        output_dir = Path(tmp) / "build" if args.check else args.output_dir
        corpora = build(translations, output_dir, args.pairs, suite=args.suite)
        if args.check:
            failed = False
            for pair, corpus in corpora.items():
                diff = compare_corpora(corpus, Corpus.load(args.output_dir / pair))
                if diff:
                    logger.error("%s differs from %s in %s", pair, args.output_dir / pair, diff)
                    failed = True
                else:
                    logger.info("%s: rebuilt text is identical to %s", pair, args.output_dir / pair)
            return 1 if failed else 0
        if set(args.pairs) == set(SHIPPED_PAIRS):
            readme = render_readme(corpora, args.suite)
            (args.output_dir / "README.md").write_text(readme, encoding="utf-8")
        logger.info("wrote %s", ", ".join(str(c.directory / MANIFEST) for c in corpora.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
