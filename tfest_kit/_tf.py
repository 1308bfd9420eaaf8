"""The one place that imports TensorFlow and TensorFlow Estimator.

Every other module takes ``tf`` (``tf.compat.v1``), ``tf2`` (the top-level ``tensorflow``
package) and ``estimator`` (``tf.compat.v1.estimator``) from here, so the version check below
runs before anything touches ``tf.estimator``.

``tf.estimator`` was removed in TensorFlow 2.16; tfest_kit pins 2.15 (see requirements.txt).
"""

from __future__ import annotations

import os
import re

__all__ = [
    "tf",
    "tf2",
    "estimator",
    "CallableOptions",
    "SavedModel",
    "estimator_training",
    "lookup_ops",
    "summary_ops_v2",
    "TF_VERSION",
    "check_version",
]

_PINS = "tensorflow==2.15.1 tensorflow-estimator==2.15.0"

# TensorFlow's C++ start-up lines (oneDNN notice, "Unable to register cuDNN factory" …) are
# printed while the shared library loads, before any Python setting can reach them, so the
# default has to be in place before the import.  A value the user set is respected.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def check_version(version: str, has_estimator: bool = True) -> None:
    """Raises ImportError unless ``version`` is a TensorFlow that still ships ``tf.estimator``.

    Args:
      version: ``tensorflow.__version__``, e.g. ``"2.15.1"``.
      has_estimator: whether ``tensorflow.compat.v1.estimator`` could be imported.

    Raises:
      ImportError: for TensorFlow >= 2.16, < 2.13, or any build without ``tf.estimator``;
        the message names the installed version and what to install.
    """
    match = re.match(r"(\d+)\.(\d+)", version)
    major_minor = (int(match.group(1)), int(match.group(2))) if match else (0, 0)
    if major_minor >= (2, 16) or not has_estimator:
        raise ImportError(
            f"tfest_kit needs tf.estimator, which TensorFlow {version} does not have "
            "(it was removed in TensorFlow 2.16). Install the pinned versions: "
            f"pip install {_PINS}  or  pip install -r requirements.txt"
        )
    if major_minor < (2, 13):
        raise ImportError(
            f"tfest_kit supports TensorFlow 2.13-2.15; found {version}. "
            f"Install the pinned versions: pip install {_PINS}"
        )


import tensorflow as tf2  # noqa: E402  (the environment variable above must come first)

TF_VERSION: str = tf2.__version__
# The version number alone decides for 2.16+, before tensorflow_estimator (which would fail
# with a less helpful error of its own) is imported.
check_version(TF_VERSION)

try:
    import tensorflow_estimator  # noqa: E402,F401

    _has_estimator = hasattr(tf2.compat.v1, "estimator")
except ImportError:  # pragma: no cover - exercised through the simulated-version test
    _has_estimator = False

check_version(TF_VERSION, _has_estimator)

tf = tf2.compat.v1
estimator = tf.estimator
# The proto Session._make_callable_from_options takes; TensorFlow has no public name for it.
from tensorflow.core.protobuf.config_pb2 import CallableOptions  # noqa: E402

# The saved_model.pb file format, to read an export's signatures without restoring its weights
# (what `saved_model_cli show` does); TensorFlow has no public name for it either.
from tensorflow.core.protobuf.saved_model_pb2 import SavedModel  # noqa: E402

# The lookup-table functions tf.contrib.lookup re-exported (index_table_from_file …; tf.lookup
# has the classes, not the functions) and TF 1.15's tf.contrib.summary (create_file_writer,
# always_record_summaries … in graph mode): TensorFlow 2.15 keeps them only here. Used by the
# legacy runner's tf.contrib.lookup / summary; both already imported by TensorFlow itself.
from tensorflow.python.ops import lookup_ops, summary_ops_v2  # noqa: E402

# Estimator's train_and_evaluate machinery, for its one extension point with no public name:
# the continuous-evaluation listener (_TrainingExecutor(continuous_eval_listener=)), which
# decides before and after each evaluation, locally and on the evaluator task.
from tensorflow_estimator.python.estimator import training as estimator_training  # noqa: E402
