"""What the commands that decode with a trained model share (``translate``, ``parse``).

Sentences come as arguments or on stdin, one per line; ``--model`` is a saved ``.keras``
Transformer (with its SentencePiece model(s)) or an exported SavedModel directory (vocabularies
and decoding settings inside); decoding options override the task's defaults where the model
allows it.

Bad input is refused in one line with exit status 2 (:mod:`pipelines.cli_errors`): stdin that is
not UTF-8, a model that does not load, a parser given to ``translate`` or a translation model to
``parse``, a sentence longer than the model can encode.

Long input. A model with sinusoidal positions (section 3.5, every preset but Table 3 row E)
encodes a source of any length, so a long line is translated whole (slowly: the output may run to
its length + ``max_length_offset`` pieces). A model with learned positions encodes at most
``max_length`` pieces, its EOS included, and would cut the rest off: such a line (with
``split_sentences``, such a sentence of it) is refused with its length, since a translation of
its beginning passed off as the translation of the line would be a lie and splitting it at an
arbitrary piece would give one that no evaluation measured. An export carries no tokenizer outside
its graph: its lines are measured in words (each at least one piece) and refused as above, and a
line of more characters than the limit, which may be cut, is warned about on stderr.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import zipfile
from pathlib import Path

from pipelines.cli_errors import InputError, add_debug_option, check_utf8_argument, first_line, utf8_lines

logger = logging.getLogger(__name__)


def build_parser(prog: str = "translate", description: str = "Translate sentences with a trained "
                 "Transformer (arguments or stdin, one per line).", defaults: str = "4, 0.6, 50"
                 ) -> argparse.ArgumentParser:
    """The options of a command decoding sentences with a saved or exported model (``parse`` reuses them)."""
    beam, alpha, offset = defaults.split(", ")
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("sentences", nargs="*", help="sentences; none or '-' reads stdin")
    parser.add_argument("--model", required=True, help="a .keras model file or an exported SavedModel directory")
    parser.add_argument("--tokenizer", help="SentencePiece .model file (source side; both sides if shared)")
    parser.add_argument("--target-tokenizer", help="target SentencePiece .model for separate vocabularies")
    parser.add_argument("--beam-size", type=int, help=f"beam size (default {beam}; fixed in an export)")
    parser.add_argument("--length-penalty", "--alpha", type=float, dest="length_penalty",
                        help=f"length penalty alpha (default {alpha}; fixed in an export)")
    parser.add_argument("--max-length-offset", type=int,
                        help=f"max output length = input length + this (default {offset})")
    parser.add_argument("--greedy", action="store_true", help="greedy decoding instead of beam search")
    parser.add_argument("--batch-size", type=int, default=32, help="sentences decoded together (default 32)")
    parser.add_argument("--verbose", "-v", action="store_true", help="log progress to stderr")
    add_debug_option(parser)
    return parser


def read_sentences(args_sentences: list[str], stdin) -> list[str]:
    """The argument sentences, or stdin's lines (without line terminators) for none or ``-``.

    Stdin is read as bytes and decoded line by line, so that invalid UTF-8 is refused with its
    line and byte (:func:`~pipelines.cli_errors.utf8_lines`).
    """
    if args_sentences and args_sentences != ["-"]:
        return [check_utf8_argument(text, f"argument {number}") for number, text in enumerate(args_sentences, 1)]
    buffer = getattr(stdin, "buffer", None)
    if buffer is None:  # a text stream with no bytes beneath (io.StringIO): decoded already
        return [line.rstrip("\r\n") for line in stdin]
    return list(utf8_lines(buffer, "stdin"))


def check_options(args, parser: argparse.ArgumentParser) -> None:
    if args.batch_size < 1:
        parser.error("--batch-size must be positive")
    if args.beam_size is not None and args.beam_size < 1:
        parser.error("--beam-size must be positive")
    if args.length_penalty is not None and args.length_penalty < 0:
        parser.error("--length-penalty must be >= 0")
    # TensorFlow's C++ start-up messages would drown the stderr logs.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)


def load_translator(args, parser: argparse.ArgumentParser, decoding=None, parses: bool = False):
    """The translator ``--model`` names and the decoding options of the command line.

    ``decoding`` (a ``DecodingSettings``) replaces the paper's translation defaults for a
    ``.keras`` model; an export has its own settings compiled in. ``parses``: the command wants a
    parser (``parse``), else a translation model; the other kind is an :class:`InputError`, as is
    a model that does not load.
    """
    from pipelines.quiet_tensorflow import import_quietly

    check_model_file(args, parser)
    # TensorFlow's start-up lines would come before the one line of an error in the model.
    import_quietly()
    from keras_transformer.decoding.export import is_exported_translator

    model_path = Path(args.model)
    if model_path.is_dir():
        if not is_exported_translator(model_path):
            raise InputError(f"{model_path} is a directory but not an exported translator")
        if args.greedy or args.tokenizer or args.target_tokenizer:
            parser.error("an exported translator has its tokenizer and beam search built in; "
                         "--tokenizer/--target-tokenizer/--greedy do not apply")
        check_kind(model_path, export_parses(model_path), parses)
        translator = _load_export(model_path)
        try:
            translator.decoding_record(**decoding_options(args))
        except ValueError as err:
            parser.error(str(err))
        return translator, {}
    # A span parser's model loads as a ChartParser, whose chart search ignores the beam options.
    translator = _load_keras(model_path, args.tokenizer, args.target_tokenizer, decoding)
    check_kind(model_path, keras_parses(translator), parses)
    options = {**decoding_options(args), **({"greedy": True} if args.greedy else {})}
    try:
        translator.decoding_record(**decoding_options(args))
    except ValueError as err:
        parser.error(str(err))
    return translator, options


def check_model_file(args, parser: argparse.ArgumentParser) -> None:
    """Refuses a ``--model`` that is no directory and no Keras archive, or one without its
    ``--tokenizer``: what needs no TensorFlow, checked before it is imported (a minute on a busy machine)."""
    model_path = Path(args.model)
    if model_path.is_dir():
        return
    if not model_path.is_file():
        raise InputError(f"model {model_path} does not exist")
    if not args.tokenizer:
        parser.error("--tokenizer is required with a .keras model")
    if not zipfile.is_zipfile(model_path):
        raise InputError(f"{model_path} is not a Keras model archive (not a zip file)")


def _load_export(path: Path):
    from keras_transformer.decoding.export import load_exported
    from keras_transformer.tokenizer import without_identity_notice

    try:
        with without_identity_notice():  # the SavedModel's SentencePiece ops load their models
            return load_exported(path)
    except Exception as error:  # a corrupt graph fails in protobuf, TensorFlow or JSON: any of them
        raise InputError(f"{path}: cannot load the exported model: {first_line(error)}") from error


def _load_keras(model_path: Path, tokenizer: str, target_tokenizer: str | None, decoding):
    from keras_transformer.checkpoints import saved_model
    from keras_transformer.tokenizer import SubwordTokenizer

    for path in filter(None, (tokenizer, target_tokenizer)):
        try:
            SubwordTokenizer(path)
        except Exception as error:  # not a SentencePiece model: the parse fails inside tensorflow_text
            raise InputError(f"{path}: not a SentencePiece model: {first_line(error)}") from error
    try:
        return saved_model.load_translator(model_path, tokenizer, target_tokenizer, decoding=decoding)
    except Exception as error:  # an archive Keras cannot read, or tokenizers that do not fit the model
        raise InputError(f"{model_path}: cannot load the model: {first_line(error)}") from error


def export_parses(path: Path) -> bool | None:
    """Whether an export is a parser, by its metadata: a chart parser's (``kind``) or a seq2seq
    export decoding under the tree constraint; ``None`` for an export older than the metadata's
    ``constraint`` field, which cannot tell."""
    from keras_transformer.decoding.formats import METADATA_FILE

    try:
        metadata = json.loads((path / METADATA_FILE).read_text("utf-8"))
    except (OSError, ValueError) as error:
        raise InputError(f"{path}: unreadable {METADATA_FILE}: {first_line(error)}") from error
    if not isinstance(metadata, dict):
        raise InputError(f"{path}: {METADATA_FILE} is not a JSON object")
    if metadata.get("kind") == "chart_parser" or metadata.get("constraint") == "BracketConstraint":
        return True
    return False if "constraint" in metadata else None


def keras_parses(translator) -> bool:
    """Whether a loaded ``.keras`` model is a parser: its config says it reads trees (a span
    parser, a word-aligned seq2seq parser), or its target vocabulary is one of trees (:func:`writes_trees`)."""
    return bool(translator.model.config.reads_trees) or writes_trees(translator.target_tokenizer.pieces())


def writes_trees(pieces) -> bool:
    """Whether a vocabulary is a seq2seq parser's (linearised trees, ``(S (NP DT NN )NP )S``).

    Its pieces hold an opening bracket ``(L`` and its closer ``)L`` for every phrase label ``L``;
    a subword vocabulary of text may hold a ``(S`` (``(Samba``) and, rarely, a ``)S``, but not the
    pair for two labels, each a capital then capitals, digits or ``-|$``: that is the rule.
    """
    marks = {piece.lstrip("\u2581") for piece in pieces}
    labels = {piece[1:] for piece in marks if piece.startswith("(") and len(piece) > 1}
    return sum(1 for label in labels if f"){label}" in marks and label[0].isupper()
               and all(ch.isupper() or ch.isdigit() or ch in "-|$" for ch in label)) >= 2


def check_kind(path: Path, parses: bool | None, wanted: bool) -> None:
    if parses is None or parses == wanted:
        return
    if wanted:
        raise InputError(f"{path} is a translation model, not a parser")
    raise InputError(f"{path} is a parser, not a translation model: parse it with `parse`")


def check_lengths(translator, sentences: list[str], per_sentence: bool) -> None:
    """Refuses a line the model cannot encode whole, warns of one it may not (module docstring).

    ``per_sentence``: the model translates each sentence of a line on its own (``split_sentences``).
    """
    limit = source_limit(translator)
    if limit is None:
        return
    tokenizer = getattr(translator, "tokenizer", None)
    for number, line in enumerate(sentences, start=1):
        parts = _sentences_of(line) if per_sentence else [line]
        if tokenizer is not None:
            pieces = max(len(ids) for ids in tokenizer.tokenize(parts).to_list()) + 1  # + EOS
            if pieces > limit:
                raise InputError(f"line {number}: {len(line)} characters ({pieces} pieces with EOS"
                                 f"{' in its longest sentence' if len(parts) > 1 else ''}); the model "
                                 f"encodes at most {limit}: split it")
            continue
        words = max(len(part.split()) for part in parts) + 1
        if words > limit:
            raise InputError(f"line {number}: {len(line)} characters ({words - 1} words); the model "
                             f"encodes at most {limit} pieces with EOS: split it")
        if max(len(part) for part in parts) + 1 > limit:
            logger.warning("line %d: %d characters, maybe more pieces than the %d (with EOS) the model "
                           "encodes: the rest would be cut off", number, len(line), limit)


def source_limit(translator) -> int | None:
    """The most source pieces (EOS included) the model encodes; ``None`` for no limit."""
    config = getattr(getattr(translator, "model", None), "config", None)
    if config is not None:
        return config.max_positions
    model_config = getattr(translator, "settings", {}).get("model_config") or {}
    if model_config.get("positional_encoding") == "learned":
        return int(model_config["max_length"])
    return None


def _sentences_of(line: str) -> list[str]:
    from keras_transformer.decoding.sentences import split_bullets, split_sentences

    _, bodies = split_bullets(split_sentences([line]).flat_values)
    return [part.decode("utf-8") for part in bodies.numpy()] or [line]


def decoding_options(args) -> dict:
    """The decoding settings the command line names (``DecodingSettings``' names), those given."""
    options = {"beam_size": args.beam_size, "length_penalty": args.length_penalty,
               "max_length_offset": args.max_length_offset}
    return {name: value for name, value in options.items() if value is not None}
