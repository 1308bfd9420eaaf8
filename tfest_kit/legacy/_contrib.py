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
  ``framework`` / ``layers`` (TensorFlow and ``tf_slim``), ``image`` (ports of its projective
  transforms), ``losses`` (a port of its TF 1.0 losses), ``signal`` / ``stateless`` / ``util``
  (TensorFlow's own functions) …; ``slim`` is ``tf_slim``.

Every other package and name TF 1.15's ``tf.contrib`` had is a
:class:`~tfest_kit.legacy._refused.Refused`: it imports, and its first use raises naming its
TensorFlow 2.15 (or PyPI) home (``CONTRIB_REPLACEMENTS``, a module's ``NOT_SERVED``) or
saying there is none.

Example:

    contrib = build_contrib(Report())
    contrib.tpu.TPUEstimator      # tfest_kit.tpu.TPUEstimator
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Sequence
from typing import Any, Callable, Optional

from tfest_kit._tf import tf
from tfest_kit.legacy._refused import (
    CONTRIB_REPLACEMENTS,
    ITS_EQUIVALENT,
    MOVED_TO_TF_DATA,
    Refused,
    refuse_the_rest,
    tf115,
)
from tfest_kit.legacy._shim import SHIM, Entry, Report, ShimModule

from tensorflow.python.util import nest as util_nest  # tf.contrib.framework.nest

__all__ = [
    "build_contrib",
    "tpu_module",
    "served_package",
    "from_tfest_tpu",
    "cluster_resolver_module",
    "examples_module",
    "TPU_NAMES",
    "TF1_RUNTIME",
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


# Set by the runner: off a TPU, TF 1.15's TPUEstimator trained one step per Session.run
# whatever TPUConfig.iterations_per_loop said, and so does the fallback it hands scripts.
TF1_RUNTIME = {"on": False}


def from_tfest_tpu(name: str) -> Callable[[], Any]:
    def load() -> Any:
        # Imported on first use: tfest_kit.tpu pulls in the Estimator machinery.
        tpu = importlib.import_module("tfest_kit.tpu")
        if TF1_RUNTIME["on"]:
            tpu._state["loops"] = False
        return getattr(tpu, name)

    return load


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
    provides = f"Of {display} it provides {', '.join(sorted(entries))}. "
    if display == "tf.contrib.tpu":
        refuse_the_rest("tpu", display, entries, fallbacks, report)
    module = ShimModule(
        display,
        report,
        entries=entries,
        fallbacks=fallbacks,
        kind=kind,
        provides=provides,
    )
    return module


_TPU_PACKAGE = "tensorflow_estimator.python.estimator.tpu"


def _holding(name: str, child: str, module: ShimModule, report: Report) -> ShimModule:
    """The package stand-in ``name`` whose one module is ``module``, as ``name.child``: the
    ``python`` directories leading to TF 1.15's implementation modules."""
    return ShimModule(name, report, entries={child: Entry(lambda: module, None)}, kind=SHIM)


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
    return _holding(f"{display}.python", "tpu", package, report)


def _training_python(report: Report) -> ShimModule:
    """``tf.contrib.training.python.training.{hparam,evaluation,training}``: TF 1.15's modules.

    ``hparam`` (xlnet) is the HParams port; ``evaluation`` (tensorflow/tpu's mobilenet,
    inception: ``checkpoints_iterator`` …) and ``training`` (``create_train_op``, ``train``)
    moved to tf_slim unchanged.
    """
    display = "tf.contrib.training.python.training"
    modules = {"hparam": "tfest_kit.legacy.contrib.training"}
    modules.update(evaluation="tf_slim.training.evaluation", training="tf_slim.training.training")
    entries = {
        name: Entry(
            lambda name=name, real=real: ShimModule(
                f"{display}.{name}",
                report,
                fallbacks=[(lambda: importlib.import_module(real), real)],
                kind=SHIM,
            ),
            None,
        )
        for name, real in modules.items()
    }
    training = ShimModule(display, report, entries=entries, kind=SHIM)
    return _holding("tf.contrib.training.python", "training", training, report)


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
    """``tf.contrib.layers.python.layers``: tf_slim's ``layers`` package (``initializers`` …).

    TF 1.15's package star-imported its modules, so its ``batch_norm`` (and ``.layers.
    batch_norm``) was ``tf.contrib.layers.batch_norm``: the runner's ports come first.
    """
    served = importlib.import_module("tfest_kit.legacy.contrib.layers")
    ported = {
        name: Entry(lambda name=name: getattr(served, name), backing)
        for name, backing in served.BACKING.items()
        if not backing.startswith("tf_slim.")
    }

    def layers_module() -> ShimModule:
        slim_layers = importlib.import_module("tf_slim.layers.layers")
        return ShimModule(
            "tf.contrib.layers.python.layers.layers",
            report,
            entries={k: v for k, v in ported.items() if k in ("batch_norm", "layer_norm")},
            fallbacks=[(lambda: slim_layers, "tf_slim.layers.layers")],
            kind=SHIM,
        )

    layers = ShimModule(
        "tf.contrib.layers.python.layers",
        report,
        entries={**ported, "layers": Entry(layers_module, None)},
        fallbacks=[(lambda: importlib.import_module("tf_slim.layers"), "tf_slim.layers")],
        kind=SHIM,
    )
    return _holding("tf.contrib.layers.python", "layers", layers, report)


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


def _variables(report: Report) -> ShimModule:
    """``…framework.python.ops.variables``: tf_slim's, ``local_variable`` / ``global_variable``
    ported."""
    slim_variables = importlib.import_module("tf_slim.ops.variables")
    fallbacks = [(lambda: slim_variables, "tf_slim.ops.variables")]
    display = "tf.contrib.framework.python.ops.variables"
    return ShimModule(display, report, entries=_ported_variables(), fallbacks=fallbacks, kind=SHIM)


def _ported_variables() -> dict[str, Entry]:
    framework = importlib.import_module("tfest_kit.legacy.contrib.framework")
    return {
        name: Entry(lambda name=name: getattr(framework, name), framework.BACKING[name])
        for name in ("local_variable", "global_variable")
    }


def _framework_python(report: Report) -> ShimModule:
    """``tf.contrib.framework.python.ops``: ``tf.contrib.framework``'s names (``arg_scope`` …).

    TF 1.15's ``ops`` package star-imported its modules, so ``from
    tensorflow.contrib.framework.python.ops import arg_scope`` gave the function.
    """
    # `variables` stayed a submodule (its names were star-imported beside it): SSD-Tensorflow's
    # `from tensorflow.contrib.framework.python.ops import variables`; tf_slim carries it on.
    variables = Entry(lambda: _variables(report), "tf_slim.ops.variables, two functions ported")
    # TF 1.x's speech_commands: `from tensorflow.contrib.framework.python.ops import audio_ops`:
    # TF 1.15's star import of TensorFlow's own gen_audio_ops, less the names it kept private.
    display, audio = "tf.contrib.framework.python.ops", "tensorflow.python.ops.gen_audio_ops"
    audio_ops = _served_module(f"{display}.audio_ops", audio, _AUDIO_OPS, report)
    extra = {"variables": variables, "audio_ops": audio_ops}
    ops = served_package("framework", report, display=display, extra=extra)
    return _holding("tf.contrib.framework.python", "ops", ops, report)


def _rnn_python(report: Report) -> ShimModule:
    """``tf.contrib.rnn.python.ops.{rnn,rnn_cell,core_rnn_cell,lstm_ops,gru_ops}``: TF 1.15's
    implementation modules of ``tf.contrib.rnn`` (``from tensorflow.contrib.rnn.python.ops import
    rnn``), each the served ``tf.contrib.rnn`` under its own name; ``core_rnn_cell`` also has
    its private ``_linear``."""
    # core_rnn_cell's private _linear, which TF1 attention code imports (tf.contrib.rnn had none).
    linear = Entry(
        lambda: importlib.import_module("tfest_kit.legacy.contrib.rnn").linear,
        "tfest_kit.legacy.contrib.rnn.linear (a port of TF 1.15's _linear)",
    )
    modules = {
        name: Entry(
            lambda name=name: served_package(
                "rnn",
                report,
                display=f"tf.contrib.rnn.python.ops.{name}",
                extra={"_linear": linear} if name == "core_rnn_cell" else None,
            ),
            None,
        )
        for name in ("rnn", "rnn_cell", "core_rnn_cell", "lstm_ops", "gru_ops")
    }
    ops = ShimModule("tf.contrib.rnn.python.ops", report, entries=modules, kind=SHIM)
    return _holding("tf.contrib.rnn.python", "ops", ops, report)


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
    entries = {
        "TPUClusterResolver": Entry(
            from_tfest_tpu("TPUClusterResolver"), "tfest_kit.tpu.TPUClusterResolver"
        )
    }
    fallbacks = [
        (lambda: tf.distribute.cluster_resolver, "tf.compat.v1.distribute.cluster_resolver")
    ]
    if display == "tf.contrib.cluster_resolver":
        refuse_the_rest("cluster_resolver", display, entries, fallbacks, report)
    return ShimModule(display, report, entries=entries, fallbacks=fallbacks, kind=SHIM)


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
    optional ``NOT_SERVED`` dict names the replacement of what it does not serve, and its
    optional ``OTHERS`` string the replacement of TF 1.15's other names it does not serve
    (see :func:`tf115`): those are :class:`Refused`.

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
    provides = f"Of {display} it provides {', '.join(sorted(entries))}. "
    replacements = getattr(module, "NOT_SERVED", {})
    others = getattr(module, "OTHERS", ITS_EQUIVALENT)
    refuse_the_rest(package, display, entries, fallbacks, report, replacements, others)
    return ShimModule(
        display,
        report,
        entries=entries,
        fallbacks=fallbacks,
        kind=SHIM,
        provides=provides,
    )


def _whole(
    key: str,
    report: Report,
    entries: dict[str, Entry],
    fallbacks: Sequence[tuple[Callable[[], Any], str]],
    provides: str,
    replacements: Optional[dict[str, str]] = None,
) -> ShimModule:
    """``tf.contrib.<key>``: ``entries``, then ``fallbacks``; TF 1.15's other names refused
    (naming their ``replacements``)."""
    display = f"tf.contrib.{key}"
    refuse_the_rest(key, display, entries, fallbacks, report, replacements)
    return ShimModule(
        display, report, entries=entries, fallbacks=fallbacks, kind=SHIM, provides=provides
    )


def _data(report: Report) -> ShimModule:
    return _whole(
        "data",
        report,
        {
            "batch_and_drop_remainder": Entry(lambda: batch_and_drop_remainder, _DROP_REMAINDER),
            "padded_batch_and_drop_remainder": Entry(
                lambda: padded_batch_and_drop_remainder, _DROP_REMAINDER
            ),
        },
        [(lambda: tf.data.experimental, "tf.data.experimental")],
        "Of tf.contrib.data it provides what tf.data.experimental has, "
        "batch_and_drop_remainder and padded_batch_and_drop_remainder. ",
        MOVED_TO_TF_DATA,
    )


def _keras(report: Report) -> ShimModule:
    """TF 1.15's ``tf.contrib.keras``, "an alias for ``tf.keras``, for backwards compatibility"
    (its ``__init__``): the script's ``tf.keras`` (Keras 2), less the scikit-learn wrappers."""
    fallbacks = [(lambda: tf.keras, "tf.compat.v1.keras")]
    wrappers = {"wrappers": "scikeras (scikeras.wrappers.KerasClassifier / KerasRegressor)"}
    provides = "Of tf.contrib.keras it provides what tf.keras has. "
    return _whole("keras", report, {}, fallbacks, provides, wrappers)


def _compiler(report: Report) -> ShimModule:
    jit = Entry(
        lambda: ShimModule(
            "tf.contrib.compiler.jit",
            report,
            entries={
                "experimental_jit_scope": Entry(
                    lambda: tf.xla.experimental.jit_scope,
                    "tf.compat.v1.xla.experimental.jit_scope",
                )
            },
            provides="Of tf.contrib.compiler.jit it provides experimental_jit_scope. ",
        ),
        None,
    )
    provides = "Of tf.contrib.compiler it provides jit.experimental_jit_scope. "
    return _whole("compiler", report, {"jit": jit}, [], provides)


_DECODER = "tf_slim.tfexample_decoder, Image and BackupHandler ported (tfest_kit.legacy.contrib)"


def _tfexample_decoder(display: str, report: Report) -> ShimModule:
    """``slim.tfexample_decoder``: tf_slim's, with the handlers that branch ported."""
    port = importlib.import_module("tfest_kit.legacy.contrib._tfexample_decoder")
    entries = {
        name: Entry(lambda name=name: getattr(port, name), _DECODER) for name in port.__all__
    }
    slim_decoder = importlib.import_module("tf_slim.data.tfexample_decoder")
    return ShimModule(
        display,
        report,
        entries=entries,
        fallbacks=[(lambda: slim_decoder, "tf_slim.tfexample_decoder")],
        kind=SHIM,
    )


def _slim_python(report: Report) -> ShimModule:
    """``tf.contrib.slim.python.slim``: TF 1.15's implementation package, now tf_slim's.

    Its modules (``data.parallel_reader``, ``evaluation``, ``queues`` …) live on in tf_slim
    under the same names; ``learning`` is the runner's port, as ``tf.contrib.slim.learning``.
    """
    modules = ("evaluation", "model_analyzer", "nets", "queues", "summaries")
    entries = {
        name: Entry(lambda name=name: importlib.import_module(f"tf_slim.{name}"), f"tf_slim.{name}")
        for name in modules
    }
    entries["learning"] = Entry(_slim_learning, _SLIM_LEARNING)
    decoder = "tf.contrib.slim.python.slim.data.tfexample_decoder"
    data = ShimModule(
        "tf.contrib.slim.python.slim.data",
        report,
        entries={"tfexample_decoder": Entry(lambda: _tfexample_decoder(decoder, report), None)},
        fallbacks=[(lambda: importlib.import_module("tf_slim.data"), "tf_slim.data")],
        kind=SHIM,
    )
    entries["data"] = Entry(lambda: data, None)
    slim = ShimModule(
        "tf.contrib.slim.python.slim",
        report,
        entries=entries,
        kind=SHIM,
        provides=f"Of tf.contrib.slim.python.slim it provides {', '.join(sorted(entries))}. ",
    )
    return _holding("tf.contrib.slim.python", "slim", slim, report)


def _slim(report: Report) -> ShimModule:
    # tf_slim 1.1's versions of these do not run on TensorFlow 2.15: our ports.
    entries = {
        "batch_norm": Entry(_slim_batch_norm, _BATCH_NORM),
        "learning": Entry(_slim_learning, _SLIM_LEARNING),
        "recompute_grad": Entry(_recompute_grad, _RECOMPUTE_GRAD),
        **_ported_variables(),
        "tfexample_decoder": Entry(
            lambda: _tfexample_decoder("tf.contrib.slim.tfexample_decoder", report), None
        ),
        # `from tensorflow.contrib.slim.python.slim.data import parallel_reader`.
        "python": Entry(lambda: _slim_python(report), None),
    }
    fallbacks = [(lambda: importlib.import_module("tf_slim"), "tf_slim")]
    return _whole(
        "slim", report, entries, fallbacks, "Of tf.contrib.slim it provides what tf_slim 1.1 has. "
    )


_MNIST = "a port of TF 1.15's (tfest_kit.legacy.contrib, the same arrays and Extracting lines)"


def _learn_datasets(report: Report) -> ShimModule:
    """``tf.contrib.learn.datasets``: TF 1.15's ``mnist`` and ``base``, ported; the rest refused."""
    port = importlib.import_module("tfest_kit.legacy.contrib._learn_datasets")

    def module(name: str, names: Sequence[str]) -> Entry:
        display = f"tf.contrib.learn.datasets.{name}"
        built = ShimModule(
            display,
            report,
            entries={n: Entry(lambda n=n: getattr(port, n), _MNIST) for n in names},
            kind=SHIM,
            provides=f"Of {display} it provides {', '.join(sorted(names))}. ",
        )
        return Entry(lambda: built, None)

    entries = {"mnist": module("mnist", port.MNIST_NAMES), "base": module("base", port.BASE_NAMES)}
    display = "tf.contrib.learn.datasets"
    refuse_the_rest("learn.datasets", display, entries, [], report, port.NOT_SERVED)
    provides = f"Of {display} it provides base and mnist. "
    return ShimModule(display, report, entries=entries, kind=SHIM, provides=provides)


_LEARN_PORT = "a port of TF 1.15's (tfest_kit.legacy.contrib._learn_experiment, .learn)"


def _learn_port(name: str) -> Callable[[], Any]:
    where = "_learn_experiment" if name in ("Experiment", "run", "tune") else "learn"
    return lambda: getattr(importlib.import_module(f"tfest_kit.legacy.contrib.{where}"), name)


def _learn_module(display: str, names: Sequence[str], report: Report) -> ShimModule:
    """The stand-in ``display`` serving the learn ports' ``names``."""
    entries = {n: Entry(_learn_port(n), _LEARN_PORT) for n in names}
    provides = f"Of {display} it provides {', '.join(names)}. "
    return ShimModule(display, report, entries=entries, kind=SHIM, provides=provides)


def _learn_driver(report: Report) -> dict[str, Entry]:
    """``tf.contrib.learn``'s ``Experiment``, ``learn_runner``, ``monitors.ValidationMonitor``
    and ``utils.saved_model_export_utils.make_export_strategy``: ports."""
    runner = _learn_module("tf.contrib.learn.learn_runner", ("run", "tune"), report)
    exports = "tf.contrib.learn.utils.saved_model_export_utils"
    export_utils = _learn_module(exports, ["make_export_strategy"], report)
    utils = _holding("tf.contrib.learn.utils", "saved_model_export_utils", export_utils, report)
    monitors = _learn_module("tf.contrib.learn.monitors", ["ValidationMonitor"], report)
    return {
        "Experiment": Entry(_learn_port("Experiment"), _LEARN_PORT),
        "learn_runner": Entry(lambda: runner, None),
        "monitors": Entry(lambda: monitors, None),
        "utils": Entry(lambda: utils, None),
    }


def examples_module(report: Report) -> ShimModule:
    """``tensorflow.examples.tutorials.mnist.input_data``: ``read_data_sets``, as TF 1.15's."""

    def read_data_sets() -> Any:
        return importlib.import_module("tfest_kit.legacy.contrib._learn_datasets").read_data_sets

    input_data = ShimModule(
        "tf.examples.tutorials.mnist.input_data",
        report,
        entries={"read_data_sets": Entry(read_data_sets, _MNIST)},
        kind=SHIM,
        provides="Of tf.examples.tutorials.mnist.input_data it provides read_data_sets. ",
    )

    def package(display: str, name: str, child: ShimModule) -> ShimModule:
        return ShimModule(display, report, entries={name: Entry(lambda: child, None)}, kind=SHIM)

    mnist = package("tf.examples.tutorials.mnist", "input_data", input_data)
    return package("tf.examples", "tutorials", package("tf.examples.tutorials", "mnist", mnist))


def _nest(report: Report) -> ShimModule:
    """``tf.contrib.framework.nest``: TF 1.15's 19 functions, from TensorFlow's own ``nest``."""
    entries = {
        # TF 1.15's is_sequence was is_nested's old name (TensorFlow 2 keeps only is_nested).
        "is_sequence": Entry(lambda: tf.nest.is_nested, "tf.compat.v1.nest.is_nested"),
    }
    for name in tf115()["names"]["framework.nest"]:
        if name not in entries and not hasattr(tf.nest, name) and hasattr(util_nest, name):
            entries[name] = Entry(
                lambda name=name: getattr(util_nest, name),
                f"tensorflow.python.util.nest.{name} (TensorFlow's private module)",
            )
    fallbacks = [(lambda: tf.nest, "tf.compat.v1.nest")]
    provides = "Of tf.contrib.framework.nest it provides TF 1.15's functions. "
    return _whole("framework.nest", report, entries, fallbacks, provides)


def _served_module(display: str, real: str, names: Sequence[str], report: Report) -> Entry:
    """The stand-in ``display`` serving ``names`` of the installed module ``real``."""
    entries = {n: Entry(lambda n=n: getattr(importlib.import_module(real), n), real) for n in names}
    return Entry(lambda: ShimModule(display, report, entries=entries, kind=SHIM), None)


# TF 1.15's tf.contrib.losses.metric_learning: metric_loss_ops' public names, which tf_slim
# carries on unchanged.
_METRIC_LEARNING = ("contrastive_loss", "cluster_loss", "lifted_struct_loss", "npairs_loss")
_METRIC_LEARNING += ("npairs_loss_multilabel", "triplet_semihard_loss")
_AUDIO_OPS = ("decode_wav", "encode_wav", "audio_spectrogram", "mfcc")


def build_contrib(report: Report) -> ShimModule:
    """Returns the ``tf.contrib`` stand-in.

    Args:
      report: where served names are recorded.

    Returns:
      A module with the served packages (``tpu``, ``cluster_resolver``, ``data``, ``layers``
      …); every other package TF 1.15 had is a :class:`Refused` naming its replacement
      (:data:`CONTRIB_REPLACEMENTS`); any other name raises ``AttributeError`` saying the
      legacy runner does not provide it.
    """

    def package(name: str, **kwargs: Any) -> Entry:
        return Entry(lambda: served_package(name, report, **kwargs), None)

    # One module for tf.contrib.learn.datasets and tensorflow.contrib.learn.python.learn.datasets.
    datasets = functools.cache(lambda: _learn_datasets(report))

    driver = _learn_driver(report)
    metric_learning = ("tf.contrib.losses.metric_learning", "tf_slim.losses.metric_learning")
    metric_learning += (_METRIC_LEARNING,)

    def learn_python() -> ShimModule:
        # `from tensorflow.contrib.learn.python.learn import learn_runner` (`utils`, `run_config`
        # whose _DEFAULT_UID_WHITE_LIST cifar10_estimator reads); learn's Estimators refused.
        names = ("RunConfig", "Environment", "TaskType", "_DEFAULT_UID_WHITE_LIST")
        display = "tf.contrib.learn.python.learn"
        run_config = _learn_module(f"{display}.estimators.run_config", names, report)
        estimators = _holding(f"{display}.estimators", "run_config", run_config, report)
        entries = {"datasets": Entry(datasets, None), "run_config": Entry(lambda: run_config, None)}
        entries.update(driver, estimators=Entry(lambda: estimators, None))
        learn = ShimModule(display, report, entries=entries, kind=SHIM)
        return _holding("tf.contrib.learn.python", "learn", learn, report)

    entries = {
        "tpu": Entry(lambda: tpu_module("tf.contrib.tpu", report, estimator=True, ops=True), None),
        "cluster_resolver": Entry(
            lambda: cluster_resolver_module("tf.contrib.cluster_resolver", report), None
        ),
        "data": Entry(lambda: _data(report), None),
        "predictor": package("predictor"),
        # `from tensorflow.contrib.training.python.training import hparam` (xlnet).
        "training": package(
            "training", extra={"python": Entry(lambda: _training_python(report), None)}
        ),
        "metrics": package(
            "metrics",
            fallbacks=[(lambda: importlib.import_module("tf_slim.metrics"), "tf_slim.metrics")],
        ),
        "lookup": package("lookup"),
        # `from tensorflow.contrib.rnn.python.ops import rnn` (stack_bidirectional_dynamic_rnn).
        "rnn": package("rnn", extra={"python": Entry(lambda: _rnn_python(report), None)}),
        "framework": package(
            "framework",
            extra={
                "nest": Entry(lambda: _nest(report), None),
                # `from tensorflow.contrib.framework.python.ops import arg_scope` (tpu's mobilenet).
                "python": Entry(lambda: _framework_python(report), None),
            },
        ),
        "estimator": package("estimator"),
        "factorization": package("factorization"),
        "crf": package("crf"),
        "seq2seq": package("seq2seq"),
        "legacy_seq2seq": package("legacy_seq2seq"),
        "opt": package("opt"),
        "summary": package("summary"),
        "learn": package(
            "learn",
            extra={
                "preprocessing": Entry(
                    lambda: served_package(
                        "_learn_preprocessing", report, display="tf.contrib.learn.preprocessing"
                    ),
                    None,
                ),
                "datasets": Entry(datasets, None),
                # `from tensorflow.contrib.learn.python.learn.datasets import mnist`.
                "python": Entry(learn_python, None),
                **driver,
            },
        ),
        "compiler": Entry(lambda: _compiler(report), None),
        "keras": Entry(lambda: _keras(report), None),
        "distribute": package(
            "distribute", fallbacks=[(lambda: tf.distribute, "tf.compat.v1.distribute")]
        ),
        # `from tensorflow.contrib.layers.python.layers import initializers`.
        "layers": package("layers", extra={"python": Entry(lambda: _layers_python(report), None)}),
        "slim": Entry(lambda: _slim(report), None),
        "image": package("image"),
        "losses": package(
            "losses", extra={"metric_learning": _served_module(*metric_learning, report)}
        ),
        "signal": package("signal"),
        "stateless": package("stateless"),
        "util": package("util"),
    }
    provides = f"Of tf.contrib it provides: {', '.join(sorted(entries))}. "
    for name in sorted(set(tf115()["packages"]).union(CONTRIB_REPLACEMENTS) - set(entries)):
        replacement = CONTRIB_REPLACEMENTS.get(name, ITS_EQUIVALENT)
        entries[name] = Entry(
            lambda name=name, text=replacement: Refused(f"tf.contrib.{name}", text, report), None
        )
    return ShimModule("tf.contrib", report, entries=entries, provides=provides)
