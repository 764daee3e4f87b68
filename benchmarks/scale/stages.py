"""One data stage of the translation flow, run alone in its process so that its time and memory are its own.

    python -m benchmarks.scale.stages STAGE --config YAML --result JSON [--set KEY=VALUE ...]

Stages, as the flow runs them (the same functions its Prefect tasks call), on the pipeline config
``--config`` with ``--set`` overrides (``data.source=folder`` and ``data.folder=...``):

* ``prepare``: :func:`~pipelines.tasks.translation.sources.prepare_corpus` (read, clean, write);
* ``vocabulary``: :func:`~pipelines.tokenization.train_tokenizer` on the prepared corpus;
* ``cache``: :func:`~pipelines.input_pipeline.build_cache` of train (the config's
  ``input.sentence_pairs``) and validation;
* ``input``: :func:`~pipelines.input_pipeline.make_dataset`'s training batches, repeated, drawn
  for ``--seconds`` after a warm-up: real (non-padding) target tokens per second;
* ``train``: :func:`~pipelines.training.stage.train_on_corpus` for ``train.train_steps`` steps.

The stage writes what it measured itself (pairs, tokens, steps) to ``--result``; the parent
(:mod:`benchmarks.scale.data_stages`) measures time, memory and disk around it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import time
from pathlib import Path
from typing import Any

logger = logging.getLogger("benchmarks.scale.stages")

STAGES = ("prepare", "vocabulary", "cache", "input", "train")


def load(config_path: str, settings: list[str]):
    from flows.pipeline_config import parse_overrides
    from flows.task_flows import TRANSLATION

    return TRANSLATION.load_config(config_path, parse_overrides(settings))


def _corpus(config):
    from pipelines.corpus import Corpus

    return Corpus.load(config.data.output_dir)


def _tokenizers(config):
    from pipelines.tokenization import load_tokenizers
    from pipelines.vocabulary import Vocabulary

    name = "spm_shared.model"  # the translation configs share one vocabulary (section 3.4)
    return load_tokenizers(Vocabulary(Path(config.tokenizer_dir) / name))


def prepare(config, args) -> dict[str, Any]:
    from pipelines.tasks.translation.sources import prepare_corpus

    corpus = _corpus(config) if prepare_corpus(config.data) else None
    return {"counts": corpus.counts, "cleaning": corpus.manifest["cleaning"]}


def vocabulary(config, args) -> dict[str, Any]:
    from pipelines.tokenization import train_tokenizer

    models = train_tokenizer(_corpus(config), config.tokenizer, config.tokenizer_dir)
    record = json.loads(Path(models.source).with_suffix(".json").read_text(encoding="utf-8"))
    return {"vocab_size": config.tokenizer.vocab_size, "sampling": record.get("sampling")}


def cache(config, args) -> dict[str, Any]:
    import numpy as np

    from pipelines.input_pipeline import build_cache, lengths_path
    from pipelines.token_cache import usable_cores, worker_count

    corpus, tokenizers = _corpus(config), _tokenizers(config)
    result: dict[str, Any] = {"usable_cores": usable_cores()}
    for split, mode in (("train", config.input.sentence_pairs), ("validation", "none")):
        tick = time.perf_counter()
        path = build_cache(corpus, split, tokenizers, config.input, mode)
        seconds = time.perf_counter() - tick
        lengths = np.load(lengths_path(path))
        result[split] = {"paragraph_pairs": corpus.counts[split], "pairs_written": int(len(lengths)),
                         "target_tokens": int(lengths[:, 1].sum()), "seconds": round(seconds, 2),
                         "pairs_per_second": round(len(lengths) / seconds, 1),
                         "processes": worker_count(corpus.counts[split]), "sentence_pairs": mode}
    return result


def input_rate(config, args) -> dict[str, Any]:
    import numpy as np

    from pipelines.input_pipeline import make_dataset

    corpus, tokenizers = _corpus(config), _tokenizers(config)
    input_config = dataclasses.replace(config.input, sentence_pairs=config.input.sentence_pairs, repeat=True)
    iterator = make_dataset(corpus, "train", tokenizers, input_config, training=True).as_numpy_iterator()
    for _ in range(args.warmup_batches):
        next(iterator)
    tokens = batches = 0
    tick = time.perf_counter()
    while time.perf_counter() - tick < args.seconds:
        (_, _), target = next(iterator)
        tokens += int(np.count_nonzero(target))
        batches += 1
    seconds = time.perf_counter() - tick
    return {"tokens_per_batch": input_config.tokens_per_batch, "batches": batches, "target_tokens": tokens,
            "seconds": round(seconds, 2), "target_tokens_per_second": round(tokens / seconds),
            "batches_per_second": round(batches / seconds, 1)}


def train(config, args) -> dict[str, Any]:
    from pipelines.training.stage import train_on_corpus

    train_config = dataclasses.replace(config.train, checkpoint_dir=str(Path(config.run_dir) / "train"),
                                       progress_bar=False)
    result = train_on_corpus(_corpus(config), _tokenizers(config), config.input, train_config)
    return {"preset": config.train.preset, "start_step": result.start_step, "final_step": result.final_step,
            "elapsed_seconds": round(result.elapsed_seconds, 1), "tokens_per_step": config.train.tokens_per_step,
            "loss": (result.history[-1] if result.history else {}).get("loss")}


RUNNERS = {"prepare": prepare, "vocabulary": vocabulary, "cache": cache, "input": input_rate, "train": train}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scale.stages", description=__doc__.split("\n")[0])
    parser.add_argument("stage", choices=STAGES)
    parser.add_argument("--config", required=True)
    parser.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--result", type=Path, required=True, help="where the stage's own figures go (JSON)")
    parser.add_argument("--seconds", type=float, default=20.0, help="input: seconds of batches measured")
    parser.add_argument("--warmup-batches", type=int, default=20, help="input: batches drawn before measuring")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    config = load(args.config, args.settings)
    result = RUNNERS[args.stage](config, args)
    args.result.write_text(json.dumps(result, indent=1, default=str) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
