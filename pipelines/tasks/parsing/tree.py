"""Immutable constituency trees and the Penn Treebank bracket syntax (paper section 6.3).

A `Tree` has a phrase label and children; its leaves are `Leaf(tag, word)` preterminals. The
bracket syntax is the one of the Penn Treebank ``.mrg`` files (Marcus et al., 1993) and of EVALB's
input files: ``(TOP (S (NP (NNP Pierre) (NNP Vinken)) (VP (VBD joined)) (. .)))``.

`parse_tree` reads one tree and, by default, applies the usual WSJ normalisation of the parsing
task (the setting of Vinyals et al., 2015, "Grammar as a Foreign Language", which the paper's
section 6.3 follows): empty elements (``-NONE-``) are removed together with the constituents they leave
empty, function tags and co-indices are stripped from phrase labels (``NP-SBJ-1`` -> ``NP``,
``PP-LOC=2`` -> ``PP``) and the root is labelled ``TOP``. Tags that begin with a hyphen
(``-LRB-``, ``-RRB-``, ``-NONE-``) are never cut. ``normalize=False`` keeps a tree exactly as
written, which the EVALB scorer needs to see what EVALB sees.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

ROOT_LABEL = "TOP"
EMPTY_TAG = "-NONE-"
# PTB files open each tree with an unlabelled bracket; other treebank exports name it ROOT or TOP.
_ROOT_ALIASES = frozenset({"", "ROOT", ROOT_LABEL})
# "(" takes the label written right after it: "( (S" opens an unlabelled bracket, as in EVALB.
_TOKEN = re.compile(r"\([^\s()]*|\)|[^\s()]+")
_FUNCTION_TAG = re.compile(r"[-=].*$")
_UNWRITABLE = re.compile(r"[\s()]")


class TreebankError(ValueError):
    """A malformed bracketed tree; names the file (``source``) and the line where the tree starts."""

    def __init__(self, source: str, line: int, message: str):
        super().__init__(f"{source}, line {line}: {message}")
        self.source = source
        self.line = line
        self.message = message


class Leaf(NamedTuple):
    """A preterminal: POS tag and word, e.g. ``Leaf("NNP", "Pierre")``."""

    tag: str
    word: str


@dataclass(frozen=True, slots=True)
class Tree:
    """A constituent: phrase label and children, each a `Tree` or a `Leaf`."""

    label: str
    children: tuple[Tree | Leaf, ...] = ()

    def leaves(self) -> list[Leaf]:
        """The preterminals in sentence order."""
        found: list[Leaf] = []
        # Explicit stack: decoded trees may nest deeper than the PTB's few dozen levels.
        stack: list[Tree | Leaf] = [self]
        while stack:
            node = stack.pop()
            if isinstance(node, Leaf):
                found.append(node)
            else:
                stack.extend(reversed(node.children))
        return found

    def words(self) -> list[str]:
        """The words in sentence order."""
        return [leaf.word for leaf in self.leaves()]

    def tags(self) -> list[str]:
        """The POS tags in sentence order."""
        return [leaf.tag for leaf in self.leaves()]

    def to_string(self) -> str:
        """One-line bracketed form, e.g. ``(TOP (S (NP (NNP Pierre) (NNP Vinken)) (. .)))``.

        Raises ValueError if a label, tag or word is empty or holds whitespace or a bracket, since
        such a tree could not be read back.
        """
        parts: list[str] = []
        stack: list[Tree | Leaf | str] = [self]
        while stack:
            node = stack.pop()
            if isinstance(node, str):
                parts.append(node)
            elif isinstance(node, Leaf):
                _check_atom(node.tag, "tag")
                _check_atom(node.word, "word")
                parts.append(f"({node.tag} {node.word})")
            else:
                if node.label:
                    _check_atom(node.label, "label")
                parts.append(f"({node.label}")
                stack.append(")")
                for child in reversed(node.children):
                    stack.extend((child, " "))
        return "".join(parts)

    def __str__(self) -> str:
        return self.to_string()


def _check_atom(text: str, kind: str) -> None:
    if not text or _UNWRITABLE.search(text):
        raise ValueError(f"cannot write {kind} {text!r} in bracket syntax (empty, whitespace or bracket)")


def strip_function_tags(label: str) -> str:
    """``NP-SBJ-1`` -> ``NP``, ``PP-LOC=2`` -> ``PP``; labels that start with ``-`` (``-NONE-``) stay whole."""
    if label.startswith("-"):
        return label
    return _FUNCTION_TAG.sub("", label)


def _tokens(text: str, first_line: int) -> Iterator[tuple[str, int]]:
    for offset, line in enumerate(text.splitlines()):
        for match in _TOKEN.finditer(line):
            yield match.group(), first_line + offset


class _Open:
    """A bracket being read: its label, children so far and the line it opened on."""

    __slots__ = ("label", "children", "line", "atoms", "emptied")

    def __init__(self, label: str, line: int):
        self.label = label
        self.children: list[Tree | Leaf] = []
        self.atoms: list[str] = []
        self.line = line
        self.emptied = False  # a child was removed as an empty element


def iter_trees(text: str, *, normalize: bool = True, source: str = "<string>", line: int = 1) -> Iterator[Tree]:
    """Yield every bracketed tree in ``text`` (``line`` is the line number of its first line).

    Raises `TreebankError` naming ``source`` and the line where the bad tree starts, after having
    yielded the good trees before it.
    """
    stack: list[_Open] = []
    for token, at in _tokens(text, line):
        if token[0] == "(":
            stack.append(_Open(token[1:], at))
        elif token == ")":
            if not stack:
                raise TreebankError(source, at, "unbalanced brackets: ')' closes nothing")
            opened = stack.pop()
            node = _close(opened, stack, normalize, source)
            if stack:
                if node is not None:
                    stack[-1].children.append(node)
                else:
                    stack[-1].emptied = True
            else:
                yield _root(node, normalize, source, opened.line)
        elif not stack:
            raise TreebankError(source, at, f"text outside brackets: {token!r}")
        else:
            stack[-1].atoms.append(token)
    if stack:
        raise TreebankError(source, stack[0].line, f"unbalanced brackets: {len(stack)} '(' not closed at the end")


def _close(node: _Open, stack: list[_Open], normalize: bool, source: str) -> Tree | Leaf | None:
    start = stack[0].line if stack else node.line
    if node.atoms:
        if node.children or len(node.atoms) > 1:
            raise TreebankError(source, start, f"bracket ({node.label} ...) opened on line {node.line} mixes "
                                               f"words {node.atoms[:3]} with other words or constituents")
        if not node.label:
            raise TreebankError(source, start, f"word {node.atoms[0]!r} on line {node.line} has no POS tag")
        if normalize and node.label == EMPTY_TAG:
            return None
        return Leaf(node.label, node.atoms[0])
    if not node.children:
        if node.emptied:
            return None  # only empty elements below it: removed with them
        if not stack:
            return Tree(node.label)  # a sentence without words, as `repair` writes for an empty input
        raise TreebankError(source, start, f"empty bracket ({node.label}) on line {node.line}")
    label = strip_function_tags(node.label) if normalize and stack else node.label
    return Tree(label, tuple(node.children))


def _root(node: Tree | Leaf | None, normalize: bool, source: str, line: int) -> Tree:
    if node is None:
        raise TreebankError(source, line, "tree has no words left after removing empty elements (-NONE-)")
    if isinstance(node, Leaf):
        return Tree(ROOT_LABEL, (node,))
    if not normalize:
        return node
    if node.label in _ROOT_ALIASES:
        return Tree(ROOT_LABEL, node.children)
    return Tree(ROOT_LABEL, (Tree(strip_function_tags(node.label), node.children),))


def parse_tree(text: str, *, normalize: bool = True, source: str = "<string>", line: int = 1) -> Tree:
    """Read exactly one bracketed tree (may span lines); raise `TreebankError` otherwise."""
    trees = iter_trees(text, normalize=normalize, source=source, line=line)
    first = next(trees, None)
    if first is None:
        raise TreebankError(source, line, "no tree found")
    second = next(trees, None)
    if second is not None:
        raise TreebankError(source, line, "more than one tree where one was expected")
    return first
