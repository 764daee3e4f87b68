"""The architecture hyperparameters of the models (section 3, Table 3), validated.

:class:`TransformerConfig` is the encoder-decoder; :class:`SpanParserConfig` the span parser on its
encoder (section 6.3's task, Kitaev & Klein 2018). :data:`ARCHITECTURES` names them for presets and
for ``model_config.json``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

POSITIONAL_ENCODINGS = ("sinusoidal", "learned")
TAGGERS = ("none", "fused")
WORD_PIECES = ("first", "mean")
#: Why most removed settings went: what a config still naming one is told.
DROPPED = 'it lost in every measurement; see benchmarks/results/README.md, "Tried and dropped"'


def head_size(d_model: int, num_heads: int, size: int | None = None) -> int:
    """``size``, or section 3.2.2's default d_k = d_v = d_model / h."""
    return size if size is not None else d_model // num_heads


class _VocabularyChecks:
    """What both architectures share: the vocabulary sizes and special ids checked against the
    tokenizers, and the settings taken out of the product."""

    #: A removed setting -> why it went: a preset or override still naming it fails saying so.
    removed_settings: ClassVar[dict[str, str]] = {}
    #: A setting -> {its removed value: why it went}.
    removed_values: ClassVar[dict[str, dict[Any, str]]] = {}
    #: A removed setting -> its value that is what the model now always does: a saved model
    #: recording that value loads (:meth:`saved_settings`).
    kept_behaviour: ClassVar[dict[str, Any]] = {}

    @classmethod
    def removed_setting(cls, settings: dict[str, Any]) -> tuple[str, str] | None:
        """``(key, why it was removed)`` for the first removed setting or value in ``settings``,
        else ``None``."""
        for key, value in settings.items():
            if key in cls.removed_settings:
                return key, cls.removed_settings[key]
            values = cls.removed_values.get(key, {})
            if isinstance(value, str) and value in values:
                return key, values[value]
        return None

    @classmethod
    def saved_settings(cls, settings: dict[str, Any]) -> dict[str, Any]:
        """``settings`` as a saved model recorded them, without the removed settings it recorded
        at the behaviour kept (a span parser saved with ``span_loss: tree_crf``)."""
        return {k: v for k, v in settings.items()
                if not (k in cls.kept_behaviour and v == cls.kept_behaviour[k])}

    def _check_removed_values(self) -> None:
        for name, values in self.removed_values.items():
            value = getattr(self, name)
            if isinstance(value, str) and value in values:
                raise ValueError(f"Invalid model setting `{name}`={value!r}: was removed ({values[value]})")

    def check_tokenizer(self, tokenizer, side: str = "target") -> None:
        """Raises ValueError unless ``tokenizer``'s size and special ids are this model's.

        The input pipeline takes the ids from the tokenizer, the model from this config: a
        mismatch would train on one EOS and decode with another, silently.
        """
        vocab = self.source_vocab_size if side == "source" else self.target_vocab_size
        size = getattr(tokenizer, "vocab_size", None)
        if size is not None and vocab is not None and size != vocab:
            raise ValueError(f"{side} tokenizer has {size} pieces but the model's {side} vocabulary has "
                             f"{vocab}: they were not trained together")
        for name in ("pad_id", "bos_id", "eos_id"):
            value = getattr(tokenizer, name, None)
            if value is not None and int(value) != getattr(self, name):
                raise ValueError(f"{side} tokenizer {name} {value} != the model's {name} {getattr(self, name)}")

    def to_dict(self) -> dict:
        """The settings as JSON types (tuples as lists), e.g. for ``get_config``."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}

    @classmethod
    def field_names(cls) -> set[str]:
        return {f.name for f in dataclasses.fields(cls)}


@dataclass(frozen=True)
class TransformerConfig(_VocabularyChecks):
    """Architecture of an encoder-decoder Transformer (names as in the paper).

    Give ``vocab_size`` for one shared vocabulary, or ``source_vocab_size`` and ``target_vocab_size``
    with ``share_embeddings=False`` for separate ones (the parsing task of section 6.3).
    """

    #: The shared source and target vocabulary's size (section 3.4); the training stage sets it from the tokenizer.
    vocab_size: int | None = None
    #: The source vocabulary's size, with separate vocabularies (parsing); set from the tokenizer.
    source_vocab_size: int | None = None
    #: The target vocabulary's size, with separate vocabularies; set from the tokenizer.
    target_vocab_size: int | None = None
    #: N: layers of the encoder and of the decoder (section 3.1).
    num_layers: int = 6
    #: Encoder layers, if not ``num_layers``.
    num_encoder_layers: int | None = None
    #: Decoder layers, if not ``num_layers``.
    num_decoder_layers: int | None = None
    #: The width of every layer's output (section 3.1).
    d_model: int = 512
    #: h: attention heads (section 3.2.2).
    num_heads: int = 8
    #: Width of each head's queries and keys; null: d_model / h (section 3.2.2).
    d_k: int | None = None
    #: Width of each head's values; null: d_model / h.
    d_v: int | None = None
    #: The inner width of the position-wise feed-forward layers (section 3.3).
    d_ff: int = 2048
    #: P_drop: dropout on each sublayer's output and on the embedding sums (section 5.4).
    dropout: float = 0.1
    #: Dropout on the attention weights (not in the paper).
    attention_dropout: float = 0.0
    #: Dropout after the feed-forward layers' ReLU (not in the paper).
    relu_dropout: float = 0.0
    #: ``sinusoidal`` (section 3.5) or ``learned`` (Table 3 row E).
    positional_encoding: str = "sinusoidal"
    #: The longest sequence a ``learned`` positional embedding covers (sinusoids have no limit).
    max_length: int = 1024
    #: One embedding matrix for source and target (section 3.4; needs one shared vocabulary).
    share_embeddings: bool = True
    #: The pre-softmax projection is the target embedding matrix (section 3.4); false: a separate one.
    tie_output_embeddings: bool = True
    #: LayerNorm's epsilon.
    layer_norm_epsilon: float = 1e-6
    #: Pre-norm: each LayerNorm before its sublayer, and one after each stack (the paper's post-norm is false).
    norm_first: bool = False
    #: Each decoder input also gets the encoder state of the next word to cover (section 6.3's parser;
    #: :mod:`keras_transformer.layers.word_alignment`).
    word_alignment: bool = False
    #: The source pieces that begin a word; the training stage reads them off the tokenizer.
    word_start_ids: tuple[int, ...] | None = None
    #: With ``word_alignment``: the target ids that stand for a word (the tree's POS slots).
    slot_ids: tuple[int, ...] | None = None
    #: With ``word_alignment``: ``fused`` adds a slot classifier over each word's encoder state, its logits added to
    #: the decoder's; ``none``: no tagger.
    tagger: str = "none"
    #: A word's state: its ``first`` piece's encoder state, or the ``mean`` of all its pieces'.
    word_pieces: str = "first"
    #: The padding id (the tokenizer's; checked against it).
    pad_id: int = 0
    #: The begin-of-sequence id (the tokenizer's; checked against it).
    bos_id: int = 2
    #: The end-of-sequence id (the tokenizer's; checked against it).
    eos_id: int = 3

    removed_values: ClassVar[dict[str, dict[Any, str]]] = {"tagger": {"auxiliary": DROPPED}}

    def __post_init__(self):
        def fail(setting, value, why):
            raise ValueError(f"Invalid Transformer setting `{setting}`={value!r}: {why}")

        self._check_removed_values()

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

    @property
    def max_positions(self) -> int | None:
        """The longest sequence the positional encoding covers: ``max_length`` for learned
        embeddings (Table 3 row E), ``None`` (no limit) for sinusoids (section 3.5)."""
        return self.max_length if self.positional_encoding == "learned" else None

    @property
    def reads_trees(self) -> bool:
        """Whether the model learns from a linearised tree's symbols (the word-aligned parser)."""
        return self.word_alignment

    def vocabulary_facts(self, source, target, trees) -> dict[str, Any]:
        """The settings that are facts of the vocabularies, where this config leaves them empty: which
        pieces begin a word and which symbols stand for one (``trees()``, the training trees, unread)."""
        if not self.word_alignment or self.word_start_ids:
            return {}
        from keras_transformer.layers.word_alignment import alignment_ids

        return alignment_ids(source, target)


@dataclass(frozen=True)
class SpanParserConfig(_VocabularyChecks):
    """Architecture of a span parser (:class:`~keras_transformer.models.span_parser.SpanParser`).

    Section 3.1's encoder over the source pieces, a span classifier and a tagger. The spans are trained
    on the gold tree's probability among all trees (:mod:`keras_transformer.models.span_parser.tree_crf`; Zhang,
    Zhou & Li 2020, supar's parser), and the chart search adds up per span the log-odds of its marginal
    probability of being a constituent (supar's ``--mbr``). ``labels``, ``tags``, ``word_start_ids`` and
    ``source_pieces`` are facts of the treebank and the vocabularies: left empty in a preset, the
    training stage reads them off the corpus and tokenizers.
    """

    #: The shared source and target vocabulary's size (section 3.4); the training stage sets it from the tokenizer.
    vocab_size: int | None = None
    #: The source vocabulary's size, with separate vocabularies (parsing); set from the tokenizer.
    source_vocab_size: int | None = None
    #: The linearised trees' vocabulary the training batches hold (checked, not used by the model).
    target_vocab_size: int | None = None
    #: Span labels, the empty label ``""`` first, unary chains joined by ``+``; read off the treebank by the training
    #: stage.
    labels: tuple[str, ...] = ()
    #: The POS tags the tagger predicts; read off the treebank by the training stage.
    tags: tuple[str, ...] = ()
    #: The source pieces that begin a word; the training stage reads them off the tokenizer.
    word_start_ids: tuple[int, ...] = ()
    #: Layers of section 3.1's encoder.
    num_layers: int = 4
    #: The width of every layer's output (section 3.1).
    d_model: int = 256
    #: h: attention heads (section 3.2.2).
    num_heads: int = 4
    #: The inner width of the position-wise feed-forward layers (section 3.3).
    d_ff: int = 1024
    #: P_drop: dropout on each sublayer's output and on the embedding sums (section 5.4).
    dropout: float = 0.2
    #: Pre-norm: each LayerNorm before its sublayer, and one after each stack (the paper's post-norm is false).
    norm_first: bool = True
    #: The hidden width of the span classifier.
    span_hidden: int = 256
    #: A word's state: its ``first`` piece's encoder state, or the ``mean`` of all its pieces'.
    word_pieces: str = "first"
    #: In training, each piece becomes ``unk_id`` with this probability (word dropout, Stern et al. 2017), so unseen
    #: words are parsed from their context.
    piece_dropout: float = 0.0
    #: Width of the character embeddings of a CNN that reads each word's spelling into its pieces' embeddings (Kitaev
    #: & Klein 2018); 0: none.
    char_dim: int = 0
    #: With ``char_dim``: a piece hidden by piece dropout keeps its characters, so a word whose pieces are all hidden
    #: is read from its spelling alone.
    spell_dropped: bool = False
    #: Layers of bidirectional LSTMs over the word states whose halves are the fenceposts the spans are read from
    #: (Stern et al. 2017, supar's parser); 0: none.
    word_lstm: int = 0
    #: The source vocabulary's pieces by id, the characters ``char_dim`` reads; the training stage reads them off the
    #: tokenizer.
    source_pieces: tuple[str, ...] = ()
    #: Added to every span's constituent log-odds when decoding; the ``calibrate`` stage chooses it on the validation
    #: files.
    bias: float = 0.0
    #: The padding id (the tokenizer's; checked against it).
    pad_id: int = 0
    #: The unknown-piece id (the tokenizer's), which piece dropout writes.
    unk_id: int = 1
    #: The begin-of-sequence id (the tokenizer's; checked against it).
    bos_id: int = 2
    #: The end-of-sequence id (the tokenizer's; checked against it).
    eos_id: int = 3

    removed_settings: ClassVar[dict[str, str]] = {
        "span_biaffine": DROPPED,
        "span_loss": f"the spans are trained with the tree CRF; the local loss {DROPPED.removeprefix('it ')}",
        "chart_scores": f"the chart search adds up the tree CRF's marginals; the spans' own log-odds "
                        f"{DROPPED.removeprefix('it ')}",
    }
    kept_behaviour: ClassVar[dict[str, Any]] = {"span_biaffine": 0, "span_loss": "tree_crf",
                                                "chart_scores": "marginals"}

    def __post_init__(self):
        def fail(setting, value, why):
            raise ValueError(f"Invalid span parser setting `{setting}`={value!r}: {why}")

        if self.vocab_size is not None:
            object.__setattr__(self, "source_vocab_size", self.vocab_size)
            object.__setattr__(self, "target_vocab_size", self.vocab_size)
        for name in ("source_vocab_size", "num_layers", "d_model", "num_heads", "d_ff", "span_hidden"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                fail(name, value, "must be a positive integer")
        if self.d_model % 2 or self.d_model % self.num_heads:
            fail("d_model", self.d_model, f"must be even (forward/backward halves) and divisible by "
                 f"num_heads={self.num_heads}")
        if not 0.0 <= self.dropout < 1.0:
            fail("dropout", self.dropout, "must be in [0, 1)")
        if self.word_pieces not in WORD_PIECES:
            fail("word_pieces", self.word_pieces, f"use one of {WORD_PIECES}")
        if not 0.0 <= self.piece_dropout < 1.0:
            fail("piece_dropout", self.piece_dropout, "must be in [0, 1)")
        if not isinstance(self.char_dim, int) or isinstance(self.char_dim, bool) or self.char_dim < 0:
            fail("char_dim", self.char_dim, "must be a non-negative integer (0: no character CNN)")
        if not isinstance(self.word_lstm, int) or isinstance(self.word_lstm, bool) or self.word_lstm < 0:
            fail("word_lstm", self.word_lstm, "must be a non-negative integer (0: none)")
        if not isinstance(self.spell_dropped, bool):
            fail("spell_dropped", self.spell_dropped, "must be true or false")
        if self.spell_dropped and not self.char_dim:
            fail("spell_dropped", self.spell_dropped, "keeps the words' spelling: set char_dim too")
        for name in ("labels", "tags", "source_pieces"):
            value = getattr(self, name)
            if isinstance(value, (str, bytes)) or not all(isinstance(v, str) for v in value):
                fail(name, value, "must be a list of names")
            object.__setattr__(self, name, tuple(value))
        if self.labels and (self.labels[0] != "" or len(self.labels) < 2):
            fail("labels", self.labels, 'must start with the empty label "" and hold at least one other')
        if self.tags and len(self.tags) < 2:
            fail("tags", self.tags, "must hold at least two tags")
        value = self.word_start_ids
        if isinstance(value, (str, bytes)) or not all(isinstance(i, int) and i >= 0 for i in value):
            fail("word_start_ids", value, "must be a list of non-negative token ids")
        object.__setattr__(self, "word_start_ids", tuple(int(i) for i in value))
        if len({self.pad_id, self.unk_id, self.bos_id, self.eos_id}) != 4:
            fail("pad_id/unk_id/bos_id/eos_id", (self.pad_id, self.unk_id, self.bos_id, self.eos_id),
                 "special token ids must be distinct")
        object.__setattr__(self, "bias", float(self.bias))

    @property
    def max_positions(self) -> None:
        """Sinusoidal positions (section 3.5): no length limit."""
        return None

    #: It learns from linearised trees: its targets are read off the target vocabulary's pieces.
    reads_trees = True

    def vocabulary_facts(self, source, target, trees) -> dict[str, Any]:
        """The settings that are facts of the treebank and the vocabularies, where this config leaves
        them empty: the span labels of the training trees (``trees()``) and the tags, which pieces
        begin a word, and the pieces' strings the character CNN spells words from."""
        from keras_transformer.layers.word_alignment import alignment_ids
        from keras_transformer.models.span_parser.targets import span_inventory

        facts: dict[str, Any] = {}
        if not self.labels:
            facts.update(span_inventory(trees(), target.pieces(), target.special_ids))
        if not self.word_start_ids:
            facts["word_start_ids"] = alignment_ids(source, target)["word_start_ids"]
        if self.char_dim and not self.source_pieces:
            facts["source_pieces"] = source.pieces()
        return facts


#: Architecture name (a preset's ``architecture``, ``model_config.json``'s) -> its config class.
ARCHITECTURES = {"transformer": TransformerConfig, "span_parser": SpanParserConfig}


def config_class(architecture: str):
    """The config class of ``architecture``; a ``ValueError`` names the known ones otherwise."""
    if architecture not in ARCHITECTURES:
        raise ValueError(f"unknown architecture {architecture!r}; known are {sorted(ARCHITECTURES)}")
    return ARCHITECTURES[architecture]
