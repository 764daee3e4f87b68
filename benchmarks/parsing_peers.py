"""The two parsing peers of ``bench_parsing_peers.py``: a treebank PCFG with NumPy CKY, and supar's CRF parser.

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

**supar** (Zhang, Zhou & Li, IJCAI 2020, package ``supar-bauwenst``) runs from its own virtualenv:
`write_pid` / `read_pid` convert trees to its one-tree-per-line files, `train_supar` runs
``con-crf train`` under a wall-clock budget (keeping a copy of each best-on-dev model as it is
saved) and `predict_supar` runs ``con-crf predict``. See /work/shared/baselines/supar/README.md.
"""

from __future__ import annotations

import logging
import math
import os
import re
import shutil
import signal
import subprocess
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from pipelines.tasks.parsing.tree import ROOT_LABEL, Leaf, Tree, parse_tree

logger = logging.getLogger("parsing_peers")

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


# --- supar ----------------------------------------------------------------------------------------------------

SUPAR_CONFIG = """\
# /work/shared/baselines/supar/crf-con.ini: crf-con-en's network without BERT; epochs and patience
# are never reached, the benchmark stops training by wall clock.
[Data]
encoder = 'lstm'
feat = ['char']
bert = 'bert-base-cased'

[Network]
n_embed = 100
n_pretrained = 100
n_feat_embed = 100
n_char_embed = 50
n_char_hidden = 100
char_pad_index = 0
embed_dropout = .33
n_encoder_hidden = 800
n_encoder_layers = 3
encoder_dropout = .33
n_span_mlp = 500
n_label_mlp = 100
mlp_dropout = .33

[Optimizer]
lr = 2e-3
mu = .9
nu = .9
eps = 1e-12
weight_decay = 0
clip = 5.0
min_freq = 2
fix_len = 20
decay = .75
decay_steps = 5000
update_steps = 1

[Train]
epochs = 1000
patience = 100
batch_size = 5000
"""


def write_pid(trees: Sequence[Tree], path: Path) -> Path:
    """One ``(TOP ...)`` tree per line, supar's input format (never name it ``*.txt``)."""
    path.write_text("".join(tree.to_string() + "\n" for tree in trees), encoding="utf-8")
    return path


def read_pid(path: Path) -> list[Tree]:
    """The trees of a one-tree-per-line file, normalised like the treebank reader's."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [parse_tree(line, source=str(path), line=i + 1) for i, line in enumerate(lines) if line.strip()]


def _supar_env(threads: int) -> dict:
    # torch >= 2.6 refuses supar's pickled checkpoints without the second variable.
    return {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
            "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def _command(venv: Path, cores: str | None, *args: str) -> list[str]:
    prefix = ["taskset", "-c", cores] if cores else []
    return [*prefix, str(venv / "bin" / "con-crf"), *args]


def supar_epochs(log: Path) -> list[dict]:
    """Per epoch of supar's training log: number, dev labelled F1, finished, model saved (improved on dev)."""
    text = log.read_text(errors="replace") if log.exists() else ""
    text = re.split(r"Epoch \d+ saved", text)[0]  # the summary after a normal end repeats the best dev score
    parts = re.split(r"Epoch (\d+) / \d+:", text)
    epochs = []
    for number, block in zip(parts[1::2], parts[2::2]):
        dev = re.search(r"dev:.*?LF:\s*([\d.]+)", block)
        done = re.search(r"s elapsed( \(saved\))?\n", block)
        epochs.append({"epoch": int(number), "dev_labelled_f1": float(dev.group(1)) if dev else None,
                       "finished": done is not None, "saved": bool(done and done.group(1))})
    return epochs


def train_supar(venv: Path, work: Path, files: dict[str, Path], minutes: float, threads: int,
                cores: str | None) -> dict:
    """Run ``con-crf train`` for ``minutes`` of wall clock; keep a copy of each improving model as ``model.best``."""
    config = work / "crf-con.ini"
    config.write_text(SUPAR_CONFIG)
    model, best = work / "model", work / "model.best"
    log = work / "model.train.log"
    for stale in (model, best, log, work / "model.best.predict.log", work / "test.pred.pid"):
        stale.unlink(missing_ok=True)  # a reused work dir must not lend this run an earlier run's model
    command = _command(venv, cores, "train", "-b", "-d", "-1", "--threads", str(threads), "-c", str(config),
                       "-p", str(model), "--feat", "char", "--embed", "", "--mbr", "--train", str(files["train"]),
                       "--dev", str(files["dev"]), "--test", str(files["test"]))
    logger.info("supar train: %s", " ".join(command))
    started = time.monotonic()
    deadline = started + minutes * 60
    copied: list[dict] = []  # the saved epochs, in order; model.best holds the last one

    def keep_saved() -> None:
        # The "(saved)" line is logged after the checkpoint is written: the file is complete then.
        saved = [epoch for epoch in supar_epochs(log) if epoch["saved"]]
        if len(saved) > len(copied):
            shutil.copyfile(model, best)
            copied[:] = saved
            logger.info("supar: model of epoch %d kept at %.0f s", saved[-1]["epoch"], time.monotonic() - started)

    with open(work / "train.stderr", "w") as stderr:
        process = subprocess.Popen(command, cwd=work, env=_supar_env(threads), stdout=subprocess.DEVNULL,
                                   stderr=stderr, start_new_session=True)
        killed = False
        while process.poll() is None:
            time.sleep(1.0)
            keep_saved()
            if time.monotonic() > deadline:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
                killed = True
    seconds = time.monotonic() - started
    if not killed and process.returncode != 0:
        raise RuntimeError(f"con-crf train failed ({process.returncode}): "
                           f"{(work / 'train.stderr').read_text(errors='replace')[-3000:]}")
    keep_saved()
    if not killed and model.exists():
        shutil.copyfile(model, best)  # ended by itself (patience): supar saved the best model again at the end
    finished = [epoch for epoch in supar_epochs(log) if epoch["finished"]]
    return {"seconds": round(seconds, 1), "stopped_by_budget": killed, "epochs_finished": len(finished),
            "dev_labelled_f1_per_epoch": [epoch["dev_labelled_f1"] for epoch in finished],
            "model_epoch": copied[-1]["epoch"] if copied else None,
            "model_dev_labelled_f1": copied[-1]["dev_labelled_f1"] if copied else None,
            "model_saved": best.exists(), "command": " ".join(command)}


def predict_supar(venv: Path, work: Path, data: Path, threads: int, cores: str | None) -> tuple[Path, dict]:
    """Run ``con-crf predict`` with the best saved model; return the prediction file and timings."""
    pred = work / "test.pred.pid"
    command = _command(venv, cores, "predict", "-d", "-1", "--threads", str(threads), "-p", str(work / "model.best"),
                       "--data", str(data), "--pred", str(pred), "--mbr")
    started = time.monotonic()
    done = subprocess.run(command, cwd=work, env=_supar_env(threads), capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        raise RuntimeError(f"con-crf predict failed ({done.returncode}): {done.stderr[-3000:]}")
    log = (work / "model.best.predict.log")
    text = log.read_text(errors="replace") if log.exists() else done.stderr
    own = re.findall(r"([\d.]+) Sents/s", text)
    return pred, {"seconds_with_loading": round(seconds, 2),
                  "supar_sentences_per_second": float(own[-1]) if own else None,
                  "command": " ".join(command)}
