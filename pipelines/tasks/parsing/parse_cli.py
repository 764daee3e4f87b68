"""``parse``: constituency trees for sentences, from the command line or stdin (paper section 6.3).

Usage::

    parse --model runs/parsing-sample/latest/export "Ms. Haag plays Elianti ."
    parse --model model.keras --tokenizer spm_en.model --target-tokenizer spm_tree.model < sentences.txt

``--model`` is an exported parser directory (vocabularies and decoding inside) or a saved
``.keras`` model with its two vocabularies. Decoding defaults are section 6.3's: beam 21, alpha
0.3, maximum length input + 300. Sentences are split into Penn Treebank-style tokens first
(punctuation and clitics such as ``n't`` and ``'s`` become words of their own; ``--pretokenized``
takes whitespace-separated tokens as they are). Output: one bracketed tree per input line,
``(TOP ...)``, always over exactly the sentence's tokens: the best beam hypothesis that is such a
tree, or the best one repaired (:func:`.linearize.best_tree`).
"""

from __future__ import annotations

import logging
import re
import sys

from pipelines import decode_cli

from .linearize import best_tree

logger = logging.getLogger("parse")

#: Penn Treebank-style splits of raw text: clitics, punctuation, quotes, brackets.
_SPLITS = [
    (re.compile(r'^"'), "`` "),
    (re.compile(r'(?<=[\s(\[{<])"'), " `` "),
    (re.compile(r'"'), " '' "),
    (re.compile(r"([,;:@#$%&?!])"), r" \1 "),
    (re.compile(r"([^.])(\.)\s*$"), r"\1 \2 "),
    (re.compile(r"([(){}\[\]<>])"), r" \1 "),
    (re.compile(r"(?i)([^' ])('s|'m|'d|'ll|'re|'ve|n't)\b"), r"\1 \2"),
]
_BRACKETS = {"(": "-LRB-", ")": "-RRB-", "[": "-LSB-", "]": "-RSB-", "{": "-LCB-", "}": "-RCB-"}


def ptb_tokenize(text: str) -> list[str]:
    """Penn Treebank-style tokens of raw text (a small subset of the Treebank tokenizer's rules)."""
    for pattern, replacement in _SPLITS:
        text = pattern.sub(replacement, text)
    return [_BRACKETS.get(token, token) for token in text.split()]


def main(argv: list[str] | None = None) -> int:
    parser = decode_cli.build_parser(
        "parse", "Constituency trees of sentences (arguments or stdin, one per line).", "21, 0.3, 300")
    parser.add_argument("--pretokenized", action="store_true",
                        help="sentences are whitespace-separated tokens already")
    args = parser.parse_args(argv)
    decode_cli.check_options(args, parser)
    from keras_transformer.presets import get_preset

    sentences = decode_cli.read_sentences(args.sentences, sys.stdin)
    translator, options = decode_cli.load_translator(args, parser, decoding=get_preset("parser").decoding)
    words = [line.split() if args.pretokenized else ptb_tokenize(line) for line in sentences]
    nonempty = [i for i, tokens in enumerate(words) if tokens]
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
