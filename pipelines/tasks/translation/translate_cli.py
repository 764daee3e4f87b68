"""``translate``: translate sentences from the command line or stdin.

Usage::

    translate --model model.keras --tokenizer spm_shared.model "A sentence." "Another one."
    translate --model exported_dir/ < sentences.txt > translations.txt
    echo "Hello." | translate --model model.keras --tokenizer spm.model --beam-size 1 --alpha 0

``--model`` is a saved ``.keras`` Transformer (needs ``--tokenizer``) or a directory written by
``keras_transformer.decoding.export.export_translator`` (tokenizer and decoding settings inside). Without
sentence arguments (or with ``-``) sentences are read from stdin, one per line. Translations go
to stdout, one per line in input order; logs go to stderr. Decoding defaults are the paper's
(section 6.1): beam 4, alpha 0.6, maximum length input + 50. Bad input (stdin that is not UTF-8, a
model that does not load or is a parser, a line longer than the model encodes) exits with status 2
and one line on stderr; ``--debug`` logs its traceback too (:mod:`pipelines.decode_cli`).
"""

from __future__ import annotations

import logging
import sys

from pipelines.cli_errors import run_command
from pipelines.decode_cli import build_parser, check_lengths, check_options, load_translator, read_sentences

logger = logging.getLogger("translate")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    check_options(args, parser)
    return run_command(parser.prog, lambda: translate(args, parser), args.debug)


def translate(args, parser) -> int:
    sentences = read_sentences(args.sentences, sys.stdin)
    translator, options = load_translator(args, parser)
    if not sentences:
        return 0
    check_lengths(translator, sentences, per_sentence=translator.decoding.split_sentences)
    logger.info("translating %d sentence(s) with %s", len(sentences), options or "the model's decoding settings")
    translations = translator.translate(sentences, batch_size=args.batch_size, **options)
    out = sys.stdout
    for translation in translations:
        # One line per input line: a translation never contains a line break.
        out.write(translation.replace("\n", " ") + "\n")
    out.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
