"""The CTranslate2 engine alone, the yardstick of the export's wrapping: what bulk translation could cost.

``ctranslate2.Translator.translate_batch`` on the weights of a CTranslate2 export, its recorded engine options
(beam 4 and the rest), the sentences tokenized before the clock starts, sorted by length and asked in
batches of 32, the best hypothesis only. Only the engine calls are timed: no text goes in or out of them.
The batch's length limit and floor are taken as the export takes them for one length (the longest source
plus the offset; the ratio of the shortest), so the engine decodes the same lengths it would be asked for;
mixed lengths in a batch make it differ from the export's translations a little, which the report shows
beside the speed (BLEU).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

#: Sentences per engine call.
BATCH_SIZE = 32


class RawEngine:
    """A CTranslate2 export's engine, called directly (see the module's docstring).

    Args:
        path: the export directory.
        threads: the engine's ``intra_threads``.
    """

    def __init__(self, path, threads: int):
        import ctranslate2

        from keras_transformer.decoding.ctranslate2_export import METADATA_FILE, SOURCE_TOKENIZER, TARGET_TOKENIZER
        from keras_transformer.tokenizer import SubwordTokenizer

        path = Path(path)
        metadata = json.loads((path / METADATA_FILE).read_text("utf-8"))
        self.options = dict(metadata["engine"])
        self.decoding = metadata["decoding"]
        self.output_limit = int(metadata["max_positions"]) - 1
        self.source = SubwordTokenizer(path / SOURCE_TOKENIZER)
        self.target = SubwordTokenizer(path / TARGET_TOKENIZER)
        self.source_pieces = np.asarray(self.source.pieces(), dtype=object)
        self.eos_piece = self.source_pieces[metadata["model_config"]["eos_id"]]
        self.target_ids = {piece: i for i, piece in enumerate(self.target.pieces())}
        self.engine = ctranslate2.Translator(str(path), device="cpu", inter_threads=1, intra_threads=threads)

    def prepare(self, paragraphs: list[str]) -> dict:
        """The paragraphs' sentences (split as the export splits them) as source pieces with EOS, untimed."""
        import tensorflow as tf

        from keras_transformer.decoding.sentences import split_bullets, split_sentences

        parts = split_sentences(tf.constant(paragraphs, tf.string))
        bullets, bodies = split_bullets(parts.flat_values)
        ids = self.source.tokenize(bodies).to_list()
        tokens = [list(self.source_pieces[row]) + [self.eos_piece] for row in ids]
        return {"tokens": tokens, "bodies": [b.decode("utf-8") for b in bodies.numpy()],
                "bullets": [b.decode("utf-8") for b in bullets.numpy()], "row_splits": parts.row_splits.numpy()}

    def translate(self, tokens: list[list[str]]) -> list[list[str]]:
        """The engine's best target pieces per source (the timed part)."""
        order = sorted(range(len(tokens)), key=lambda i: len(tokens[i]))
        outputs: list = [None] * len(tokens)
        offset, ratio = self.decoding["max_length_offset"], self.decoding["min_length_ratio"]
        for k in range(0, len(order), BATCH_SIZE):
            batch = order[k : k + BATCH_SIZE]
            lengths = [len(tokens[i]) for i in batch]
            results = self.engine.translate_batch(
                [tokens[i] for i in batch], max_input_length=0, **self.options,
                max_decoding_length=min(max(lengths) + offset, self.output_limit),
                min_decoding_length=int(math.floor(ratio * max(min(lengths) - 1, 0))))
            for i, result in zip(batch, results):
                outputs[i] = result.hypotheses[0]
        return outputs

    def texts(self, prepared: dict, outputs: list[list[str]]) -> list[str]:
        """The paragraphs' translations from the engine's pieces, sentences joined as the export joins them."""
        import tensorflow as tf

        from keras_transformer.decoding.sentences import join_sentences

        ids = [np.fromiter((self.target_ids[t] for t in pieces), np.int32) for pieces in outputs]
        ragged = tf.RaggedTensor.from_row_lengths(np.concatenate([np.zeros(0, np.int32), *ids]),
                                                  [len(row) for row in ids])
        texts = self.target.restore(self.target.detokenize(ragged), prepared["bodies"])
        joined = join_sentences(tf.strings.join([prepared["bullets"], texts]), prepared["row_splits"])
        return [t.decode("utf-8") for t in joined.numpy()]
