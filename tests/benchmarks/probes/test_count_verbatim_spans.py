"""The span count of benchmarks/count_verbatim_spans.py on hand-made translations."""

from __future__ import annotations

from benchmarks.probes import count_verbatim_spans

count = count_verbatim_spans.count


def test_counts_spans_whole_in_translations_and_references():
    sources = ["See http://a.org/x/ and /usr/share/doc/p/.", "No span here.", "Mail joe@b.org now."]
    references = ["Siehe http://a.org/x/ und /usr/share/doc/p/.", "Kein.", "Schreiben Sie joe@b.org."]
    translations = ["Siehe http://a.org/x und /usr/share/doc/p/.", "Nein.", "Mail Mail Mail joe@b.org"]
    assert count(sources, translations, references) == {
        "paragraphs_with_spans": 2, "spans": 3, "whole_in_translation": 2, "whole_in_reference": 3,
        "looping_translations_among_them": 1}


def test_identifiers_are_counted_apart_and_their_paragraphs_scored_apart():
    other = "Dieser Satz hat keinen Bezeichner und wird genau so übersetzt."
    sources = ["Hashes: MD5 and SHA256, see /usr/share/doc/p/.", "This sentence has no identifier.", "IPv6 support."]
    references = ["Prüfsummen: MD5 und SHA256, siehe /usr/share/doc/p/.", other, "IPv6-Unterstützung."]
    translations = ["Prüfsummen: SHA256 SHA256 SHA256, siehe /usr/share/doc/p/.", other, "IPv6-Unterstützung."]
    report = count(sources, translations, references, identifiers=True)
    assert {k: v for k, v in report.items() if not k.startswith("scores_")} == {
        "paragraphs_with_spans": 2, "spans": 3, "whole_in_translation": 2, "whole_in_reference": 3,
        "looping_translations_among_them": 1}
    # The one paragraph without an identifier is translated exactly; the two with one are not.
    assert report["scores_other_paragraphs"]["bleu"] == 100.0
    assert report["scores_paragraphs_with_spans"]["bleu"] < 100.0
