"""SentencePiece training: exact round trip on the real test split, special ids, caching."""

import json

import pytest
import tensorflow as tf

from keras_transformer.tokenizer import SubwordTokenizer
from pipelines.config import ConfigError, from_dict
from pipelines.tokenization import TokenizerConfig, load_tokenizers, train_tokenizer, vocabulary_record
from pipelines.vocabulary import Vocabulary
from tests.conftest import TEST_VOCAB_SIZE


def _round_trip_failures(tokenizer, sentences, batch_size=2048):
    failures, unknown = [], 0
    for start in range(0, len(sentences), batch_size):
        batch = sentences[start:start + batch_size]
        ids = tokenizer.tokenize(batch)
        unknown += int(tf.reduce_sum(tf.cast(ids.flat_values == tokenizer.unk_id, tf.int32)))
        for original, text in zip(batch, tokenizer.detokenize(ids).numpy()):
            if text.decode("utf-8") != original:
                failures.append((original, text.decode("utf-8")))
    return failures, unknown


def test_round_trip_every_test_sentence(ddtp_corpus, tokenizer):
    """detokenize(tokenize(s)) == s on both sides of the whole test split, with no <unk>."""
    for lang in (ddtp_corpus.source_lang, ddtp_corpus.target_lang):
        sentences = list(ddtp_corpus.lines("test", lang))
        assert len(sentences) == ddtp_corpus.counts["test"] > 1000
        failures, unknown = _round_trip_failures(tokenizer, sentences)
        assert failures == []
        assert unknown == 0


def test_special_ids_and_vocab(tokenizer):
    assert (tokenizer.pad_id, tokenizer.unk_id, tokenizer.bos_id, tokenizer.eos_id) == (0, 1, 2, 3)
    assert tokenizer.vocab_size == TEST_VOCAB_SIZE
    pieces = [p.decode() for p in tokenizer.id_to_piece([0, 1, 2, 3]).numpy()]
    assert pieces == ["<pad>", "<unk>", "<s>", "</s>"]
    # Normal text never produces the special ids (they are reserved).
    ids = tokenizer.tokenize(["Ein Paket für Entwickler <s> </s> <pad>"]).flat_values.numpy()
    assert not set(ids.tolist()) & {0, 1, 2, 3}


def test_byte_fallback_covers_unseen_characters(tokenizer):
    text = "Unicode: 日本語 текст 🙂 ∮ E⋅da = Q"
    ids = tokenizer.tokenize([text])
    assert tokenizer.unk_id not in ids.flat_values.numpy().tolist()
    assert tokenizer.detokenize(ids).numpy()[0].decode() == text


def test_retraining_is_skipped_when_inputs_are_unchanged(ddtp_corpus, tokenizer_model):
    before = tokenizer_model.stat().st_mtime_ns
    config = TokenizerConfig(vocab_size=TEST_VOCAB_SIZE, input_sentence_size=20000)
    assert train_tokenizer(ddtp_corpus, config, tokenizer_model.parent) == Vocabulary(tokenizer_model)
    assert tokenizer_model.stat().st_mtime_ns == before
    assert tokenizer_model.with_suffix(".vocab").read_text(encoding="utf-8").startswith(
        "<pad>\t0")
    # Off, the verbatim setting is left out of the record, so tokenizers trained before it stay up to date.
    meta = json.loads(tokenizer_model.with_suffix(".json").read_text(encoding="utf-8"))
    assert "verbatim" not in meta["inputs"]["config"] and meta["inputs"]["config"]["vocab_size"] == TEST_VOCAB_SIZE


def test_separate_vocabularies(ddtp_corpus, tmp_path):
    config = TokenizerConfig(vocab_size=600, input_sentence_size=5000, shared=False)
    models = train_tokenizer(ddtp_corpus, config, tmp_path)
    assert not models.shared and [p.name for p in models.distinct()] == ["spm_en.model", "spm_de.model"]
    tokenizers = load_tokenizers(models)
    source, target = tokenizers
    assert source.serialized_model != target.serialized_model
    for tok, lang in ((source, "en"), (target, "de")):
        sentences = list(ddtp_corpus.lines("test", lang))[:300]
        assert _round_trip_failures(tok, sentences) == ([], 0)
    # The record that ties checkpoints to both vocabularies names each.
    assert vocabulary_record(tokenizers) == {"fingerprint": [source.fingerprint, target.fingerprint],
                                             "size": [source.vocab_size, target.vocab_size]}
    shared = load_tokenizers(Vocabulary(tmp_path / "spm_en.model"))
    shared_a, shared_b = shared
    assert shared.shared and shared_a is shared_b and isinstance(shared_a, SubwordTokenizer)
    assert vocabulary_record(shared) == {"fingerprint": shared_a.fingerprint, "size": shared_a.vocab_size}


def test_tokenizer_config_validation():
    assert from_dict(TokenizerConfig, {"vocab_size": 4000, "shared": False}).vocab_size == 4000
    with pytest.raises(ConfigError, match="TokenizerConfig.vocab_size=100: must be at least 261"):
        from_dict(TokenizerConfig, {"vocab_size": 100})
    with pytest.raises(ConfigError, match="TokenizerConfig.model_type='wordpiece': expected bpe"):
        from_dict(TokenizerConfig, {"model_type": "wordpiece"})
    with pytest.raises(ConfigError, match="TokenizerConfig.target=.*unknown setting"):
        from_dict(TokenizerConfig, {"shared": False, "target": {"vocab": 10}})
    with pytest.raises(ConfigError, match=r"target=.*\['num_threads', 'verbatim'\] cannot differ between the sides"):
        from_dict(TokenizerConfig, {"shared": False, "target": {"vocab_size": 400, "verbatim": True, "num_threads": 1}})


def test_verbatim_tokenizer_has_one_placeholder_piece(verbatim_tokenizer, tokenizer):
    from keras_transformer.text import VERBATIM

    assert verbatim_tokenizer.copies_verbatim and not tokenizer.copies_verbatim
    placeholder = int(verbatim_tokenizer.piece_to_id([VERBATIM]).numpy()[0])
    assert placeholder != verbatim_tokenizer.unk_id
    ids = verbatim_tokenizer.tokenize(["See https://www.example.org/some/long/path.html now."]).to_list()[0]
    pieces = [p.decode() for p in verbatim_tokenizer.id_to_piece(ids).numpy()]
    assert placeholder in ids and not any("example" in p or "html" in p for p in pieces)


def test_verbatim_round_trip_every_test_sentence(ddtp_corpus, verbatim_tokenizer):
    """restore(detokenize(tokenize(s)), s) == s on both sides of the test split, spans included."""
    for lang in (ddtp_corpus.source_lang, ddtp_corpus.target_lang):
        sentences = list(ddtp_corpus.lines("test", lang))
        texts = verbatim_tokenizer.detokenize(verbatim_tokenizer.tokenize(sentences))
        restored = [t.decode("utf-8") for t in verbatim_tokenizer.restore(texts, sentences).numpy()]
        assert sum("://" in s for s in sentences) > 5
        assert restored == sentences


def _files(directory):
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def test_a_tokenizer_trained_from_other_inputs_is_never_replaced(ddtp_corpus, tokenizer_model, tmp_path):
    """An earlier run's model is good only with the tokenizer it was trained with: other settings
    (or another corpus) in the same directory are refused, and its files stay byte for byte."""
    import shutil

    from pipelines.tokenization import check_existing, refuse_to_replace

    directory = tmp_path / "tokenizer"
    shutil.copytree(tokenizer_model.parent, directory)
    before = _files(directory)
    other = TokenizerConfig(vocab_size=TEST_VOCAB_SIZE + 100, input_sentence_size=20000)
    with pytest.raises(ConfigError) as refused:
        train_tokenizer(ddtp_corpus, other, directory)
    assert str(refused.value) == (
        f"{directory / 'spm_shared.model'}: trained with other settings (vocab_size {TEST_VOCAB_SIZE}, not "
        f"{TEST_VOCAB_SIZE + 100}), and the earlier runs of this directory depend on it: give this run another "
        "run_dir, or the tokenizer settings it was trained with")
    with pytest.raises(ConfigError, match="trained with other settings"):  # the check before any work says the same
        check_existing(other, directory)
    same = TokenizerConfig(vocab_size=TEST_VOCAB_SIZE, input_sentence_size=20000)
    check_existing(same, directory)
    record = json.loads((directory / "spm_shared.json").read_text())["inputs"]
    with pytest.raises(ConfigError, match=r"trained on other data \(the corpus's train files for en/de differ\)"):
        refuse_to_replace(directory / "spm_shared.model", {**record, "files": {"en": "0" * 64, "de": "1" * 64}})
    assert _files(directory) == before
    # A model its record does not describe (left half-written by a killed run) is trained again.
    (directory / "spm_shared.model").write_bytes(b"half")
    assert train_tokenizer(ddtp_corpus, same, directory) == Vocabulary(directory / "spm_shared.model")
    assert _files(directory) == before
