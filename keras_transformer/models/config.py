"""The architecture hyperparameters of the models (section 3, Table 3), validated.

:class:`TransformerConfig` is the encoder-decoder; :class:`SpanParserConfig` the span parser on its
encoder (section 6.3's task, Kitaev & Klein 2018). :data:`ARCHITECTURES` names them for presets and
for ``model_config.json``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

POSITIONAL_ENCODINGS = ("sinusoidal", "learned")
TAGGERS = ("none", "auxiliary", "fused")
SPAN_LOSSES = ("local", "tree_crf")
#: What the chart search adds up: each span's own constituent log-odds, or those of its marginal
#: probability of being a constituent under the tree CRF (minimum Bayes risk decoding).
CHART_SCORES = ("log_odds", "marginals")
WORD_PIECES = ("first", "mean")


def head_size(d_model: int, num_heads: int, size: int | None = None) -> int:
    """``size``, or section 3.2.2's default d_k = d_v = d_model / h."""
    return size if size is not None else d_model // num_heads


class _VocabularyChecks:
    """What both architectures share: the vocabulary sizes and special ids checked against the tokenizers."""

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

    @property
    def max_positions(self) -> int | None:
        """The longest sequence the positional encoding covers: ``max_length`` for learned
        embeddings (Table 3 row E), ``None`` (no limit) for sinusoids (section 3.5)."""
        return self.max_length if self.positional_encoding == "learned" else None


@dataclass(frozen=True)
class SpanParserConfig(_VocabularyChecks):
    """Architecture of a span parser (:class:`~keras_transformer.models.span_parser.SpanParser`).

    Section 3.1's encoder (``num_layers``, ``d_model``, ``num_heads``, ``d_ff``, ``dropout``,
    ``norm_first``) over the source pieces, a span classifier of hidden width ``span_hidden`` and a
    tagger. ``labels`` (the empty label ``""`` first, unary chains joined by ``+``), ``tags`` and
    ``word_start_ids`` are facts of the treebank and the vocabularies: left empty in a preset, the
    training stage reads them off the corpus and tokenizers. ``target_vocab_size`` is the
    linearised trees' vocabulary the training batches hold (checked, not used by the model).
    ``word_pieces``: a word's state is its first piece's (``first``) or the mean of its pieces' (``mean``).
    ``piece_dropout``: in training, each piece becomes ``unk_id`` with this probability (word
    dropout, Stern et al. 2017), so that words unseen in training are parsed from their context.
    ``char_dim`` (0: none): each word's spelling, read by a character CNN with embeddings of this
    width, is added to its pieces' embeddings (Kitaev & Klein 2018, section 5.1); its characters
    come from ``source_pieces``, the source vocabulary's pieces by id (read off the tokenizer by the
    training stage, like ``word_start_ids``). ``spell_dropped`` (needs ``char_dim``): a piece
    hidden by piece dropout keeps its characters, so a word whose pieces are all hidden is read
    from its spelling alone (K&K's character-only words), as a word unseen in training is.
    ``span_loss``: ``local``, cross-entropy over every span on its own (Teng & Zhang 2018), or
    ``tree_crf``, the gold tree's probability among all trees
    (:mod:`keras_transformer.training.tree_crf`; Zhang, Zhou & Li 2020, supar's parser).
    ``chart_scores``: what the chart search adds up per span: ``log_odds``, the span's own log-odds
    of being a constituent, or ``marginals``, the log-odds of its probability of being a constituent
    of the tree, summed over all trees by the tree CRF (:func:`keras_transformer.training.tree_crf.
    span_marginals`; supar's ``--mbr``, Zhang, Zhou & Li 2020, section 3.3).
    ``word_lstm`` (0: none): layers of bidirectional LSTMs (``d_model / 2`` units each way) over the
    word states, whose forward and backward halves become the fenceposts the spans are read from
    (the BiLSTM span features of Stern et al. 2017 and of supar's parser, Zhang, Zhou & Li 2020);
    the tagger keeps reading the encoder's word states. ``span_biaffine`` (0: none): the width of
    a biaffine bracket scorer over the fenceposts (Dozat & Manning 2017, as in supar's parser),
    ``[l_i; 1]^T W [r_j; 1]``, added to every label's log-odds of span ``(i, j)``.
    ``bias`` is added to every span's constituent log-odds when decoding (chosen on dev).
    """

    vocab_size: int | None = None
    source_vocab_size: int | None = None
    target_vocab_size: int | None = None
    labels: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    word_start_ids: tuple[int, ...] = ()
    num_layers: int = 4
    d_model: int = 256
    num_heads: int = 4
    d_ff: int = 1024
    dropout: float = 0.2
    norm_first: bool = True
    span_hidden: int = 256
    word_pieces: str = "first"
    piece_dropout: float = 0.0
    char_dim: int = 0
    spell_dropped: bool = False
    span_loss: str = "local"
    chart_scores: str = "log_odds"
    word_lstm: int = 0
    span_biaffine: int = 0
    source_pieces: tuple[str, ...] = ()
    bias: float = 0.0
    pad_id: int = 0
    unk_id: int = 1
    bos_id: int = 2
    eos_id: int = 3

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
        for name in ("word_lstm", "span_biaffine"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                fail(name, value, "must be a non-negative integer (0: none)")
        if not isinstance(self.spell_dropped, bool):
            fail("spell_dropped", self.spell_dropped, "must be true or false")
        if self.spell_dropped and not self.char_dim:
            fail("spell_dropped", self.spell_dropped, "keeps the words' spelling: set char_dim too")
        if self.span_loss not in SPAN_LOSSES:
            fail("span_loss", self.span_loss, f"use one of {SPAN_LOSSES}")
        if self.chart_scores not in CHART_SCORES:
            fail("chart_scores", self.chart_scores, f"use one of {CHART_SCORES}")
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


#: Architecture name (a preset's ``architecture``, ``model_config.json``'s) -> its config class.
ARCHITECTURES = {"transformer": TransformerConfig, "span_parser": SpanParserConfig}


def config_class(architecture: str):
    """The config class of ``architecture``; a ``ValueError`` names the known ones otherwise."""
    if architecture not in ARCHITECTURES:
        raise ValueError(f"unknown architecture {architecture!r}; known are {sorted(ARCHITECTURES)}")
    return ARCHITECTURES[architecture]
