"""The tokenization of the paper's BLEU (tensor2tensor's ``get_ende_bleu.sh``), for its comparable variant.

The 28.4 En-De BLEU of Vaswani et al. (2017, Table 2) was computed on Moses-tokenized text with
hyphenated compounds split (``a ##AT##-##AT## b``); :mod:`pipelines.tasks.translation.evaluation`
reports that variant beside detokenized sacreBLEU and explains the differences (13a in place of
Moses' tokenizer.perl).
"""

from __future__ import annotations

import re

from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

#: Moses ``replace-unicode-punctuation.perl`` substitutions, in its order.
UNICODE_PUNCTUATION: tuple[tuple[str, str], ...] = (
    ("，", ","),
    (r"。 *", ". "),
    ("、", ","),
    ("”", '"'),
    ("“", '"'),
    ("∶", ":"),
    ("：", ":"),
    ("？", "?"),
    ("《", '"'),
    ("》", '"'),
    ("）", ")"),
    ("！", "!"),
    ("（", "("),
    ("；", ";"),
    ("１", "1"),
    ("」", '"'),
    ("「", '"'),
    ("０", "0"),
    ("３", "3"),
    ("２", "2"),
    ("５", "5"),
    ("６", "6"),
    ("９", "9"),
    ("７", "7"),
    ("８", "8"),
    ("４", "4"),
    (r"． *", ". "),
    ("～", "~"),
    ("’", "'"),
    ("…", "..."),
    ("━", "-"),
    ("〈", "<"),
    ("〉", ">"),
    ("【", "["),
    ("】", "]"),
    ("％", "%"),
)
_PUNCTUATION_PATTERNS = tuple((re.compile(p), r) for p, r in UNICODE_PUNCTUATION)
#: get_ende_bleu.sh: ``perl -ple 's{(\S)-(\S)}{$1 ##AT##-##AT## $2}g'``.
_COMPOUND = re.compile(r"(\S)-(\S)")
_TOKENIZER_13A = Tokenizer13a()


def replace_unicode_punctuation(text: str) -> str:
    """Moses ``replace-unicode-punctuation.perl`` (see :data:`UNICODE_PUNCTUATION`)."""
    for pattern, replacement in _PUNCTUATION_PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def split_compounds(tokenized: str) -> str:
    """``rich-text`` -> ``rich ##AT##-##AT## text``, as get_ende_bleu.sh's perl one-liner.

    Non-overlapping, left to right, like perl's ``s///g``: ``a-b-c`` -> ``a ##AT##-##AT## b-c``.
    """
    return _COMPOUND.sub(r"\1 ##AT##-##AT## \2", tokenized)


def paper_tokenize(text: str) -> str:
    """Tokenization of the paper's BLEU: punctuation normalised, 13a-tokenized, compounds split."""
    return split_compounds(_TOKENIZER_13A(replace_unicode_punctuation(text)))
