"""Builder of the bundled English-only pool: Debian descriptions that have no German translation to pair.

The bookworm ``Translation-en`` holds many more English paragraphs than the En-De corpus pairs: every
description no translator reached, and the paragraphs of descriptions whose translation could not be
aligned. A teacher can translate them (:mod:`pipelines.tasks.translation.synthesis`), and a student learn from its
translations (back-/forward-translation, self-training: He et al., ICLR 2020).

The pool is the text of no evaluation, by construction, before anything is translated:

1. **Not a source**: a paragraph (summary or long-description paragraph, normalised as the corpus
   builder normalises) that is the English side of any En-De pair, in any split, is left out: it is
   parallel text already.
2. **Packages held out**: a description one of whose packages shares its stem
   (:func:`~pipelines.tasks.translation.ddtp_packages.package_stem`) with a package of ``validation``,
   ``test`` or ``test_unseen`` (the ``<split>.packages`` files of the En-De corpus; boilerplate ``*``
   names none) is left out whole, the way ``test_unseen`` holds packages out of training.
3. **Evaluation sentences**: a paragraph holding a sentence (as the evaluation splits paragraphs,
   :func:`~keras_transformer.decoding.sentences.split_sentences`) of an English side of ``validation``,
   ``test`` or ``test_unseen`` is left out, boilerplate included.

Then empty and over-long paragraphs (more words than the corpus builder keeps) and repeats are dropped.
The pool ships as ``corpora/ddtp/en-pool/pool.en.xz`` (one paragraph a line, English file order) with
``pool.packages.xz`` (the description's package stems per line) and a ``manifest.json`` of counts and
checksums; rebuild or check it with::

    python -m pipelines.tasks.translation.ddtp_monolingual --translations-dir DIR          # rebuild in place
    python -m pipelines.tasks.translation.ddtp_monolingual --translations-dir DIR --check  # compare only
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pipelines.corpus import Corpus, compress_xz, lines_to_bytes, sha256_bytes, sha256_file
from pipelines.tasks.translation.cleaning import CleaningConfig, normalize_text
from pipelines.tasks.translation.ddtp_files import Description, find_translation_file, parse_translation_file
from pipelines.tasks.translation.ddtp_packages import SHARED_MARK, UNSEEN_SPLIT, package_stem
from pipelines.textfiles import DataError, read_lines

logger = logging.getLogger(__name__)

#: Where the pool ships, beside the parallel corpora it is filtered against.
POOL_DIR = Path(__file__).resolve().parent / "corpora" / "ddtp" / "en-pool"
#: The parallel corpus whose sources and evaluation splits the pool excludes.
PARALLEL_DIR = POOL_DIR.parent / "en-de"
POOL_FILE, PACKAGES_FILE, MANIFEST_FILE, README_FILE = "pool.en.xz", "pool.packages.xz", "manifest.json", "README.md"
#: The splits nothing of which may reach the pool.
EVALUATION_SPLITS = ("validation", "test", UNSEEN_SPLIT)


def evaluation_exclusions(corpus: Corpus) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """The parallel corpus' English sides (every split), the package stems of its evaluation splits, and
    the sentences of their English sides (split as the evaluation splits them)."""
    sources = frozenset(en for split in corpus.splits for en, _ in corpus.pairs(split))
    stems: set[str] = set()
    english: list[str] = []
    for split in EVALUATION_SPLITS:
        if split not in corpus.splits:
            continue
        english.extend(corpus.lines(split, corpus.source_lang))
        if not {f"{split}.packages", f"{split}.packages.xz"} & set(corpus.manifest["files"]):
            continue  # a corpus of other origin names no packages
        for line in corpus.side_lines(f"{split}.packages"):
            if line.strip() != SHARED_MARK:
                stems.update(line.split())
    return sources, frozenset(stems), frozenset(sentences_of(english))


def sentences_of(paragraphs: Sequence[str]) -> list[str]:
    """Every sentence and list item of ``paragraphs``, as the evaluation translates them."""
    import tensorflow as tf

    from keras_transformer.decoding.sentences import split_bullets, split_sentences

    if not paragraphs:
        return []
    parts = split_sentences(tf.constant(list(paragraphs), tf.string))
    return [b.decode("utf-8") for b in split_bullets(parts.flat_values)[1].numpy()]


def holds_a_sentence(paragraphs: Sequence[str], sentences: frozenset[str], chunk: int = 4096) -> list[bool]:
    """Per paragraph, whether one of its sentences (split as the evaluation splits) is in ``sentences``."""
    import tensorflow as tf

    from keras_transformer.decoding.sentences import split_bullets, split_sentences

    holding = []
    for start in range(0, len(paragraphs), chunk):
        parts = split_sentences(tf.constant(list(paragraphs[start : start + chunk]), tf.string))
        bodies = [b.decode("utf-8") for b in split_bullets(parts.flat_values)[1].numpy()]
        splits = parts.row_splits.numpy()
        holding.extend(not sentences.isdisjoint(bodies[splits[k] : splits[k + 1]]) for k in range(len(splits) - 1))
    return holding


def pool_paragraphs(english: dict[str, Description], corpus: Corpus,
                    max_words: int | None = None) -> tuple[list[tuple[str, str]], dict[str, int]]:
    """The pool's ``(paragraph, package stems)`` in English file order and the count of each exclusion."""
    max_words = max_words or CleaningConfig().max_words
    sources, held_stems, held_sentences = evaluation_exclusions(corpus)
    counts = {"descriptions": len(english), "paragraphs": 0, "source_of_a_pair": 0, "evaluation_package": 0,
              "evaluation_sentence": 0, "empty": 0, "too_long": 0, "duplicate": 0, "kept": 0}
    candidates: list[tuple[str, str]] = []
    seen: set[str] = set()
    for md5, description in english.items():
        stems = sorted({package_stem(p) for p in description.packages}) or [f"md5:{md5}"]
        texts = [normalize_text(t) for t in (description.summary, *description.paragraphs)]
        counts["paragraphs"] += len(texts)
        if held_stems.intersection(stems):
            counts["evaluation_package"] += len(texts)
            continue
        for text in texts:
            if text in sources:
                counts["source_of_a_pair"] += 1
            elif not text:
                counts["empty"] += 1
            elif len(text.split()) > max_words:
                counts["too_long"] += 1
            elif text in seen:
                counts["duplicate"] += 1
            else:
                seen.add(text)
                candidates.append((text, " ".join(stems)))
    holding = holds_a_sentence([text for text, _ in candidates], held_sentences)
    kept = [pair for pair, held in zip(candidates, holding) if not held]
    counts["evaluation_sentence"] = len(candidates) - len(kept)
    counts["kept"] = len(kept)
    return kept, counts


def write_pool(output_dir: str | Path, pool: list[tuple[str, str]], counts: dict[str, int],
               provenance: dict[str, Any]) -> dict[str, Any]:
    """Writes the pool's files and manifest (the files first, the manifest last); returns the manifest."""
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    files = {}
    for name, lines in ((POOL_FILE, [t for t, _ in pool]), (PACKAGES_FILE, [p for _, p in pool])):
        text = lines_to_bytes(lines)
        data = compress_xz(text)
        (output_dir / name).write_bytes(data)
        files[name] = {"lines": len(lines), "sha256": sha256_bytes(data), "text_sha256": sha256_bytes(text)}
    manifest = {"language": "en", "kind": "monolingual pool", "source": "ddtp", "count": len(pool),
                "exclusions": counts, "files": files, "provenance": provenance}
    (output_dir / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", "utf-8")
    (output_dir / README_FILE).write_text(render_readme(manifest), "utf-8")
    return manifest


def render_readme(manifest: dict[str, Any]) -> str:
    """The pool's provenance README: where it comes from, the exclusion rule, its counts and checksums."""
    counts = manifest["exclusions"]
    lines = [
        "# Bundled English pool (en-pool): Debian descriptions with no German pair",
        "",
        f"English paragraphs of {manifest['provenance']['origin']}, built by",
        "`pipelines/tasks/translation/ddtp_monolingual.py`, for a teacher to translate (the `synthesize` stage).",
        "Summaries and long-description paragraphs, NFKC-normalised with whitespace collapsed as the parallel",
        "corpora are; one paragraph a line in `pool.en.xz`, the description's package stems per line in",
        "`pool.packages.xz`. Licence and attribution: as the parallel corpora (`../README.md`).",
        "",
        "Exclusion rule, applied before anything is translated, against the En-De corpus beside it:",
        "",
        "1. a paragraph that is the English side of any En-De pair (any split) is parallel text already;",
        "2. a description with a package whose stem is a package of `validation`, `test` or `test_unseen`",
        "   (their `<split>.packages`) is left out whole, the way `test_unseen` holds packages out of training;",
        "3. a paragraph holding a sentence of an English side of `validation`, `test` or `test_unseen` (split",
        "   into sentences and list items as the evaluation splits them), boilerplate included, is left out.",
        "",
        "Then empty paragraphs, paragraphs of more than 200 words and repeats are dropped.",
        "`tests/pipelines/tasks/translation/test_ddtp_monolingual.py` checks that the rule holds on the shipped file.",
        "",
        "Rebuild (bit-identical text) or check, `DIR` holding `Translation-en.xz`:",
        "",
        "    python -m pipelines.tasks.translation.ddtp_monolingual --translations-dir DIR",
        "    python -m pipelines.tasks.translation.ddtp_monolingual --translations-dir DIR --check",
        "",
        f"Counts: {counts['descriptions']:,} descriptions, {counts['paragraphs']:,} paragraphs; left out: "
        f"{counts['source_of_a_pair']:,} sources of a pair, {counts['evaluation_package']:,} of evaluation "
        f"packages, {counts['evaluation_sentence']:,} holding an evaluation sentence, {counts['too_long']:,} too "
        f"long, {counts['empty']:,} empty, {counts['duplicate']:,} repeats; kept {manifest['count']:,}.",
        "",
        "Input files (sha256):",
        "",
        *(f"    {digest}  {name}" for name, digest in sorted(manifest["provenance"]["input_files"].items())),
        "",
        "Shipped files (sha256 of the .xz file / of the decompressed text):",
        "",
    ]
    for name, entry in sorted(manifest["files"].items()):
        lines += [f"    {entry['sha256']}  {name}", f"    {entry['text_sha256']}  {name.removesuffix('.xz')}"]
    return "\n".join(lines) + "\n"


def build_pool(translations_dir: str | Path, output_dir: str | Path, parallel_dir: str | Path = PARALLEL_DIR,
               suite: str = "bookworm") -> dict[str, Any]:
    """Builds the pool from ``Translation-en`` in ``translations_dir``, filtered against the parallel corpus."""
    path = find_translation_file(translations_dir, "en")
    corpus = Corpus.load(parallel_dir)
    pool, counts = pool_paragraphs(parse_translation_file(path), corpus)
    logger.info("English pool: %s", ", ".join(f"{k} {v:,}" for k, v in counts.items()))
    provenance = {"origin": f"Debian {suite} main/i18n Translation-en (DDTP)",
                  "input_files": {path.name: sha256_file(path)},
                  "filtered_against": {"corpus": corpus.language_pair, "splits": list(EVALUATION_SPLITS),
                                       "fingerprint": corpus.fingerprint()}}
    return write_pool(output_dir, pool, counts, provenance)


def read_pool(directory: str | Path = POOL_DIR) -> list[str]:
    """The shipped pool's paragraphs, checked against its manifest (a changed file is a ``DataError``)."""
    directory = Path(directory)
    manifest = json.loads((directory / MANIFEST_FILE).read_text("utf-8"))
    data = (directory / POOL_FILE).read_bytes()
    if sha256_bytes(data) != manifest["files"][POOL_FILE]["sha256"]:
        raise DataError(f"{directory / POOL_FILE}: checksum differs from {directory / MANIFEST_FILE}")
    return list(read_lines(directory / POOL_FILE))


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: rebuild (or ``--check``) the shipped pool from a directory holding ``Translation-en``."""
    parser = argparse.ArgumentParser(prog="python -m pipelines.tasks.translation.ddtp_monolingual",
                                     description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--translations-dir", type=Path, required=True, help="directory holding Translation-en[.xz]")
    parser.add_argument("--output-dir", type=Path, default=POOL_DIR)
    parser.add_argument("--parallel-dir", type=Path, default=PARALLEL_DIR, help="the En-De corpus filtered against")
    parser.add_argument("--check", action="store_true", help="build into a temporary directory and compare")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    with tempfile.TemporaryDirectory() as tmp:
        output = Path(tmp) if args.check else args.output_dir
        built = build_pool(args.translations_dir, output, args.parallel_dir)
        if args.check:
            shipped = json.loads((args.output_dir / MANIFEST_FILE).read_text("utf-8"))
            same = all(built["files"][n]["text_sha256"] == shipped["files"][n]["text_sha256"] for n in built["files"])
            logger.log(logging.INFO if same else logging.ERROR, "pool %s %s",
                       "identical to" if same else "differs from", args.output_dir)
            return 0 if same else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
