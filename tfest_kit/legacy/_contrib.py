"""The ``tf.contrib`` pieces TF1-era fine-tuning scripts use, backed by TF 2.15 and tfest_kit.

``tf.contrib`` was removed in TensorFlow 2.0.  What BERT-style scripts need from it lives on:

- ``tf.contrib.tpu``: ``TPUEstimator``, ``TPUEstimatorSpec``, ``RunConfig``, ``TPUConfig``,
  ``InputPipelineConfig``, ``CrossShardOptimizer`` from ``tfest_kit.tpu`` (CPU/GPU fallback
  without a TPU); the TPU-only functions (``cross_replica_sum``, ``rewrite``, ``shard`` …)
  from :mod:`tfest_kit.legacy.contrib.tpu` (what one replica computes, without a TPU); other
  names from ``tf.compat.v1.estimator.tpu`` / ``tf.compat.v1.tpu``.  ``tf.tpu`` gets the same
  functions (see :func:`tpu_module`);
- ``tf.contrib.cluster_resolver.TPUClusterResolver``: ``tfest_kit.tpu.TPUClusterResolver``;
- ``tf.contrib.data.*`` (``map_and_batch``, ``parallel_interleave`` …):
  ``tf.compat.v1.data.experimental``; ``batch_and_drop_remainder`` and its padded twin:
  ``Dataset.batch(…, drop_remainder=True)``;
- the packages of :mod:`tfest_kit.legacy.contrib`, one module each, imported when a script
  first reaches the package (see :func:`served_package`): ``predictor``
  (``tfest_kit.serving.Predictor``), ``training`` (a port of ``HParams``), ``metrics``
  (``tf.compat.v1.metrics`` in contrib's argument order, the rest from ``tf_slim.metrics``),
  ``lookup`` (``lookup_ops``), ``rnn`` (``tf.compat.v1.nn.rnn_cell`` and the fused kernels),
  ``framework`` / ``layers`` (TensorFlow and ``tf_slim``) …; ``slim`` is ``tf_slim``.

Other ``tf.contrib`` packages are not served: the error a script gets names their TensorFlow
2.15 (or PyPI) home (:data:`CONTRIB_REPLACEMENTS`), as does a name a served package lacks
(its module's ``NOT_SERVED``).

Example:

    contrib = build_contrib(Report())
    contrib.tpu.TPUEstimator      # tfest_kit.tpu.TPUEstimator
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any, Callable, Optional

from tfest_kit._tf import tf
from tfest_kit.legacy._shim import SHIM, Entry, Report, ShimModule

__all__ = [
    "build_contrib",
    "tpu_module",
    "served_package",
    "from_tfest_tpu",
    "cluster_resolver_module",
    "TPU_NAMES",
    "CONTRIB_REPLACEMENTS",
]

# Names of tfest_kit.legacy.contrib.tpu, listed here so that building the stand-in imports
# nothing; tests/test_legacy.py checks the two lists agree.
ONE_REPLICA_NAMES = (
    "cross_replica_sum",
    "rewrite",
    "replicate",
    "shard",
    "batch_parallel",
    "initialize_system",
    "shutdown_system",
)
TPU_NAMES = ("TPUEstimator", "TPUEstimatorSpec", "RunConfig", "TPUConfig", "InputPipelineConfig")


# tf.contrib.<name> -> what to write instead, for the packages the runner does not serve; every
# `tf.…` named here is in tf.compat.v1 (checked by tests/test_legacy.py).
CONTRIB_REPLACEMENTS = {
    "learn": (
        "tf.estimator (out of scope for the legacy runner): tf.contrib.learn.Estimator -> "
        "tf.estimator.Estimator, learn.RunConfig -> tf.estimator.RunConfig, "
        "learn.Experiment / learn_runner.run -> tf.estimator.train_and_evaluate, "
        "learn.datasets -> tf.keras.datasets"
    ),
    "legacy_seq2seq": "tf.contrib.seq2seq (served: decoders, attention, beam search)",
    "keras": "tf.keras",
    "losses": "tf.losses",
    "feature_column": "tf.feature_column",
    "saved_model": "tf.saved_model",
    "checkpoint": "tf.train.Checkpoint",
    "cudnn_rnn": "tf.keras.layers.LSTM / tf.keras.layers.GRU (cuDNN kernels on a GPU)",
    "image": "tf.image",
    "distributions": "tensorflow-probability's tfp.distributions",
    "bayesflow": "tensorflow-probability",
    "tensor_forest": "tensorflow-decision-forests",
    "gan": "tensorflow-gan",
    "quantize": "tensorflow-model-optimization (tfmot.quantization)",
}


def from_tfest_tpu(name: str) -> Callable[[], Any]:
    # Imported on first use: tfest_kit.tpu pulls in the Estimator machinery.
    return lambda: getattr(importlib.import_module("tfest_kit.tpu"), name)


def _from_one_replica(name: str) -> Callable[[], Any]:
    return lambda: getattr(importlib.import_module("tfest_kit.legacy.contrib.tpu"), name)


def tpu_module(
    display: str, report: Report, *, estimator: bool, ops: bool, kind: str = SHIM
) -> ShimModule:
    """Returns a ``tpu`` stand-in: ``tf.contrib.tpu``, ``tf.estimator.tpu`` or ``tf.tpu``.

    Args:
      display: ``"tf.contrib.tpu"``, ``"tf.estimator.tpu"``, ``"tf.tpu"`` …
      report: where served names are recorded.
      estimator: serve the TPUEstimator family from ``tfest_kit.tpu`` and the rest of
        ``tf.compat.v1.estimator.tpu``.
      ops: serve ``CrossShardOptimizer`` from ``tfest_kit.tpu``, the TPU-only functions
        (``cross_replica_sum``, ``rewrite``, ``shard`` …) from
        :mod:`tfest_kit.legacy.contrib.tpu` (one replica without a TPU), and the rest of
        ``tf.compat.v1.tpu``.  ``tf.contrib.tpu`` had both halves.
      kind: how the names taken from TensorFlow's modules are reported: :data:`SHIM` for a
        module TensorFlow 2.15 does not have (``tf.contrib.tpu``), ``COMPAT_V1`` for ``tf.tpu``.

    Returns:
      A module whose TPU-only names fall back to what one replica computes without a TPU.
    """
    entries = {}
    fallbacks = []
    if estimator:
        entries.update(
            {name: Entry(from_tfest_tpu(name), f"tfest_kit.tpu.{name}") for name in TPU_NAMES}
        )
        fallbacks.append((lambda: tf.estimator.tpu, "tf.compat.v1.estimator.tpu"))
    if ops:
        entries["CrossShardOptimizer"] = Entry(
            from_tfest_tpu("CrossShardOptimizer"), "tfest_kit.tpu.CrossShardOptimizer"
        )
        for name in ONE_REPLICA_NAMES:
            entries[name] = Entry(
                _from_one_replica(name),
                f"tfest_kit.legacy.contrib.tpu.{name} (one replica without a TPU)",
            )
        fallbacks.append((lambda: tf.tpu, "tf.compat.v1.tpu"))
    if estimator and ops:
        # TF 1.x scripts also imported the implementation modules:
        # `from tensorflow.contrib.tpu.python.tpu import tpu_estimator, tpu_config, tpu`.
        entries["python"] = Entry(lambda: _contrib_tpu_python(display, report, module), None)
    module = ShimModule(
        display,
        report,
        entries=entries,
        fallbacks=fallbacks,
        kind=kind,
        provides=f"Of {display} it provides {', '.join(sorted(entries))}. ",
    )
    return module


_TPU_PACKAGE = "tensorflow_estimator.python.estimator.tpu"


def _contrib_tpu_python(display: str, report: Report, contrib_tpu: ShimModule) -> ShimModule:
    """``tf.contrib.tpu.python``: ``.tpu.{tpu_estimator, tpu_config, tpu_optimizer, tpu}``."""

    def module(name: str, names: Sequence[str], real: str) -> Entry:
        def build() -> ShimModule:
            return ShimModule(
                f"{display}.python.tpu.{name}",
                report,
                entries={n: Entry(from_tfest_tpu(n), f"tfest_kit.tpu.{n}") for n in names},
                fallbacks=[(lambda: importlib.import_module(real), real)],
                kind=SHIM,
            )

        return Entry(build, None)

    package = ShimModule(
        f"{display}.python.tpu",
        report,
        entries={
            "tpu_estimator": module(
                "tpu_estimator",
                ("TPUEstimator", "TPUEstimatorSpec"),
                f"{_TPU_PACKAGE}.tpu_estimator",
            ),
            "tpu_config": module(
                "tpu_config",
                ("RunConfig", "TPUConfig", "InputPipelineConfig"),
                f"{_TPU_PACKAGE}.tpu_config",
            ),
            "tpu_optimizer": module(
                "tpu_optimizer", ("CrossShardOptimizer",), "tensorflow.python.tpu.tpu_optimizer"
            ),
            # rewrite, shard, cross_replica_sum …: the one-replica functions of tf.contrib.tpu.
            "tpu": Entry(lambda: contrib_tpu, None),
            "tpu_function": Entry(
                lambda: importlib.import_module("tensorflow.python.tpu.tpu_function"), None
            ),
        },
        kind=SHIM,
    )
    return ShimModule(
        f"{display}.python", report, entries={"tpu": Entry(lambda: package, None)}, kind=SHIM
    )


def _training_python(report: Report) -> ShimModule:
    """``tf.contrib.training.python.training.hparam``: the HParams port."""
    hparam = ShimModule(
        "tf.contrib.training.python.training.hparam",
        report,
        fallbacks=[
            (
                lambda: importlib.import_module("tfest_kit.legacy.contrib.training"),
                "tfest_kit.legacy.contrib.training",
            )
        ],
        kind=SHIM,
    )
    # `from tensorflow.contrib.training.python.training import evaluation` (tensorflow/tpu's
    # mobilenet, inception): its checkpoints_iterator … moved to tf_slim.
    evaluation = ShimModule(
        "tf.contrib.training.python.training.evaluation",
        report,
        fallbacks=[
            (
                lambda: importlib.import_module("tf_slim.training.evaluation"),
                "tf_slim.training.evaluation",
            )
        ],
        kind=SHIM,
    )
    training = ShimModule(
        "tf.contrib.training.python.training",
        report,
        entries={
            "hparam": Entry(lambda: hparam, None),
            "evaluation": Entry(lambda: evaluation, None),
        },
        kind=SHIM,
    )
    return ShimModule(
        "tf.contrib.training.python",
        report,
        entries={"training": Entry(lambda: training, None)},
        kind=SHIM,
    )


_BATCH_NORM = "tf.nn.fused_batch_norm (tfest_kit.legacy.contrib.layers, a port of TF 1.15's)"


def _slim_batch_norm() -> Any:
    return importlib.import_module("tfest_kit.legacy.contrib.layers").batch_norm


# tf_slim 1.1's gradient helpers and recompute_grad do not run on TensorFlow 2.15 either.
_SLIM_LEARNING = "tf_slim.learning, its gradient helpers ported (tfest_kit.legacy.contrib)"
_RECOMPUTE_GRAD = "tf.custom_gradient (tfest_kit.legacy.contrib.layers, a port of TF 1.15's)"


def _slim_learning() -> Any:
    return importlib.import_module("tfest_kit.legacy.contrib._slim_learning")


def _recompute_grad() -> Any:
    return importlib.import_module("tfest_kit.legacy.contrib.layers").recompute_grad


def _layers_python(report: Report) -> ShimModule:
    """``tf.contrib.layers.python.layers``: tf_slim's ``layers`` package (``initializers`` …)."""
    layers = ShimModule(
        "tf.contrib.layers.python.layers",
        report,
        fallbacks=[(lambda: importlib.import_module("tf_slim.layers"), "tf_slim.layers")],
        kind=SHIM,
    )
    return ShimModule(
        "tf.contrib.layers.python",
        report,
        entries={"layers": Entry(lambda: layers, None)},
        kind=SHIM,
    )


_DROP_REMAINDER = "tf.data.Dataset.batch / padded_batch(..., drop_remainder=True)"


def batch_and_drop_remainder(batch_size: Any) -> Callable[[Any], Any]:
    """TF 1.15's ``tf.contrib.data.batch_and_drop_remainder``, for ``Dataset.apply``."""
    return lambda dataset: dataset.batch(batch_size, drop_remainder=True)


def padded_batch_and_drop_remainder(
    batch_size: Any, padded_shapes: Any, padding_values: Any = None
) -> Callable[[Any], Any]:
    """TF 1.15's ``tf.contrib.data.padded_batch_and_drop_remainder``, for ``Dataset.apply``."""
    return lambda dataset: dataset.padded_batch(
        batch_size, padded_shapes, padding_values, drop_remainder=True
    )


def _framework_python(report: Report) -> ShimModule:
    """``tf.contrib.framework.python.ops``: ``tf.contrib.framework``'s names (``arg_scope`` …).

    TF 1.15's ``ops`` package star-imported its modules, so ``from
    tensorflow.contrib.framework.python.ops import arg_scope`` gave the function.
    """
    ops = served_package("framework", report, display="tf.contrib.framework.python.ops")
    return ShimModule(
        "tf.contrib.framework.python",
        report,
        entries={"ops": Entry(lambda: ops, None)},
        kind=SHIM,
    )


def cluster_resolver_module(display: str, report: Report) -> ShimModule:
    """Returns a ``cluster_resolver`` stand-in whose ``TPUClusterResolver`` is tfest_kit's.

    tfest_kit's resolver answers "no TPU" on a machine without one (TF 2.15's raises "Please
    provide a TPU Name to connect to.") and contacts no metadata server unless a TPU name or
    address is given.

    Args:
      display: e.g. ``"tf.contrib.cluster_resolver"``.
      report: where served names are recorded.

    Returns:
      A module serving ``TPUClusterResolver`` from ``tfest_kit.tpu``, the other resolvers from
      ``tf.compat.v1.distribute.cluster_resolver``.
    """
    return ShimModule(
        display,
        report,
        entries={
            "TPUClusterResolver": Entry(
                from_tfest_tpu("TPUClusterResolver"), "tfest_kit.tpu.TPUClusterResolver"
            )
        },
        fallbacks=[
            (
                lambda: tf.distribute.cluster_resolver,
                "tf.compat.v1.distribute.cluster_resolver",
            )
        ],
        kind=SHIM,
    )


def served_package(
    package: str,
    report: Report,
    *,
    fallbacks: Sequence[tuple[Callable[[], Any], str]] = (),
    extra: Optional[dict[str, Entry]] = None,
    display: Optional[str] = None,
) -> ShimModule:
    """Returns the ``tf.contrib.<package>`` stand-in that ``legacy.contrib.<package>`` serves.

    The module is imported here, when a script first reaches the package.  Its ``BACKING``
    dict names what it serves and the library behind each name (``--report`` shows it); its
    optional ``NOT_SERVED`` dict names the replacement of what it does not serve.

    Args:
      package: e.g. ``"predictor"``.
      report: where served names are recorded.
      fallbacks: modules whose names are served too, after the module's own, as
        ``(getter, hint_prefix)`` pairs (``tf.compat.v1.nn.rnn_cell`` for ``rnn`` …).
      extra: more entries (implementation-module paths such as ``layers.python.layers``).
      display: the module's name (default ``tf.contrib.<package>``).

    Returns:
      The stand-in module.
    """
    module = importlib.import_module(f"tfest_kit.legacy.contrib.{package}")
    entries = {
        name: Entry(
            lambda name=name: getattr(module, name),
            backing,
        )
        for name, backing in module.BACKING.items()
    }
    entries.update(extra or {})
    display = display or f"tf.contrib.{package}"
    return ShimModule(
        display,
        report,
        entries=entries,
        fallbacks=fallbacks,
        kind=SHIM,
        provides=f"Of {display} it provides {', '.join(sorted(entries))}. ",
        replacements=getattr(module, "NOT_SERVED", None),
    )


def build_contrib(report: Report) -> ShimModule:
    """Returns the ``tf.contrib`` stand-in.

    Args:
      report: where served names are recorded.

    Returns:
      A module with ``tpu``, ``cluster_resolver``, ``data`` and ``layers``; any other name
      raises ``AttributeError`` saying the legacy runner does not provide it, with its
      replacement when :data:`CONTRIB_REPLACEMENTS` has one.
    """
    entries = {
        "tpu": Entry(lambda: tpu_module("tf.contrib.tpu", report, estimator=True, ops=True), None),
        "cluster_resolver": Entry(
            lambda: cluster_resolver_module("tf.contrib.cluster_resolver", report), None
        ),
        "data": Entry(
            lambda: ShimModule(
                "tf.contrib.data",
                report,
                entries={
                    "batch_and_drop_remainder": Entry(
                        lambda: batch_and_drop_remainder, _DROP_REMAINDER
                    ),
                    "padded_batch_and_drop_remainder": Entry(
                        lambda: padded_batch_and_drop_remainder, _DROP_REMAINDER
                    ),
                },
                fallbacks=[(lambda: tf.data.experimental, "tf.data.experimental")],
                kind=SHIM,
                provides="Of tf.contrib.data it provides what tf.data.experimental has, "
                "batch_and_drop_remainder and padded_batch_and_drop_remainder. ",
            ),
            None,
        ),
        "predictor": Entry(lambda: served_package("predictor", report), None),
        "training": Entry(
            lambda: served_package(
                "training",
                report,
                # `from tensorflow.contrib.training.python.training import hparam` (xlnet).
                extra={"python": Entry(lambda: _training_python(report), None)},
            ),
            None,
        ),
        "metrics": Entry(
            lambda: served_package(
                "metrics",
                report,
                fallbacks=[(lambda: importlib.import_module("tf_slim.metrics"), "tf_slim.metrics")],
            ),
            None,
        ),
        "lookup": Entry(lambda: served_package("lookup", report), None),
        "rnn": Entry(lambda: served_package("rnn", report), None),
        "framework": Entry(
            lambda: served_package(
                "framework",
                report,
                # `from tensorflow.contrib.framework.python.ops import arg_scope` (tpu's mobilenet).
                extra={"python": Entry(lambda: _framework_python(report), None)},
            ),
            None,
        ),
        "estimator": Entry(lambda: served_package("estimator", report), None),
        "crf": Entry(lambda: served_package("crf", report), None),
        "seq2seq": Entry(lambda: served_package("seq2seq", report), None),
        "opt": Entry(lambda: served_package("opt", report), None),
        "summary": Entry(lambda: served_package("summary", report), None),
        "compiler": Entry(
            lambda: ShimModule(
                "tf.contrib.compiler",
                report,
                entries={
                    "jit": Entry(
                        lambda: ShimModule(
                            "tf.contrib.compiler.jit",
                            report,
                            entries={
                                "experimental_jit_scope": Entry(
                                    lambda: tf.xla.experimental.jit_scope,
                                    "tf.compat.v1.xla.experimental.jit_scope",
                                )
                            },
                            provides="Of tf.contrib.compiler.jit it provides "
                            "experimental_jit_scope. ",
                        ),
                        None,
                    )
                },
                provides="Of tf.contrib.compiler it provides jit.experimental_jit_scope. ",
            ),
            None,
        ),
        "distribute": Entry(
            lambda: served_package(
                "distribute",
                report,
                fallbacks=[(lambda: tf.distribute, "tf.compat.v1.distribute")],
            ),
            None,
        ),
        "layers": Entry(
            lambda: served_package(
                "layers",
                report,
                # `from tensorflow.contrib.layers.python.layers import initializers`.
                extra={"python": Entry(lambda: _layers_python(report), None)},
            ),
            None,
        ),
        "slim": Entry(
            lambda: ShimModule(
                "tf.contrib.slim",
                report,
                # tf_slim 1.1's versions of these do not run on TensorFlow 2.15: our ports.
                entries={
                    "batch_norm": Entry(_slim_batch_norm, _BATCH_NORM),
                    "learning": Entry(_slim_learning, _SLIM_LEARNING),
                    "recompute_grad": Entry(_recompute_grad, _RECOMPUTE_GRAD),
                },
                fallbacks=[(lambda: importlib.import_module("tf_slim"), "tf_slim")],
                kind=SHIM,
                provides="Of tf.contrib.slim it provides what tf_slim 1.1 has. ",
            ),
            None,
        ),
    }
    return ShimModule(
        "tf.contrib",
        report,
        entries=entries,
        provides=f"Of tf.contrib it provides: {', '.join(sorted(entries))}. ",
        replacements=CONTRIB_REPLACEMENTS,
    )
