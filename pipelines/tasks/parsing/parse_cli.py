"""``parse``: constituency trees for sentences, from the command line or stdin (paper section 6.3).

Usage::

    parse --model runs/parsing-sample/latest/export "Ms. Haag plays Elianti ."
    parse --model model.keras --tokenizer spm_en.model --target-tokenizer spm_tree.model < sentences.txt

``--model`` is an exported parser directory (vocabularies and decoding inside) or a saved
``.keras`` model with its two vocabularies. Decoding defaults are section 6.3's: beam 21, alpha
0.3, maximum length input + 300. Sentences are split into the treebank's tokens first, by NLTK's
port of the Penn Treebank tokenizer (`ptb_tokenize`): punctuation, ``$`` and ``%`` and clitics
such as ``n't`` and ``'s`` become words of their own, double quotes the treebank's opening and
closing quote tokens, brackets ``-LRB-`` ``-RRB-``. It was measured against the hand-written subset
of its rules this module had before, on the NLTK sample's test files wsj_0180-0199: on the 139
raw-text lines that are one tree each it gives the gold tree's words for all 139 (the subset: 129),
on the 245 gold sentences detokenized again for 243 (the subset: 223); see
benchmarks/results/parse-tokenizer-2026-11-25.json. ``--pretokenized`` takes whitespace-separated
tokens as they are, but for brackets, which the treebank's bracket syntax cannot hold: they
are written as `ptb_tokenize` writes them (``(`` ``-LRB-``, ``)`` ``-RRB-``, ``{`` ``-LCB-``,
``}`` ``-RCB-``, ``[`` ``-LSB-``, ``]`` ``-RSB-``, inside a token too), and the trees' words carry
those names. Output: one bracketed tree per input line, ``(TOP ...)``, always over exactly the
sentence's tokens: the best beam hypothesis that is such a tree, or the best one repaired
(:func:`.linearize.best_tree`). Bad input (stdin that is not UTF-8, a model that does not load or
is a translation model, a sentence longer than the model encodes) exits with status 2 and one line
on stderr; ``--debug`` logs its traceback too (:mod:`pipelines.decode_cli`).
"""

from __future__ import annotations

import functools
import logging
import sys

from pipelines import decode_cli
from pipelines.cli_errors import run_command

from .linearize import best_tree

logger = logging.getLogger("parse")

#: The treebank's names of the brackets, which its bracket syntax cannot hold as words (NLTK's
#: ``convert_parentheses``).
PTB_BRACKETS = str.maketrans({"(": "-LRB-", ")": "-RRB-", "{": "-LCB-", "}": "-RCB-", "[": "-LSB-", "]": "-RSB-"})


@functools.cache
def _treebank_tokenizer():
    # Imported on first use: NLTK's package import takes a second or two, which `parse --help` need not wait.
    from nltk.tokenize import TreebankWordTokenizer

    return TreebankWordTokenizer()


def ptb_tokenize(text: str) -> list[str]:
    """Penn Treebank tokens of one raw sentence (NLTK's ``TreebankWordTokenizer``, brackets as ``-LRB-`` etc.).

    The tokens the treebank's trees have as words, so that the parser sees its training input.
    """
    return _treebank_tokenizer().tokenize(text, convert_parentheses=True)


def pretokenized(text: str) -> list[str]:
    """The whitespace-separated tokens of ``text``, brackets written as the treebank writes them."""
    return [token.translate(PTB_BRACKETS) for token in text.split()]


def main(argv: list[str] | None = None) -> int:
    parser = decode_cli.build_parser(
        "parse", "Constituency trees of sentences (arguments or stdin, one per line).", "21, 0.3, 300")
    parser.add_argument("--pretokenized", action="store_true",
                        help="sentences are whitespace-separated tokens already")
    args = parser.parse_args(argv)
    decode_cli.check_options(args, parser)
    return run_command(parser.prog, lambda: parse(args, parser), args.debug)


def parse(args, parser) -> int:
    from pipelines.quiet_tensorflow import import_quietly

    sentences = decode_cli.read_sentences(args.sentences, sys.stdin)
    decode_cli.check_model_file(args, parser)
    import_quietly()  # before the presets' module, which imports TensorFlow
    from keras_transformer.models.presets import get_preset

    translator, options = decode_cli.load_translator(args, parser, decoding=get_preset("parser").decoding,
                                                     parses=True)
    words = [pretokenized(line) if args.pretokenized else ptb_tokenize(line) for line in sentences]
    nonempty = [i for i, tokens in enumerate(words) if tokens]
    # The parser reads the tokens, one parse per input line: lengths are per line.
    decode_cli.check_lengths(translator, [" ".join(tokens) for tokens in words], per_sentence=False)
    decoded = translator.translate([" ".join(words[i]) for i in nonempty], batch_size=args.batch_size,
                                   n_best=True, **options) if nonempty else []
    outputs = dict(zip(nonempty, decoded))
    out = sys.stdout
    for i, tokens in enumerate(words):
        if not tokens:
            out.write("\n")  # an empty line stays empty: output lines match input lines
            continue
        tree, repaired = best_tree(outputs[i], tokens)
        if repaired:
            logger.info("sentence %d: no hypothesis was a tree over its words; repaired the best", i + 1)
        out.write(tree.to_string() + "\n")
    out.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
