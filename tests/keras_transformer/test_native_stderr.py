"""keras_transformer/native_stderr.py: lines written straight to file descriptor 2 in a block, the
noise among them held back and the rest written after it; the identity notice of tensorflow-text's
SentencePiece is such noise (keras_transformer/tokenizer.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

from keras_transformer.native_stderr import filtered_stderr


def test_noise_written_to_fd_2_is_held_back_and_the_rest_written_after_the_block(capfd):
    with filtered_stderr(lambda line: line.startswith("noise")):
        os.write(2, b"noise from C++\nan error a user must see\nnoise again\n")
    assert capfd.readouterr().err == "an error a user must see\n"


def test_a_capture_in_another_thread_waits_for_the_first_to_end(capfd):
    inside = threading.Event()
    release = threading.Event()

    def hold():
        with filtered_stderr(lambda line: False):
            os.write(2, b"first\n")
            inside.set()
            release.wait(10)

    thread = threading.Thread(target=hold)
    thread.start()
    inside.wait(10)
    with_second = []

    def capture():
        with filtered_stderr(lambda line: False):
            os.write(2, b"second\n")
            with_second.append(True)

    waiting = threading.Thread(target=capture)
    waiting.start()
    waiting.join(0.5)
    assert not with_second  # the second capture has not started while the first holds fd 2
    release.set()
    thread.join(10)
    waiting.join(10)
    assert with_second and capfd.readouterr().err == "first\nsecond\n"


def test_the_identity_notice_of_sentencepiece_is_the_only_line_held_back_for_tokenizers():
    code = ("from keras_transformer.tokenizer import is_identity_notice as n; "
            "print(n('normalizer.cc(51) LOG(INFO) precompiled_charsmap is empty. use identity normalization.\\n'), "
            "n('normalizer.cc(51) LOG(ERROR) something else\\n'), n('precompiled_charsmap is empty'))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=True)
    assert done.stdout.split() == ["True", "False", "False"]
