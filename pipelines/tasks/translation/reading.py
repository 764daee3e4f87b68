"""What a user reads of a translation run: its test sentences as a table, and attention pictures.

A corpus BLEU says how much a model is better, not how it fails. So each evaluation also writes
``sentences.json``, every test sentence beside its reference and translation with its sentence
chrF and BLEU (sacreBLEU's ``sentence_chrf`` and ``sentence_bleu``, effective order), worst chrF
first, in the ``columns`` / ``data`` form that MLflow shows as a table, and the encoder-decoder
attention of the last layer (the paper's Figures 3-5) for the best and the worst few
(``attention/best-1.png``, ...): the model run with teacher forcing on the translation it gave, so
the picture is of that translation. Sentences are ranked by chrF, not BLEU: a short sentence's BLEU
falls to 0 on one joined or split compound ("KDE Bluetooth-Stack" for "KDE-Bluetooth-Stack"),
while its character n-grams say how close it came.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

TABLE_FILE = "sentences.json"
ATTENTION_DIR = "attention"
COLUMNS = ["sentence_chrf", "sentence_bleu", "line", "source", "reference", "translation"]
#: Where each column is in a row.
CHRF, BLEU, LINE, SOURCE, REFERENCE, TRANSLATION = range(len(COLUMNS))


def sentence_table(sources: list[str], references: list[str], hypotheses: list[str]) -> dict[str, Any]:
    """Every sentence with its sentence chrF and BLEU, worst chrF first (ties by line); ``line`` is 1-based."""
    import sacrebleu

    rows = [[round(sacrebleu.sentence_chrf(hypothesis, [reference]).score, 2),
             round(sacrebleu.sentence_bleu(hypothesis, [reference]).score, 2), line, source, reference, hypothesis]
            for line, (source, reference, hypothesis) in enumerate(zip(sources, references, hypotheses), 1)]
    rows.sort(key=lambda row: (row[CHRF], row[LINE]))
    return {"columns": COLUMNS, "data": rows}


def write_table(output_dir: Path, table: dict[str, Any]) -> Path:
    path = Path(output_dir) / TABLE_FILE
    path.write_text(json.dumps(table, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return path


def extremes(table: dict[str, Any], count: int) -> dict[str, list[tuple[str, str]]]:
    """(source, translation) of the ``count`` worst and best sentences (both sides non-empty)."""
    rows = [row for row in table["data"] if row[SOURCE].strip() and row[TRANSLATION].strip()]
    count = min(count, len(rows) // 2)
    return {"worst": [(row[SOURCE], row[TRANSLATION]) for row in rows[:count]],
            "best": [(row[SOURCE], row[TRANSLATION]) for row in rows[::-1][:count]]}


def draw_attention(translator: Any, table: dict[str, Any], output_dir: Path, count: int = 2) -> list[Path]:
    """``attention/<best|worst>-<i>.png``: the last layer's encoder-decoder attention, every head,
    for the ``count`` best and worst sentences. Nothing when ``translator`` holds no Keras model
    (a loaded SavedModel export has no attention to show)."""
    from pipelines.tasks.translation.attention_plots import AttentionPlotConfig, attention_maps, draw_heads

    model = getattr(translator, "model", None)
    if model is None or count <= 0:
        return []
    config = AttentionPlotConfig(kinds=("encoder_decoder",), max_tokens=48)
    written = []
    for name, sentences in extremes(table, count).items():
        for index, (source, translation) in enumerate(sentences, 1):
            maps = attention_maps(model, translator.tokenizer, source, translation, config,
                                  translator.target_tokenizer)
            rows, columns = maps.labels("encoder_decoder")
            # Shown at the width of MLflow's artifact pane (about 800 pixels), a picture keeps labels of
            # 9 pixels or more with two heads a row up to 24 pieces, one a row beyond (four a row of 60
            # pieces shrank them to 3).
            across = 2 if max(len(rows), len(columns)) <= 24 else 1
            title = f"Encoder-decoder attention, layer {maps.layer + 1}: {name} {index} by sentence chrF"
            path = Path(output_dir) / ATTENTION_DIR / f"{name}-{index}.png"
            written.append(draw_heads(maps.weights["encoder_decoder"], rows, columns, title, path, across,
                                      config.dpi))
    logger.info("attention of the %d best and worst sentences in %s", count, Path(output_dir) / ATTENTION_DIR)
    return written
