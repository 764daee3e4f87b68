"""The test cases Keras and keras-hub test their own layers with, made safe for this suite.

Both harnesses' ``setUp`` reset TensorFlow's kernel cache (Keras's ``clear_session``,
TensorFlow's ``set_random_seed``), which deletes the SentencePiece resources of the suite's
session-scoped tokenizers (tensorflow/text#570; ``tests/conftest.py``). Only that reset is left out:
every ``run_*`` check runs as Keras and keras-hub run it.
"""

from __future__ import annotations

import unittest

from keras.src.testing import TestCase as _KerasTestCase
from keras.src.utils import traceback_utils
from keras_hub.src.tests.test_case import TestCase as _KerasHubTestCase


class KerasTestCase(_KerasTestCase):
    """``keras.src.testing.TestCase`` without ``clear_session`` in ``setUp``."""

    def setUp(self):
        unittest.TestCase.setUp(self)
        if traceback_utils.is_traceback_filtering_enabled():
            traceback_utils.disable_traceback_filtering()


class KerasHubTestCase(_KerasHubTestCase):
    """keras-hub's ``TestCase`` without TensorFlow's global seed (whose setting clears the kernel cache)."""

    def setUp(self):
        self._set_default_seed = False  # tf.test.TestCase.__init__ sets it True
        super().setUp()
