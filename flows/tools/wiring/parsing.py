"""Wiring check of the parser: it must overfit a few dozen trees and it must need its source.

Before an hour of training a new parsing model or recipe, two things are cheap to know:

* **overfit**: trained on 50 training trees alone (no dropout), the model parses those same 50
  sentences back, with section 6.3's constrained beam search, to labelled F1 >= 95 within
  minutes. A model that cannot memorise 50 trees has a bug, not a recipe problem.
* **source**: the same model's loss on those trees with the source replaced by padding is
  clearly worse than with it. A decoder that does as well without the sentence is a language
  model of trees, which is what an F1 between the two trivial baselines looked like.

Both numbers go to stdout as JSON (and ``--output``). ``--compare`` runs the check for the model
with and without ``word_alignment`` (the decoder told which word comes next), the measurement
behind that option. ``--smoke`` shrinks everything for the test suite.

    wiring-check parsing --treebank ~/nltk_data/corpora/treebank.zip
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from pathlib import Path

from flows.tools.report import emit
from flows.tools.wiring.losses import arrays, needs_source, source_losses
from pipelines.quiet_tensorflow import import_quietly

logger = logging.getLogger("wiring_check.parsing")


def _f1(model, tokenizers, pairs, beam_size: int) -> dict:
    from keras_transformer.decoding.translator import Translator
    from keras_transformer.models.presets import DecodingSettings
    from pipelines.tasks.parsing.evalb import score_trees
    from pipelines.tasks.parsing.evaluation import parse_sentences
    from pipelines.tasks.parsing.linearize import delinearize

    translator = Translator(model, *tokenizers, decoding=DecodingSettings(beam_size, 0.3, 300))
    sentences = [source for source, _ in pairs]
    _, trees, repaired = parse_sentences(translator, sentences, constrained=True)
    gold = [delinearize(target, source.split()) for source, target in pairs]
    scores = score_trees(gold, trees, punctuation="gold")["all"]
    return {"f1": scores["fmeasure"], "tagging_accuracy": scores["tagging_accuracy"],
            "exact_match": scores["complete_match"], "repaired": repaired}


def check(corpus, tokenizers, *, word_alignment: bool, sentences: int = 50, max_steps: int = 600,
          eval_every: int = 100, target_f1: float = 95.0, model_overrides: dict | None = None,
          beam_size: int = 4) -> dict:
    """Overfits ``sentences`` training trees; returns F1 on them and the loss with and without the source."""
    import keras

    from keras_transformer import Transformer
    from keras_transformer.layers.word_alignment import alignment_ids

    source_tok, target_tok = tokenizers
    pairs = list(corpus.pairs("train"))[:sentences]
    settings = {"dropout": 0.0, **(model_overrides or {})}
    if word_alignment:
        settings.update(word_alignment=True, **alignment_ids(source_tok, target_tok))
    model = Transformer.from_preset("parser-cpu", source_vocab_size=source_tok.vocab_size,
                                    target_vocab_size=target_tok.vocab_size, **settings)
    config = model.config
    source, target_in, target_out = arrays(pairs, source_tok, target_tok, config.eos_id, config.bos_id)
    model.compile(optimizer=keras.optimizers.Adam(1e-3, beta_2=0.98, epsilon=1e-9))
    started, steps, history = time.perf_counter(), 0, []
    result = {}
    while steps < max_steps:
        model.fit((source, target_in), target_out, batch_size=len(pairs), epochs=eval_every, verbose=0)
        steps += eval_every
        result = _f1(model, tokenizers, pairs, beam_size)
        history.append({"steps": steps, "seconds": round(time.perf_counter() - started, 1), **result})
        logger.info("alignment %s, %d steps: F1 %.1f, tagging %.1f", word_alignment, steps, result["f1"],
                    result["tagging_accuracy"])
        if result["f1"] >= target_f1:
            break
    losses = source_losses(model, source, target_in, target_out)
    return {
        "word_alignment": word_alignment, "sentences": len(pairs), "steps": steps,
        "seconds": round(time.perf_counter() - started, 1), "overfit": result, "target_f1": target_f1,
        "overfit_passed": result.get("f1", 0.0) >= target_f1,
        **losses, "source_check_passed": needs_source(losses), "history": history,
    }


def prepare(treebank: str, workdir: Path, max_train_trees: int | None = None,
            vocab_size: int = 4000) -> tuple:
    """The parsing corpus of ``treebank`` and its (words BPE, tree symbols) tokenizers."""
    from pipelines.corpus import Corpus
    from pipelines.tasks.parsing.data import TreebankConfig, prepare_treebank
    from pipelines.tokenization import TokenizerConfig, load_tokenizers, train_tokenizer

    corpus = Corpus.load(prepare_treebank(TreebankConfig(path=treebank, output_dir=str(workdir / "corpus"),
                                                         max_train_trees=max_train_trees)))
    config = TokenizerConfig(vocab_size=vocab_size, shared=False,
                             target={"model_type": "word", "vocab_size": 400, "byte_fallback": False})
    return corpus, load_tokenizers(train_tokenizer(corpus, config, workdir / "tokenizer"))


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("--treebank", required=True, help="NLTK treebank.zip / folder, or the LDC WSJ folder")
    parser.add_argument("--compare", action="store_true", help="with and without word_alignment")
    parser.add_argument("--no-alignment", action="store_true", help="check the model without word_alignment")
    parser.add_argument("--sentences", type=int, help="the training trees overfitted (default 50; --smoke 10)")
    parser.add_argument("--max-steps", type=int, help="the step budget (default 600; --smoke 40)")
    parser.add_argument("--smoke", action="store_true", help="tiny model and budget (the test suite)")
    parser.add_argument("--model", action="append", default=[], metavar="KEY=VALUE",
                        help="a model setting of the checked recipe (YAML value), e.g. tagger=fused")
    parser.add_argument("--output", help="also write the JSON here")
    args = parser.parse_args(argv)
    import_quietly()  # without TensorFlow's start-up lines, as every command of the package
    import yaml

    settings = {}
    for item in args.model:
        key, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--model {item!r}: expected KEY=VALUE")
        settings[key] = yaml.safe_load(value)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    import keras

    # Before any tokenizer exists: seeding resets TensorFlow's resources, SentencePiece's with them.
    keras.utils.set_random_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        if args.smoke:
            corpus, tokenizers = prepare(args.treebank, Path(tmp), max_train_trees=60, vocab_size=600)
            options = {"sentences": 10, "max_steps": 40, "eval_every": 20, "beam_size": 2,
                       "model_overrides": {"num_layers": 1, "d_model": 32, "num_heads": 2, "d_ff": 64, **settings}}
        else:
            corpus, tokenizers = prepare(args.treebank, Path(tmp))
            options = {"model_overrides": settings}
        options.update({key: value for key, value in (("sentences", args.sentences), ("max_steps", args.max_steps))
                        if value is not None})
        variants = [True, False] if args.compare else [not args.no_alignment]
        results = [check(corpus, tokenizers, word_alignment=variant, **options) for variant in variants]
    report = {"benchmark": "parser_wiring", "treebank": Path(args.treebank).name, "smoke": args.smoke,
              "model_settings": settings, "results": results}
    emit(report, args.output, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
