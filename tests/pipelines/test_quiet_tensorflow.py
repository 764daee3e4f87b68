"""pipelines/quiet_tensorflow.py: TensorFlow's start-up lines dropped, every other line kept."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pipelines.quiet_tensorflow import is_start_up_line
from tests.commands import REPO


@pytest.mark.parametrize("line, noise", [
    ("WARNING: All log messages before absl::InitializeLog() is called are written to STDERR", True),
    ("I0000 00:00:1795597593.472981    6304 port.cc:153] oneDNN custom operations are on. You may see", True),
    ("I0000 00:00:1795597593.473890    6304 cudart_stub.cc:31] Could not find cuda drivers on your machine", True),
    ("E0000 00:00:1795597602.546332    6304 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error", True),
    ("E0000 00:00:1796537483.168632    5181 util.cc:131] oneDNN supports DT_INT64 only on platforms with AVX-512. "
     "Falling back to the default Eigen-based implementation if present.", True),
    ("E0000 00:00:1796537483.168632    5181 util.cc:131] oneDNN supports DT_BOOL only on platforms with AVX-512. "
     "Falling back to the default Eigen-based implementation if present.", True),
    ("E0000 00:00:1796537483.168632    5181 util.cc:99] Invalid argument: shapes must be equal", False),
    ("E0000 00:00:1795597602.546332    6304 op_kernel.cc:52] OP_REQUIRES failed at save_restore_v2_ops", False),
    ("Traceback (most recent call last):", False),
])
def test_only_tensorflows_start_up_lines_are_dropped(line, noise):
    assert is_start_up_line(line + "\n") is noise


#: A process as an entry point runs one: TensorFlow imported quietly, then what a run does first
#: (threads and logical CPUs set), then integer transposes (decoding's and the input pipeline's),
#: which on some CPUs log oneDNN's fallback notice the first time; then a real error.
PROCESS = """
import sys
from pipelines.quiet_tensorflow import import_quietly
import_quietly()
import tensorflow as tf
tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.set_logical_device_configuration(tf.config.list_physical_devices("CPU")[0],
                                           [tf.config.LogicalDeviceConfiguration()] * 2)
for dtype in (tf.int32, tf.int64, tf.bool):
    tf.transpose(tf.zeros((3, 2), dtype))
    tf.function(lambda x: tf.transpose(x))(tf.zeros((2, 3), dtype))
print(len(tf.config.list_logical_devices("CPU")))
sys.stderr.write("a real error\\n")
"""


def test_an_entry_point_process_prints_no_start_up_line_on_any_cpu():
    """Whatever the CPU (the fallback notice shows on some only), standard error holds nothing
    but the real error, and the runtime could still be configured after the quiet import."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run([sys.executable, "-c", PROCESS], capture_output=True, text=True, env=env,
                          timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["2"]
    assert done.stderr == "a real error\n"


EXTRAS = """
import sys
from pipelines.quiet_tensorflow import import_quietly
import_quietly()
loaded = [name in sys.modules for name in ("sklearn", "matplotlib", "matplotlib.pyplot")]
import keras
import sklearn.base
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
import matplotlib.pyplot
print(*loaded, isinstance(sklearn.base.BaseEstimator(), sklearn.base.BaseEstimator),
      FigureCanvasAgg(Figure()).get_renderer() is not None, callable(matplotlib.pyplot.subplots))
"""


def test_the_quiet_import_leaves_scikit_learn_and_matplotlib_unloaded_and_importable():
    # Keras' scikit-learn wrappers and image galleries cost every entry point 1.4 s; both libraries are
    # still there for what needs them (the attention pictures draw with matplotlib).
    done = subprocess.run([sys.executable, "-c", EXTRAS], capture_output=True, text=True, timeout=300, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["False", "False", "False", "True", "True", "True"]
