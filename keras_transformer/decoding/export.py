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

A span parser's export (:mod:`keras_transformer.models.span_parser.chart_export`) writes the same metadata
file with ``"kind": "chart_parser"``; :func:`load_exported` loads either kind.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import tensorflow as tf

from keras_transformer.decoding.beam import search_decode
from keras_transformer.decoding.formats import EXPORT_FORMATS, INPUT_NAME, METADATA_FILE, OUTPUT_NAME, SIGNATURE_KEY
from keras_transformer.decoding.greedy import ensure_built
from keras_transformer.decoding.repetition import with_guard
from keras_transformer.decoding.sentences import translate_by_sentence
from keras_transformer.decoding.settings import DecodingSettings
from keras_transformer.tokenizer import source_batch

logger = logging.getLogger(__name__)


class TranslatorModule(tf.Module):
    """``tf.Module`` whose ``translate`` (once :meth:`trace` made it) maps a 1-D ``tf.string`` tensor to
    translations, decoding with ``decoding`` (a :class:`DecodingSettings`, fixed in the graph) and
    ``constraint``."""

    def __init__(self, model, tokenizer, target_tokenizer=None, decoding: DecodingSettings | None = None,
                 constraint=None, name: str = "translator"):
        super().__init__(name=name)
        ensure_built(model)
        self.model = model
        self.source_tokenizer = tokenizer
        self.target_tokenizer = target_tokenizer if target_tokenizer is not None else tokenizer
        self.decoding = decoding or getattr(model, "decoding", None) or DecodingSettings()
        # A decoding constraint (the parser's BracketConstraint, the repetition guard) is part of
        # the graph: the export decodes exactly as the evaluation that scored it. The parser's
        # per-sentence input is the number of whitespace-separated words.
        self.constraint = with_guard(self.decoding, model.config.target_vocab_size, constraint, asked=True)
        if self.decoding.split_sentences and getattr(self.constraint, "takes_slots", False):
            # Its slots count the input's words (the parser's brackets): per input, never per sentence.
            raise ValueError(f"split_sentences cannot be combined with {type(constraint).__name__}, "
                             "whose slots are per input")
        config = model.config
        self._eos_id = config.eos_id
        self._pad_id = config.pad_id
        self._source_limit = config.max_positions

    def trace(self):
        """Traces ``n_best``, ``translate`` and ``serve`` once each and sets them as the module's concrete
        functions; returns ``serve``, the serving signature. Each calls the one before as a graph of its
        own: traced inside another graph, or again by ``tf.saved_model.save`` (which retraces a
        ``tf.function`` in its own context), the beam search's tracing, most of an export's time, was
        done twice."""
        spec = [tf.TensorSpec([None], tf.string, name=INPUT_NAME)]
        # Without AutoGraph, which has nothing to convert here (the search is a tf.while_loop).
        self.n_best = tf.function(self._n_best, input_signature=spec, autograph=False).get_concrete_function()
        self.translate = tf.function(self._translate, input_signature=spec, autograph=False).get_concrete_function()
        self.serve = tf.function(self._serve, input_signature=spec, autograph=False).get_concrete_function()
        return self.serve

    def _n_best(self, sentences):
        """Every finished beam hypothesis, best first: ``hypotheses`` ``tf.string [batch, beam]``
        and their length-normalised ``scores`` (``-inf`` marks an empty slot)."""
        source = source_batch(self.source_tokenizer, sentences, self._eos_id, self._pad_id, self._source_limit)
        slots = None
        if self.constraint is not None:
            slots = tf.cast(tf.strings.split(sentences).row_lengths(), tf.int32)
        result = search_decode(self.model, source, self.decoding, self.constraint, slots)
        shape = tf.shape(result.ids)
        texts = self.target_tokenizer.detokenize(tf.reshape(result.ids, tf.stack([-1, shape[2]])))
        texts = self.target_tokenizer.restore(texts, tf.repeat(sentences, shape[1]))
        return {"hypotheses": tf.reshape(texts, shape[:2]), "scores": result.scores}

    def _translate(self, sentences):
        """Translations ``tf.string [batch]`` of ``sentences`` (``tf.string [batch]``), sentence by
        sentence if exported with ``split_sentences`` (as ``Translator.translate``)."""
        if not self.decoding.split_sentences:
            return self.n_best(sentences)["hypotheses"][:, 0]
        return translate_by_sentence(sentences, lambda parts: self.n_best(parts)["hypotheses"][:, 0])

    def _serve(self, sentences):
        return {OUTPUT_NAME: self.translate(sentences)}


def export_translator(model, tokenizer, path, decoding: DecodingSettings | None = None, target_tokenizer=None,
                      constraint=None) -> Path:
    """Writes a SavedModel translating raw strings to ``path`` and returns the path.

    ``decoding`` (default: the model's own, else the paper's ``DecodingSettings()``) is fixed in
    the exported graph and recorded under ``"decoding"`` in ``assets.extra/translator.json``. The
    serving signature ``serving_default`` takes ``sentences: tf.string [batch]`` and returns
    ``{"translations": tf.string [batch]}``; the module's ``translate`` function returns the tensor
    directly. ``constraint`` (a :class:`~keras_transformer.decoding.constraints.BracketConstraint`)
    constrains the beam search as in :meth:`Translator.translate`, with one slot per
    whitespace-separated word.
    """
    path = Path(path)
    module = TranslatorModule(model, tokenizer, target_tokenizer, decoding, constraint)
    logger.info("tracing the translation graph (%s)", module.decoding.describe())
    signature = module.trace()
    tf.saved_model.save(module, str(path), signatures={SIGNATURE_KEY: signature})
    metadata = {
        "kind": "translator",
        "decoding": module.decoding.to_dict(),
        # URLs, e-mail addresses and paths go through as placeholders, put back from the source.
        "copies_verbatim": bool(getattr(module.target_tokenizer, "copies_verbatim", False)),
        "constraint": None if module.constraint is None else type(module.constraint).__name__,
        "signature": SIGNATURE_KEY,
        "input": INPUT_NAME,
        "output": OUTPUT_NAME,
        "model_config": model.config.to_dict(),
    }
    (path / METADATA_FILE).parent.mkdir(parents=True, exist_ok=True)
    (path / METADATA_FILE).write_text(json.dumps(metadata, indent=2, sort_keys=True) + "\n", "utf-8")
    logger.info("exported translator to %s", path)
    return path


def check_format(export_format: str, constraint=None) -> str:
    """``export_format`` if it is one of :data:`EXPORT_FORMATS` and can hold ``constraint``, else a ``ValueError``."""
    if export_format not in EXPORT_FORMATS:
        raise ValueError(f"export format {export_format!r}: use one of {', '.join(EXPORT_FORMATS)}")
    if export_format == "ctranslate2" and constraint is not None:
        from keras_transformer.decoding.ctranslate2_export import UnsupportedModelError

        raise UnsupportedModelError(f"a decoding constraint ({type(constraint).__name__}) cannot be exported to "
                                    "CTranslate2: the engine's beam search takes no constraint; export a SavedModel")
    return export_format


def export_record(path) -> dict:
    """How the export at ``path`` decodes, read from its metadata alone (no graph loaded): its
    ``DecodingSettings``, or a chart parser's search and bias."""
    metadata = json.loads((Path(path) / METADATA_FILE).read_text("utf-8"))
    if metadata.get("kind") == "chart_parser":
        from keras_transformer.models.span_parser.chart_parser import chart_record

        return chart_record(metadata["bias"], {})
    if metadata.get("kind") == "ctranslate2":
        # The settings it was converted for and what the engine runs in their place.
        engine = {**metadata["engine"], "quantization": metadata["quantization"]}
        return {**exported_decoding(metadata).to_dict(), "engine": "ctranslate2",
                **{f"engine.{name}": value for name, value in engine.items()}}
    return exported_decoding(metadata).to_dict()


def exported_decoding(metadata: dict) -> DecodingSettings:
    """The decoding an export's metadata records; exports written before the settings were one
    record kept them at the top level, the length penalty as ``alpha``."""
    if "decoding" in metadata:
        return DecodingSettings.from_dict(metadata["decoding"])
    legacy = {name: metadata.get(name) for name in DecodingSettings.names()}
    legacy["length_penalty"] = metadata.get("alpha")
    return DecodingSettings.from_dict(legacy)


def is_exported_translator(path) -> bool:
    """Whether ``path`` is a directory written by :func:`export_translator`,
    :func:`~keras_transformer.models.span_parser.chart_export.export_chart_parser` or
    :func:`~keras_transformer.decoding.ctranslate2_export.convert_to_ctranslate2` (all load with
    :func:`load_exported`)."""
    path = Path(path)
    model_file = (path / "saved_model.pb").is_file() or (path / "model.bin").is_file()
    return model_file and (path / METADATA_FILE).is_file()


class ExportedTranslator:
    """A loaded export with the :class:`~keras_transformer.decoding.translator.Translator` call style."""

    def __init__(self, path):
        import tensorflow_text  # noqa: F401  (registers the SentencePiece ops the graph uses)

        self.path = Path(path)
        self.module = tf.saved_model.load(str(self.path))
        metadata_path = self.path / METADATA_FILE
        self.settings = json.loads(metadata_path.read_text("utf-8")) if metadata_path.is_file() else {}
        self.decoding = exported_decoding(self.settings)

    def decoding_record(self, **decoding) -> dict:
        """The settings compiled into the export; asking for others is an error, not a silent
        difference between what was asked and what was decoded."""
        return self.decoding.fixed_record(self.path, decoding)

    def translate(self, sentences, batch_size: int = 32, n_best: bool = False,
                  **decoding) -> list[str] | list[list[str]]:
        """Translations of a list of strings, decoded ``batch_size`` sentences at a time.

        ``n_best=True``: per sentence, every finished beam hypothesis, best first. ``decoding``
        overrides must equal the compiled-in settings (:meth:`decoding_record`).
        """
        if isinstance(sentences, (str, bytes)):
            raise TypeError("translate() takes a list of sentences, not a single string")
        self.decoding_record(**decoding)
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


def load_exported(path, threads: int = 0):
    """Loads an export (TensorFlow + tensorflow_text): an :class:`ExportedTranslator` for
    :func:`export_translator`'s, an :class:`~keras_transformer.models.span_parser.chart_export.ExportedChartParser`
    for a span parser's (metadata ``"kind": "chart_parser"``), a
    :class:`~keras_transformer.decoding.ctranslate2_translator.CTranslate2Translator` for a CTranslate2
    directory (``"kind": "ctranslate2"``, run on ``threads`` threads, 0: one per core). All translate lists
    of sentences."""
    metadata_path = Path(path) / METADATA_FILE
    metadata = json.loads(metadata_path.read_text("utf-8")) if metadata_path.is_file() else {}
    if metadata.get("kind") == "ctranslate2":
        from keras_transformer.decoding.ctranslate2_translator import CTranslate2Translator

        return CTranslate2Translator(path, threads=threads)
    if metadata.get("kind") == "chart_parser":
        from keras_transformer.models.span_parser.chart_export import ExportedChartParser  # imports this module

        return ExportedChartParser(path)
    return ExportedTranslator(path)
