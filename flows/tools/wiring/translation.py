"""Wiring check of a translation model or recipe: it must learn a few dozen pairs back, and need its source.

The translation side of the check the parser gets first (``wiring-check parsing``,
:mod:`flows.tools.wiring.parsing`), run before an hour of a new translation model or recipe:

* **overfit**: trained on the first ``--pairs`` training pairs alone (no dropout, no label
  smoothing), the model translates those same sources back, with the beam search the evaluation
  stage uses, to sacreBLEU >= 90 within minutes.
* **source**: with every source removed (read as EOS alone) its translations of those pairs are
  clearly worse: BLEU at most half of what it is with the sources. (The loss is reported too, but
  is no test here: a decoder that memorised 40 targets needs the source for their first tokens
  only; the first wiring run had 0.014 nats per token with the sources, 0.39 without.)

``--optimizer recipe`` trains with the config's own recipe (section 5.3's Adam, its warm-up, peak
and scale, as the training stage builds it, without the run's final decay) instead of a fixed Adam
at 1e-3, so that the check covers the recipe as well as the model; a warm-up of hundreds of steps
then needs ``--max-steps`` beyond it.

``--config`` takes the pipeline config whose model and input settings are checked (``cpu-small``
by default) and ``--set`` changes them as the flows' ``--set`` does; pairs longer than the config's
``input.max_length`` are skipped, as training skips them. Without ``--corpus-dir`` the bundled DDTP
corpus is prepared in a temporary directory, and without ``--tokenizer`` a tokenizer of the config's
size is trained on it. ``--smoke`` shrinks everything for the test suite.

    wiring-check translation --set input.max_length=256 --output wiring.json
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import logging
import sys
import tempfile
import time
from pathlib import Path

from flows.tools import REPO as ROOT
from flows.tools.report import emit
from flows.tools.wiring.losses import arrays, source_losses
from pipelines.quiet_tensorflow import import_quietly

logger = logging.getLogger("wiring_check.translation")

#: The overfit bar: the training pairs translated back at this corpus BLEU.
TARGET_BLEU = 90.0


def _bleu(model, tokenizers, pairs, beam_size: int, sources: list[str] | None = None) -> dict:
    """Corpus BLEU of ``pairs``' translations (of ``sources`` instead of theirs, if given)."""
    import sacrebleu

    from keras_transformer.decoding.translator import Translator

    translator = Translator(model, *tokenizers)
    hypotheses = translator.translate(sources or [s for s, _ in pairs], beam_size=beam_size)
    references = [t for _, t in pairs]
    return {"bleu": sacrebleu.corpus_bleu(hypotheses, [references]).score,
            "exact_match": 100.0 * sum(h == r for h, r in zip(hypotheses, references)) / len(pairs),
            "example": {"source": pairs[0][0], "reference": references[0], "hypothesis": hypotheses[0]}}


def check(pipeline, corpus, tokenizers, *, pairs: int = 40, max_steps: int = 600, eval_every: int = 100,
          beam_size: int = 4, learning_rate: float = 1e-3, optimizer: str = "fixed") -> dict:
    """Overfits ``pairs`` training pairs of ``corpus`` with ``pipeline``'s model (and, ``optimizer``
    ``"recipe"``, its training recipe's optimizer; ``"fixed"``: Adam at ``learning_rate``); returns
    BLEU on them and the loss with and without the source."""
    import keras

    from keras_transformer import Transformer
    from pipelines.sentence_pairs import with_sentence_pairs

    source_tok, target_tok = tokenizers
    limit = pipeline.input.max_length
    # The pairs as training reads them (input.sentence_pairs may cut paragraphs into sentences).
    chosen, stream = [], with_sentence_pairs(corpus.pairs("train"), pipeline.input.sentence_pairs)
    while len(chosen) < pairs and (chunk := list(itertools.islice(stream, 4 * pairs))):
        sources, targets = ([pair[side] for pair in chunk] for side in (0, 1))
        source_lengths = map(len, source_tok.tokenize(sources).to_list())
        lengths = zip(source_lengths, map(len, target_tok.tokenize(targets).to_list()))
        chosen += [pair for pair, sides in zip(chunk, lengths) if max(sides) + 1 <= limit][: pairs - len(chosen)]
    settings = {**pipeline.train.model, "dropout": 0.0}
    model = Transformer.from_preset(pipeline.train.preset, source_vocab_size=source_tok.vocab_size,
                                    target_vocab_size=target_tok.vocab_size, **settings)
    # Each pair is translated back whole, as it was trained: a paragraph kept whole (its sides split
    # into unlike numbers of sentences) would otherwise be translated sentence by sentence, which
    # nothing taught the model, and the overfit would fail for the decoding's sake.
    model.decoding = dataclasses.replace(model.decoding, split_sentences=False)
    config = model.config
    source, target_in, target_out = arrays(chosen, source_tok, target_tok, config.eos_id, config.bos_id)
    if optimizer == "recipe":
        trained_with = pipeline.train.resolved().optimizer(config.d_model)
    elif optimizer == "fixed":
        trained_with = keras.optimizers.Adam(learning_rate, beta_2=0.98, epsilon=1e-9)
    else:
        raise ValueError(f"--optimizer must be 'fixed' or 'recipe', got {optimizer!r}")
    model.compile(optimizer=trained_with,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=config.pad_id))
    started, steps, history, result = time.perf_counter(), 0, [], {}
    while steps < max_steps:
        model.fit((source, target_in), target_out, batch_size=len(chosen), epochs=eval_every, verbose=0)
        steps += eval_every
        result = _bleu(model, tokenizers, chosen, beam_size)
        history.append({"steps": steps, "seconds": round(time.perf_counter() - started, 1),
                        "bleu": round(result["bleu"], 2), "exact_match": result["exact_match"]})
        logger.info("%d steps: BLEU %.1f on the training pairs, %.0f%% exact", steps, result["bleu"],
                    result["exact_match"])
        if result["bleu"] >= TARGET_BLEU:
            break
    # An empty sentence is encoded as EOS alone, as the loss check's removed sources are.
    blind = _bleu(model, tokenizers, chosen, beam_size, sources=[""] * len(chosen))
    losses = source_losses(model, source, target_in, target_out)
    return {"pairs": len(chosen), "max_length": limit, "optimizer": optimizer, "parameters": model.count_params(),
            "objective": "cross-entropy (fit)", "steps": steps,
            "seconds": round(time.perf_counter() - started, 1), "overfit": result, "target_bleu": TARGET_BLEU,
            "overfit_passed": result.get("bleu", 0.0) >= TARGET_BLEU,
            "bleu_source_removed": round(blind["bleu"], 2), "example_source_removed": blind["example"]["hypothesis"],
            "source_check_passed": blind["bleu"] <= result.get("bleu", 0.0) / 2 and result.get("bleu", 0.0) > 0,
            **losses, "history": history}


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=ROOT / "configs/translation/cpu-small.yaml")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a setting of the config (dotted, YAML value), as the flows take it")
    parser.add_argument("--corpus-dir", type=Path, help="a prepared corpus (default: the bundled DDTP, prepared here)")
    parser.add_argument("--tokenizer", type=Path, help="a shared SentencePiece model (default: trained here)")
    parser.add_argument("--pairs", type=int, default=40)
    parser.add_argument("--optimizer", choices=("fixed", "recipe"), default="fixed",
                        help="Adam at 1e-3 (the model alone), or the config's recipe (model and recipe)")
    parser.add_argument("--max-steps", type=int, default=600)
    parser.add_argument("--smoke", action="store_true", help="tiny model and budget (the test suite)")
    parser.add_argument("--output", type=Path, help="also write the JSON here")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    import_quietly()  # without TensorFlow's start-up lines, as every command of the package
    import keras

    from flows.pipeline_config import parse_overrides
    from flows.task_flows import TRANSLATION
    from pipelines.corpus import Corpus
    from pipelines.tasks.translation.sources import prepare_corpus
    from pipelines.tokenization import Vocabulary, load_tokenizers, train_tokenizer

    overrides = list(args.set)
    if args.smoke:
        overrides += ["train.model.num_layers=1", "train.model.d_model=32", "train.model.num_heads=2",
                      "train.model.d_ff=64", "tokenizer.vocab_size=500"]
    pipeline = TRANSLATION.load_config(args.config, parse_overrides(overrides))
    # Before any tokenizer exists: seeding resets TensorFlow's resources, SentencePiece's with them.
    keras.utils.set_random_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        data = dataclasses.replace(pipeline.data, output_dir=str(Path(tmp) / "corpus"))
        corpus_dir = args.corpus_dir or prepare_corpus(data)
        corpus = Corpus.load(corpus_dir)
        if args.tokenizer:
            models = Vocabulary(args.tokenizer, args.tokenizer)
        else:
            models = train_tokenizer(corpus, pipeline.tokenizer, Path(tmp) / "tokenizer")
        options = {"pairs": args.pairs, "max_steps": args.max_steps, "optimizer": args.optimizer}
        if args.smoke:
            options.update(pairs=10, max_steps=20, eval_every=10, beam_size=2)
        result = check(pipeline, corpus, load_tokenizers(models), **options)
    report = {"benchmark": "translation_wiring", "config": str(args.config), "settings": args.set,
              "smoke": args.smoke, **result}
    emit(report, args.output, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
