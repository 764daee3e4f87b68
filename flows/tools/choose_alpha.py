"""Choose the length-penalty alpha of beam search on the validation split, by BLEU.

Section 6.1 of the paper chose beam 4 and alpha 0.6 "after experimentation on the development
set"; the penalty is GNMT's ((5 + |Y|) / 6) ** alpha (Wu et al., 2016). A CPU model trained for an
hour is not the paper's: its output was short (brevity penalty 0.83 on the test split, issue 20),
so alpha is measured again here, on validation, never on a test split. Each alpha decodes the same
sentences with the evaluation stage itself (sacreBLEU BLEU, chrF, brevity penalty, loop counts),
and the best is the one to put in the pipeline config's ``evaluation.decoding.length_penalty``.

    choose-alpha --run runs/cpu-small/latest --alphas 0,0.4,0.6,0.8,1.0,1.4

``--guards 0,4`` also tries the repetition guard (``evaluation.decoding.repetition_guard``: no third copy in a
row of an n-gram of up to 4 pieces begins, :mod:`keras_transformer.decoding.repetition`) at every alpha, and
the pair is chosen together. ``--confirm-on test`` then scores the chosen alpha with and without
the guard on that split (and its companions, e.g. ``test_unseen``): issue 20 keeps the guard only
if it helps BLEU on both test splits. Nothing is chosen on a test split.

``--run`` is a run directory (``<run_dir>/runs/<id>`` or ``<run_dir>/latest``): the averaged model is
``averaged/model.keras``, the tokenizer the one ``.model`` in ``<run_dir>/tokenizer`` and the corpus the
one in ``<run_dir>/data``; ``--model``, ``--tokenizer`` and ``--corpus-dir`` name them instead.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from pathlib import Path

from flows.tools.report import emit
from pipelines.quiet_tensorflow import import_quietly

logger = logging.getLogger("choose_alpha")


def run_files(run: Path) -> dict[str, Path | None]:
    """The averaged model, the shared tokenizer and the prepared corpus of a pipeline run: the run_dir's, the
    tokenizer the model's vocabulary record names (a student's is its own, ``tokenizer/student-*/``), and not a
    student's corpus (``source: mixed``, which only trains)."""
    import hashlib
    import json

    run = run.resolve()
    run_dir = run.parents[1] if run.parent.name == "runs" else run.parent
    tokenizers = sorted((run_dir / "tokenizer").rglob("*.model"))
    try:
        record = json.loads((run / "averaged" / "model_config.json").read_text("utf-8"))["vocabulary"]["fingerprint"]
    except (OSError, ValueError, KeyError, TypeError):
        record = None
    if isinstance(record, str):
        tokenizers = [t for t in tokenizers if hashlib.sha256(t.read_bytes()).hexdigest()[:16] == record]
    corpora = sorted(p.parent for p in (run_dir / "data").glob("*/manifest.json")
                     if json.loads(p.read_text("utf-8")).get("source") != "mixed")
    return {"model": run / "averaged" / "model.keras",
            "tokenizer": tokenizers[0] if len(tokenizers) == 1 else None,
            "corpus_dir": corpora[0] if len(corpora) == 1 else None}


def choose(results: list[dict]) -> dict:
    """The best alpha (and guard) by BLEU; a tie goes to the smaller alpha and no guard (the milder change)."""
    return max(results, key=lambda r: (round(r["bleu"], 6), -r.get("repetition_guard", 0), -r["alpha"]))


def summary(result) -> dict:
    """The numbers of one evaluation that matter for length and loops."""
    scores = result.scores
    return {"bleu": result.bleu, "chrf": result.chrf, "brevity_penalty": scores["bleu"]["brevity_penalty"],
            "length_ratio": scores["bleu"]["length_ratio"], "looping_hypotheses": scores["loops"]["hypotheses"],
            "looping_references": scores["loops"]["references"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="choose-alpha", description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", type=Path, help="a pipeline run directory (or <run_dir>/latest)")
    parser.add_argument("--model", type=Path, help="a .keras Transformer (default: the run's averaged model)")
    parser.add_argument("--tokenizer", type=Path, help="SentencePiece model (default: the run's)")
    parser.add_argument("--target-tokenizer", type=Path, help="target SentencePiece model, if separate")
    parser.add_argument("--corpus-dir", type=Path, help="prepared corpus (default: the run's)")
    parser.add_argument("--alphas", default="0,0.2,0.4,0.6,0.8,1.0,1.2", help="comma-separated alphas")
    parser.add_argument("--split", default="validation", help="the split to choose on (default %(default)s)")
    parser.add_argument("--beam-size", type=int, default=4)
    parser.add_argument("--max-length-offset", type=int)
    parser.add_argument("--max-sentences", type=int, help="only the first N sentences (quick looks)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--guards", default="0", help="comma-separated repetition_guard values (0: off)")
    parser.add_argument("--confirm-on", help="score the chosen alpha with and without the guard on this test split")
    parser.add_argument("--output", type=Path, help="also write the JSON report here")
    parser.add_argument("--keep", type=Path, help="keep each decoding's files (translations, scores) here")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    import_quietly()  # without TensorFlow's start-up lines, as every command of the package
    found = run_files(args.run) if args.run else {}
    model = args.model or found.get("model")
    tokenizer = args.tokenizer or found.get("tokenizer")
    corpus_dir = args.corpus_dir or found.get("corpus_dir")
    if not (model and tokenizer and corpus_dir):
        parser.error("give --run, or --model, --tokenizer and --corpus-dir (a run with several tokenizers "
                     "or corpora needs them named)")
    if args.split.startswith("test"):
        parser.error("alpha is chosen on validation data; scoring a test split here would tune on it")
    alphas = [float(a) for a in args.alphas.split(",")]
    if any(a < 0 for a in alphas):
        parser.error("alphas must be >= 0")

    from keras_transformer.checkpoints.saved_model import load_translator
    from pipelines.corpus import Corpus
    from pipelines.tasks.translation.evaluation import EvalConfig, evaluate

    # A model saved before models kept their preset's decoding decodes as its run's preset (load_translator
    # reads its model_config.json), as the evaluation stage decoded it.
    translator = load_translator(model, tokenizer, args.target_tokenizer)
    logger.info("decoding: %s", translator.decoding)
    corpus = Corpus.load(corpus_dir)
    guards = [int(g) for g in args.guards.split(",")]
    results = []
    with tempfile.TemporaryDirectory() as temporary:
        scratch = args.keep or temporary
        def score(split, alpha, guard, extra_splits=()):
            decoding = {"beam_size": args.beam_size, "length_penalty": alpha, "max_length_offset":
                        args.max_length_offset, "repetition_guard": guard}
            config = EvalConfig(split=split, extra_splits=extra_splits, decoding=decoding, batch_size=args.batch_size,
                                max_sentences=args.max_sentences)
            return evaluate(translator, corpus, config=config,
                            output_dir=Path(scratch) / f"{split}-{alpha}-{guard}")

        for guard in guards:
            for alpha in alphas:
                result = score(args.split, alpha, guard)
                results.append({"alpha": alpha, "repetition_guard": guard, **summary(result)})
                logger.info("%s", results[-1])
        best = choose(results)
        report = {"benchmark": "choose_alpha", "model": str(model), "corpus": str(corpus_dir), "split": args.split,
                  "split_sentences": translator.decoding.split_sentences,
                  "sentences": result.num_sentences, "beam_size": args.beam_size, "results": results,
                  "best_alpha": best["alpha"], "best_repetition_guard": best["repetition_guard"],
                  "best_bleu": best["bleu"],
                  "config": f"evaluation.decoding.length_penalty: {best['alpha']}, "
                            f"evaluation.decoding.repetition_guard: {best['repetition_guard']}"}
        if args.confirm_on:
            report["confirmation"] = {}
            for guard in sorted({0, *guards}):
                result = score(args.confirm_on, best["alpha"], guard, extra_splits=None)
                others = {split: summary(other) for split, other in result.others.items()}
                report["confirmation"][f"repetition_guard={guard}"] = {args.confirm_on: summary(result), **others}
                logger.info("confirmation: %s", report["confirmation"])
    emit(report, args.output, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
