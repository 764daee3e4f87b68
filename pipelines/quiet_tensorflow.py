"""TensorFlow imported without its C++ start-up lines, for the entry points (flows, commands).

TensorFlow 2.21 and tensorflow-text log from their libraries' static initialisers through absl
before anything can call ``absl::InitializeLog``, straight to file descriptor 2, and no setting
reaches those lines (tensorflow/tensorflow#100442; ``TF_CPP_MIN_LOG_LEVEL=3``,
``CUDA_VISIBLE_DEVICES=-1`` and absl's or glog's variables leave them): "oneDNN custom operations
are on", "Could not find cuda drivers" (twice: once per library). "failed call to cuInit", when the
devices are first listed, is an ERROR line after absl is set up: only ``TF_CPP_MIN_LOG_LEVEL=3``
drops it, and with it every C++ error a user should see. On CPUs where TensorFlow's oneDNN build
routes transposes through oneDNN (seen on Intel CPUs with AMX), the first transpose of an integer or
boolean tensor in a process logs, once per process, an ERROR line that is only a notice: "oneDNN
supports DT_INT32 only on platforms with AVX-512. Falling back to the default Eigen-based
implementation" (decoding and the input pipeline transpose integer ids). Every run printed them; in
a worker's log they read like errors, and before a command's one-line error they hid it.
:func:`import_quietly` imports both libraries, lists the devices and transposes one integer tensor
(which spends that one-time notice) with fd 2 captured, then writes back every captured line that is
not one of those, so a real error raised while importing still shows.
``TF_CPP_MIN_LOG_LEVEL=2`` (set here unless the user chose a level) keeps TensorFlow's later
informational lines (XLA, tf.data) out as well.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys

from keras_transformer.native_stderr import filtered_stderr

#: Lines TensorFlow's libraries print while loading, whatever the log level.
_START_UP = re.compile(
    r"^(WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR"
    r"|[IW]\d{4} [\d:.]+\s+\d+ (port|cudart_stub|cpu_feature_guard|dso_loader)\.cc:\d+\] .*"
    r"|E\d{4} [\d:.]+\s+\d+ (cuda_platform|cuda_executor|cuda_diagnostics)\.cc:\d+\] .*"
    r"|E\d{4} [\d:.]+\s+\d+ util\.cc:\d+\] oneDNN supports DT_[A-Z0-9]+ only on platforms with AVX-512\. .*"
    r"|To enable the following instructions: .*)$"
)


def is_start_up_line(line: str) -> bool:
    """Whether ``line`` is one of TensorFlow's start-up lines (nothing a user must act on)."""
    return bool(_START_UP.match(line.rstrip("\r\n")))


def import_quietly() -> None:
    """Imports TensorFlow and tensorflow-text and lists the devices, without the start-up lines.

    Does nothing but the import once TensorFlow is imported (its lines were printed then).
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if "tensorflow" in sys.modules:
        return
    with filtered_stderr(is_start_up_line), _without_keras_extras():
        import tensorflow as tf
        import tensorflow_text  # noqa: F401  (its library prints the same lines when it loads)

        tf.config.list_physical_devices()  # initialises the platforms: the cuInit line
        _spend_onednn_notice(tf)


#: Libraries Keras imports when they are installed, for what no entry point here uses: its scikit-learn
#: wrappers (scikit-learn is installed for MLflow), a second of every start, and ``keras.visualization``'s
#: image galleries (``matplotlib.pyplot``; the attention pictures draw with matplotlib's Agg canvas),
#: 0.4 s.
KERAS_EXTRAS = ("sklearn", "matplotlib")


@contextlib.contextmanager
def _without_keras_extras():
    """While TensorFlow and Keras load, ``import sklearn`` and ``import matplotlib`` find nothing
    (``sys.modules[name] = None``), so Keras defines its wrappers and galleries without them (they say
    the library is missing if called); afterwards both import as ever. A process that imported one
    before keeps it as it is."""
    blocked = [name for name in KERAS_EXTRAS if name not in sys.modules]
    for name in blocked:
        sys.modules[name] = None  # type: ignore[assignment]
    try:
        yield
    finally:
        for name in blocked:
            if sys.modules.get(name, 0) is None:
                del sys.modules[name]


def _spend_onednn_notice(tf) -> None:
    """Transposes one integer tensor in a graph session of its own: where oneDNN logs its
    once-a-process fallback notice, it logs it now. A session, not an eager op, because an eager op
    would start TensorFlow's runtime, after which threads and logical CPUs can no longer be set."""
    graph = tf.Graph()
    with graph.as_default():
        transposed = tf.transpose(tf.zeros((1, 2), tf.int32))
    with tf.compat.v1.Session(graph=graph) as session:
        session.run(transposed)
