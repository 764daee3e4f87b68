"""The package-held-out split (test_unseen): stems, units, the builder, and the shipped corpora."""

import lzma

import pytest

from pipelines.corpus import SPLITS, Corpus, write_corpus
from pipelines.tasks.translation import ddtp
from pipelines.tasks.translation.ddtp_packages import (
    SHARED_MARK,
    UNSEEN_SPLIT,
    package_split,
    package_stem,
)
from pipelines.textfiles import DataError


@pytest.mark.parametrize("name, stem", [
    ("libfoo1", "foo"), ("libfoo-dev", "foo"), ("libfoo-doc", "foo"), ("foo", "foo"), ("foo-data", "foo"),
    ("python3-foo", "foo"), ("liblua5.3-0-dbg", "lua"), ("lua5.3", "lua"), ("gir1.2-gtk-3.0", "gtk"),
    ("libgtk-3-bin", "gtk"), ("libatomic1-armel-cross", "atomic"), ("libobjc4-mips64r6el-cross", "objc"),
    ("golang-github-spf13-cobra-dev", "spf"), ("lua-socket", "socket"), ("r-cran-dplyr", "dplyr"),
    ("0ad-data-common", "0ad"),
    ("libstemmer0d", "stemmer"), ("7kaa-data", "7kaa"), ("python3", "python"),
])
def test_package_stem(name, stem):
    assert package_stem(name) == stem


def test_units_join_stems_that_share_their_own_text_but_not_boilerplate():
    groups = {
        "a1": frozenset({"a"}), "ab": frozenset({"a", "b"}), "c1": frozenset({"c"}),
        "boiler": frozenset({"a", "c", "d", "e", "f"}),  # 5 stems: Debian boilerplate
        "d1": frozenset({"d"}),
    }
    split = package_split(groups, 0.5, max_groups=5)
    assert split.stats["units"] == 3 and split.stats["largest_unit"] == 2  # {a, b}, {c}, {d}
    assert split.stats["shared_sentences"] == 1 and split.is_shared("boiler")
    assert ("a" in split.held_out) == ("b" in split.held_out)
    assert not split.is_held_out("boiler") and split.label("boiler") == SHARED_MARK
    assert split.label("ab") == "a b"
    assert split.is_held_out("a1") == ("a" in split.held_out)
    # Deterministic: the same units are held out every time.
    assert package_split(groups, 0.5, max_groups=5).held_out == split.held_out
    with pytest.raises(ValueError):
        package_split(groups, 0.0, max_groups=5)


# --- the builder on hand-written Translation files: families of sibling packages ------------------

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
         "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango"]
FAMILIES = [f"{a}{b}" for a in WORDS for b in WORDS[:6]]  # 120 families


def _record(package, md5, lang, summary, paragraphs):
    body = "\n .\n".join(f" {p}" for p in paragraphs)
    return f"Package: {package}\nDescription-md5: {md5}\nDescription-{lang}: {summary}\n{body}\n"


def _write_families(directory):
    """Per family: libX1 and libX-dev share the first paragraph, X-doc ends in boilerplate."""
    en, de = [], []
    for i, name in enumerate(FAMILIES):
        records = [
            (f"lib{name}1", f"{3 * i:032x}", (f"{name} library", f"{name} Bibliothek"),
             [(f"The {name} library parses things.", f"Die {name}-Bibliothek parst Dinge."),
              (f"This package holds the shared library of {name}.", f"Dieses Paket enthält {name}.")]),
            (f"lib{name}-dev", f"{3 * i + 1:032x}", (f"{name} library (development)", f"{name} (Entwicklung)"),
             [(f"The {name} library parses things.", f"Die {name}-Bibliothek parst Dinge."),
              (f"This package holds the headers of {name}.", f"Dieses Paket enthält Header von {name}.")]),
            (f"{name}-doc", f"{3 * i + 2:032x}", (f"{name} documentation", f"{name} Dokumentation"),
             [("This package contains the documentation.", "Dieses Paket enthält die Dokumentation.")]),
        ]
        for package, md5, (en_summary, de_summary), paragraphs in records:
            en.append(_record(package, md5, "en", en_summary, [p for p, _ in paragraphs]))
            de.append(_record(package, md5, "de", de_summary, [p for _, p in paragraphs]))
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "Translation-en.xz").write_bytes(lzma.compress("\n".join(en).encode()))
    (directory / "Translation-de.xz").write_bytes(lzma.compress("\n".join(de).encode()))
    return {lang: ddtp.find_translation_file(directory, lang) for lang in ("en", "de")}


def _groups(corpus, split):
    return [set(line.split()) for line in corpus.side_lines(f"{split}.packages")]


@pytest.fixture(scope="module")
def families(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("families")
    translations = _write_families(tmp / "raw")
    config = ddtp.DdtpBuildConfig(validation_fraction=0.1, test_fraction=0.1, unseen_fraction=0.2)
    built = ddtp.build(translations, tmp / "out", ["en-de"], config, compress=False)["en-de"]
    plain = ddtp.build(translations, tmp / "plain", ["en-de"],
                       ddtp.DdtpBuildConfig(validation_fraction=0.1, test_fraction=0.1, unseen_fraction=0),
                       compress=False)["en-de"]
    again = ddtp.build(translations, tmp / "again", ["en-de"], config, compress=False)["en-de"]
    return built, plain, again


def test_no_package_of_the_unseen_split_is_in_training(families):
    built, _, _ = families
    assert built.splits == (*SPLITS, UNSEEN_SPLIT) and built.counts[UNSEEN_SPLIT] > 20
    unseen = set().union(*_groups(built, UNSEEN_SPLIT))
    trained = set().union(*_groups(built, "train")) - {SHARED_MARK}
    assert unseen and not unseen & trained
    # Whole families went: the summary, the shared paragraph and both packages' own sentences.
    unseen_english = set(built.lines(UNSEEN_SPLIT, "en"))
    for stem in unseen:
        assert f"The {stem} library parses things." in unseen_english | set(built.lines("test", "en")) \
            | set(built.lines("validation", "en"))
    # The boilerplate stays where the sentence hash put it, and is marked.
    assert SHARED_MARK not in {line for line in built.side_lines(f"{UNSEEN_SPLIT}.packages")}
    for split in SPLITS:
        assert not set(built.lines(split, "en")) & unseen_english


def test_validation_and_test_are_those_of_the_sentence_hash_split(families):
    built, plain, again = families
    assert plain.splits == SPLITS
    for split in ("validation", "test"):
        for lang in ("en", "de"):
            assert built.file_sha256(split, lang) == plain.file_sha256(split, lang)
    # train lost exactly the unseen sentences, in order.
    unseen = set(built.pairs(UNSEEN_SPLIT))
    assert [p for p in plain.pairs("train") if p not in unseen] == list(built.pairs("train"))
    assert sorted(built.pairs(UNSEEN_SPLIT)) == sorted(p for p in plain.pairs("train") if p in unseen)
    assert ddtp.compare_corpora(again, built) == []  # deterministic
    assert built.manifest["provenance"]["unseen_split"]["fraction"] == 0.2


# --- the shipped corpora ----------------------------------------------------------------------------

@pytest.mark.parametrize("pair", ddtp.SHIPPED_PAIRS)
def test_shipped_unseen_split_shares_no_package_and_no_sentence_with_training(pair):
    corpus = ddtp.shipped_corpus(pair)
    assert corpus.splits == (*SPLITS, UNSEEN_SPLIT) and corpus.counts[UNSEEN_SPLIT] > 1000
    english = {split: set(corpus.lines(split, "en")) for split in corpus.splits}
    for split in SPLITS:
        assert not english[UNSEEN_SPLIT] & english[split], split
    groups = {split: _groups(corpus, split) for split in corpus.splits}
    assert all(len(groups[s]) == corpus.counts[s] for s in corpus.splits)
    unseen = set().union(*groups[UNSEEN_SPLIT])
    trained = set().union(*groups["train"]) - {SHARED_MARK}
    assert SHARED_MARK not in unseen and len(unseen) > 200
    assert not unseen & trained
    unseen_info = corpus.manifest["provenance"]["unseen_split"]
    assert unseen_info["test_unseen_packages"] == len(unseen)
    assert UNSEEN_SPLIT in (ddtp.SHIPPED_DIR / "README.md").read_text(encoding="utf-8")


def test_corpus_layout_takes_extra_splits_and_side_files(tmp_path):
    splits = {s: [(f"{s} a", f"{s} b")] for s in (*SPLITS, UNSEEN_SPLIT)}
    corpus = write_corpus(tmp_path / "c", "en", "de", splits, source="t", side_files={"train.packages": ["x"]})
    loaded = Corpus.load(corpus.directory)
    assert loaded.splits == (*SPLITS, UNSEEN_SPLIT) and list(loaded.pairs(UNSEEN_SPLIT)) == [("test_unseen a",
                                                                                               "test_unseen b")]
    assert list(loaded.side_lines("train.packages")) == ["x"]
    assert loaded.fingerprint() != write_corpus(tmp_path / "d", "en", "de", {s: splits[s] for s in SPLITS},
                                                source="t").fingerprint()
    with pytest.raises(DataError, match="unknown split"):
        write_corpus(tmp_path / "e", "en", "de", {**splits, "dev2": []}, source="t")
    with pytest.raises(KeyError):
        Corpus.load(tmp_path / "d").path(UNSEEN_SPLIT, "en")
