"""A small treebank of the suite's own, generated from a hand-written English PCFG.

The parsing tests need a treebank, and NLTK's Penn Treebank sample cannot be shipped (its licence
is non-commercial). `write_toy_treebank` writes, deterministically from a seed, a folder in the
sample's unpacked layout (``combined/wsj_0001.mrg`` .. ``wsj_0199.mrg``, which
`pipelines.tasks.parsing.treebank.load_splits` splits by file number: 1-159 train, 160-179 dev,
180-199 test) holding trees in the PTB's own format: multi-line ``.mrg`` text opened by the
unlabelled bracket ``( (S ...) )``, real PTB phrase labels and POS tags, function tags
(``NP-SBJ``, ``PP-LOC``, ``NP-TMP`` ...) and empty elements (``-NONE-`` for ``0``, ``*``, ``*U*``,
``*T*-1``), so that the reader's normalisation has something to remove.

The grammar is regular on purpose, so that a tiny model learns it in a minute or two: every word
has one POS tag (``said`` is always VBD, ``%`` always NN), and the brackets follow from the tags
(a PP with ``of`` attaches to its noun, one with ``in`` or ``at`` to the verb). 148 word forms,
plus the capitalised forms of sentence-initial words; sentences of 3-20 tokens (9 on average);
600 / 60 / 60 trees, no sentence twice in the whole treebank, so the dev and test sentences are
unseen in training. Measured: the flow with a 2-layer, d_model 64 model trained for 600 steps
(66 s on a busy 2-core machine) parses the test split at labelled F1 61 (complete match 45%),
where right-branching trees score 15 and the most-frequent-label bracketing 46.
"""

from __future__ import annotations

import random
from pathlib import Path

#: Trees per split; the files of a split share its trees as evenly as they can.
SIZES = {"train": 600, "dev": 60, "test": 60}
#: File numbers of each split, as in NLTK's sample (``treebank.SAMPLE_SPLITS``).
FILES = {"train": range(1, 160), "dev": range(160, 180), "test": range(180, 200)}
MIN_WORDS, MAX_WORDS = 3, 20
MAX_DEPTH = 12

#: Preterminal symbol -> its words. The symbol's tag is the part before ``_``.
LEXICON: dict[str, list[str]] = {
    "DT": "the a this each some".split(),
    "NN": "company market board director report price bank plan deal unit index group".split(),
    "NN_time": "year week month quarter".split(),
    "NN_pct": ["%"],
    "NNS": "shares prices investors analysts traders banks profits sales bonds workers officials stocks".split(),
    "NNP_title": "Mr. Ms.".split(),
    "NNP_name": "Haag Vinken Smith Jones".split(),
    "NNP_co": "IBM Sony Elianti Boeing Exxon".split(),
    "NNP_place": "Tokyo London Boston Chicago".split(),
    "PRP": "he she it they we".split(),
    "PRP$": "its their his".split(),
    "VBD": "bought sold made held acquired announced reported".split(),
    "VBD_intr": "rose fell gained declined climbed slipped".split(),
    "VBD_be": ["was"],
    "VBD_say": ["said"],
    "VBD_ctrl": "expected wanted agreed".split(),
    "VBZ": "plays owns buys sells makes".split(),
    "VBZ_be": ["is"],
    "VBZ_ctrl": "expects wants".split(),
    "VB": "buy sell make hold pay".split(),
    "VB_intr": "rise fall gain".split(),
    "MD": "will could would".split(),
    "TO": ["to"],
    "IN_of": ["of"],
    "IN_loc": "in at".split(),
    "IN_tmp": "after before during".split(),
    "IN_sub": "because although while if".split(),
    "IN_that": ["that"],
    "JJ": "new big small strong weak cheap major high low large".split(),
    "JJ_time": "last next".split(),
    "RB_pre": "also still recently".split(),
    "RB_mnr": "sharply quickly slightly".split(),
    "RB_deg": "very really".split(),
    "RB_neg": ["n't"],
    "CC": "and but or".split(),
    "CD_num": "2.5 5 10 15 20 30".split(),
    "CD_word": "two three five".split(),
    "CD_scale": "million billion".split(),
    "$": ["$"],
    ",": [","],
    ".": ["."],
    "``": ["``"],
    "''": ["''"],
    "-LRB-": ["-LRB-"],
    "-RRB-": ["-RRB-"],
}

_NP_BASE = [
    (4, "DT NN"), (2, "DT JJ NN"), (2, "NNS"), (1, "JJ NNS"), (1.5, "NNP_title NNP_name"), (1, "NNP_co"),
    (1, "PRP$ NN"), (0.5, "CD_word NNS"), (0.5, "$ CD_num CD_scale -NONE-:*U*"),
]
#: Phrase symbol -> weighted right-hand sides. The label written is the part before ``_``;
#: a symbol with no rules of its own (``NP-SBJ``) takes those of its label without function tags.
#: ``-NONE-:X`` is the empty element ``(-NONE- X)``.
RULES: dict[str, list[tuple[float, str]]] = {
    "S_root": [
        (6, "NP-SBJ VP ."), (1, "NP-SBJ ADVP_pre VP ."), (1, "PP-TMP , NP-SBJ VP ."),
        (1, "SBAR-ADV , NP-SBJ VP ."), (1, "S , CC S ."), (1, "S-TPC-1 , NP-SBJ VP_saytrace ."),
        (0.5, "`` S-TPC-1 , '' NP-SBJ VP_saytrace ."), (1, "NP-SBJ-1 VP_ctrl ."),
    ],
    "S": [(1, "NP-SBJ VP")],
    "NP_base": _NP_BASE,
    "NP": [*_NP_BASE, (1.5, "NP_base PP"), (0.7, "NP_base CC NP_base")],
    "NP-SBJ": [*_NP_BASE, (3, "NP_base PP"), (5, "PRP")],
    "NP-SBJ-1": [*_NP_BASE, (4, "PRP")],
    "NP-PRD": [(1, "DT JJ NN"), (1, "DT NN PP")],
    "NP-TMP": [(1, "JJ_time NN_time"), (1, "DT NN_time")],
    "NP-EXT": [(1, "CD_num NN_pct")],
    "NP_time": [(1, "DT NN_time"), (1, "JJ_time NN_time")],
    "NP_place": [(1, "NNP_place")],
    "PP": [(1, "IN_of NP_base")],
    "PP-LOC": [(1, "IN_loc NP_place")],
    "PP-TMP": [(1, "IN_tmp NP_time")],
    "SBAR": [(1, "IN_sub S")],
    "SBAR_that": [(1, "IN_that S")],
    "SBAR_zero": [(1, "-NONE-:0 S")],
    "SBAR_trace": [(1, "-NONE-:0 S_trace")],
    "S_trace": [(1, "-NONE-:*T*-1")],
    "S_ctrl": [(1, "NP-SBJ_trace VP_to")],
    "NP-SBJ_trace": [(1, "-NONE-:*-1")],
    "VP": [
        (3, "VBD NP"), (1.5, "VBD NP PP-LOC"), (1, "VBD NP NP-TMP"), (1, "VBD_intr"), (1, "VBD_intr ADVP-MNR"),
        (1, "VBD_intr NP-EXT"), (1, "VBD_intr NP-EXT PP-TMP"), (1, "VBZ NP"), (1, "MD VP_bare"),
        (1, "VBD_be ADJP-PRD"), (0.5, "VBZ_be ADJP-PRD"), (0.5, "VBZ_be RB_neg ADJP-PRD"), (0.5, "VBZ_be NP-PRD"),
        (1, "VBD_say SBAR_that"), (0.5, "VBD_say SBAR_zero"),
    ],
    "VP_bare": [(2, "VB NP"), (1, "VB_intr"), (1, "VB NP PP-LOC")],
    "VP_to": [(1, "TO VP_bare")],
    "VP_saytrace": [(1, "VBD_say SBAR_trace")],
    "VP_ctrl": [(1, "VBD_ctrl S_ctrl"), (1, "VBZ_ctrl S_ctrl")],
    "ADJP": [(3, "JJ"), (1, "RB_deg JJ"), (0.4, "PRN JJ")],
    "PRN": [(1, "-LRB- ADVP -RRB-")],
    "ADVP": [(1, "RB_deg")],
    "ADVP_pre": [(1, "RB_pre")],
    "ADVP-MNR": [(1, "RB_mnr")],
}

#: A generated node: ``(label, [children])`` for a phrase, ``(tag, word)`` for a preterminal.
Node = tuple[str, "list[Node] | str"]


class _TooDeep(Exception):
    """A derivation went past `MAX_DEPTH`; the sentence is drawn again."""


def _label(symbol: str) -> str:
    return symbol.split("_")[0]


def _rules(symbol: str) -> list[tuple[float, str]]:
    if symbol in RULES:
        return RULES[symbol]
    label = _label(symbol)
    return RULES[label.split("-")[0] if not label.startswith("-") else label]


def _expand(symbol: str, rng: random.Random, depth: int) -> Node:
    if depth > MAX_DEPTH:
        raise _TooDeep(symbol)
    if symbol.startswith("-NONE-:"):
        return ("-NONE-", symbol.split(":", 1)[1])
    if symbol in LEXICON:
        return (_label(symbol), rng.choice(LEXICON[symbol]))
    weights, bodies = zip(*_rules(symbol))
    body = rng.choices(bodies, weights=weights)[0]
    return (_label(symbol), [_expand(child, rng, depth + 1) for child in body.split()])


def _leaves(node: Node) -> list[tuple[str, str]]:
    label, body = node
    if isinstance(body, str):
        return [(label, body)]
    return [leaf for child in body for leaf in _leaves(child)]


def words(node: Node) -> list[str]:
    """The sentence's tokens: the words of the tree without its empty elements."""
    return [word for tag, word in _leaves(node) if tag != "-NONE-"]


def _capitalise_first(node: Node) -> Node:
    """The tree with its first word capitalised, as sentences start in running text."""
    done = False

    def walk(current: Node) -> Node:
        nonlocal done
        label, body = current
        if isinstance(body, str):
            if not done and label not in ("-NONE-", "``") and body[0].isalpha():
                done = True
                return (label, body[0].upper() + body[1:])
            if label not in ("-NONE-", "``"):
                done = True
            return current
        return (label, [walk(child) for child in body])

    return walk(node)


def generate_tree(rng: random.Random) -> Node:
    """One sentence's tree (root ``S``), its length between `MIN_WORDS` and `MAX_WORDS` tokens."""
    while True:
        try:
            tree = _expand("S_root", rng, 0)
        except _TooDeep:
            continue
        if MIN_WORDS <= len(words(tree)) <= MAX_WORDS:
            return _capitalise_first(tree)


def to_mrg(node: Node, indent: int = 0) -> str:
    """``node`` in the PTB files' layout: preterminals that open a phrase on its line, then one child a line."""
    label, body = node
    if isinstance(body, str):
        return f"({label} {body})"
    text = f"({label}"
    inline = True
    for child in body:
        if inline and isinstance(child[1], str):
            text += " " + to_mrg(child)
            continue
        inline = False
        text += "\n" + " " * (indent + 2) + to_mrg(child, indent + 2)
    return text + (" )" if isinstance(body[-1][1], str) else ")")


def generate_splits(seed: int = 0, sizes: dict[str, int] | None = None) -> dict[str, list[Node]]:
    """``{"train": [...], "dev": [...], "test": [...]}``, no sentence twice in the whole treebank."""
    rng = random.Random(seed)
    seen: set[tuple[str, ...]] = set()
    splits: dict[str, list[Node]] = {}
    for split, size in (sizes or SIZES).items():
        trees: list[Node] = []
        while len(trees) < size:
            tree = generate_tree(rng)
            key = tuple(words(tree))
            if key not in seen:
                seen.add(key)
                trees.append(tree)
        splits[split] = trees
    return splits


def write_toy_treebank(folder: str | Path, seed: int = 0, sizes: dict[str, int] | None = None) -> Path:
    """Writes ``folder/combined/wsj_0001.mrg`` .. ``wsj_0199.mrg`` and returns ``folder``.

    The same seed writes the same bytes. Each split's trees fill its files in order, as evenly as
    they go (the 600 training trees: three or four a file).
    """
    folder = Path(folder)
    combined = folder / "combined"
    combined.mkdir(parents=True, exist_ok=True)
    for split, trees in generate_splits(seed, sizes).items():
        numbers = list(FILES[split])
        for index, number in enumerate(numbers):
            start, end = len(trees) * index // len(numbers), len(trees) * (index + 1) // len(numbers)
            text = "".join(f"( {to_mrg(tree, 2)})\n" for tree in trees[start:end])
            (combined / f"wsj_{number:04d}.mrg").write_text("\n" + text)
    return folder
