"""Training pairs cut at sentence boundaries, the inputs sentence-by-sentence decoding gives.

A DDTP description is a paragraph; the decoding can translate it sentence by sentence
(:mod:`keras_transformer.decoding.sentences`), so the model's inputs are then single sentences,
while it trained on paragraphs, 789 of which (14% of the training tokens) were longer than
``max_length`` and dropped. When both sides of a paragraph pair split into the same number of
sentences (5,290 of the 6,693 multi-sentence training pairs), the i-th sentences are taken as
translations of each other: ``only`` trains on the sentence pairs instead of such a paragraph.
Paragraphs whose sides split unequally stay whole. Both sides are cut by
the decoding's own splitter, list items too (their bullets set aside as the decoding sets them aside),
so training sees what decoding cuts.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

#: ``InputConfig.sentence_pairs``: the paragraphs as they are, or with their sentence pairs.
MODES = ("none", "only")


def with_sentence_pairs(pairs: Iterable[tuple[str, str]], mode: str,
                        chunk_size: int = 1024) -> Iterator[tuple[str, str]]:
    """``pairs`` with the sentence pairs of each paragraph pair whose sides split alike (see module)."""
    if mode not in MODES:
        raise ValueError(f"sentence_pairs must be one of {', '.join(MODES)}, got {mode!r}")
    if mode == "none":
        yield from pairs
        return
    pairs = iter(pairs)
    while chunk := [pair for _, pair in zip(range(chunk_size), pairs)]:
        sources = _sentences([s for s, _ in chunk])
        targets = _sentences([t for _, t in chunk])
        for pair, source, target in zip(chunk, sources, targets):
            if 1 < len(source) == len(target):
                yield from ((s.decode(), t.decode()) for s, t in zip(source, target))
            else:
                yield pair


def _sentences(texts: list[str]) -> list[list[bytes]]:
    """Each text's parts as the decoding gives them to the model: list items without their bullet."""
    from keras_transformer.decoding.sentences import split_bullets, split_sentences

    parts = split_sentences(texts)
    return parts.with_flat_values(split_bullets(parts.flat_values)[1]).to_list()
