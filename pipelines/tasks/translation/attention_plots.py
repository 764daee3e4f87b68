"""Attention pictures in the spirit of the paper's Figures 3-5: every head of one layer.

For a source sentence and its translation (the model's own, by beam search, unless a target is
given) the model is run once with teacher forcing on that translation, and for the chosen layer
each head's weights are drawn as a heat map:

* ``encoder_self``: encoder self-attention, source tokens attending to source tokens (the
  paper's figures show encoder self-attention in layer 5 of 6);
* ``encoder_decoder``: encoder-decoder attention, each output token (the row is the token being
  predicted) attending to the source tokens;
* ``decoder_self`` (optional): masked decoder self-attention over the output so far.

One PNG per kind, one panel per head, written with matplotlib's Agg canvas (no display, no
global backend switch).
"""

from __future__ import annotations

import argparse
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

KINDS = ("encoder_self", "encoder_decoder", "decoder_self")
TITLES = {
    "encoder_self": "Encoder self-attention",
    "encoder_decoder": "Encoder-decoder attention",
    "decoder_self": "Decoder self-attention",
}


@dataclass
class AttentionPlotConfig:
    """Which layer (0-based; negative counts from the last) and kinds to draw, and how.

    ``decoding`` (a ``DecodingSettings``) decodes the translation when no target is given (the
    model's own when ``None``); ``max_tokens`` truncates very long sentences for legibility.
    """

    layer: int = -1
    kinds: tuple[str, ...] = ("encoder_self", "encoder_decoder")
    decoding: Any = None
    max_tokens: int = 60
    dpi: int = 110
    columns: int = 4

    def __post_init__(self) -> None:
        unknown = sorted(set(self.kinds) - set(KINDS))
        if unknown:
            raise ValueError(f"unknown attention kinds {unknown}; choose from {KINDS}")
        if self.max_tokens < 2 or self.columns < 1:
            raise ValueError("max_tokens must be >= 2 and columns >= 1")


@dataclass
class AttentionMaps:
    """Weights of one layer: ``kind -> [heads, queries, keys]`` and the token labels."""

    layer: int
    source_tokens: list[str]
    target_tokens: list[str]
    weights: dict[str, np.ndarray] = field(default_factory=dict)

    def labels(self, kind: str) -> tuple[list[str], list[str]]:
        """(row labels, column labels) of ``kind``."""
        if kind == "encoder_self":
            return self.source_tokens, self.source_tokens
        if kind == "encoder_decoder":
            return self.target_tokens, self.source_tokens
        return self.target_tokens, ["<s>"] + self.target_tokens[:-1]


def _pieces(tokenizer, ids) -> list[str]:
    """The pieces' labels; a verbatim span's placeholder (a private-use character, which no font
    draws) shows as ``<span>``."""
    import tensorflow as tf

    from keras_transformer.text import VERBATIM

    pieces = tokenizer.id_to_piece(tf.constant(list(ids), tf.int32)).numpy()
    return [p.decode("utf-8", errors="replace").replace(VERBATIM, "<span>") for p in pieces]


def attention_maps(model, tokenizer, sentence: str, target: str | None = None,
                   config: AttentionPlotConfig | None = None, target_tokenizer=None) -> AttentionMaps:
    """Runs ``model`` on ``sentence`` (and its translation) and returns one layer's weights."""
    import tensorflow as tf

    from keras_transformer.decoding.beam import compiled_search
    from keras_transformer.decoding.settings import DecodingSettings

    config = config or AttentionPlotConfig()
    target_tokenizer = target_tokenizer or tokenizer
    c = model.config
    layer = config.layer if config.layer >= 0 else c.num_encoder_layers + config.layer
    if not 0 <= layer < min(c.num_encoder_layers, c.num_decoder_layers):
        raise ValueError(
            f"layer {config.layer} does not exist: the model has {c.num_encoder_layers} encoder and "
            f"{c.num_decoder_layers} decoder layers"
        )
    source_ids = tokenizer.tokenize(tf.constant([sentence])).to_list()[0][: config.max_tokens - 1]
    source_ids = source_ids + [c.eos_id]
    source = tf.constant([source_ids], tf.int32)
    if target is None:
        settings = config.decoding or getattr(model, "decoding", None) or DecodingSettings()
        result = compiled_search(model, settings)(
            source, tf.constant(settings.length_penalty, tf.float32), tf.constant(settings.max_length_offset, tf.int32)
        )
        length = int(result.lengths[0, 0])
        target_ids = [int(t) for t in result.ids[0, 0, :length].numpy()]
    else:
        target_ids = target_tokenizer.tokenize(tf.constant([target])).to_list()[0] + [c.eos_id]
    target_ids = target_ids[: config.max_tokens]
    decoder_input = tf.constant([[c.bos_id] + target_ids[:-1]], tf.int32)

    encoder_outputs, encoder_scores = model.encode(source, training=False, return_attention_scores=True)
    decoder_scores = model.decode(
        decoder_input, encoder_outputs, model.padding_mask(source), training=False,
        return_attention_scores=True, word_states=model.word_states(source, encoder_outputs),
    ).attention
    weights = {
        "encoder_self": np.asarray(encoder_scores[layer])[0],
        "encoder_decoder": np.asarray(decoder_scores[layer]["cross"])[0],
        "decoder_self": np.asarray(decoder_scores[layer]["self"])[0],
    }
    return AttentionMaps(
        layer=layer,
        source_tokens=_pieces(tokenizer, source_ids),
        target_tokens=_pieces(target_tokenizer, target_ids),
        weights={k: weights[k].astype(np.float32) for k in config.kinds},
    )


def draw_heads(weights: np.ndarray, row_labels: list[str], column_labels: list[str], title: str,
               path: str | Path, columns: int = 4, dpi: int = 110) -> Path:
    """Saves a PNG with one heat map per head of ``weights [heads, rows, columns]``."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    heads, n_rows, n_cols = weights.shape
    grid_cols = min(columns, heads)
    grid_rows = math.ceil(heads / grid_cols)
    # A panel grows with its sentence (a token's row 0.24 inch) and the labels' font is three quarters
    # of a row: scaled to fit a screen, a picture keeps its labels as legible as its cells are large.
    tokens = max(n_rows, n_cols)
    cell = max(3.0, 0.24 * tokens + 1.2)
    # Constrained layout keeps the token labels of one panel out of its neighbours.
    figure = Figure(figsize=(cell * grid_cols + 1.5, cell * grid_rows + 1.0), dpi=dpi, layout="constrained")
    FigureCanvasAgg(figure)
    vmax = float(weights.max()) if weights.size else 1.0
    font = 13
    image = None
    for head in range(heads):
        axes = figure.add_subplot(grid_rows, grid_cols, head + 1)
        image = axes.imshow(weights[head], cmap="viridis", vmin=0.0, vmax=vmax, aspect="auto",
                            interpolation="nearest")
        axes.set_title(f"head {head + 1}", fontsize=14)
        axes.set_xticks(range(n_cols))
        axes.set_xticklabels(column_labels, rotation=90, fontsize=font)
        axes.set_yticks(range(n_rows))
        axes.set_yticklabels(row_labels, fontsize=font)
    if image is not None:
        figure.colorbar(image, ax=figure.axes, shrink=0.6)
    figure.suptitle(title, fontsize=16)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="png")
    return path


def plot_attention(model, tokenizer, sentence: str, output_dir: str | Path,
                   config: AttentionPlotConfig | None = None, target: str | None = None,
                   target_tokenizer=None) -> dict[str, Path]:
    """Writes ``<kind>_layer<N>.png`` for each configured kind; returns ``kind -> path``.

    ``N`` is 1-based in the file name and title, as the paper counts layers.
    """
    config = config or AttentionPlotConfig()
    maps = attention_maps(model, tokenizer, sentence, target, config, target_tokenizer)
    output_dir = Path(output_dir)
    paths = {}
    for kind in config.kinds:
        rows, columns = maps.labels(kind)
        title = f"{TITLES[kind]}, layer {maps.layer + 1}, all {maps.weights[kind].shape[0]} heads"
        paths[kind] = draw_heads(maps.weights[kind], rows, columns, title,
                                 output_dir / f"{kind}_layer{maps.layer + 1}.png",
                                 config.columns, config.dpi)
        logger.info("wrote %s", paths[kind])
    return paths


def main(argv: list[str] | None = None) -> int:
    """``python -m pipelines.tasks.translation.attention_plots --model m.keras --tokenizer spm.model "A sentence."``"""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sentence")
    parser.add_argument("--model", required=True, help="a saved .keras Transformer")
    parser.add_argument("--tokenizer", required=True, help="SentencePiece .model file")
    parser.add_argument("--target", help="plot this translation instead of the model's own")
    parser.add_argument("--layer", type=int, default=-1, help="0-based; negative counts from the last")
    parser.add_argument("--kinds", nargs="+", default=["encoder_self", "encoder_decoder"], choices=KINDS)
    parser.add_argument("--output-dir", default="attention")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

    from keras_transformer.checkpoints.saved_model import load_translator

    translator = load_translator(args.model, args.tokenizer)
    config = AttentionPlotConfig(layer=args.layer, kinds=tuple(args.kinds))
    for path in plot_attention(translator.model, translator.tokenizer, args.sentence, args.output_dir,
                               config, args.target).values():
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
