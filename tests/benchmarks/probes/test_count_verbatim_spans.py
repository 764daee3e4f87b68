"""The span count of benchmarks/probes/count_verbatim_spans.py on hand-made translations."""

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

