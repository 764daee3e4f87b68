"""Translate raw sentences with a trained Transformer: tokenize, beam search, detokenize.

The defaults are the paper's inference settings (section 6.1): beam size 4, length penalty
alpha = 0.6, maximum output length = input length + 50; a model built from a preset decodes with
the preset's ``decoding`` (:class:`~keras_transformer.decoding.settings.DecodingSettings`), which a
call overrides by name.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
import tensorflow as tf
from tqdm.auto import tqdm

from keras_transformer.decoding.beam import compiled_search
from keras_transformer.decoding.greedy import compiled_greedy_decode
from keras_transformer.decoding.repetition import with_guard
from keras_transformer.decoding.sentences import translate_by_sentence
from keras_transformer.decoding.settings import DecodingSettings

logger = logging.getLogger(__name__)


class Translator:
    """A model and its tokenizer(s), translating lists of strings.

    Args:
        model: a (trained) :class:`~keras_transformer.Transformer`.
        tokenizer: a :class:`~keras_transformer.tokenizer.SubwordTokenizer` (or anything with
            ``tokenize``, ``detokenize``, ``restore`` and ``eos_id``) for the source side, and the
            target side too unless ``target_tokenizer`` is given (separate vocabularies).
        decoding: how it decodes by default (:class:`DecodingSettings`); when omitted, the model's own
            (``model.decoding``: its preset's), else the paper's (``DecodingSettings()``).

    Sources are encoded as their subword ids followed by EOS, as in training; translations are
    the best finished beam hypothesis, detokenized up to its EOS, with the source's URLs, e-mail
    addresses and paths in its placeholders if the vocabulary has them (:mod:`keras_transformer.text`).
    """

    def __init__(self, model, tokenizer, target_tokenizer=None, decoding: DecodingSettings | None = None):
        self.model = model
        self.tokenizer = tokenizer
        self.target_tokenizer = target_tokenizer if target_tokenizer is not None else tokenizer
        # None: the model's own (its preset's, for a model built from one), else the paper's.
        self.decoding = decoding if decoding is not None else getattr(model, "decoding", None) or DecodingSettings()
        model.config.check_tokenizer(self.tokenizer, "source")
        model.config.check_tokenizer(self.target_tokenizer, "target")

    # ------------------------------------------------------------------ encoding

    def encode(self, sentences: Sequence[str]) -> list[np.ndarray]:
        """Source ids per sentence: subword ids then EOS (truncated to what the model can encode)."""
        if not sentences:
            return []
        ragged = self.tokenizer.tokenize(tf.constant(list(sentences), tf.string))
        eos = self.model.config.eos_id
        limit = self._source_limit()
        encoded = []
        for i, ids in enumerate(ragged.to_list()):
            if limit is not None and len(ids) + 1 > limit:
                logger.warning("source sentence %d has %d tokens; truncated to %d", i, len(ids) + 1, limit)
                ids = ids[: limit - 1]
            encoded.append(np.asarray(ids + [eos], np.int32))
        return encoded

    def _source_limit(self) -> int | None:
        return self.model.config.max_positions

    # ------------------------------------------------------------------ translation

    def translate(
        self,
        sentences: Sequence[str],
        batch_size: int = 32,
        greedy: bool = False,
        n_best: bool = False,
        constraint=None,
        slots: Sequence[int] | None = None,
        **decoding,
    ) -> list[str] | list[list[str]]:
        """Translations of ``sentences``, in order.

        ``decoding``: overrides of the translator's :class:`DecodingSettings` by name
        (``beam_size=8``, ``length_penalty=1.0``, ...), merged once. Sentences are sorted by length
        and decoded in batches of ``batch_size`` so that little padding is computed; the compiled
        search is traced once per beam size. ``greedy=True`` uses greedy decoding instead of beam
        search (the beam's settings are ignored). ``n_best=True`` returns, per sentence, every
        finished hypothesis of the beam, best first (for a caller that must reject some, e.g. a
        parse that is not a tree over its words). ``constraint`` with ``slots`` (one int per
        sentence) constrains the beam search (:mod:`keras_transformer.decoding.constraints`); it
        takes the place of a repetition guard that comes with the settings. With
        ``split_sentences`` each paragraph is translated sentence by sentence and item by item
        (:mod:`keras_transformer.decoding.sentences`), except for an n-best list or a constraint
        with slots, which are per input.
        """
        if isinstance(sentences, (str, bytes)):
            raise TypeError("translate() takes a list of sentences, not a single string")
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        settings = self.decoding.merged(decoding)
        sentences = list(sentences)
        if not sentences:
            return []
        constraint = with_guard(settings, self.model.config.target_vocab_size, constraint, greedy, asked=decoding)
        per_input = n_best or (constraint is not None and getattr(constraint, "takes_slots", True))
        if settings.split_sentences and not per_input:
            # One beam search over every sentence of every paragraph, then each paragraph joined
            # by the ops its export uses (keras_transformer.decoding.sentences).
            def translate_parts(parts):
                flat = [part.decode("utf-8") for part in parts.numpy()]
                return tf.constant(self._translate(flat, settings, batch_size, greedy, constraint=constraint),
                                   tf.string)

            return [t.decode("utf-8") for t in translate_by_sentence(sentences, translate_parts).numpy()]
        return self._translate(sentences, settings, batch_size, greedy, n_best, constraint, slots)

    def decoding_record(self, **decoding) -> dict:
        """The settings :meth:`translate` decodes with given these overrides, for a record."""
        return self.decoding.merged(decoding).to_dict()

    def _translate(self, sentences, settings: DecodingSettings, batch_size=32, greedy=False, n_best=False,
                   constraint=None, slots=None):
        encoded = self.encode(sentences)
        # Longest first: the first batch shows the worst-case time, and similar lengths share
        # a batch. Ties keep input order (stable sort) so results do not depend on the sort.
        order = sorted(range(len(encoded)), key=lambda i: -len(encoded[i]))
        batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
        pad = self.model.config.pad_id
        translations: list = [None] * len(sentences)
        if constraint is not None and slots is None and not getattr(constraint, "takes_slots", True):
            slots = [0] * len(sentences)
        if constraint is not None and (greedy or slots is None or len(slots) != len(sentences)):
            raise ValueError("a constraint needs beam search and one slots value per sentence")
        decode = compiled_greedy_decode(self.model) if greedy else compiled_search(self.model, settings, constraint)
        logger.info("translating %d sentences in %d batches (%s)", len(sentences), len(batches),
                    f"greedy, max length input + {settings.max_length_offset}" if greedy else settings.describe())
        offset = tf.constant(settings.max_length_offset, tf.int32)
        for batch in tqdm(batches, desc="translating", unit="batch", disable=None):
            width = max(len(encoded[i]) for i in batch)
            source = np.full((len(batch), width), pad, np.int32)
            for row, i in enumerate(batch):
                source[row, : len(encoded[i])] = encoded[i]
            if greedy:
                ids = decode(tf.constant(source), offset).ids[:, None]
                found = np.ones(ids.shape[:2], bool)
            else:
                inputs = [tf.constant(source), tf.constant(settings.length_penalty, tf.float32), offset]
                if constraint is not None:
                    inputs.append(tf.constant([int(slots[i]) for i in batch], tf.int32))
                result = decode(*inputs)
                ids = result.ids if n_best else result.ids[:, :1]
                found = np.isfinite(result.scores.numpy()[:, : ids.shape[1]])
            shape = tf.shape(ids)
            texts = self.target_tokenizer.detokenize(tf.reshape(ids, [-1, shape[2]]))
            sources = np.repeat([sentences[i] for i in batch], int(shape[1]))  # one per hypothesis
            texts = self.target_tokenizer.restore(texts, sources).numpy()
            texts = texts.reshape(int(shape[0]), int(shape[1]))
            for row, i in enumerate(batch):
                hypotheses = [t.decode("utf-8") for t, ok in zip(texts[row], found[row]) if ok]
                translations[i] = hypotheses if n_best else (hypotheses[0] if hypotheses else "")
        return translations

    def __call__(self, sentences: Sequence[str], **kwargs) -> list[str]:
        return self.translate(sentences, **kwargs)

    @classmethod
    def from_files(cls, model_path, tokenizer_path, target_tokenizer_path=None, decoding=None) -> Translator:
        """A translator from a saved ``.keras`` model and SentencePiece ``.model`` file(s)."""
        import keras

        from keras_transformer.models.transformer import Transformer  # noqa: F401  (registers classes)
        from keras_transformer.tokenizer import SubwordTokenizer

        model = keras.saving.load_model(model_path, compile=False)
        tokenizer = SubwordTokenizer(tokenizer_path)
        target = SubwordTokenizer(target_tokenizer_path) if target_tokenizer_path else None
        return cls(model, tokenizer, target, decoding or run_preset_decoding(model, model_path))


def load_translator(model_path, tokenizer_path, target_tokenizer_path=None, decoding=None):
    """The decoder a saved model calls for (``model.decoder``): a :class:`Translator` for a
    ``Transformer``, a chart parser for a span parser (which reads only the source tokenizer). Both
    take ``translate(sentences, n_best=...)``."""
    import keras

    import keras_transformer.models.span_parser  # noqa: F401  (registers classes)
    from keras_transformer.models.transformer import Transformer  # noqa: F401  (registers classes)
    from keras_transformer.tokenizer import SubwordTokenizer

    model = keras.saving.load_model(model_path, compile=False)
    tokenizer = SubwordTokenizer(tokenizer_path)
    target = SubwordTokenizer(target_tokenizer_path) if target_tokenizer_path else None
    return model.decoder(tokenizer, target, decoding or run_preset_decoding(model, model_path))


def run_preset_decoding(model, model_path) -> DecodingSettings | None:
    """The decoding of a saved model's run preset, for a ``.keras`` file saved before models kept
    their preset's decoding in their config; ``None`` for any other (it decodes as its config says).

    Such a model would otherwise decode with the paper's defaults (whole paragraphs, alpha 0.6),
    not as its run's evaluation did. ``Transformer`` marks it (``decoding_saved``); the
    preset is the one its run's ``model_config.json`` (beside the model, as the training and
    averaging stages write it) names.
    """
    from pathlib import Path

    from keras_transformer.checkpoints.model_checkpoint import read_model_config
    from keras_transformer.models.presets import get_preset, preset_names

    if getattr(model, "decoding_saved", True):
        return None
    path = Path(model_path)
    info = read_model_config(path.parent) or {}
    if info.get("preset") not in preset_names():
        return None
    logger.info("%s predates models keeping their decoding: decoding as its run's preset %r",
                path, info["preset"])
    return get_preset(info["preset"]).decoding
