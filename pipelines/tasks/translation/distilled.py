"""The bundled En-De training targets as a teacher translated them: sequence-level distillation.

Kim & Rush (2016) train a small student on its teacher's beam-search output in place of the references:
the teacher's translations are more consistent than human ones (one way of saying a thing, the way the
student's own decoding would), so a model with few updates learns more of them. The bundled
``corpora/ddtp/en-de-distilled/train.de.xz`` holds, line for line with the bundled En-De ``train`` split,
the translation of its English side by a teacher trained on that split alone (the ``synthesize`` stage,
:mod:`pipelines.tasks.translation.synthesis`, with the train sources as its pool); where the stage dropped
the teacher's output (a loop, a copy, a length ratio of no real pair) the reference stays. Validation and
test text is never translated: they keep the references, so a distilled run is scored as any other.

``data.train_targets: distilled`` trains on it (:func:`distilled_pairs`); rebuild it from a synthesis with::

    python -m pipelines.tasks.translation.distilled --synthesis DIR --teacher "what the teacher is"
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

from pipelines.corpus import compress_xz, lines_to_bytes, sha256_bytes, sha256_file
from pipelines.tasks.translation.ddtp import SHIPPED_DIR, shipped_corpus
from pipelines.textfiles import DataError, read_lines

DISTILLED_DIR = SHIPPED_DIR / "en-de-distilled"
TARGETS = "train.de.xz"
MANIFEST = "manifest.json"


def distilled_targets(directory: Path = DISTILLED_DIR) -> list[str]:
    """The distilled targets, line for line with the bundled En-De ``train`` split; a ``DataError``
    naming the file if it is not the one its manifest describes, or was made from another corpus."""
    manifest = json.loads((directory / MANIFEST).read_text("utf-8"))
    path = directory / TARGETS
    if sha256_file(path) != manifest["sha256"]:
        raise DataError(f"{path}: does not match the checksum in {directory / MANIFEST}")
    if manifest["train_fingerprint"] != shipped_corpus("en-de").fingerprint("train"):
        raise DataError(f"{path}: made from another En-De train split than the bundled one")
    return list(read_lines(path))


def distilled_pairs(pairs: Iterable[tuple[str, str]], directory: Path = DISTILLED_DIR) -> Iterator[tuple[str, str]]:
    """The bundled ``train`` pairs (``pairs``, in file order) with the teacher's targets."""
    targets = distilled_targets(directory)
    count = 0
    for (source, _), target in zip(pairs, targets, strict=False):
        count += 1
        yield source, target
    if count != len(targets):
        raise DataError(f"{directory / TARGETS}: {len(targets)} lines for {count} train pairs")


def write_distilled(synthesis_dir: Path, teacher: str, directory: Path = DISTILLED_DIR) -> dict:
    """Writes the distilled targets from a finished synthesis of the bundled train sources; returns the
    manifest. A source the synthesis dropped (or did not translate) keeps its reference."""
    from pipelines.tasks.translation.synthesis import MANIFEST as SYNTHESIS
    from pipelines.tasks.translation.synthesis import read_synthetic

    corpus = shipped_corpus("en-de")
    translated = dict(read_synthetic(synthesis_dir))
    pairs = list(corpus.pairs("train"))
    targets = [translated.get(source, reference) for source, reference in pairs]
    data = compress_xz(lines_to_bytes(targets))
    directory.mkdir(parents=True, exist_ok=True)
    (directory / TARGETS).write_bytes(data)
    synthesis = json.loads((Path(synthesis_dir) / SYNTHESIS).read_text("utf-8"))
    manifest = {"language_pair": "en-de", "split": "train", "lines": len(targets), "sha256": sha256_bytes(data),
                "train_fingerprint": corpus.fingerprint("train"), "teacher": teacher,
                "distilled": sum(source in translated for source, _ in pairs),
                "references_kept": sum(source not in translated for source, _ in pairs),
                "dropped": synthesis.get("dropped", {})}
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n", "utf-8")
    return manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipelines.tasks.translation.distilled",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--synthesis", type=Path, required=True,
                        help="a finished synthesis of the bundled En-De train sources (its output_dir)")
    parser.add_argument("--teacher", required=True, help="what the teacher is, for the manifest")
    parser.add_argument("--output-dir", type=Path, default=DISTILLED_DIR)
    args = parser.parse_args(argv)
    try:
        manifest = write_distilled(args.synthesis, args.teacher, args.output_dir)
    except (DataError, OSError, KeyError) as err:
        print(f"{parser.prog}: error: {err}", file=sys.stderr)
        return 2
    print(json.dumps(manifest, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
