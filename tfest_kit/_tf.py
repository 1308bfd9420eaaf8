"""The one place that imports TensorFlow and TensorFlow Estimator.

Other modules take ``tf`` (``tf.compat.v1``), ``tf2`` (``tensorflow``) and ``estimator`` from
here, so the version check runs first. On TF 2.16+, which dropped ``tf.estimator``,
``_estimator_bridge`` supplies what tensorflow-estimator 2.15 imports and restores it.
"""

import contextlib
import importlib.util
import os
import re
import sys
import tempfile
import warnings
from collections.abc import Iterator

from tfest_kit.cli.doctor import STACKS, _release  # stdlib only (no TensorFlow)

SUPPORTED = ((2, 13), (2, 21))  # the two stacks and the releases smoke-tested around them

# TensorFlow's C++ start-up lines (oneDNN, cuDNN factory …) print while the library loads, so
# the default must be set before the import; a user's value is respected.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# "I0000 00:00:17… port.cc:153] oneDNN …", and absl's banner before it.
_NATIVE_LOG_LINE = re.compile(rb"([IWEF])\d{4} \d\d:\d\d:|WARNING: All log messages before absl")
# Estimator needs Keras 2: from TF 2.16 on, tf.keras is tf-keras only if this is set before the
# import. Only where tf-keras is installed: TF 2.15 would read it too and look for tf-keras.
if importlib.util.find_spec("tf_keras") is not None:
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
# TF 1.15's wheel had no oneDNN, whose graph rewrites fail on TF1 graphs: 2.15 aborts on a
# hand-written layer norm ("map.h:1293 … key not found"), 2.15 and 2.21 fail on conv + inference
# batch norm + tanh ("Fusion is not implemented"). Legacy scripts run without it.
if ("-m", "tfest_kit.legacy") in zip(_argv := getattr(sys, "orig_argv", []), _argv[1:]):
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")


@contextlib.contextmanager
def _native_log_filtered() -> Iterator[None]:
    """Applies ``TF_CPP_MIN_LOG_LEVEL`` to fd 2 during the TensorFlow import. From TF 2.17 the
    libraries log through absl before the variable is read. Lines below the level are dropped; the
    rest (warnings, tracebacks) are written after, in order."""
    value = os.environ["TF_CPP_MIN_LOG_LEVEL"]
    level = int(value) if value.isdigit() else 0
    if level <= 0:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            for line in captured:
                match = _NATIVE_LOG_LINE.match(line)
                severity = "IWEF".index(match.group(1).decode()) if match and match.group(1) else 0
                if not match or severity >= level:
                    os.write(2, line)


def check_version(version: str, has_estimator: bool = True, reason: str = "") -> None:
    """Raises ImportError, naming ``version`` and what to install, for TensorFlow < 2.13 or > 2.21
    or without tensorflow-estimator (``has_estimator``; ``reason``: what its import said)."""
    install = " or ".join(f"pip install {s.install} (Python {s.pythons})" for s in STACKS.values())
    if not SUPPORTED[0] <= _release(version)[:2] <= SUPPORTED[1]:
        raise ImportError(
            f"tfest_kit was tested with TensorFlow 2.15 and 2.21 (it accepts 2.13-2.21); found "
            f"{version}. Install one of the two stacks: {install}, or `make setup STACK=2.21`."
        )
    if not has_estimator:
        raise ImportError(
            f"tfest_kit needs the tensorflow-estimator package beside TensorFlow {version}: "
            f"{install}." + (f" (import tensorflow_estimator: {reason})" if reason else "")
        )


with _native_log_filtered():
    import tensorflow as tf2  # noqa: E402  (the environment variables above must come first)

    TF_VERSION: str = tf2.__version__
    check_version(TF_VERSION)

    from tfest_kit import _estimator_bridge  # noqa: E402

    _estimator_bridge.install()
    try:
        import tensorflow_estimator  # noqa: E402
    except ImportError as error:
        check_version(TF_VERSION, has_estimator=False, reason=str(error))

    _estimator_bridge.restore_estimator_namespace()
    # The Keras 2 package behind tf.keras: keras 2.15 on TensorFlow 2.15, tf-keras from 2.16 on.
    KERAS_PACKAGE = "tf_keras" if _estimator_bridge.needed(TF_VERSION) else "keras"
    if not tf2.keras.__name__.startswith(KERAS_PACKAGE):
        warnings.warn(
            f"tf.keras is {tf2.keras.__name__.split('.')[0]} {tf2.keras.__version__}, not Keras 2: "
            "Estimator and keras_bridge need Keras 2. Install tf-keras (pip install "
            "tf-keras==2.21.0) and import tfest_kit before tensorflow, or set "
            "TF_USE_LEGACY_KERAS=1 before TensorFlow is imported.",
            stacklevel=2,
        )

tf = tf2.compat.v1
estimator = tf.estimator
# No public equivalents below (all in PRIVATE_NAMES). For Session._make_callable_from_options:
from tensorflow.core.protobuf.config_pb2 import CallableOptions  # noqa: E402

# saved_model.pb's format: an export's signatures without its weights (`saved_model_cli show`).
from tensorflow.core.protobuf.saved_model_pb2 import SavedModel  # noqa: E402

# The reader Estimator's own warm start uses for object-based (Keras) checkpoints.
from tensorflow.python.training.saver import object_graph_key_mapping  # noqa: E402
from tensorflow.python.util import deprecation, module_wrapper  # noqa: E402  (logs.py's switches)

# train_and_evaluate's one extension point with no public name: the continuous-eval listener,
# called before and after each evaluation, locally and on the evaluator task.
from tensorflow_estimator.python.estimator import training as estimator_training  # noqa: E402

TrainingExecutor = estimator_training._TrainingExecutor
ContinuousEvalListener = estimator_training._ContinuousEvalListener
EvalStatus = estimator_training._EvalStatus

# The loop off a TPU: iterations_per_loop read as TPUEstimator reads it ("100", "300s"); the
# saveable of an object-based checkpoint's graph proto (a saver built again after the loop).
from tensorflow.python.trackable.base import NoRestoreSaveable  # noqa: E402
from tensorflow_estimator.python.estimator.tpu.util import parse_iterations_per_loop  # noqa: E402

# Every private TF / Keras / Estimator name tfest_kit uses, and what for; no others allowed.
# tests/test_tf_private_names.py fails when one disappears. Keys:
#   "module:attr.attr"      a module's or a class's attribute (imported, then looked up);
#   "module:Class().attr"   an attribute of an instance (the test builds one);
#   "module#name"           a name the module's own source reads (an attribute set elsewhere).
_ESTIMATOR_TRAINING = "tensorflow_estimator.python.estimator.training"
_V1, _DISTRIBUTE = "tensorflow.compat.v1", "tensorflow.python.distribute"
_CANNED_HEAD = "tensorflow_estimator.python.estimator.canned.head"
PRIVATE_NAMES: dict[str, str] = {
    # training.py: train_and_evaluate's loop with a continuous-eval listener.
    f"{_ESTIMATOR_TRAINING}:_TrainingExecutor": "train_and_evaluate with a listener",
    f"{_ESTIMATOR_TRAINING}:_TrainingExecutor._execute_evaluator_once": "evaluator task",
    f"{_ESTIMATOR_TRAINING}:_TrainingExecutor._start_std_server": "a taken port, named",
    f"{_ESTIMATOR_TRAINING}:_ContinuousEvalListener": "stop the evaluator after an early stop",
    f"{_ESTIMATOR_TRAINING}:_EvalStatus": "whether an evaluation ran",
    # training.py: a config Estimator hands to the distribute coordinator.
    "tensorflow_estimator.python.estimator.estimator#_distribute_coordinator_mode": "training.py",
    # tpu.py: the fallback, an Estimator subclass overriding members as TPUEstimator does.
    f"{_V1}:estimator.Estimator._assert_members_are_not_overridden": "tpu.py: overrides",
    f"{_V1}:estimator.Estimator._train_with_estimator_spec": "tpu.py: loss line",
    f"{_V1}:estimator.Estimator._call_input_fn": "tpu.py: params['batch_size']",
    f"{_V1}:estimator.RunConfig()._master": "tpu.py: no TPU master off the TPU",
    f"{_V1}:estimator.RunConfig()._evaluation_master": "tpu.py: same",
    f"{_V1}:train.CheckpointSaverHook._set_steps_per_run": "_loop.py: steps per Session run",
    "tensorflow.python.ops.summary_ops_v2#_SUMMARY_WRITER_V2": "tpu.py: host_call writers",
    "tensorflow_estimator.python.estimator.tpu.util:parse_iterations_per_loop": "_loop.py",
    "tensorflow.python.trackable.base:NoRestoreSaveable": "_loop.py: a saver built again",
    f"{_V1}:train.Saver()._is_built": "_loop.py: same",
    # _predictor.py, cli/signature.py: serving an export.
    f"{_V1}:Session._make_callable_from_options": "_predictor.py: feeds by name",
    "tensorflow.core.protobuf.config_pb2:CallableOptions": "_predictor.py",
    "tensorflow.core.protobuf.saved_model_pb2:SavedModel": "read signatures without weights",
    "tensorflow.python.util.deprecation:_PRINT_DEPRECATION_WARNINGS": "logs.py: deprecations",
    "tensorflow.python.util.module_wrapper:_PER_MODULE_WARNING_LIMIT": "logs.py: v1 names",
    # Checkpoints and sessions.
    "tensorflow.python.training.saver:object_graph_key_mapping": "keras_bridge.py: warm start",
    f"{_V1}:Variable()._save_slice_info": "_warm_start.py: skip partitioned",
    f"{_V1}:Session()._closed": "hooks.py: a stale PreemptionHook; a closed Predictor",
    f"{_V1}:estimator.Estimator()._model_fn": "keras_bridge.py: the converter's raw model_fn",
    f"{_V1}:estimator.Estimator()._warm_start_settings": "legacy/contrib: add_metrics' own",
    f"{_V1}:train.Saver()._var_list": "keras_bridge.py: its saver, rebuilt",
    f"{_V1}:train.Saver()._object_restore_saver": "keras_bridge.py: same",
    # legacy/contrib/opt.py: LazyAdamOptimizer, TF 1.15's AdamOptimizer subclass.
    f"{_V1}:train.AdamOptimizer._get_beta_accumulators": "LazyAdam's beta powers",
    f"{_V1}:train.AdamOptimizer._apply_sparse": "LazyAdam overrides it",
    f"{_V1}:train.AdamOptimizer._resource_apply_sparse": "LazyAdam overrides it",
    **{
        f"{_V1}:train.AdamOptimizer()._{name}": "LazyAdam: the prepared tensors, locking"
        for name in ("lr_t", "beta1_t", "beta2_t", "epsilon_t", "use_locking")
    },
    # Keras 2 (keras 2.15, or tf-keras on TensorFlow >= 2.16).
    f"{KERAS_PACKAGE}:Model()._nested_inputs": "keras_bridge.py: dict inputs' keys",
    f"{KERAS_PACKAGE}:Model()._nested_outputs": "keras_bridge.py: dict outputs' keys",
    f"{KERAS_PACKAGE}.src.backend:_SEED_GENERATOR": "_model_fn_call.py: unseeded initializers",
    # _estimator_bridge.py (TF >= 2.16); the first four: RunConfig(train_distribute=…)'s path.
    f"{_DISTRIBUTE}.distribute_coordinator:run_distribute_coordinator": "the coordinator",
    f"{_DISTRIBUTE}.distribute_coordinator:CoordinatorMode": "same",
    f"{_DISTRIBUTE}.distribute_coordinator_context:get_current_worker_context": "worker's task",
    f"{_DISTRIBUTE}.multi_worker_util:normalize_cluster_spec": "same",
    "tensorflow.python.util.tf_export:_Attributes": "the estimator API name's attributes",
    "tensorflow.python.util.tf_export:API_ATTRS": "same",
    "tensorflow.python.util.tf_export:API_ATTRS_V1": "same",
    "tensorflow.python.util.tf_export:SUBPACKAGE_NAMESPACES": "same",
    "tensorflow_estimator.python.estimator.api._v1:estimator": "tf.compat.v1.estimator",
    "tensorflow_estimator.python.estimator.api._v2:estimator": "tf.estimator",
    # legacy/: TF 1.15's tf.contrib pieces whose only TF 2.15 home is a private module.
    "tensorflow.python.ops.lookup_ops:index_table_from_file": "legacy/contrib/lookup.py",
    "tensorflow.python.ops.lookup_ops:DenseHashTable": "legacy/contrib/lookup.py",
    "tensorflow.python.ops.clustering_ops:KMeans": "legacy/contrib/factorization.py",
    "tensorflow.python.ops.summary_ops_v2:create_file_writer": "legacy/contrib/summary.py",
    "tensorflow.python.ops.summary_ops_v2:record_summaries_every_n_global_steps": "same",
    "tensorflow.python.util.nest:flatten_up_to": "legacy/_contrib.py: tf.contrib.framework.nest",
    "tensorflow.python.util.nest:map_structure_up_to": "legacy/_contrib.py: same",
    f"{_CANNED_HEAD}:_regression_head": "legacy/contrib: v1 heads",
    f"{_CANNED_HEAD}:_binary_logistic_head_with_sigmoid_cross_entropy_loss": "same",
    f"{_CANNED_HEAD}:_multi_class_head_with_softmax_cross_entropy_loss": "same",
    f"{_CANNED_HEAD}:_assert_range": "same: logistic_regression_head's labels",
    "tensorflow.python.ops.gen_audio_ops:decode_wav": "legacy/_contrib.py: contrib's audio_ops",
    "tensorflow.python.ops.gen_audio_ops:encode_wav": "legacy/_contrib.py: same",
    "tensorflow.python.ops.gen_audio_ops:audio_spectrogram": "legacy/_contrib.py: same",
    "tensorflow.python.ops.gen_audio_ops:mfcc": "legacy/_contrib.py: same",
    "tensorflow.python.tpu.tpu_optimizer:CrossShardOptimizer": "legacy/_contrib.py: tf.contrib.tpu",
    "tensorflow.python.tpu.tpu_function:get_tpu_context": "legacy/_contrib.py: same",
    # legacy/_namespace.py, _contrib.py: the tensorflow_estimator stand-ins fall back to these.
    "tensorflow_estimator.python.estimator.tpu.tpu_estimator:TPUEstimator": "legacy/",
    "tensorflow_estimator.python.estimator.tpu.tpu_config:RunConfig": "legacy/",
    "tensorflow.python.framework.indexed_slices:IndexedSlicesValue": "legacy/: ops.",
    "tensorflow.python.ops.ref_variable:_to_proto_fn": "legacy/: resource_variable_ops.",
    "tensorflow.python.ops.ref_variable:_from_proto_fn": "legacy/: same",
    "tensorflow.python.platform.app:_parse_flags_tolerate_undef": "legacy/: tf.app.run's bad flag",
}
