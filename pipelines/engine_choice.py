"""The engine options of a CTranslate2 export, chosen again on the validation split.

The engine's beam search is not the one the model was evaluated with: its length penalty divides by
``|Y| ** p`` where ours is GNMT's, and its nearest rule to our repetition guard blocks every repeated
n-gram (:mod:`keras_transformer.decoding.ctranslate2_translator`). So the export is decoded on the
validation split with a few options around the mapped ones, and keeps the best: the highest score
(BLEU) among the candidates with the fewest looping translations, the guard's purpose. The test
splits are never looked at; the record of every candidate goes into the export's metadata.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

#: Factors on the mapped length penalty exponent tried on validation.
LENGTH_PENALTY_FACTORS = (0.75, 1.0, 1.25)
#: The engine's ``no_repeat_ngram_size`` values tried when the decoding has a repetition guard.
NO_REPEAT_SIZES = (0, 4)


def candidates(options: dict[str, Any], repetition_guard: int) -> list[dict[str, Any]]:
    """Engine options around ``options`` (the mapped ones): the length penalty exponent scaled by
    :data:`LENGTH_PENALTY_FACTORS`, and with a guard in the settings, each of :data:`NO_REPEAT_SIZES`."""
    penalties = sorted({round(options["length_penalty"] * factor, 3) for factor in LENGTH_PENALTY_FACTORS})
    sizes = NO_REPEAT_SIZES if repetition_guard else (options.get("no_repeat_ngram_size", 0),)
    return [{**options, "length_penalty": p, "no_repeat_ngram_size": n} for n in sizes for p in penalties]


def choose_engine_options(export_dir: str | Path, evaluate: Callable[[Any, Path], Any], work_dir: str | Path,
                          threads: int = 0) -> dict[str, Any]:
    """Decodes the validation split with every :func:`candidates` option set, writes the best into the
    export's metadata (``engine``, and ``engine_choice`` with every candidate's figures) and returns it.

    ``evaluate(translator, output_dir)`` scores a translator on the validation split and returns a
    :class:`~pipelines.tasks.base.TaskEvaluation` (its ``score`` and ``looping_hypotheses`` metric).
    """
    from keras_transformer.decoding.ctranslate2_translator import CTranslate2Translator
    from keras_transformer.decoding.formats import METADATA_FILE

    metadata_path = Path(export_dir) / METADATA_FILE
    metadata = json.loads(metadata_path.read_text("utf-8"))
    tried = []
    for k, options in enumerate(candidates(metadata["engine"], metadata["decoding"]["repetition_guard"])):
        evaluation = evaluate(CTranslate2Translator(export_dir, threads, engine=options), Path(work_dir) / str(k))
        loops = int(evaluation.metrics.get("looping_hypotheses", 0))
        tried.append({"engine": options, "score": evaluation.score, "metric": evaluation.primary, "loops": loops})
        logger.info("engine options %s: %s %.2f, %d looping", options, evaluation.primary, evaluation.score, loops)
    fewest = min(t["loops"] for t in tried)
    best = max((t for t in tried if t["loops"] == fewest), key=lambda t: t["score"])
    metadata["engine"] = best["engine"]
    metadata["engine_choice"] = {"split": "validation", "rule": "best score among the fewest looping",
                                 "candidates": tried}
    metadata_path.write_text(json.dumps(metadata, indent=2, sort_keys=True) + "\n", "utf-8")
    logger.info("chose engine options %s", best["engine"])
    return best


def validation_config(eval_config):
    """``eval_config`` on the validation split alone, without the attention pictures."""
    return dataclasses.replace(eval_config, split="validation", extra_splits=(), attention_examples=0)
