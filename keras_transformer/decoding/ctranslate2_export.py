"""Convert a trained Transformer to a CTranslate2 model directory: the CPU engine's form of the same weights.

CTranslate2 (OpenNMT's inference engine) runs the encoder-decoder of section 3 and its beam search in C++,
with int8 weights if asked; on this project's 2-core machine it translates about ten times faster than
the SavedModel (:mod:`keras_transformer.decoding.export`). The conversion goes through its Python spec
API (a ``Converter`` building a ``TransformerSpec``), weight for weight:

- the embeddings, multiplied by sqrt(d_model) in the engine as in
  :class:`~keras_transformer.layers.embedding.ScaledEmbedding` (section 3.4);
- the positions as a table of our own (section 3.5's sines at even and cosines at odd indices, or the
  learned table of Table 3 row (E)): the engine's built-in sinusoids put every sine before every cosine;
- each attention's query, key and value projections fused as the engine reads them (self-attention:
  one ``[q; k; v]``; encoder-decoder attention: ``q`` and ``[k; v]``), Keras' ``[in, out]`` kernels
  transposed to the engine's ``[out, in]``;
- post-norm (the paper's ``LayerNorm(x + Sublayer(x))``) or pre-norm with its final norms, at the
  model's own LayerNorm epsilon;
- the pre-softmax projection, tied to the target embedding or not;
- the vocabulary as SentencePiece pieces in id order, with our special pieces as the engine's.

What the engine cannot hold is refused with the reason: a parser's word alignment and tagger (their
decoder input depends on the words already covered), ``d_k != d_v``.

The directory also holds what the engine leaves to its caller, so that a translator built on it reads
and writes text exactly as the SavedModel does (:mod:`keras_transformer.decoding.ctranslate2_translator`):
the SentencePiece model(s) and ``assets.extra/translator.json`` (``"kind": "ctranslate2"``, the decoding
settings, the engine options they map to, the precision).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

import numpy as np

from keras_transformer.decoding.formats import METADATA_FILE, QUANTIZATIONS
from keras_transformer.decoding.settings import DecodingSettings
from keras_transformer.layers.positional_encoding import sinusoidal_encoding

logger = logging.getLogger(__name__)

# The engine's OpenMP threads (GNU libgomp, which reads this when the engine loads) spin while they wait
# by default: with anything else running on the cores, two threads then took minutes for 60 paragraphs
# instead of 3 s. Sleeping threads cost an idle machine little; a caller's own setting is kept. Both
# modules that load the engine import this one first.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

#: Where the tokenizers go, beside the metadata (:data:`~keras_transformer.decoding.formats.METADATA_FILE`).
SOURCE_TOKENIZER = "assets.extra/source.model"
TARGET_TOKENIZER = "assets.extra/target.model"
#: Rows of the sinusoid table: past the longest source a served request may hold (2,000 characters, one
#: piece each at worst, plus EOS) and the longest output (input + the offset).
MIN_POSITIONS = 2048


class UnsupportedModelError(ValueError):
    """A model the engine cannot represent; the message says what and why."""


def _dense(spec, layer) -> None:
    spec.weight = np.ascontiguousarray(layer.kernel.numpy().T)
    if layer.bias is not None:
        spec.bias = layer.bias.numpy()


def _fused(spec, layers) -> None:
    spec.weight = np.ascontiguousarray(np.concatenate([layer.kernel.numpy().T for layer in layers], axis=0))
    if all(layer.bias is not None for layer in layers):
        spec.bias = np.concatenate([layer.bias.numpy() for layer in layers])


def _norm(spec, layer) -> None:
    spec.gamma = layer.gamma.numpy()
    spec.beta = layer.beta.numpy()


def _attention(spec, attention, residual, self_attention: bool) -> None:
    if self_attention:
        _fused(spec.linear[0], [attention.query_dense, attention.key_dense, attention.value_dense])
    else:
        _dense(spec.linear[0], attention.query_dense)
        _fused(spec.linear[1], [attention.key_dense, attention.value_dense])
    _dense(spec.linear[-1], attention.output_dense)
    _norm(spec.layer_norm, residual.layer_norm)


def _feed_forward(spec, layer) -> None:
    _dense(spec.linear_0, layer.feed_forward.inner)
    _dense(spec.linear_1, layer.feed_forward.outer)
    _norm(spec.layer_norm, layer.feed_forward_residual.layer_norm)


def _positions(model, which: str, rows: int) -> np.ndarray:
    if model.config.positional_encoding == "learned":
        return getattr(model, which).position_embeddings.numpy()
    return np.asarray(sinusoidal_encoding(np.arange(rows), model.config.d_model, dtype="float32"))


def check_convertible(model) -> None:
    """Raises :class:`UnsupportedModelError` for a model the engine's ``TransformerSpec`` cannot hold."""
    if getattr(model, "architecture", None) != "transformer":
        raise UnsupportedModelError(
            f"a {getattr(model, 'architecture', type(model).__name__)} model cannot be converted to CTranslate2: "
            "the engine runs encoder-decoder Transformers; export it as a SavedModel")
    c = model.config
    if c.word_alignment or c.tagger != "none":
        raise UnsupportedModelError(
            "a model with word_alignment or a tagger cannot be converted to CTranslate2: its decoder input adds "
            "the encoder state of the next word to cover, which the engine's decoder has no place for; "
            "export it as a SavedModel")
    if c.d_k != c.d_v:
        raise UnsupportedModelError(f"d_k={c.d_k} != d_v={c.d_v} cannot be converted to CTranslate2: "
                                    "the engine has one head size for keys and values")


def transformer_spec(model, source_pieces: list[str], target_pieces: list[str], positions: int, unk_id: int = 1):
    """The ``ctranslate2.specs.TransformerSpec`` of ``model`` with its weights set; the sinusoid table
    has ``positions`` rows."""
    from ctranslate2.specs import transformer_spec as specs

    check_convertible(model)
    c = model.config
    head_dim = c.d_k if c.d_k * c.num_heads != c.d_model else None
    encoder = specs.TransformerEncoderSpec(c.num_encoder_layers, c.num_heads, pre_norm=c.norm_first,
                                           head_dim=head_dim)
    decoder = specs.TransformerDecoderSpec(c.num_decoder_layers, c.num_heads, pre_norm=c.norm_first,
                                           head_dim=head_dim)
    encoder.embeddings[0].weight = model.source_embedding.embeddings.numpy()
    decoder.embeddings.weight = model.target_embedding.embeddings.numpy()
    encoder.position_encodings.encodings = _positions(model, "encoder_positions", positions)
    decoder.position_encodings.encodings = _positions(model, "decoder_positions", positions)
    for layer_spec, layer in zip(encoder.layer, model.encoder_layers):
        _attention(layer_spec.self_attention, layer.self_attention, layer.self_attention_residual, True)
        _feed_forward(layer_spec.ffn, layer)
    for layer_spec, layer in zip(decoder.layer, model.decoder_layers):
        _attention(layer_spec.self_attention, layer.self_attention, layer.self_attention_residual, True)
        _attention(layer_spec.attention, layer.cross_attention, layer.cross_attention_residual, False)
        _feed_forward(layer_spec.ffn, layer)
    if c.norm_first:
        _norm(encoder.layer_norm, model.encoder_norm)
        _norm(decoder.layer_norm, model.decoder_norm)
    if model.output_projection is None:
        decoder.projection.weight = model.target_embedding.embeddings.numpy()
    else:
        decoder.projection.weight = np.ascontiguousarray(model.output_projection.kernel.numpy().T)
    spec = specs.TransformerSpec(encoder, decoder)
    spec.config.layer_norm_epsilon = float(c.layer_norm_epsilon)
    # The special pieces are found by name in the vocabulary; ours, by the project's ids.
    spec.config.unk_token = target_pieces[unk_id]
    spec.config.bos_token = spec.config.decoder_start_token = target_pieces[c.bos_id]
    spec.config.eos_token = target_pieces[c.eos_id]
    # The translator adds the source EOS itself, after cutting the source as the SavedModel does.
    spec.config.add_source_eos = False
    spec.register_source_vocabulary(source_pieces)
    spec.register_target_vocabulary(target_pieces)
    return spec


def engine_options(decoding: DecodingSettings) -> dict:
    """The engine options nearest to ``decoding`` (:mod:`keras_transformer.decoding.ctranslate2_translator`
    says how each maps and where the engine differs)."""
    return {
        "beam_size": decoding.beam_size,
        "length_penalty": round(0.8 * decoding.length_penalty, 3),
        "no_repeat_ngram_size": 0,
    }


def _converter(spec):
    from ctranslate2.converters.converter import Converter

    class KerasTransformerConverter(Converter):
        """A ``ctranslate2`` converter whose model is already a spec."""

        def _load(self):
            return spec

    return KerasTransformerConverter()


def convert_to_ctranslate2(model, tokenizer, path, quantization: str = "int8",
                           decoding: DecodingSettings | None = None, target_tokenizer=None,
                           engine: dict | None = None) -> Path:
    """Writes ``model`` with its tokenizer(s) as a CTranslate2 directory at ``path`` and returns it.

    ``quantization``: ``float32`` or ``int8`` (weights; the engine computes int8 matmuls with float32
    accumulation on CPU). ``decoding`` (default: the model's own) is recorded with the engine options it
    maps to (:func:`engine_options`; ``engine``
    overrides them, as chosen on a validation split). An existing directory at ``path`` is replaced.
    """
    if quantization not in QUANTIZATIONS:
        raise ValueError(f"quantization={quantization!r}: use one of {', '.join(QUANTIZATIONS)}")
    path = Path(path)
    target_tokenizer = target_tokenizer if target_tokenizer is not None else tokenizer
    decoding = decoding or getattr(model, "decoding", None) or DecodingSettings()
    model.config.check_tokenizer(tokenizer, "source")
    model.config.check_tokenizer(target_tokenizer, "target")
    positions = max(MIN_POSITIONS, MIN_POSITIONS + decoding.max_length_offset)
    spec = transformer_spec(model, tokenizer.pieces(), target_tokenizer.pieces(), positions, target_tokenizer.unk_id)
    # Written beside the destination and moved into place: an interrupted conversion leaves no
    # directory that looks whole.
    partial = path.with_name(path.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    _converter(spec).convert(str(partial), quantization=None if quantization == "float32" else quantization,
                             force=True)
    (partial / SOURCE_TOKENIZER).parent.mkdir(parents=True, exist_ok=True)
    (partial / SOURCE_TOKENIZER).write_bytes(tokenizer.serialized_model)
    (partial / TARGET_TOKENIZER).write_bytes(target_tokenizer.serialized_model)
    options = {**engine_options(decoding), **(engine or {})}
    metadata = {
        "kind": "ctranslate2",
        "quantization": quantization,
        "decoding": decoding.to_dict(),
        "engine": options,
        "copies_verbatim": bool(getattr(target_tokenizer, "copies_verbatim", False)),
        # No decoding constraint: a parser's bracket constraint is not the engine's (read by `translate`/`parse`).
        "constraint": None,
        "max_positions": positions if model.config.positional_encoding != "learned" else model.config.max_length,
        "model_config": model.config.to_dict(),
    }
    (partial / METADATA_FILE).write_text(json.dumps(metadata, indent=2, sort_keys=True) + "\n", "utf-8")
    shutil.rmtree(path, ignore_errors=True)
    partial.rename(path)
    logger.info("converted to CTranslate2 (%s) at %s", quantization, path)
    return path


def is_ctranslate2_export(path) -> bool:
    """Whether ``path`` is a directory written by :func:`convert_to_ctranslate2`."""
    path = Path(path)
    if not ((path / "model.bin").is_file() and (path / METADATA_FILE).is_file()):
        return False
    return json.loads((path / METADATA_FILE).read_text("utf-8")).get("kind") == "ctranslate2"
