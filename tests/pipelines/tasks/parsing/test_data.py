"""The parsing task's data stage on the toy treebank: a corpus of (words, linearised tree) pairs."""

import pytest

from pipelines.corpus import Corpus
from pipelines.tasks.parsing.data import TreebankConfig, prepare_treebank
from pipelines.tasks.parsing.linearize import delinearize
from pipelines.textfiles import DataError


def test_the_treebank_becomes_a_corpus_split_by_file(toy_treebank, toy_splits, tmp_path):
    path = prepare_treebank(TreebankConfig(path=str(toy_treebank), output_dir=str(tmp_path / "corpus")))
    corpus = Corpus.load(path)
    assert (corpus.source_lang, corpus.target_lang) == ("en", "tree")
    assert corpus.counts == {"train": len(toy_splits["train"]), "validation": len(toy_splits["dev"]),
                               "test": len(toy_splits["test"])}
    words, target = next(corpus.pairs("test"))
    # Each pair gives back the treebank's tree: the corpus is the task's whole data.
    assert delinearize(target, words.split()) == toy_splits["test"][0]


def test_a_rerun_does_no_work_and_changed_settings_are_refused(toy_treebank, tmp_path, caplog):
    """Issue 61: the corpus earlier runs were made from is not rewritten for other settings; the
    check before a flow starts says so too."""
    from flows.preflight import check_prepared_data
    from pipelines.config import ConfigError
    from pipelines.tasks.parsing.data import up_to_date

    config = TreebankConfig(path=str(toy_treebank), output_dir=str(tmp_path / "corpus"), max_train_trees=50)
    prepare_treebank(config)
    manifest = (tmp_path / "corpus" / "manifest.json").stat().st_mtime_ns
    caplog.set_level("INFO")
    prepare_treebank(config)
    assert "nothing to do" in caplog.text
    assert (tmp_path / "corpus" / "manifest.json").stat().st_mtime_ns == manifest
    assert up_to_date(config)
    config.max_train_trees = 60
    assert not up_to_date(config)
    refusal = r"corpus/manifest.json: the corpus was prepared with other settings \(data.max_train_trees 50, not 60\)"
    with pytest.raises(ConfigError, match=refusal):
        check_prepared_data(config)
    with pytest.raises(ConfigError, match=refusal):
        prepare_treebank(config)
    assert (tmp_path / "corpus" / "manifest.json").stat().st_mtime_ns == manifest
    assert Corpus.load(tmp_path / "corpus").counts["train"] == 50
    config.output_dir = str(tmp_path / "other")
    check_prepared_data(config)
    assert Corpus.load(prepare_treebank(config)).counts["train"] == 60


def test_a_missing_treebank_names_the_setting_and_how_to_get_it(tmp_path):
    config = TreebankConfig(path=str(tmp_path / "nowhere.zip"), output_dir=str(tmp_path / "corpus"))
    with pytest.raises(DataError, match=r"data.path: .*nowhere.zip does not exist.*nltk.downloader treebank"):
        prepare_treebank(config)


def test_offline_fetching_fails_after_one_short_probe_naming_the_download_command(tmp_path, monkeypatch):
    """What makes it fail within seconds: one HEAD request under ``network_timeout``, no download
    (whose own timeout is a minute) and no retry."""
    import urllib.request

    opened, urlopen = [], urllib.request.urlopen

    def recorded(request, *args, timeout=None, **kwargs):
        method = request.get_method() if isinstance(request, urllib.request.Request) else "GET"
        opened.append((method, timeout))
        return urlopen(request, *args, timeout=timeout, **kwargs)

    monkeypatch.setattr(urllib.request, "urlopen", recorded)
    # Port 9 (discard) on the loopback interface: nothing listens, as on a machine without internet.
    config = TreebankConfig(output_dir=str(tmp_path / "corpus"), url="http://127.0.0.1:9/treebank.zip",
                            network_timeout=3)
    with pytest.raises(DataError, match=r"unreachable.*3s timeout.*give data.path.*nltk.downloader treebank"):
        prepare_treebank(config)
    assert opened == [("HEAD", 3)]
    assert not (tmp_path / "corpus").exists() or not any((tmp_path / "corpus").rglob("*.zip"))


def test_invalid_settings_are_rejected():
    with pytest.raises(ValueError, match="on_error"):
        TreebankConfig(on_error="ignore")
    with pytest.raises(ValueError, match="max_train_trees"):
        TreebankConfig(max_train_trees=0)


@pytest.mark.parametrize("coverage, complete", [(None, True), (0.98, False)])
def test_a_word_vocabulary_of_the_trees_spells_every_symbol(toy_treebank, tmp_path, coverage, complete):
    """The default target vocabulary keeps every tree symbol, the rare ones too: a tag left
    ``<unk>`` would make a word vanish from the parsers' targets (the training stage refuses it)."""
    from keras_transformer.models.span_parser.targets import missing_symbols
    from pipelines.corpus import Corpus
    from pipelines.tasks.parsing.data import TreebankConfig, prepare_treebank
    from pipelines.tokenization import TokenizerConfig, load_tokenizers, train_tokenizer
    from pipelines.training.stage import check_tree_symbols

    corpus = Corpus.load(prepare_treebank(TreebankConfig(path=str(toy_treebank), output_dir=str(tmp_path / "data"))))
    target = {"model_type": "word", "vocab_size": 400, "byte_fallback": False,
              **({} if coverage is None else {"character_coverage": coverage})}
    config = TokenizerConfig(vocab_size=600, shared=False, target=target)
    tokenizers = load_tokenizers(train_tokenizer(corpus, config, tmp_path / "tokenizer"))
    missing = missing_symbols((tree for _, tree in corpus.pairs("train")), tokenizers.target.pieces())
    assert (missing == []) == complete, missing
    if not complete:
        with pytest.raises(ValueError, match=r"target vocabulary lacks .*character_coverage"):
            check_tree_symbols(corpus, tokenizers.target.pieces())
