"""Trees as token sequences: the sequence-to-sequence form of constituency parsing (paper section 6.3).

Vinyals et al. (2015), "Grammar as a Foreign Language", parse by translating the sentence into
a depth-first linearisation of its tree; the paper's section 6.3 trains the Transformer on the
same kind of pairs (tensor2tensor's WSJ parsing problem). Here:

* source: the words joined by single spaces, ``Pierre Vinken will join the board .``;
* target: one token per opening bracket ``(LABEL``, per closing bracket ``)LABEL`` (labelled, so
  that a closer says which constituent it ends) and per word, which is replaced by its POS tag;
  e.g. ``(S (NP NNP NNP )NP (VP MD (VP VB (NP DT NN )NP )VP )VP . )S``. The ``TOP`` root is
  implicit: the target is the sequence of its children.

The format is unambiguous because no PTB label or POS tag starts with ``(`` or ``)`` or holds
whitespace: a token that starts with a bracket is a bracket, every other token is one word's slot.
(tensor2tensor's ``wsj_parsing.py`` writes POS tags as ``(NNP`` and closers as ``/NP``; the
form above is the one of Vinyals et al.'s example, ``(S (NP NNP )NP (VP VBZ (NP DT NN )NP )VP . )S``.)

`delinearize` inverts `linearize` exactly and rejects anything else; `repair` turns any decoded
sequence into a well-formed tree over the input words, for evaluating a model's output.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from .tree import ROOT_LABEL, Leaf, Tree

logger = logging.getLogger(__name__)

#: The 45 POS tags of the Penn Treebank (Santorini, 1990), as written in the .mrg files.
PTB_TAGS = frozenset(
    "CC CD DT EX FW IN JJ JJR JJS LS MD NN NNS NNP NNPS PDT POS PRP PRP$ RB RBR RBS RP SYM TO UH VB VBD "
    "VBG VBN VBP VBZ WDT WP WP$ WRB # $ . , : `` '' -LRB- -RRB-".split()
)
#: Phrase labels of the Penn Treebank II bracketing guidelines, function tags stripped.
#: ADVP|PRT and PRT|ADVP are the annotators' undecided labels that the WSJ files keep.
PTB_LABELS = frozenset(
    "ADJP ADVP CONJP FRAG INTJ LST NAC NP NX PP PRN PRT QP RRC S SBAR SBARQ SINV SQ UCP VP WHADJP "
    "WHADVP WHNP WHPP X ADVP|PRT PRT|ADVP".split()
)
#: Tag of the preterminals `repair` supplies for words the decoder gave no POS slot.
FILLER_TAG = "XX"
MAX_DEPTH = 100


def _check(text: str, kind: str) -> str:
    if not text or text[0] in "()" or any(ch.isspace() for ch in text):
        raise ValueError(f"{kind} {text!r} cannot be linearised unambiguously (empty, whitespace or leading bracket)")
    return text


def linearize(tree: Tree) -> str:
    """The target sequence of ``tree`` (``TOP`` root implicit), tokens separated by single spaces."""
    tokens: list[str] = []
    stack: list[Tree | Leaf | str] = list(reversed(tree.children))
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            tokens.append(node)
        elif isinstance(node, Leaf):
            tokens.append(_check(node.tag, "POS tag"))
        else:
            tokens.append("(" + _check(node.label, "label"))
            stack.append(")" + node.label)
            stack.extend(reversed(node.children))
    return " ".join(tokens)


def source(tree: Tree) -> str:
    """The source sequence: the words joined by spaces."""
    return " ".join(tree.words())


def delinearize(target: str | Iterable[str], words: Iterable[str]) -> Tree:
    """The tree that `linearize` turned into ``target``, with ``words`` in its POS slots.

    Strict: raises ValueError on a closer that does not match the open constituent, an empty
    constituent, an unclosed bracket or a number of POS slots other than ``len(words)``.
    """
    tokens = target.split() if isinstance(target, str) else list(target)
    words = list(words)
    stack: list[tuple[str, list[Tree | Leaf]]] = [(ROOT_LABEL, [])]
    used = 0
    for position, token in enumerate(tokens):
        if not token:
            raise ValueError(f"token {position} is empty")
        if token.startswith("(") and len(token) > 1:
            stack.append((token[1:], []))
        elif token.startswith(")") and len(token) > 1:
            label, children = stack.pop() if len(stack) > 1 else (None, [])
            if label != token[1:]:
                raise ValueError(f"token {position} {token!r} does not close the open constituent {label!r}")
            if not children:
                raise ValueError(f"token {position} {token!r} closes an empty constituent")
            stack[-1][1].append(Tree(label, tuple(children)))
        elif token[0] in "()":
            raise ValueError(f"token {position} {token!r} is a bracket without a label")
        else:
            if used >= len(words):
                raise ValueError(f"token {position} {token!r}: more POS slots than the {len(words)} words")
            stack[-1][1].append(Leaf(token, words[used]))
            used += 1
    if len(stack) > 1:
        raise ValueError(f"constituents left open at the end: {[label for label, _ in stack[1:]]}")
    if used != len(words):
        raise ValueError(f"{used} POS slots for {len(words)} words")
    return Tree(ROOT_LABEL, tuple(stack[0][1]))


def repair(tokens: str | Iterable[str], words: Iterable[str], *, tags: Iterable[str] | None = None,
           labels: Iterable[str] | None = None, filler_tag: str = FILLER_TAG, max_depth: int = MAX_DEPTH) -> Tree:
    """A well-formed tree over exactly ``words``, in order, from any decoded token sequence.

    Tokens that are neither ``(L``/``)L`` with ``L`` in ``labels`` nor a tag in ``tags`` (PTB sets
    by default) are dropped; a closer ends the innermost open constituent of its label, closing
    those inside it, and is ignored if none is open; brackets still open at the end are closed;
    POS slots beyond the number of words are dropped; words without a slot get ``filler_tag``
    preterminals at the end of the last top-level constituent; constituents left without words
    are removed; brackets nested deeper than ``max_depth`` are ignored. Never raises for
    sequences of strings.
    """
    tokens = tokens.split() if isinstance(tokens, str) else [token for token in tokens if isinstance(token, str)]
    words = list(words)
    tag_set = PTB_TAGS if tags is None else frozenset(tags)
    label_set = PTB_LABELS if labels is None else frozenset(labels)
    # A frame is (label, children, real); an ignored over-deep opening shares its parent's children.
    stack: list[tuple[str, list, bool]] = [(ROOT_LABEL, [], True)]
    depth, used, dropped = 0, 0, 0
    for token in tokens:
        if token[:1] == "(" and token[1:] in label_set:
            real = depth < max_depth
            stack.append((token[1:], [] if real else stack[-1][1], real))
            depth += real
        elif token[:1] == ")" and token[1:] in label_set:
            target = next((i for i in range(len(stack) - 1, 0, -1) if stack[i][0] == token[1:]), None)
            if target is None:
                dropped += 1
                continue
            while len(stack) > target:
                depth -= _pop(stack)
        elif token in tag_set and used < len(words):
            stack[-1][1].append(Leaf(token, words[used]))
            used += 1
        else:
            dropped += 1
    while len(stack) > 1:
        depth -= _pop(stack)
    children = stack[0][1]
    missing = [Leaf(filler_tag, word) for word in words[used:]]
    if missing:
        if children and isinstance(children[-1], Tree):
            last = children[-1]
            children[-1] = Tree(last.label, last.children + tuple(missing))
        else:
            children.extend(missing)
    if dropped or missing:
        logger.debug("repair: dropped %d tokens, supplied %d %s preterminals", dropped, len(missing), filler_tag)
    return Tree(ROOT_LABEL, tuple(children))


def _pop(stack: list[tuple[str, list, bool]]) -> bool:
    """Close the innermost frame into its parent; True if it was a real (counted) constituent."""
    label, children, real = stack.pop()
    if real and children:
        stack[-1][1].append(Tree(label, tuple(children)))
    return real


def best_tree(hypotheses: str | Iterable[str], words: Iterable[str]) -> tuple[Tree, bool]:
    """The tree of the best hypothesis that is one over ``words``, and whether repair was needed.

    ``hypotheses`` is a beam's finished hypotheses, best first (or one decoded string). An
    undertrained model can rank an invalid parse first (a short one with too few POS slots, or
    the empty sequence, which a wide beam finds); the best *valid* hypothesis is the answer a
    parser should give. With none valid, the best hypothesis is repaired (:func:`repair`).
    """
    hypotheses = [hypotheses] if isinstance(hypotheses, str) else list(hypotheses)
    words = list(words)
    for hypothesis in hypotheses:
        try:
            return delinearize(hypothesis, words), False
        except ValueError:
            continue
    return repair(hypotheses[0] if hypotheses else "", words), True


def tree_constraint(target_tokenizer, eos_id: int):
    """A :class:`~keras_transformer.decoding.constraints.BracketConstraint` over a target vocabulary of
    linearised trees: PTB tags are the slots, ``(L``/``)L`` the brackets (a word-level vocabulary;
    SentencePiece's word-boundary mark ``▁`` is ignored)."""
    import tensorflow as tf

    from keras_transformer.decoding.constraints import BracketConstraint

    size = int(target_tokenizer.vocab_size)
    pieces = [p.decode("utf-8").lstrip("\u2581")
              for p in target_tokenizer.id_to_piece(tf.range(size)).numpy()]
    ids = {piece: i for i, piece in enumerate(pieces)}
    slots = [ids[tag] for tag in sorted(PTB_TAGS) if tag in ids]
    labels = sorted(label for label in PTB_LABELS if f"({label}" in ids and f"){label}" in ids)
    return BracketConstraint(size, slots, [ids[f"({label}"] for label in labels],
                             [ids[f"){label}"] for label in labels], eos_id)
