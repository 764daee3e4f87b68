"""What the commands that decode with a trained model share (``translate``, ``parse``).

Sentences come as arguments or on stdin, one per line; ``--model`` is a saved ``.keras``
Transformer (with its SentencePiece model(s)) or an exported SavedModel directory (vocabularies
and decoding settings inside); decoding options override the task's defaults where the model
allows it.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path


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
    return parser


def read_sentences(args_sentences: list[str], stdin) -> list[str]:
    """The argument sentences, or stdin's lines (without line terminators) for none or ``-``."""
    if args_sentences and args_sentences != ["-"]:
        return list(args_sentences)
    return [line.rstrip("\r\n") for line in stdin]


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


def load_translator(args, parser: argparse.ArgumentParser, decoding=None):
    """The translator ``--model`` names and the decoding options of the command line.

    ``decoding`` (a ``DecodingSettings``) replaces the paper's translation defaults for a
    ``.keras`` model; an export has its own settings compiled in.
    """
    from keras_transformer.decoding.export import is_exported_translator, load_exported

    model_path = Path(args.model)
    if model_path.is_dir():
        if not is_exported_translator(model_path):
            parser.error(f"{model_path} is a directory but not an exported translator")
        if args.greedy or args.tokenizer or args.target_tokenizer:
            parser.error("an exported translator has its tokenizer and beam search built in; "
                         "--tokenizer/--target-tokenizer/--greedy do not apply")
        translator = load_exported(model_path)
        try:
            translator.decoding_record(**decoding_options(args))
        except ValueError as err:
            parser.error(str(err))
        return translator, {}
    if not model_path.is_file():
        parser.error(f"model {model_path} does not exist")
    if not args.tokenizer:
        parser.error("--tokenizer is required with a .keras model")
    from keras_transformer.decoding import translator as translators

    # A span parser's model loads as a ChartParser, whose chart search ignores the beam options.
    translator = translators.load_translator(model_path, args.tokenizer, args.target_tokenizer, decoding=decoding)
    options = {**decoding_options(args), **({"greedy": True} if args.greedy else {})}
    try:
        translator.decoding_record(**decoding_options(args))
    except ValueError as err:
        parser.error(str(err))
    return translator, options


def decoding_options(args) -> dict:
    """The decoding settings the command line names (``DecodingSettings``' names), those given."""
    options = {"beam_size": args.beam_size, "length_penalty": args.length_penalty,
               "max_length_offset": args.max_length_offset}
    return {name: value for name, value in options.items() if value is not None}
