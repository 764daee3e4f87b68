"""Translate with a CTranslate2 directory, reading and writing text exactly as the SavedModel does.

The engine decodes piece strings; everything around it is the project's own TensorFlow text ops, the
ones the :class:`~keras_transformer.decoding.translator.Translator` and the SavedModel export run:
normalisation, verbatim spans (URLs, e-mail addresses and paths held aside as one placeholder piece and
put back from the source), the source EOS and the cut at the longest source, sentence and list-item
splitting with the bullets put back (:mod:`keras_transformer.decoding.sentences`), detokenisation.

The engine's search is not ours, so the decoding settings (section 6.1's beam search, and the options
of :class:`~keras_transformer.decoding.settings.DecodingSettings`) are mapped as closely as it allows
(:func:`~keras_transformer.decoding.ctranslate2_export.engine_options`, recorded by the conversion), and
where they differ the export records engine options chosen on a validation split instead:

- ``length_penalty``: ours is GNMT's ``((5 + |Y|) / 6) ** alpha``; the engine divides by ``|Y| ** p``.
  Both grow as ``|Y| ** (0.8 alpha)`` near 20 pieces, so ``p = 0.8 alpha`` is the starting point.
- ``max_length_offset`` and ``min_length_ratio`` are per sentence here and per batch in the engine,
  so a batch holds sentences of one length only: each gets its own limit and floor, and a sentence's
  translation does not depend on what else was asked with it (a served request, the evaluation's
  batches).
- ``repetition_guard`` (no third copy in a row of an n-gram) has no equal in the engine's search: the
  engine returns its whole beam and the best hypothesis whose text does not loop
  (:mod:`keras_transformer.decoding.loops`) is taken; a sentence whose every hypothesis loops is decoded
  again with no bigram of pieces twice (the engine's ``no_repeat_ngram_size=2``). Words are not
  pieces (a word's pieces differ by where it stands: "▁ent" alone, "ent" inside "entmen"), so text
  that still loops then ends before the copy that makes the loop (:func:`~keras_transformer.decoding.loops.cut_loops`).
  The engine's ``no_repeat_ngram_size`` may also be set for every sentence.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import tensorflow as tf

from keras_transformer.decoding.ctranslate2_export import SOURCE_TOKENIZER, TARGET_TOKENIZER
from keras_transformer.decoding.formats import METADATA_FILE
from keras_transformer.decoding.loops import cut_loops, repeated_ngram
from keras_transformer.decoding.sentences import translate_by_sentence
from keras_transformer.decoding.settings import DecodingSettings

logger = logging.getLogger(__name__)

#: What a sentence whose every hypothesis loops is decoded again with: three copies in a row of any
#: n-gram of pieces hold one of its bigrams twice, so what loops after it is a word's pieces differing.
LOOP_RETRY = {"no_repeat_ngram_size": 2}

#: The engine options a CTranslate2 export decodes with (``translate_batch`` keyword arguments);
#: ``coverage_penalty`` is 0 wherever an export records it.
ENGINE_OPTIONS = ("beam_size", "length_penalty", "coverage_penalty", "no_repeat_ngram_size")


def check_engine_options(options: dict) -> dict:
    """``options`` if every name is an engine option with a valid value; a ``ValueError`` naming it otherwise."""
    for name, value in options.items():
        if name not in ENGINE_OPTIONS:
            raise ValueError(f"engine.{name}: not a CTranslate2 option this export sets; known: "
                             f"{', '.join(ENGINE_OPTIONS)}")
        integer = name in ("beam_size", "no_repeat_ngram_size")
        if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)) or value < (
                1 if name == "beam_size" else 0):
            raise ValueError(f"engine.{name}={value!r}: must be {'an integer' if integer else 'a number'} "
                             f">= {1 if name == 'beam_size' else 0}")
    return options


class CTranslate2Translator:
    """A CTranslate2 directory (:func:`~keras_transformer.decoding.ctranslate2_export.convert_to_ctranslate2`)
    with the call style of :class:`~keras_transformer.decoding.export.ExportedTranslator`.

    Args:
        path: the directory.
        threads: the engine's workers (``inter_threads``, one thread each); 0: one per core.
        engine: engine options replacing the recorded ones (a search over them on validation).
    """

    def __init__(self, path, threads: int = 0, engine: dict | None = None):
        import ctranslate2

        from keras_transformer.tokenizer import SubwordTokenizer

        self.path = Path(path)
        self.settings = json.loads((self.path / METADATA_FILE).read_text("utf-8"))
        self.decoding = DecodingSettings.from_dict(self.settings["decoding"])
        self.engine = check_engine_options({**self.settings["engine"], **(engine or {})})
        self.tokenizer = SubwordTokenizer(self.path / SOURCE_TOKENIZER)
        self.target_tokenizer = SubwordTokenizer(self.path / TARGET_TOKENIZER)
        config = self.settings["model_config"]
        self._eos_piece = self.tokenizer.pieces()[config["eos_id"]]
        self._source_pieces = np.asarray(self.tokenizer.pieces(), dtype=object)
        self._target_ids = {piece: i for i, piece in enumerate(self.target_tokenizer.pieces())}
        positions = int(self.settings["max_positions"])
        # A source fits the position table, and so does its longest output (input + offset).
        self._source_limit = positions - self.decoding.max_length_offset - 1
        self._output_limit = positions - 1
        self.threads = int(threads) or os.cpu_count() or 1
        # A worker per thread, one core each: the batches of one source length are small, and one worker's
        # threads parallelised them worse (2 threads took more CPU than 1 for bulk translation) than
        # workers given whole batches do; the weights are shared.
        self.engine_translator = ctranslate2.Translator(str(self.path), device="cpu", inter_threads=self.threads,
                                                        intra_threads=1)

    def decoding_record(self, **decoding) -> dict:
        """The export's decoding settings; asking for others is an error, as with the SavedModel (the
        engine options were chosen for these)."""
        return self.decoding.fixed_record(self.path, decoding)

    def engine_record(self) -> dict:
        """What the engine decodes with: its options and the precision of its weights."""
        return {**self.engine, "quantization": self.settings["quantization"], "threads": self.threads}

    # ------------------------------------------------------------------ translation

    def translate(self, sentences: Sequence[str], batch_size: int = 32, n_best: bool = False, greedy: bool = False,
                  **decoding) -> list[str] | list[list[str]]:
        """Translations of a list of strings, in order, ``batch_size`` sentences to an engine call.

        ``n_best=True``: per input, every finished hypothesis, best first (per input, never split into
        sentences). ``greedy=True``: greedy decoding (beam 1, no penalty, floor or guard), as
        ``Translator.translate(greedy=True)``; a faithful conversion gives the same pieces.
        """
        if isinstance(sentences, (str, bytes)):
            raise TypeError("translate() takes a list of sentences, not a single string")
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        self.decoding_record(**decoding)
        sentences = list(sentences)
        if not sentences:
            return []
        if self.decoding.split_sentences and not n_best:
            def translate_parts(parts):
                flat = [part.decode("utf-8") for part in parts.numpy()]
                return tf.constant(self._translate(flat, batch_size, False, greedy), tf.string)

            return [t.decode("utf-8") for t in translate_by_sentence(sentences, translate_parts).numpy()]
        return self._translate(sentences, batch_size, n_best, greedy)

    def __call__(self, sentences, **kwargs):
        return self.translate(sentences, **kwargs)

    def _encode(self, sentences: list[str]) -> list[list[int]]:
        ids = self.tokenizer.tokenize(tf.constant(sentences, tf.string)).to_list()
        for i, row in enumerate(ids):
            if len(row) + 1 > self._source_limit:
                logger.warning("source sentence %d has %d tokens; truncated to %d", i, len(row) + 1,
                               self._source_limit)
                ids[i] = row[: self._source_limit - 1]
        return ids

    def _options(self, lengths: list[int], every_hypothesis: bool, greedy: bool) -> dict:
        # Per sentence in our search; per batch in the engine's (lengths: source pieces, EOS included).
        longest = min(max(lengths) + self.decoding.max_length_offset, self._output_limit)
        if greedy:
            return {"beam_size": 1, "max_decoding_length": longest, "min_decoding_length": 0}
        floor = int(np.floor(self.decoding.min_length_ratio * max(min(lengths) - 1, 0)))
        options = dict(self.engine, max_decoding_length=longest, min_decoding_length=floor)
        if every_hypothesis:
            options.update(num_hypotheses=options["beam_size"])
        return options

    def _translate(self, sentences: list[str], batch_size: int, n_best: bool, greedy: bool) -> list:
        guard = bool(self.decoding.repetition_guard) and not (n_best or greedy)
        hypotheses = self._decode(sentences, batch_size, n_best or guard, greedy)
        if n_best:
            return self._detokenize(hypotheses, sentences)
        # Only the best hypotheses are made text; a sentence's next ones only if its best loops (the
        # guard's rule reads them best first, so the choice is the same).
        best = self._detokenize([ids[:1] for ids in hypotheses], sentences)
        chosen = [texts[0] if texts else None for texts in best]
        if not guard:
            return [text if text is not None else "" for text in chosen]
        chosen = [text if text is not None and repeated_ngram(text) is None else None for text in chosen]
        looping = [i for i, text in enumerate(chosen) if text is None and len(hypotheses[i]) > 1]
        if looping:
            rest = self._detokenize([hypotheses[i][1:] for i in looping], [sentences[i] for i in looping])
            for i, texts in zip(looping, rest):
                chosen[i] = without_loops(texts)
        looping = [i for i, text in enumerate(chosen) if text is None]
        if looping:
            again = self._detokenize(self._decode([sentences[i] for i in looping], batch_size, True, False,
                                                  LOOP_RETRY), [sentences[i] for i in looping])
            for i, texts in zip(looping, again):
                text = without_loops(texts)
                first = texts[0] if texts else (best[i][0] if best[i] else "")
                chosen[i] = text if text is not None else cut_loops(first)
        return [text if text is not None else "" for text in chosen]

    def _decode(self, sentences: list[str], batch_size: int, every_hypothesis: bool, greedy: bool,
                override: dict | None = None) -> list[list[np.ndarray]]:
        """Per sentence, the target ids of its translations best first (every finished hypothesis, or the
        best only)."""
        encoded = self._encode(sentences)
        outputs: list = [None] * len(sentences)
        pending = []
        # Every batch asked before any is read: the engine's workers decode them side by side.
        for batch in _batches_of_one_length([len(ids) for ids in encoded], batch_size):
            tokens = [list(self._source_pieces[encoded[i]]) + [self._eos_piece] for i in batch]
            lengths = [len(t) for t in tokens]
            options = {**self._options(lengths, every_hypothesis, greedy), **(override or {})}
            pending.append((batch, lengths, self.engine_translator.translate_batch(
                tokens, max_input_length=0, asynchronous=True, **options)))
        for batch, lengths, results in pending:
            for i, length, result in zip(batch, lengths, results):
                limit = min(length + self.decoding.max_length_offset, self._output_limit)
                outputs[i] = [np.fromiter(map(self._target_ids.__getitem__, hypothesis[:limit]), np.int32)
                              for hypothesis in result.result().hypotheses]
        return outputs

    def _detokenize(self, hypotheses: list[list[np.ndarray]], sentences: list[str]) -> list[list[str]]:
        """Per sentence, the text of each of its hypotheses (ids), verbatim spans put back from the sentence."""
        counts = [len(ids) for ids in hypotheses]
        flat = [ids for sentence in hypotheses for ids in sentence]
        if not flat:
            return [[] for _ in hypotheses]
        # One ragged tensor from the ids' concatenation: tf.ragged.constant walks every id in Python.
        ids = tf.RaggedTensor.from_row_lengths(np.concatenate(flat).astype(np.int32),
                                               np.fromiter(map(len, flat), np.int64, len(flat)))
        texts = self.target_tokenizer.detokenize(ids)
        texts = self.target_tokenizer.restore(texts, np.repeat(np.asarray(sentences, dtype=object), counts)).numpy()
        texts = [t.decode("utf-8") for t in texts]
        split = np.cumsum([0, *counts])
        return [texts[split[k] : split[k + 1]] for k in range(len(hypotheses))]


def _batches_of_one_length(lengths: list[int], batch_size: int) -> list[list[int]]:
    """Indices of ``lengths`` in batches of at most ``batch_size`` equal lengths, longest first (ties in
    input order): the engine's length limits are per batch, ours per sentence."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches: list[list[int]] = []
    for i in order:
        if not batches or len(batches[-1]) == batch_size or lengths[batches[-1][0]] != lengths[i]:
            batches.append([])
        batches[-1].append(i)
    return batches


def without_loops(texts: list[str]) -> str | None:
    """The best of a sentence's translations (best first) whose text does not loop; None if all do."""
    return next((text for text in texts if repeated_ngram(text) is None), None)
