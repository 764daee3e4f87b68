"""The classical parsing peer of :mod:`.bench_parsing_peers`: a treebank PCFG with NumPy CKY.


**Treebank PCFG** (the classical floor; Charniak 1996, Johnson 1998, Klein & Manning 2003). Training
trees are transformed, rules counted and probabilities set by relative frequency:

* unary chains are collapsed into one label (``(S (VP ...))`` -> ``S+VP``), so that the only unary
  rules left rewrite a phrase as a POS tag (``NP -> PRP``);
* optional parent annotation (vertical order v=2: ``NP^S``) of every phrase below the root;
* right-factored binarisation with horizontal Markovisation of order h: the intermediate symbol
  ``@A|<C_i ... C_i+h-1>`` remembers its parent and the next h children it rewrites as;
* the lexicon is P(tag | word) / P(tag); words seen once stand for the unknown words: their tags are
  counted per word-shape signature (`signature`: capitals, digits, hyphen, suffixes), known words
  are smoothed with their signature's distribution, unknown words take it.

`PCFG.parse` is Viterbi CKY in log space: for each span length and split point one NumPy operation
scores every binary rule at every start position (``left[:, B] + right[:, C] + log p``) and
``np.maximum.reduceat`` keeps the best rule per parent symbol; the tree is read back by re-scoring
only the winning cells. `unbinarize` undoes the transformation exactly (tested on trees).
"""

from __future__ import annotations

import logging
import math
from collections import Counter, defaultdict
from collections.abc import Sequence

import numpy as np

from pipelines.tasks.parsing.tree import ROOT_LABEL, Leaf, Tree

logger = logging.getLogger("pcfg_peer")

CHAIN, PARENT, BAR = "+", "^", "@"
SUFFIXES = ("ing", "ed", "ion", "er", "est", "ly", "ity", "al", "y")
NEG = np.float32(-np.inf)


# --- tree transformation --------------------------------------------------------------------------------------

def _name(node: Tree | Leaf) -> str:
    return node.tag if isinstance(node, Leaf) else node.label


def binarize(tree: Tree, horizontal: int = 1, vertical: int = 1) -> Tree:
    """Collapse unary chains, parent-annotate phrases (``vertical=2``), right-factor with Markov order h."""
    def visit(node: Tree, parent: str | None) -> Tree:
        label, children = node.label, node.children
        while len(children) == 1 and isinstance(children[0], Tree):
            label, children = f"{label}{CHAIN}{children[0].label}", children[0].children
        below = label.rsplit(CHAIN, 1)[-1]
        kids = [child if isinstance(child, Leaf) else visit(child, below) for child in children]
        if vertical >= 2 and parent is not None:
            label = f"{label}{PARENT}{parent}"
        rest = kids[-1]
        for i in range(len(kids) - 2, 0, -1):
            upcoming = "~".join(_name(kid) for kid in kids[i:i + horizontal])
            rest = Tree(f"{BAR}{label}|<{upcoming}>", (kids[i], rest))
        return Tree(label, (kids[0], rest) if len(kids) > 1 else tuple(kids))

    return visit(tree, None)


def unbinarize(tree: Tree) -> Tree:
    """Inverse of `binarize`: splice ``@`` nodes, expand ``A+B`` chains, drop ``^parent`` annotations."""
    def children(node: Tree) -> list[Tree | Leaf]:
        found: list[Tree | Leaf] = []
        for child in node.children:
            if isinstance(child, Leaf):
                found.append(child)
            elif child.label.startswith(BAR):
                found.extend(children(child))
            else:
                found.append(visit(child))
        return found

    def visit(node: Tree) -> Tree:
        labels = [part.split(PARENT, 1)[0] for part in node.label.split(CHAIN)]
        out = Tree(labels[-1], tuple(children(node)))
        for label in reversed(labels[:-1]):
            out = Tree(label, (out,))
        return out

    return visit(tree)


def signature(word: str, first: bool = False) -> str:
    """Word-shape class of an unknown word, e.g. ``UNK-INITC-DASH`` or ``UNK-LC-ing``."""
    sig = "UNK"
    letters = [c for c in word if c.isalpha()]
    if letters and all(c.isupper() for c in letters) and len(letters) > 1:
        sig += "-CAPS"
    elif word[:1].isupper():
        sig += "-FIRSTC" if first else "-INITC"
    elif any(c.islower() for c in word):
        sig += "-LC"
    if any(c.isdigit() for c in word):
        sig += "-NUM"
    if "-" in word:
        sig += "-DASH"
    lower = word.lower()
    if len(lower) >= 3 and lower.endswith("s") and not lower.endswith(("ss", "us", "is")):
        return sig + "-s"
    for suffix in SUFFIXES:
        if len(lower) > len(suffix) + 1 and lower.endswith(suffix):
            return sig + "-" + suffix
    return sig


# --- grammar --------------------------------------------------------------------------------------------------

class PCFG:
    """Treebank PCFG with horizontal order ``horizontal`` and vertical order ``vertical`` (1 or 2)."""

    def __init__(self, horizontal: int = 1, vertical: int = 1, rare: int = 1, known_smoothing: float = 0.5,
                 unknown_smoothing: float = 1.0):
        self.horizontal, self.vertical, self.rare = horizontal, vertical, rare
        self.known_smoothing, self.unknown_smoothing = known_smoothing, unknown_smoothing

    def fit(self, trees: Sequence[Tree]) -> PCFG:
        binary: Counter = Counter()
        unary: Counter = Counter()
        tag_word: dict[str, Counter] = defaultdict(Counter)
        for tree in trees:
            if not tree.children:
                continue
            stack = [binarize(tree, self.horizontal, self.vertical)]
            while stack:
                node = stack.pop()
                if len(node.children) == 1:
                    unary[node.label, node.children[0].tag] += 1
                else:
                    binary[(node.label, *(_name(kid) for kid in node.children))] += 1
                stack.extend(kid for kid in node.children if isinstance(kid, Tree))
            for position, leaf in enumerate(tree.leaves()):
                tag_word[leaf.word][leaf.tag, position == 0] += 1
        self._lexicon(tag_word)
        parents = {key[0] for key in binary} | {key[0] for key in unary}
        if parents & set(self.tags):
            raise ValueError(f"phrase labels that are also POS tags: {sorted(parents & set(self.tags))}")
        phrases = sorted(parents | ({kid for key in binary for kid in key[1:]} - set(self.tags)))
        self.symbols = self.tags + phrases
        index = {symbol: i for i, symbol in enumerate(self.symbols)}
        self.n_tags = len(self.tags)
        parent_total: Counter = Counter()
        for (parent, *_), count in list(binary.items()) + list(unary.items()):
            parent_total[parent] += count
        self.binary = self._rules(binary, parent_total, index)
        self.unary = self._rules(unary, parent_total, index)
        self.roots = np.array([index[s] for s in phrases if s.split(CHAIN)[0].split(PARENT)[0] == ROOT_LABEL])
        return self

    @staticmethod
    def _rules(counts: Counter, parent_total: Counter, index: dict) -> dict:
        keys = sorted(counts, key=lambda key: (index[key[0]], key))
        parent = np.array([index[key[0]] for key in keys], dtype=np.int64)
        starts = np.flatnonzero(np.r_[True, parent[1:] != parent[:-1]]) if keys else np.zeros(0, np.int64)
        return {"parent": parent, "children": [np.array([index[key[i]] for key in keys], np.int64)
                                               for i in range(1, len(keys[0]) if keys else 1)],
                "logp": np.array([math.log(counts[key] / parent_total[key[0]]) for key in keys], np.float32),
                "starts": starts, "parents": parent[starts], "size": len(keys)}

    def _lexicon(self, tag_word: dict[str, Counter]) -> None:
        tag_total: Counter = Counter()
        rare_sig: dict[str, Counter] = defaultdict(Counter)
        rare_tag: Counter = Counter()
        self.word_tags: dict[str, Counter] = {}
        for word, counts in tag_word.items():
            by_tag: Counter = Counter()
            is_rare = sum(counts.values()) <= self.rare
            for (tag, first), count in counts.items():
                by_tag[tag] += count
                if is_rare:
                    rare_sig[signature(word, first)][tag] += count
                    rare_tag[tag] += count
            self.word_tags[word] = by_tag
            tag_total.update(by_tag)
        self.tags = sorted(tag_total)
        total = sum(tag_total.values())
        self.log_tag_prior = np.log(np.array([tag_total[t] / total for t in self.tags]))
        rare_n = sum(rare_tag.values()) or 1
        self.p_rare = np.array([rare_tag[t] / rare_n for t in self.tags])
        self.sig_counts = {sig: np.array([counts[t] for t in self.tags], float) for sig, counts in rare_sig.items()}
        self.most_frequent = {word: counts.most_common(1)[0][0] for word, counts in self.word_tags.items()}
        self.sig_frequent = {sig: self.tags[int(np.argmax(c))] for sig, c in self.sig_counts.items()}
        self.fallback_tag = self.tags[int(np.argmax(self.p_rare))] if rare_tag else self.tags[0]

    def p_tag_given_signature(self, sig: str) -> np.ndarray:
        counts = self.sig_counts.get(sig, np.zeros(len(self.tags)))
        return (counts + self.unknown_smoothing * self.p_rare) / (counts.sum() + self.unknown_smoothing)

    def tag_scores(self, word: str, first: bool) -> np.ndarray:
        """log P(word | tag) up to a constant of the word, over ``self.tags``."""
        p = self.p_tag_given_signature(signature(word, first))
        counts = self.word_tags.get(word)
        if counts is not None:
            seen = np.array([counts[t] for t in self.tags], float)
            p = (seen + self.known_smoothing * p) / (seen.sum() + self.known_smoothing)
        with np.errstate(divide="ignore"):
            return (np.log(p) - self.log_tag_prior).astype(np.float32)

    def flat_tree(self, words: Sequence[str]) -> Tree:
        """The fall-back for a sentence without a parse: ``(TOP (S ...))`` over each word's most frequent tag."""
        tags = [self.most_frequent.get(w) or self.sig_frequent.get(signature(w, i == 0), self.fallback_tag)
                for i, w in enumerate(words)]
        return Tree(ROOT_LABEL, (Tree("S", tuple(Leaf(t, w) for t, w in zip(tags, words))),))

    # --- CKY ----------------------------------------------------------------------------------------------------

    def parse(self, words: Sequence[str]) -> Tree | None:
        """The Viterbi tree of ``words`` (un-binarised, labels plain), or None if the grammar has no parse."""
        n = len(words)
        if n == 0:
            return None
        size = len(self.symbols)
        # chart[L][i] holds the best log score of every symbol over words[i:i + L].
        chart: list[np.ndarray | None] = [None] * (n + 1)
        first = np.full((n, size), NEG, np.float32)
        first[:, : self.n_tags] = np.stack([self.tag_scores(w, i == 0) for i, w in enumerate(words)])
        u = self.unary
        if u["size"]:
            scores = first[:, u["children"][0]] + u["logp"]
            first[:, u["parents"]] = np.maximum.reduceat(scores, u["starts"], axis=1)
        chart[1] = first
        b = self.binary
        left_kid, right_kid = b["children"]
        for length in range(2, n + 1):
            count = n - length + 1
            best = np.full((count, b["size"]), NEG, np.float32)
            for split in range(1, length):
                left = chart[split][:count]
                right = chart[length - split][split:split + count]
                np.maximum(best, left[:, left_kid] + right[:, right_kid] + b["logp"], out=best)
            cell = np.full((count, size), NEG, np.float32)
            if b["size"]:
                cell[:, b["parents"]] = np.maximum.reduceat(best, b["starts"], axis=1)
            chart[length] = cell
        top = chart[n][0, self.roots] if len(self.roots) else np.array([NEG])
        if not np.isfinite(top.max()):
            return None
        return unbinarize(self._build(chart, words, 0, n, int(self.roots[int(np.argmax(top))])))

    def _build(self, chart: list, words: Sequence[str], start: int, length: int, symbol: int) -> Tree | Leaf:
        if symbol < self.n_tags:
            return Leaf(self.symbols[symbol], words[start])
        if length == 1:
            rules = self._slice(self.unary, symbol)
            child = self.unary["children"][0][rules]
            scores = self.unary["logp"][rules] + chart[1][start, child]
            return Tree(self.symbols[symbol], (self._build(chart, words, start, 1, int(child[np.argmax(scores)])),))
        rules = self._slice(self.binary, symbol)
        left, right = (kids[rules] for kids in self.binary["children"])
        splits = np.arange(1, length)
        scores = np.stack([self.binary["logp"][rules] + chart[k][start, left] + chart[length - k][start + k, right]
                           for k in splits])
        k_index, rule = np.unravel_index(int(np.argmax(scores)), scores.shape)
        k = int(splits[k_index])
        return Tree(self.symbols[symbol], (self._build(chart, words, start, k, int(left[rule])),
                                           self._build(chart, words, start + k, length - k, int(right[rule]))))

    @staticmethod
    def _slice(rules: dict, symbol: int) -> slice:
        at = int(np.searchsorted(rules["parents"], symbol))
        begin = int(rules["starts"][at])
        end = int(rules["starts"][at + 1]) if at + 1 < len(rules["starts"]) else rules["size"]
        return slice(begin, end)

    def stats(self) -> dict:
        return {"symbols": len(self.symbols), "tags": self.n_tags, "binary_rules": self.binary["size"],
                "unary_rules": self.unary["size"], "known_words": len(self.word_tags),
                "signatures": len(self.sig_counts)}
