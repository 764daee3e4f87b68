"""The architecture hyperparameters of the Transformer (section 3, Table 3), validated."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

POSITIONAL_ENCODINGS = ("sinusoidal", "learned")
TAGGERS = ("none", "auxiliary", "fused")
WORD_PIECES = ("first", "mean")


def head_size(d_model: int, num_heads: int, size: int | None = None) -> int:
    """``size``, or section 3.2.2's default d_k = d_v = d_model / h."""
    return size if size is not None else d_model // num_heads


@dataclass(frozen=True)
class TransformerConfig:
    """Architecture of an encoder-decoder Transformer.

    Names follow the paper: ``num_layers`` is N, ``d_model``, ``d_ff``, ``num_heads`` is h,
    ``d_k``/``d_v`` default to d_model / h (section 3.2.2), ``dropout`` is P_drop (section 5.4).
    ``vocab_size`` is the shared source/target vocabulary (section 3.4); give
    ``source_vocab_size`` and ``target_vocab_size`` with ``share_embeddings=False`` instead for
    separate vocabularies (the parsing task of section 6.3). ``norm_first`` moves each LayerNorm
    before its sublayer (pre-norm; the paper's post-norm is the default). ``word_alignment`` adds
    to each decoder input the encoder state of the next word to cover (parsing;
    :mod:`keras_transformer.layers.word_alignment`), with the source ids that begin a word
    (``word_start_ids``) and the target ids that stand for a word (``slot_ids``). ``tagger``
    (with ``word_alignment``) adds a slot classifier over each word's encoder state: trained
    beside the decoder (``auxiliary``) or also added to the decoder's logits (``fused``).
    ``word_pieces``: a word's state is its first piece's encoder state, or the ``mean`` of all its pieces'.
    """

    vocab_size: int | None = None
    source_vocab_size: int | None = None
    target_vocab_size: int | None = None
    num_layers: int = 6
    num_encoder_layers: int | None = None
    num_decoder_layers: int | None = None
    d_model: int = 512
    num_heads: int = 8
    d_k: int | None = None
    d_v: int | None = None
    d_ff: int = 2048
    dropout: float = 0.1
    attention_dropout: float = 0.0
    relu_dropout: float = 0.0
    positional_encoding: str = "sinusoidal"
    max_length: int = 1024
    share_embeddings: bool = True
    tie_output_embeddings: bool = True
    layer_norm_epsilon: float = 1e-6
    norm_first: bool = False
    word_alignment: bool = False
    word_start_ids: tuple[int, ...] | None = None
    slot_ids: tuple[int, ...] | None = None
    tagger: str = "none"
    word_pieces: str = "first"
    pad_id: int = 0
    bos_id: int = 2
    eos_id: int = 3

    def __post_init__(self):
        def fail(setting, value, why):
            raise ValueError(f"Invalid Transformer setting `{setting}`={value!r}: {why}")

        if self.vocab_size is not None:
            for name in ("source_vocab_size", "target_vocab_size"):
                value = getattr(self, name)
                if value is not None and value != self.vocab_size:
                    fail(name, value, f"conflicts with vocab_size={self.vocab_size}")
            object.__setattr__(self, "source_vocab_size", self.vocab_size)
            object.__setattr__(self, "target_vocab_size", self.vocab_size)
        if self.source_vocab_size is None or self.target_vocab_size is None:
            fail(
                "vocab_size",
                self.vocab_size,
                "give vocab_size (shared vocabulary) or both source_vocab_size and "
                "target_vocab_size",
            )
        if self.share_embeddings and self.source_vocab_size != self.target_vocab_size:
            fail(
                "share_embeddings",
                True,
                f"a shared embedding needs one vocabulary, got source_vocab_size="
                f"{self.source_vocab_size} and target_vocab_size={self.target_vocab_size}",
            )
        for name in (
            "source_vocab_size",
            "target_vocab_size",
            "num_layers",
            "d_model",
            "num_heads",
            "d_ff",
            "max_length",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                fail(name, value, "must be a positive integer")
        for name in ("num_encoder_layers", "num_decoder_layers", "d_k", "d_v"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value <= 0):
                fail(name, value, "must be a positive integer (or None for the default)")
        if self.d_model % self.num_heads:
            fail(
                "num_heads",
                self.num_heads,
                f"d_model={self.d_model} is not divisible by num_heads={self.num_heads}",
            )
        for name in ("dropout", "attention_dropout", "relu_dropout"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                fail(name, value, "must be in [0, 1)")
        if self.positional_encoding not in POSITIONAL_ENCODINGS:
            fail("positional_encoding", self.positional_encoding, f"use one of {POSITIONAL_ENCODINGS}")
        if self.word_pieces not in WORD_PIECES:
            fail("word_pieces", self.word_pieces, f"use one of {WORD_PIECES}")
        if self.tagger not in TAGGERS:
            fail("tagger", self.tagger, f"use one of {TAGGERS}")
        if self.tagger != "none" and not self.word_alignment:
            fail("tagger", self.tagger, "the tagger reads the aligned word states: it needs word_alignment=True")
        if self.d_model % 2 and self.positional_encoding == "sinusoidal":
            fail("d_model", self.d_model, "sinusoidal encodings (section 3.5) need an even d_model")
        ids = {"pad_id": self.pad_id, "bos_id": self.bos_id, "eos_id": self.eos_id}
        if len(set(ids.values())) != 3:
            fail("pad_id/bos_id/eos_id", ids, "special token ids must be distinct")
        for name in ("word_start_ids", "slot_ids"):
            value = getattr(self, name)
            if value is not None:
                if isinstance(value, (str, bytes)) or not all(isinstance(i, int) and i >= 0 for i in value):
                    fail(name, value, "must be a list of non-negative token ids")
                object.__setattr__(self, name, tuple(int(i) for i in value))
        if self.num_encoder_layers is None:
            object.__setattr__(self, "num_encoder_layers", self.num_layers)
        if self.num_decoder_layers is None:
            object.__setattr__(self, "num_decoder_layers", self.num_layers)
        object.__setattr__(self, "d_k", head_size(self.d_model, self.num_heads, self.d_k))
        object.__setattr__(self, "d_v", head_size(self.d_model, self.num_heads, self.d_v))

    def check_tokenizer(self, tokenizer, side: str = "target") -> None:
        """Raises ValueError unless ``tokenizer``'s size and special ids are this model's.

        The input pipeline takes the ids from the tokenizer, the model from this config: a
        mismatch would train on one EOS and decode with another, silently.
        """
        vocab = self.source_vocab_size if side == "source" else self.target_vocab_size
        size = getattr(tokenizer, "vocab_size", None)
        if size is not None and size != vocab:
            raise ValueError(f"{side} tokenizer has {size} pieces but the model's {side} vocabulary has "
                             f"{vocab}: they were not trained together")
        for name in ("pad_id", "bos_id", "eos_id"):
            value = getattr(tokenizer, name, None)
            if value is not None and int(value) != getattr(self, name):
                raise ValueError(f"{side} tokenizer {name} {value} != the model's {name} {getattr(self, name)}")

    @property
    def max_positions(self) -> int | None:
        """The longest sequence the positional encoding covers: ``max_length`` for learned
        embeddings (Table 3 row E), ``None`` (no limit) for sinusoids (section 3.5)."""
        return self.max_length if self.positional_encoding == "learned" else None

    def to_dict(self) -> dict:
        """The settings as JSON types (id tuples as lists), e.g. for ``get_config``."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}

    @classmethod
    def field_names(cls) -> set[str]:
        return {f.name for f in dataclasses.fields(cls)}
