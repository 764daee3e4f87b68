"""The ``ddtp`` source: the bundled corpus as prepared, in either direction."""

from pipelines.corpus import SPLITS, Corpus
from pipelines.tasks.translation import ddtp
from pipelines.tasks.translation.cleaning import REASONS
from pipelines.tasks.translation.sources import SourceConfig, prepare_corpus


def test_ddtp_download_matches_shipped_corpus(ddtp_corpus):
    shipped = ddtp.shipped_corpus("en-de")
    assert ddtp_corpus.manifest["source"] == "ddtp"
    assert (ddtp_corpus.source_lang, ddtp_corpus.target_lang) == ("en", "de")
    assert ddtp_corpus.counts == shipped.counts
    for split in SPLITS:
        for lang in ("en", "de"):
            assert ddtp_corpus.path(split, lang).name == f"{split}.{lang}"  # plain text
            assert ddtp_corpus.file_sha256(split, lang) == shipped.file_sha256(split, lang)
        counts = ddtp_corpus.manifest["cleaning"][split]
        assert set(REASONS) <= set(counts) and counts["kept"] == shipped.counts[split]
    assert ddtp_corpus.manifest["provenance"]["build_cleaning"]["all"]["duplicate"] > 0
    assert next(ddtp_corpus.pairs("train")) == next(shipped.pairs("train"))


def test_ddtp_reverse_direction(tmp_path, ddtp_corpus):
    out = prepare_corpus(SourceConfig(language_pair="de-en", output_dir=str(tmp_path / "de-en")))
    corpus = Corpus.load(out)
    assert (corpus.source_lang, corpus.target_lang) == ("de", "en")
    assert corpus.file_sha256("test", "de") == ddtp_corpus.file_sha256("test", "de")
    de, en = next(corpus.pairs("test"))
    assert (en, de) == next(ddtp_corpus.pairs("test"))
