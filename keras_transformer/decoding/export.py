"""Export a translator as one TensorFlow SavedModel: strings in, translations out.

The artifact contains the model weights, the SentencePiece model(s) (as a ``tensorflow_text``
resource, the proto embedded) and the whole decoding graph: tokenization, the source EOS, the
encoder, beam search with its cache (section 6.1 settings fixed at export time) and
detokenization. Loading it needs TensorFlow and ``tensorflow_text`` (whose import registers the
SentencePiece ops) and nothing else: no Keras, no ``keras_transformer``::

    import tensorflow as tf, tensorflow_text  # noqa: F401
    translator = tf.saved_model.load(path)
    translator.translate(tf.constant(["Hello world."]))                 # tf.string [batch]
    translator.signatures["serving_default"](sentences=tf.constant([...]))["translations"]

A span parser's export (:mod:`keras_transformer.decoding.chart_export`) writes the same metadata
file with ``"kind": "chart_parser"``; :func:`load_exported` loads either kind.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import tensorflow as tf

from keras_transformer.decoding.beam import beam_search_decode
from keras_transformer.decoding.greedy import ensure_built
from keras_transformer.decoding.repetition import repetition_guard as guard_for
from keras_transformer.decoding.sentences import translate_by_sentence
from keras_transformer.models.presets import DecodingSettings
from keras_transformer.tokenizer import source_batch

logger = logging.getLogger(__name__)

SIGNATURE_KEY = "serving_default"
INPUT_NAME = "sentences"
OUTPUT_NAME = "translations"
METADATA_FILE = "assets.extra/translator.json"


class TranslatorModule(tf.Module):
    """``tf.Module`` whose ``translate`` maps a 1-D ``tf.string`` tensor to translations."""

    def __init__(
        self,
        model,
        tokenizer,
        target_tokenizer=None,
        beam_size: int = 4,
        alpha: float = 0.6,
        max_length_offset: int = 50,
        constraint=None,
        split_sentences: bool = False,
        min_length_ratio: float = 0.0,
        coverage_penalty: float = 0.0,
        name: str = "translator",
    ):
        super().__init__(name=name)
        # A decoding constraint (e.g. the parser's BracketConstraint) is part of the graph: the
        # export decodes exactly as the evaluation that scored it. Its per-sentence input is the
        # number of whitespace-separated words.
        self.constraint = constraint
        ensure_built(model)
        self.model = model
        self.source_tokenizer = tokenizer
        self.target_tokenizer = target_tokenizer if target_tokenizer is not None else tokenizer
        self.beam_size = int(beam_size)
        self.alpha = float(alpha)
        self.max_length_offset = int(max_length_offset)
        self.split_sentences = bool(split_sentences)
        self.min_length_ratio = float(min_length_ratio)
        self.coverage_penalty = float(coverage_penalty)
        if self.split_sentences and constraint is not None and getattr(constraint, "takes_slots", True):
            # Its slots count the input's words (the parser's brackets): per input, never per sentence.
            raise ValueError(f"split_sentences cannot be combined with {type(constraint).__name__}, "
                             "whose slots are per input")
        config = model.config
        self._eos_id = config.eos_id
        self._pad_id = config.pad_id
        self._source_limit = config.max_positions

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name=INPUT_NAME)])
    def n_best(self, sentences):
        """Every finished beam hypothesis, best first: ``hypotheses`` ``tf.string [batch, beam]``
        and their length-normalised ``scores`` (``-inf`` marks an empty slot)."""
        source = source_batch(self.source_tokenizer, sentences, self._eos_id, self._pad_id, self._source_limit)
        slots = None
        if self.constraint is not None:
            slots = tf.cast(tf.strings.split(sentences).row_lengths(), tf.int32)
        result = beam_search_decode(
            self.model, source, self.beam_size, self.alpha, self.max_length_offset, self.constraint, slots,
            min_length_ratio=self.min_length_ratio, coverage_penalty=self.coverage_penalty,
        )
        shape = tf.shape(result.ids)
        texts = self.target_tokenizer.detokenize(tf.reshape(result.ids, tf.stack([-1, shape[2]])))
        texts = self.target_tokenizer.restore(texts, tf.repeat(sentences, shape[1]))
        return {"hypotheses": tf.reshape(texts, shape[:2]), "scores": result.scores}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name=INPUT_NAME)])
    def translate(self, sentences):
        """Translations ``tf.string [batch]`` of ``sentences`` (``tf.string [batch]``), sentence by
        sentence if exported with ``split_sentences`` (as ``Translator.translate``)."""
        if not self.split_sentences:
            return self.n_best(sentences)["hypotheses"][:, 0]
        return translate_by_sentence(sentences, lambda parts: self.n_best(parts)["hypotheses"][:, 0])

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name=INPUT_NAME)])
    def serve(self, sentences):
        return {OUTPUT_NAME: self.translate(sentences)}


def export_translator(
    model,
    tokenizer,
    path,
    beam_size: int | None = None,
    alpha: float | None = None,
    max_length_offset: int | None = None,
    target_tokenizer=None,
    constraint=None,
    split_sentences: bool = False,
    min_length_ratio: float = 0.0,
    coverage_penalty: float = 0.0,
    repetition_guard: int = 0,
) -> Path:
    """Writes a SavedModel translating raw strings to ``path`` and returns the path.

    ``beam_size``, ``alpha`` and ``max_length_offset`` default to the paper's settings
    (``DecodingSettings()``) and are fixed in the exported graph. The serving signature
    ``serving_default`` takes ``sentences: tf.string [batch]`` and returns
    ``{"translations": tf.string [batch]}``; the module's ``translate`` function returns the
    tensor directly. The settings are also recorded in ``assets.extra/translator.json``.
    ``constraint`` (a :class:`~keras_transformer.decoding.constraints.BracketConstraint`) constrains the
    beam search as in :meth:`Translator.translate`, with one slot per whitespace-separated word.
    ``split_sentences`` translates each input sentence by sentence and list item by list item (the
    n-best lists stay per input);
    ``min_length_ratio`` is the beam search's length floor (``DecodingSettings.min_length_ratio``),
    ``coverage_penalty`` its coverage penalty (``DecodingSettings.coverage_penalty``), ``repetition_guard``
    its guard against loops (``DecodingSettings.repetition_guard``), which takes the constraint's place.
    """
    if repetition_guard:
        if constraint is not None:
            raise ValueError("repetition_guard cannot be combined with another constraint")
        constraint = guard_for(model.config.target_vocab_size, int(repetition_guard))
    defaults = DecodingSettings()
    beam_size = defaults.beam_size if beam_size is None else int(beam_size)
    alpha = defaults.length_penalty if alpha is None else float(alpha)
    max_length_offset = defaults.max_length_offset if max_length_offset is None else int(max_length_offset)
    path = Path(path)
    module = TranslatorModule(model, tokenizer, target_tokenizer, beam_size, alpha, max_length_offset, constraint,
                              split_sentences, min_length_ratio, coverage_penalty)
    logger.info("tracing the translation graph (beam %d, alpha %s)", beam_size, alpha)
    signature = module.serve.get_concrete_function()
    tf.saved_model.save(module, str(path), signatures={SIGNATURE_KEY: signature})
    metadata = {
        "kind": "translator",
        "beam_size": beam_size,
        "alpha": alpha,
        "max_length_offset": max_length_offset,
        "split_sentences": bool(split_sentences),
        "min_length_ratio": float(min_length_ratio),
        "coverage_penalty": float(coverage_penalty),
        # URLs, e-mail addresses and paths go through as placeholders, put back from the source.
        "copies_verbatim": bool(getattr(module.target_tokenizer, "copies_verbatim", False)),
        "copies_identifiers": bool(getattr(module.target_tokenizer, "copies_identifiers", False)),
        "constraint": None if constraint is None else type(constraint).__name__,
        # The guard's period: an evaluation of this export checks it asked for the same.
        **({"repetition_guard": constraint.max_period} if hasattr(constraint, "max_period") else {}),
        "signature": SIGNATURE_KEY,
        "input": INPUT_NAME,
        "output": OUTPUT_NAME,
        "model_config": model.config.to_dict(),
    }
    (path / METADATA_FILE).parent.mkdir(parents=True, exist_ok=True)
    (path / METADATA_FILE).write_text(json.dumps(metadata, indent=2, sort_keys=True) + "\n", "utf-8")
    logger.info("exported translator to %s", path)
    return path


def is_exported_translator(path) -> bool:
    """Whether ``path`` is a directory written by :func:`export_translator` or
    :func:`~keras_transformer.decoding.chart_export.export_chart_parser` (both load with :func:`load_exported`)."""
    path = Path(path)
    return (path / "saved_model.pb").is_file() and (path / METADATA_FILE).is_file()


class ExportedTranslator:
    """A loaded export with the :class:`~keras_transformer.decoding.translator.Translator` call style."""

    def __init__(self, path):
        import tensorflow_text  # noqa: F401  (registers the SentencePiece ops the graph uses)

        self.path = Path(path)
        self.module = tf.saved_model.load(str(self.path))
        metadata_path = self.path / METADATA_FILE
        self.settings = json.loads(metadata_path.read_text("utf-8")) if metadata_path.is_file() else {}

    def translate(self, sentences, batch_size: int = 32, n_best: bool = False) -> list[str] | list[list[str]]:
        """Translations of a list of strings, decoded ``batch_size`` sentences at a time.

        ``n_best=True``: per sentence, every finished beam hypothesis, best first.
        """
        if isinstance(sentences, (str, bytes)):
            raise TypeError("translate() takes a list of sentences, not a single string")
        sentences = list(sentences)
        out: list = []
        for start in range(0, len(sentences), batch_size):
            batch = tf.constant(sentences[start : start + batch_size], tf.string)
            if not n_best:
                out.extend(t.decode("utf-8") for t in self.module.translate(batch).numpy())
                continue
            result = self.module.n_best(batch)
            for texts, scores in zip(result["hypotheses"].numpy(), result["scores"].numpy()):
                out.append([t.decode("utf-8") for t, score in zip(texts, scores) if np.isfinite(score)])
        return out

    def __call__(self, sentences, **kwargs) -> list[str]:
        return self.translate(sentences, **kwargs)


def load_exported(path):
    """Loads an export (TensorFlow + tensorflow_text): an :class:`ExportedTranslator` for
    :func:`export_translator`'s, an :class:`~keras_transformer.decoding.chart_export.ExportedChartParser`
    for a span parser's (metadata ``"kind": "chart_parser"``). Both translate lists of sentences."""
    metadata_path = Path(path) / METADATA_FILE
    metadata = json.loads(metadata_path.read_text("utf-8")) if metadata_path.is_file() else {}
    if metadata.get("kind") == "chart_parser":
        from keras_transformer.decoding.chart_export import ExportedChartParser  # imports this module

        return ExportedChartParser(path)
    return ExportedTranslator(path)
