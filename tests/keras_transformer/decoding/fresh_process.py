"""A new interpreter for export tests: it can import TensorFlow and tensorflow_text but not this
project, and it records every Keras function it runs while the test's body loads and serves."""

import textwrap

PRELUDE = textwrap.dedent(
    """
    import json, os, sys

    class Block:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("keras_transformer", "pipelines", "flows"):
                raise ImportError("not allowed in the fresh process: " + name)
            return None

    sys.meta_path.insert(0, Block())
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the SentencePiece ops)

    keras_calls = set()

    def profile(frame, event, arg):
        if event == "call" and os.sep + "keras" + os.sep in frame.f_code.co_filename:
            keras_calls.add(frame.f_code.co_name)

    sys.setprofile(profile)
    """
)

#: What every script reports beside its own results.
REPORTED = ('"keras_calls": sorted(keras_calls), "project_modules": sorted(m for m in sys.modules '
            'if m.split(".")[0] in ("keras_transformer", "pipelines")),')


def script(body: str) -> str:
    """The prelude, then ``body`` (``{REPORTED}`` stands for the common report entries)."""
    return PRELUDE + textwrap.dedent(body).replace("{REPORTED}", REPORTED)
