"""Verbatim spans: which parts of a text are copied, not translated, and how they are put back."""

from __future__ import annotations

import pytest
import tensorflow as tf

from keras_transformer.text import VERBATIM, normalize, protect, restore, verbatim_spans

P = VERBATIM


def spans(text: str) -> list[str]:
    return [s.decode("utf-8") for s in verbatim_spans([text]).to_list()[0]]


@pytest.mark.parametrize("text, expected", [
    ("See http://www.zdomain.com/a56/src/examples/. Then", ["http://www.zdomain.com/a56/src/examples/"]),
    ("(https://example.org/a_b?x=1&y=2), and", ["https://example.org/a_b?x=1&y=2"]),
    ("Home page: www.gnu.org/software/make", ["www.gnu.org/software/make"]),
    ("Write to joe.x+deb@lists.debian.org.", ["joe.x+deb@lists.debian.org"]),
    ("Edit /etc/apt/sources.list, then ~/.config/app/ and /usr/lib/x86_64-linux-gnu/.",
     ["/etc/apt/sources.list", "~/.config/app/", "/usr/lib/x86_64-linux-gnu/"]),
    # Translatable slashes are left to the model.
    ("and/or TCP/IP I/O 1/2 24/7 Ein-/Ausgabe /etc alone", []),
])
def test_spans_are_urls_addresses_and_paths(text, expected):
    assert spans(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("Checksums: MD5, SHA1, SHA256 and SHA512.", []),
    ("IPv6 and x86_64 for Qt5-based 3D games, mp3 and W3C.", []),
    ("32bit, the 4th, 1990s, 3d, libfoo-qt5, http://a.org/v2/x, 1/2.", ["http://a.org/v2/x"]),
])
def test_identifiers_are_translated_not_copied(text, expected):
    """Words mixing letters and digits are left to the model; only URLs, addresses and paths are spans."""
    assert spans(text) == expected


def test_protect_leaves_one_placeholder_per_span_and_the_text_around():
    text = "Docs in /usr/share/doc/foo/ or at https://foo.org/. Bugs: bugs@foo.org"
    assert protect([text]).numpy()[0].decode() == f"Docs in {P} or at {P}. Bugs: {P}"


def test_restore_puts_the_sources_spans_back_in_order():
    source = normalize(["Mail a@b.org or see http://x.org/y/ and /usr/bin/z."])
    found = verbatim_spans(source)
    out = restore([f"Schreiben Sie an {P} oder siehe {P} und {P}."], found)
    assert out.numpy()[0].decode() == "Schreiben Sie an a@b.org oder siehe http://x.org/y/ und /usr/bin/z."
    # protect then restore is the identity on normalised text.
    assert restore(protect(source), found).numpy()[0] == source.numpy()[0]


def test_restore_drops_extra_placeholders_and_appends_missing_spans():
    found = tf.ragged.constant([["http://a.org/x"], [], ["/a/b", "/c/d"]], dtype=tf.string)
    out = restore([f"{P} und {P} {P}", f"nichts {P}", "ohne"], found)
    assert [t.decode() for t in out.numpy()] == ["http://a.org/x und", "nichts", "ohne /a/b /c/d"]


def test_restore_traces_with_unknown_batch_and_span_counts():
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string), tf.TensorSpec([None], tf.string)])
    def round_trip(outputs, sources):
        return restore(outputs, verbatim_spans(sources))

    out = round_trip(tf.constant([f"a {P}", "b"]), tf.constant(["x /p/q", "y"]))
    assert [t.decode() for t in out.numpy()] == ["a /p/q", "b"]
    assert round_trip(tf.constant([], tf.string), tf.constant([], tf.string)).shape == (0,)
