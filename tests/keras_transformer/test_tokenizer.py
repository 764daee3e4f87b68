"""SubwordTokenizer: in-graph tokenization, detokenization of model output, SavedModel export."""

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.tokenizer import SubwordTokenizer, source_batch

SENTENCES = ["Echtzeit-Strategiespiel über antike Kriegsführung",
             "Real-time strategy game of ancient warfare"]


def test_tokenize_is_ragged_int32_without_bos_eos(tokenizer):
    ids = tokenizer.tokenize(SENTENCES)
    assert isinstance(ids, tf.RaggedTensor) and ids.dtype == tf.int32
    assert ids.shape[0] == 2
    for row in ids.to_list():
        assert row and tokenizer.bos_id not in row and tokenizer.eos_id not in row
    single = tokenizer.tokenize(SENTENCES[0])
    assert single.shape.rank == 1 and single.numpy().tolist() == ids[0].numpy().tolist()


def test_pieces_are_the_vocabulary_by_id(tokenizer):
    pieces = tokenizer.pieces()
    assert len(pieces) == tokenizer.vocab_size
    ids = tokenizer.tokenize(SENTENCES[1]).numpy().tolist()
    assert [pieces[i] for i in ids] == [p.decode() for p in tokenizer.id_to_piece(ids).numpy()]
    assert tokenizer.piece_to_id(pieces[7]).numpy() == 7
    assert tokenizer.special_ids == {tokenizer.pad_id, tokenizer.unk_id, tokenizer.bos_id, tokenizer.eos_id}
    assert len(tokenizer.special_ids) == 4


def test_source_batch_is_the_pieces_then_eos_padded_and_cut_to_the_limit(tokenizer):
    ragged = tokenizer.tokenize(SENTENCES).to_list()
    batch = source_batch(tokenizer, SENTENCES, eos_id=3, pad_id=0).numpy()
    longest = max(len(ids) for ids in ragged) + 1
    assert batch.dtype == np.int32 and batch.shape == (2, longest)
    for row, ids in zip(batch, ragged):
        assert row.tolist() == ids + [3] + [0] * (longest - len(ids) - 1)
    cut = source_batch(tokenizer, tf.constant(SENTENCES), eos_id=3, pad_id=0, limit=4).numpy()
    assert cut.tolist() == [ids[:3] + [3] for ids in ragged]


def test_detokenize_strips_padding_bos_and_stops_at_first_eos(tokenizer):
    rows = tokenizer.tokenize(SENTENCES).to_list()
    bos, eos, pad = tokenizer.bos_id, tokenizer.eos_id, tokenizer.pad_id
    garbage = rows[1][:3]  # real pieces after EOS must not leak into the text
    dense = np.full((2, 40), pad, np.int32)
    first = [bos] + rows[0] + [eos] + garbage
    second = rows[1] + [eos, eos]
    dense[0, :len(first)] = first
    dense[1, :len(second)] = second
    texts = [t.decode() for t in tokenizer.detokenize(tf.constant(dense)).numpy()]
    assert texts == SENTENCES
    # int64 dense input, ragged input, and a single sequence.
    assert tokenizer.detokenize(tf.constant(dense, tf.int64)).numpy()[1].decode() == SENTENCES[1]
    assert tokenizer.detokenize(tokenizer.tokenize(SENTENCES)).numpy()[0].decode() == SENTENCES[0]
    assert tokenizer.detokenize(dense[0]).numpy().decode() == SENTENCES[0]
    assert tokenizer.detokenize([[eos] + rows[0]]).numpy()[0].decode() == ""


def test_works_in_tf_function_and_tf_data(tokenizer):
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def round_trip(strings):
        return tokenizer.detokenize(tokenizer.tokenize(strings))

    assert [t.decode() for t in round_trip(tf.constant(SENTENCES)).numpy()] == SENTENCES
    dataset = tf.data.Dataset.from_tensor_slices(SENTENCES).map(tokenizer.tokenize)
    rows = [r.numpy().tolist() for r in dataset]
    assert rows == tokenizer.tokenize(SENTENCES).to_list()


def test_from_serialized_proto_and_savedmodel(tokenizer, tmp_path):
    clone = SubwordTokenizer(tokenizer.serialized_model)
    assert clone.fingerprint == tokenizer.fingerprint and clone.vocab_size == tokenizer.vocab_size
    assert clone.tokenize(SENTENCES).to_list() == tokenizer.tokenize(SENTENCES).to_list()

    class Exported(tf.Module):
        def __init__(self, tok):
            super().__init__()
            self.tok = tok

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def encode(self, strings):
            return self.tok.tokenize(strings).to_tensor()

        @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)])
        def decode(self, ids):
            return self.tok.detokenize(ids)

    tf.saved_model.save(Exported(clone), str(tmp_path / "saved"))
    del clone
    loaded = tf.saved_model.load(str(tmp_path / "saved"))
    ids = loaded.encode(tf.constant(SENTENCES))
    assert [t.decode() for t in loaded.decode(ids).numpy()] == SENTENCES


def test_rejects_invalid_model(tmp_path):
    with pytest.raises(ValueError):
        SubwordTokenizer(b"")
    with pytest.raises(FileNotFoundError):
        SubwordTokenizer(tmp_path / "missing.model")


def test_tokenize_normalises_raw_input_as_the_corpus_cleaning_does(tokenizer):
    import sys

    import tensorflow as tf

    from keras_transformer.tokenizer import normalize
    from pipelines.tasks.translation.cleaning import normalize_text

    # Every code point Python splits on, and a sample of compatibility characters NFKC folds.
    specials = [chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()] + list("ﬁﬂ①Ａ²½…")
    raw = [f" a{c}b{c}{c}c " for c in specials]
    got = [x.decode("utf-8") for x in normalize(tf.constant(raw)).numpy()]
    assert got == [normalize_text(s) for s in raw]
    # So a ligature and a no-break space from a user reach the model as the pieces of plain text.
    ragged = tokenizer.tokenize(["ﬁle\u00a0\u2003system  tools", "file system tools"])
    assert ragged[0].numpy().tolist() == ragged[1].numpy().tolist()


def test_two_tokenizers_in_one_savedmodel_stay_apart(tokenizer, tmp_path):
    """A parser's export holds a source and a target tokenizer: reloaded, each must still be
    itself (unnamed, their resources shared one name and the target decoded with the source's
    model)."""
    import sentencepiece as spm

    lines = tmp_path / "trees.txt"
    lines.write_text("\n".join(["(S (NP DT NN )NP (VP VBZ )VP . )S", "(NP NNP NNP )NP", "(VP VBD (PP IN NN )PP )VP"]
                               * 20) + "\n", "utf-8")
    spm.SentencePieceTrainer.train(input=str(lines), model_prefix=str(tmp_path / "trees"), model_type="word",
                                   vocab_size=16, pad_id=0, unk_id=1, bos_id=2, eos_id=3, minloglevel=2)
    target = SubwordTokenizer(tmp_path / "trees.model")
    assert target.fingerprint != tokenizer.fingerprint

    class Pair(tf.Module):
        def __init__(self, source, target):
            super().__init__()
            self.source, self.target = source, target

        @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)])
        def decode_both(self, ids):
            return self.source.detokenize(ids), self.target.detokenize(ids)

    ids = tf.constant([[4, 5, 6, 7, 8, 9, 10, 11]], tf.int32)
    expected = [t.numpy().tolist() for t in (tokenizer.detokenize(ids), target.detokenize(ids))]
    assert expected[0] != expected[1]
    tf.saved_model.save(Pair(tokenizer, target), str(tmp_path / "pair"))
    loaded = tf.saved_model.load(str(tmp_path / "pair"))
    assert [t.numpy().tolist() for t in loaded.decode_both(ids)] == expected


@pytest.mark.parametrize("text", ["ab  c\x0b\x0b", "\u2028 x\ny ", "tab\there\x85", "plain", "", " \x1c "])
def test_one_line_is_pythons_split_and_join(text):
    """What a translator returns is what a one-line file scores: ``" ".join(text.split())``."""
    from keras_transformer.tokenizer import one_line

    assert one_line(tf.constant([text])).numpy()[0].decode("utf-8") == " ".join(text.split())
