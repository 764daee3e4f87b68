"""In-graph subword tokenizer: a SentencePiece model run by ``tensorflow_text``.

The paper (Section 5.1) encodes sentences with byte-pair encoding into a shared source-target
vocabulary. The vocabulary is trained with the ``sentencepiece`` library
(:mod:`pipelines.tokenization`); this module runs it inside the TensorFlow graph with
``tensorflow_text.SentencepieceTokenizer``, so that tokenization can live inside ``tf.data`` and
inside an exported model (the serialized model proto is a property and a tracked constant).

Special ids follow the project convention: ``pad=0``, ``unk=1``, ``bos=2``, ``eos=3``.
``tokenize`` adds no BOS/EOS; ``detokenize`` accepts model output (dense with padding, BOS and
EOS, or ragged) and stops at the first EOS. A model trained with the placeholder piece of
:mod:`keras_transformer.text` (``copies_verbatim``) sees URLs, e-mail addresses and paths as that
piece; :meth:`SubwordTokenizer.restore` puts the source's back into a translation.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from pathlib import Path

import sentencepiece as spm
import tensorflow as tf
import tensorflow_text as tf_text

from keras_transformer.native_stderr import filtered_stderr
from keras_transformer.text import VERBATIM, normalize, one_line, protect, restore, verbatim_spans

__all__ = ["SubwordTokenizer", "normalize", "one_line", "source_batch", "without_identity_notice"]

#: What tensorflow-text's own copy of SentencePiece logs (``normalizer.cc(51) LOG(INFO)
#: precompiled_charsmap is empty. use identity normalization.``) each time its op loads a model
#: without a normalisation table: every vocabulary here (``normalization_rule_name: identity``).
#: Its log level is a variable private to ``_sentencepiece_tokenizer.so`` (no setter is exported;
#: ``spm.set_min_log_level`` sets the Python package's own copy), so only holding back file
#: descriptor 2 keeps the line out of a flow's log and a command's stderr.
_IDENTITY_NOTICE = re.compile(r"^normalizer\.cc\(\d+\) LOG\(INFO\) precompiled_charsmap is empty\b")


def is_identity_notice(line: str) -> bool:
    """Whether ``line`` is SentencePiece's notice that a model normalises nothing."""
    return bool(_IDENTITY_NOTICE.match(line))


def without_identity_notice():
    """A block in which SentencePiece ops load models (a tokenizer made, an export loaded) without
    their identity-normalisation notice on stderr; other lines written to fd 2 in it come after it."""
    return filtered_stderr(is_identity_notice)


def _normalises_nothing(model: bytes) -> bool:
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(model)
    return not proto.normalizer_spec.precompiled_charsmap


class SubwordTokenizer(tf.Module):
    """SentencePiece tokenizer usable eagerly, in ``tf.function``, ``tf.data`` and SavedModels.

    Args:
      model: path of a SentencePiece ``.model`` file, or its serialized proto bytes.
      name: module name.
    """

    def __init__(self, model: str | Path | bytes, name: str | None = None):
        super().__init__(name=name)
        if isinstance(model, (str, Path)):
            model = Path(model).read_bytes()
        if not isinstance(model, bytes) or not model:
            raise ValueError("model must be a SentencePiece .model path or non-empty proto bytes")
        # The Python processor only reads the model's metadata (special ids, vocabulary size);
        # all tokenization runs through the TF op below.
        processor = spm.SentencePieceProcessor(model_proto=model)
        self._serialized_model = model
        self._vocab_size = int(processor.vocab_size())
        self._pad_id = int(processor.pad_id())
        self._unk_id = int(processor.unk_id())
        self._bos_id = int(processor.bos_id())
        self._eos_id = int(processor.eos_id())
        # Trained with the verbatim placeholder (TokenizerConfig.verbatim), the vocabulary holds it
        # as a piece of its own; otherwise it would be byte pieces and unknown as a piece.
        self._copies_verbatim = processor.piece_to_id(VERBATIM) != self._unk_id
        # The op's resource is shared by node name: unnamed, a source and a target tokenizer get
        # the same name when a SavedModel is loaded and collapse into one (the reloaded parser
        # detokenized tree symbols with the words' model). A name from the model's own bytes is
        # unique per vocabulary and the same on every export of it.
        # Eagerly, the op loads the model here, and logs its notice for a model without a table.
        quiet = without_identity_notice() if _normalises_nothing(model) else contextlib.nullcontext()
        with quiet:
            self._sp = tf_text.SentencepieceTokenizer(
                model=model, out_type=tf.int32, add_bos=False, add_eos=False,
                name=f"sentencepiece_{self.fingerprint}")

    @property
    def serialized_model(self) -> bytes:
        """The SentencePiece model proto, e.g. to embed in an exported module or to hash."""
        return self._serialized_model

    @property
    def fingerprint(self) -> str:
        """Short sha256 of the model proto (cache keys change when the tokenizer changes)."""
        return hashlib.sha256(self._serialized_model).hexdigest()[:16]

    @property
    def vocab_size(self) -> int:
        return self._vocab_size

    @property
    def pad_id(self) -> int:
        return self._pad_id

    @property
    def unk_id(self) -> int:
        return self._unk_id

    @property
    def bos_id(self) -> int:
        return self._bos_id

    @property
    def eos_id(self) -> int:
        return self._eos_id

    @property
    def copies_verbatim(self) -> bool:
        """Whether verbatim spans (URLs, e-mail addresses, paths) are one placeholder piece to
        this vocabulary: :meth:`tokenize` replaces them, :meth:`restore` puts them back."""
        return self._copies_verbatim

    @property
    def special_ids(self) -> frozenset[int]:
        """Pad, unknown, BOS and EOS ids."""
        return frozenset({self._pad_id, self._unk_id, self._bos_id, self._eos_id})

    def pieces(self) -> list[str]:
        """Every piece of the vocabulary, by id."""
        return [piece.decode("utf-8") for piece in self.id_to_piece(tf.range(self._vocab_size)).numpy()]

    def tokenize(self, strings) -> tf.RaggedTensor:
        """UTF-8 strings ``[batch]`` -> int32 ids ``RaggedTensor [batch, (tokens)]``, no BOS/EOS.

        The text is normalised first as the training corpus was (:func:`normalize`), so a
        ligature or a no-break space from a user reaches the model as the pieces it was trained
        on. A scalar string gives a 1-D int32 tensor. With :attr:`copies_verbatim` each verbatim
        span is the placeholder piece.
        """
        text = normalize(tf.convert_to_tensor(strings, dtype=tf.string))
        return self._sp.tokenize(protect(text) if self._copies_verbatim else text)

    def restore(self, translations, sources) -> tf.Tensor:
        """``translations`` (``tf.string [batch]``, detokenized) with the placeholders replaced by
        the verbatim spans of their ``sources`` (``[batch]``), in order; unchanged unless
        :attr:`copies_verbatim` (a target tokenizer's: its model writes the placeholders)."""
        translations = tf.convert_to_tensor(translations, tf.string)
        if not self._copies_verbatim:
            return translations
        sources = normalize(tf.convert_to_tensor(sources, tf.string))
        return restore(translations, verbatim_spans(sources))

    def detokenize(self, ids) -> tf.Tensor:
        """Ids -> UTF-8 strings, dropping padding and BOS and everything from the first EOS on,
        each :func:`one_line`.

        ``ids`` may be a dense ``[batch, length]`` tensor (e.g. decoder output), a ragged
        ``[batch, (length)]`` tensor (e.g. from :meth:`tokenize`), or a single 1-D sequence,
        which gives a scalar string.
        """
        if isinstance(ids, tf.RaggedTensor):
            ids = ids.to_tensor(default_value=self._pad_id)
        ids = tf.cast(tf.convert_to_tensor(ids), tf.int32)
        single = ids.shape.rank == 1
        if single:
            ids = ids[tf.newaxis]
        # Positions strictly before the first EOS: the running count of EOS tokens is still 0.
        before_eos = tf.math.cumsum(tf.cast(tf.equal(ids, self._eos_id), tf.int32), axis=-1) == 0
        keep = before_eos & tf.not_equal(ids, self._pad_id) & tf.not_equal(ids, self._bos_id)
        text = one_line(self._sp.detokenize(tf.ragged.boolean_mask(ids, keep)))
        return text[0] if single else text

    def id_to_piece(self, ids) -> tf.Tensor:
        """Ids -> their SentencePiece pieces (``tf.string``, same shape)."""
        return self._sp.id_to_string(tf.convert_to_tensor(ids, dtype=tf.int32))

    def piece_to_id(self, pieces) -> tf.Tensor:
        """Pieces -> ids (``unk_id`` for pieces not in the vocabulary)."""
        return self._sp.string_to_id(tf.convert_to_tensor(pieces, dtype=tf.string))


def source_batch(tokenizer, sentences, eos_id: int, pad_id: int, limit: int | None = None) -> tf.Tensor:
    """The padded int32 source ids ``[batch, length]`` of ``sentences`` as training saw them: the
    pieces, then EOS; cut to ``limit`` ids with the EOS if given (what the model can encode).

    ``sentences``: a list of strings or a ``tf.string`` tensor ``[batch]`` (inside a traced
    function too: the exports build their inputs here).
    """
    ids = tokenizer.tokenize(tf.convert_to_tensor(sentences, dtype=tf.string))
    if limit is not None:
        ids = ids[:, : limit - 1]
    eos = tf.fill(tf.stack([ids.nrows(), 1]), tf.constant(eos_id, ids.dtype))
    ids = tf.concat([ids, tf.RaggedTensor.from_tensor(eos)], axis=1)
    return tf.cast(ids.to_tensor(default_value=pad_id), tf.int32)
