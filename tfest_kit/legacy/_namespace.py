"""The TF1 ``tensorflow`` stand-in a legacy script sees: ``tf.compat.v1`` plus ``tf.contrib``.

Everything TF1-era scripts use outside ``tf.contrib`` still exists in TensorFlow 2.15 under
``tf.compat.v1`` (``tf.flags``, ``tf.app.run``, ``tf.logging``, ``tf.gfile``, ``tf.python_io``,
``tf.to_int32``, ``tf.train.Optimizer``, ``tf.nn.dropout(keep_prob=…)`` …), so the stand-in
serves those from there and adds:

- ``tf.contrib`` (see :mod:`tfest_kit.legacy._contrib`);
- ``tf.estimator.tpu`` backed by ``tfest_kit.tpu``, so scripts already written against
  ``import tensorflow.compat.v1 as tf`` get the same CPU/GPU fallback;
- ``tf.distribute.cluster_resolver.TPUClusterResolver`` backed by ``tfest_kit.tpu``;
- ``tf.compat.v1`` that is the stand-in itself, so ``import tensorflow.compat.v1 as tf`` and
  ``import tensorflow as tf`` see the same TF1 world.

The TF1 *behaviour* (graph mode, ``Dimension`` objects with ``.value``) is switched on
process-wide by :func:`tfest_kit.legacy.run`, not here: building a namespace changes nothing.

Example:

    report = Report()
    tf1 = build_namespace(report)
    tf1.contrib.layers.layer_norm     # tfest_kit.legacy.layer_norm
    tf1.get_variable                  # tf.compat.v1.get_variable, recorded in report
"""

from __future__ import annotations

from tfest_kit._tf import tf, tf2
from tfest_kit.legacy._contrib import build_contrib, cluster_resolver_module, tpu_module
from tfest_kit.legacy._shim import COMPAT_V1, Entry, Report, ShimModule

__all__ = ["build_namespace", "REAL_PACKAGES"]

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
                    lambda: tpu_module("tf.estimator.tpu", report, cross_shard=False), None
                )
            },
            fallbacks=[(lambda: tf.estimator, "tf.compat.v1.estimator")],
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
        },
        fallbacks=[(lambda: tf, "tf.compat.v1")],
        kind=COMPAT_V1,
        module_name="tensorflow",
        private_prefix="tensorflow",
    )
    return top
