"""The TF1 ``tensorflow`` stand-in a legacy script sees: ``tf.compat.v1`` plus ``tf.contrib``.

Everything TF1-era scripts use outside ``tf.contrib`` still exists in TensorFlow 2.15 under
``tf.compat.v1`` (``tf.flags``, ``tf.app.run``, ``tf.logging``, ``tf.gfile``, ``tf.python_io``,
``tf.to_int32``, ``tf.train.Optimizer``, ``tf.nn.dropout(keep_prob=…)`` …), so the stand-in
serves those from there and adds:

- ``tf.contrib`` (see :mod:`tfest_kit.legacy._contrib`);
- ``tensorflow.examples.tutorials.mnist.input_data`` (TF 1.15's MNIST reader, a port);
- ``tf.estimator.tpu`` backed by ``tfest_kit.tpu``, so scripts already written against
  ``import tensorflow.compat.v1 as tf`` get the same CPU/GPU fallback;
- ``tf.distribute.cluster_resolver.TPUClusterResolver`` backed by ``tfest_kit.tpu``;
- ``tf.estimator.Estimator`` and the canned Estimators with tfest_kit's writer lock and
  checkpoint recovery (:mod:`tfest_kit.legacy._estimator`);
- ``tf.compat.v1`` that is the stand-in itself, so ``import tensorflow.compat.v1 as tf`` and
  ``import tensorflow as tf`` see the same TF1 world.

The TF1 *behaviour* (graph mode, ``Dimension`` objects with ``.value``, reference variables,
TF1 control flow) is switched on process-wide by :func:`tfest_kit.legacy.run`, not here:
building a namespace changes nothing.

Example:

    report = Report()
    tf1 = build_namespace(report)
    tf1.contrib.layers.layer_norm     # tfest_kit.legacy.layer_norm
    tf1.get_variable                  # tf.compat.v1.get_variable, recorded in report
"""

from __future__ import annotations

import importlib

from tfest_kit._tf import tf, tf2
from tfest_kit.legacy._contrib import (
    build_contrib,
    cluster_resolver_module,
    examples_module,
    from_tfest_tpu,
    tpu_module,
)
from tfest_kit.legacy._shim import COMPAT_V1, PRIVATE, Entry, Report, ShimModule

__all__ = ["build_namespace", "build_estimator_package", "REAL_PACKAGES", "ESTIMATOR_PACKAGE"]

ESTIMATOR_PACKAGE = "tensorflow_estimator"
_TPU_PACKAGE = "tensorflow_estimator.python.estimator.tpu"

# TensorFlow's implementation packages: `import tensorflow.<name>…` stays the real import for
# these (tensorflow.python.ops…, tensorflow.core.protobuf…; tensorflow.lite.python…), and for
# names starting with "_".  Every other `tensorflow.<name>` the stand-in has (keras, train,
# summary, layers, nn, contrib, compat …) resolves inside it, so `from tensorflow.keras.optimizers
# import Adam` is `tf.keras.optimizers.Adam`, the TF1 one.
REAL_PACKAGES = frozenset(
    {
        "python",
        "core",
        "compiler",
        "lite",
        "tools",
        "tsl",
        "include",
        "security",
        "dtensor",
        "xla_aot_runtime_src",
    }
)

# tf.estimator: Estimator and the canned Estimators guard their model_dir as tfest_kit's own
# (tfest_kit.legacy._estimator); every other name is tf.compat.v1.estimator's.
_ESTIMATOR_FALLBACKS = [
    (
        lambda: importlib.import_module("tfest_kit.legacy._estimator").LEGACY_ESTIMATORS,
        "tf.compat.v1.estimator",
    ),
    (lambda: tf.estimator, "tf.compat.v1.estimator"),
]


def _graph_tensor_class() -> type:
    """What ``tf.Tensor`` was in TF 1.15, the class of graph tensors (``type(t) is tf.Tensor``);
    TensorFlow 2.14+ makes them a subclass of it, ``SymbolicTensor``."""
    with tf.Graph().as_default():
        return type(tf.constant(0))


def build_namespace(report: Report) -> ShimModule:
    """Returns a fresh TF1 ``tensorflow`` stand-in that records the names it serves.

    Args:
      report: where served names are recorded.

    Returns:
      A module object named ``tensorflow``; unknown names raise ``AttributeError`` saying the
      legacy runner does not provide them.
    """
    top: ShimModule

    def compat() -> ShimModule:
        return ShimModule(
            "tf.compat",
            report,
            entries={"v1": Entry(lambda: top, None), "v2": Entry(lambda: tf2.compat.v2, None)},
            fallbacks=[(lambda: tf.compat, "tf.compat")],
        )

    def estimator() -> ShimModule:
        return ShimModule(
            "tf.estimator",
            report,
            entries={
                "tpu": Entry(
                    lambda: tpu_module("tf.estimator.tpu", report, estimator=True, ops=False),
                    None,
                )
            },
            fallbacks=_ESTIMATOR_FALLBACKS,
        )

    def distribute() -> ShimModule:
        return ShimModule(
            "tf.distribute",
            report,
            entries={
                "cluster_resolver": Entry(
                    lambda: cluster_resolver_module("tf.distribute.cluster_resolver", report), None
                )
            },
            fallbacks=[(lambda: tf.distribute, "tf.compat.v1.distribute")],
        )

    top = ShimModule(
        "tf",
        report,
        entries={
            "contrib": Entry(lambda: build_contrib(report), None),
            "compat": Entry(compat, None),
            "estimator": Entry(estimator, None),
            "distribute": Entry(distribute, None),
            # `from tensorflow.examples.tutorials.mnist import input_data` (TF 1.15's pip package).
            "examples": Entry(lambda: examples_module(report), None),
            "tpu": Entry(
                lambda: tpu_module("tf.tpu", report, estimator=False, ops=True, kind=COMPAT_V1),
                None,
            ),
            "Tensor": Entry(_graph_tensor_class, "graph tensors' class (tf.compat.v1's: its base)"),
        },
        fallbacks=[(lambda: tf, "tf.compat.v1")],
        kind=COMPAT_V1,
        module_name="tensorflow",
        private_prefix="tensorflow",
    )
    return top


def build_estimator_package(report: Report) -> dict[str, ShimModule]:
    """Returns stand-ins for the ``tensorflow_estimator`` modules that lead to the TPU classes.

    TF 1.x scripts also import the TPU classes from the estimator package itself
    (``from tensorflow_estimator.python.estimator.tpu import tpu_estimator``,
    ``import tensorflow_estimator as tf_estimator; tf_estimator.tpu.TPUEstimator``); those
    get ``tfest_kit.tpu``'s classes, as ``tf.estimator.tpu`` does.  Every other name of the
    package is the real one.

    Args:
      report: where served names are recorded.

    Returns:
      ``{module name: stand-in}`` for ``tensorflow_estimator`` and the modules on the way to
      ``tpu_estimator`` / ``tpu_config``; a name not in it is imported for real.
    """

    def real(name: str):
        return lambda: importlib.import_module(name)

    def overlay(name: str, entries: dict, kind: str = PRIVATE) -> ShimModule:
        return ShimModule(name, report, entries=entries, fallbacks=[(real(name), name)], kind=kind)

    def tfest_tpu(*names: str) -> dict:
        return {n: Entry(from_tfest_tpu(n), f"tfest_kit.tpu.{n}") for n in names}

    modules = {
        f"{_TPU_PACKAGE}.tpu_estimator": overlay(
            f"{_TPU_PACKAGE}.tpu_estimator", tfest_tpu("TPUEstimator", "TPUEstimatorSpec")
        ),
        f"{_TPU_PACKAGE}.tpu_config": overlay(
            f"{_TPU_PACKAGE}.tpu_config", tfest_tpu("RunConfig", "TPUConfig", "InputPipelineConfig")
        ),
        f"{ESTIMATOR_PACKAGE}.estimator": ShimModule(
            f"{ESTIMATOR_PACKAGE}.estimator",
            report,
            entries={
                "tpu": Entry(
                    lambda: tpu_module(
                        f"{ESTIMATOR_PACKAGE}.estimator.tpu", report, estimator=True, ops=False
                    ),
                    None,
                )
            },
            fallbacks=_ESTIMATOR_FALLBACKS,
        ),
    }

    def child(name: str) -> Entry:
        return Entry(lambda: modules[name], None)

    modules[_TPU_PACKAGE] = overlay(
        _TPU_PACKAGE,
        {
            "tpu_estimator": child(f"{_TPU_PACKAGE}.tpu_estimator"),
            "tpu_config": child(f"{_TPU_PACKAGE}.tpu_config"),
        },
    )
    modules[f"{ESTIMATOR_PACKAGE}.python.estimator"] = overlay(
        f"{ESTIMATOR_PACKAGE}.python.estimator", {"tpu": child(_TPU_PACKAGE)}
    )
    modules[f"{ESTIMATOR_PACKAGE}.python"] = overlay(
        f"{ESTIMATOR_PACKAGE}.python", {"estimator": child(f"{ESTIMATOR_PACKAGE}.python.estimator")}
    )
    api = f"{ESTIMATOR_PACKAGE}.estimator"
    modules[ESTIMATOR_PACKAGE] = overlay(
        ESTIMATOR_PACKAGE,
        {
            "python": child(f"{ESTIMATOR_PACKAGE}.python"),
            "estimator": child(api),
            # TF 1.x scripts written as `tf_estimator.tpu.TPUEstimator` with the package
            # imported as tf_estimator.
            "tpu": Entry(lambda: modules[api].tpu, None),
        },
        kind=COMPAT_V1,
    )
    return modules
