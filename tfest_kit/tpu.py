"""A drop-in ``TPUEstimator``: the official one on a TPU, a logging ``Estimator`` elsewhere.

Scripts written for ``tf.compat.v1.estimator.tpu.TPUEstimator`` (BERT and friends) run
unchanged: with a reachable TPU you get the official class; otherwise a
``tf.estimator.Estimator`` subclass that injects ``params['batch_size']``, converts
``TPUEstimatorSpec`` (``eval_metrics``, ``scaffold_fn``, ``host_call``, hooks) and logs
``loss = …, step = … (… sec)`` with examples/sec every ``log_step_count_steps`` - which stock
``TPUEstimator(use_tpu=False)`` never does - unless a ``ProgressHook`` among the training hooks
prints the loss already.

This module also stands in for ``tf.contrib.tpu`` / ``tf.compat.v1.estimator.tpu``.

Example:

    from tfest_kit import tpu

    config = tpu.RunConfig(model_dir=model_dir,
                           tpu_config=tpu.TPUConfig(iterations_per_loop=100))
    est = tpu.TPUEstimator(model_fn, config=config, use_tpu="auto",
                           train_batch_size=32, eval_batch_size=8, predict_batch_size=8)
    est.train(input_fn, max_steps=1000)   # input_fn(params) gets params["batch_size"] == 32
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import os
import weakref
from collections.abc import Mapping
from typing import Any, Callable, Optional, Union

from tfest_kit import _model_dir
from tfest_kit._checks import check_int
from tfest_kit._class_ids import label_errors
from tfest_kit._eval_guard import EvalGuard
from tfest_kit._progress import LossLoggingHook, ProgressHook
from tfest_kit._replica_sync import ReplicaSyncCheckHook
from tfest_kit._run_config import session_config
from tfest_kit._task_guard import check_direct_call
from tfest_kit._tf import estimator as tf_estimator
from tfest_kit._tf import tf
from tfest_kit._tf_config import check_tf_config_json
from tfest_kit._tpu_detect import (
    CrossShardOptimizer,
    NoTPUClusterResolver,
    TPUClusterResolver,
    mark_tpu_in_use,
    tpu_available,
)
from tfest_kit._tpu_spec import (
    call_model_fn,
    call_with_args,
    model_fn_args,
    to_estimator_spec,
)
from tfest_kit._warm_start import check_model_dir, with_saver

__all__ = [
    "TPUEstimator",
    "TPUEstimatorSpec",
    "RunConfig",
    "TPUConfig",
    "InputPipelineConfig",
    "CrossShardOptimizer",
    "TPUClusterResolver",
    "NoTPUClusterResolver",
    "tpu_available",
    "RESERVED_PARAMS_KEYS",
]

TPUEstimatorSpec = tf_estimator.tpu.TPUEstimatorSpec
TPUConfig = tf_estimator.tpu.TPUConfig
InputPipelineConfig = tf_estimator.tpu.InputPipelineConfig


class RunConfig(tf_estimator.tpu.RunConfig):
    """The official ``tf.compat.v1.estimator.tpu.RunConfig``, naming a malformed ``TF_CONFIG``.

    The official class parses the ``TF_CONFIG`` environment variable and lets a bare
    ``JSONDecodeError`` through; here the ``ValueError`` names the variable and the JSON error.
    Everything else is the official class (a subclass, accepted wherever it is).

    Raises:
      ValueError: when ``TF_CONFIG`` is set but not a JSON object.

    Example:

        config = tpu.RunConfig(model_dir="/tmp/run", save_checkpoints_steps=100)
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        check_tf_config_json()
        super().__init__(*args, **kwargs)


# The official TPUEstimator reserves these params keys ('use_tpu' is set but not reserved,
# for compatibility with model_fns that read it).
RESERVED_PARAMS_KEYS = ("batch_size", "context")
_MODES = tf_estimator.ModeKeys
_BATCH_ARG = {_MODES.TRAIN: "train_batch_size", _MODES.EVAL: "eval_batch_size"}
_BATCH_ARG[_MODES.PREDICT] = "predict_batch_size"
_METHOD = {_MODES.TRAIN: "train", _MODES.EVAL: "evaluate", _MODES.PREDICT: "predict"}


def _tpu_hint(config) -> Optional[str]:
    """A TPU name or address the user gave through ``config`` (none for a local run)."""
    if config is None:
        return None
    cluster = getattr(config, "cluster", None)
    if isinstance(cluster, NoTPUClusterResolver):
        return None
    if cluster is not None:
        return cluster.master() or None
    master = getattr(config, "master", "") or ""
    if not master.startswith("grpc://") or master == _own_cluster_address(config):
        return None
    return master


def _own_cluster_address(config) -> Optional[str]:
    """This task's own server in a TF_CONFIG cluster: RunConfig's master there, not a TPU.

    Taking it for a TPU address would pick the official TPUEstimator on a CPU cluster as soon as
    anything listens there (the task's own server, started by an earlier train()).
    """
    spec, task_type = getattr(config, "cluster_spec", None), getattr(config, "task_type", None)
    if not spec or task_type is None:
        return None
    try:
        return "grpc://" + spec.task_address(task_type, config.task_id or 0)
    except (ValueError, KeyError, IndexError):
        return None


def _use_tpu_arg(use_tpu) -> Union[bool, str]:
    """``use_tpu`` as True, False or ``"auto"``.

    Anything but a string counts by its truth value, as in the official class: ``0`` from an
    int flag, ``np.False_`` or ``None`` mean no TPU (compared with ``is False`` they asked
    for one). A string other than ``"auto"`` (``"false"`` from a config file) is refused:
    the official class would take any non-empty one for True.
    """
    if isinstance(use_tpu, str):
        if use_tpu != "auto":
            raise ValueError(
                f'`use_tpu` must be True, False or "auto" (a bool, not a string). Got: {use_tpu!r}'
            )
        return use_tpu
    return bool(use_tpu)


def _wants_official(use_tpu, config) -> bool:
    use_tpu = _use_tpu_arg(use_tpu)
    if use_tpu is False:
        return False
    cluster = getattr(config, "cluster", None)
    if cluster is not None and not isinstance(cluster, NoTPUClusterResolver):
        return True  # an official resolver only exists once the TPU resolved
    hint = _tpu_hint(config)
    return tpu_available(hint) if hint else tpu_available()


def _default_run_config():
    """``RunConfig()`` (a TF_CONFIG that is not JSON is named by RunConfig below)."""
    return RunConfig()


# Every argument a plain RunConfig takes (the rest, master and cluster, both read from
# TF_CONFIG): RunConfig.replace accepts each of them.
_RUN_CONFIG_FIELDS = (
    "model_dir",
    "tf_random_seed",
    "save_summary_steps",
    "save_checkpoints_steps",
    "save_checkpoints_secs",
    "session_config",
    "keep_checkpoint_max",
    "keep_checkpoint_every_n_hours",
    "log_step_count_steps",
    "train_distribute",
    "device_fn",
    "protocol",
    "eval_distribute",
    "experimental_distribute",
    "experimental_max_worker_delay_secs",
    "session_creation_timeout_secs",
    "checkpoint_save_graph_def",
)


def _official_config(config):
    """The ``tpu.RunConfig`` the official class requires, for a config the fallback takes too.

    None becomes ``RunConfig()``; a plain ``tf.estimator.RunConfig`` becomes a
    ``tpu.RunConfig`` with the same settings and the default ``TPUConfig``. Anything else is
    left for the official class to judge.
    """
    if config is None:
        return _default_run_config()
    official = tf_estimator.tpu.RunConfig
    if isinstance(config, official) or not isinstance(config, tf_estimator.RunConfig):
        return config
    # RunConfig keeps each replaceable `name` as `_name` (what its replace() relies on); not
    # every one has a public property.
    fields = {name: getattr(config, "_" + name) for name in _RUN_CONFIG_FIELDS}
    if (
        config.cluster_spec
        and "TF_CONFIG" in os.environ
        and fields["session_config"] == session_config()
    ):
        # RunConfig's own choice for between-graph training, not the user's: a TPU trains
        # in-graph, and tpu.RunConfig leaves it out.
        fields["session_config"] = None
    return _default_run_config().replace(**fields)


def _ignored_tpu_settings(config, batch_axis, embedding_config_spec) -> list:
    names = []
    tpu_config = getattr(config, "tpu_config", None)
    if tpu_config is not None:
        default = TPUConfig()
        for field in tpu_config._fields:
            if field != "iterations_per_loop" and getattr(tpu_config, field) != getattr(
                default, field
            ):
                names.append(f"TPUConfig.{field}")
    if batch_axis is not None:
        names.append("batch_axis")
    if embedding_config_spec is not None:
        names.append("embedding_config_spec")
    return names


def _with_checkpoint_saver(spec, config, hooks=()):
    """Adds the chief's ``CheckpointSaverHook`` as Estimator would, without its per-step fetch.

    Estimator never tells its saver hook how many steps one ``session.run`` makes, so the hook
    assumes a million and fetches ``global_step`` again after every step to be safe: 25-30 % of
    a small model's step time (see benchmarks/). Off a TPU and without a distribution strategy
    one run is one step, so the hook is told so. Estimator uses a saver hook it finds in the
    spec instead of making its own, and attaches its saving listeners to it.

    Args:
      spec: the ``EstimatorSpec`` to train with.
      config: the Estimator's ``RunConfig``.
      hooks: every other hook of the run (``train(hooks=…)``, the input_fn's): as in
        Estimator, a ``CheckpointSaverHook`` among them or in the spec replaces the default.
    """
    if not (config.save_checkpoints_secs or config.save_checkpoints_steps):
        return spec
    existing = tuple(hooks) + tuple(spec.training_hooks) + tuple(spec.training_chief_hooks)
    if any(isinstance(hook, tf.train.CheckpointSaverHook) for hook in existing):
        return spec
    saver_hook = tf.train.CheckpointSaverHook(
        config.model_dir,
        save_secs=config.save_checkpoints_secs,
        save_steps=config.save_checkpoints_steps,
        scaffold=spec.scaffold,
        save_graph_def=config.checkpoint_save_graph_def,
    )
    saver_hook._set_steps_per_run(1)  # the hook's own (private) knob for exactly this
    return spec._replace(training_chief_hooks=tuple(spec.training_chief_hooks) + (saver_hook,))


def _with_loss_line(spec, config, every_n_steps: int, batch_size: Optional[int]):
    """Adds the fallback's ``LossLoggingHook`` (the loss line stock TPUEstimator lacks)."""
    # Summaries from the chief only, as Estimator writes global_step/sec: every worker
    # writing into model_dir would show TensorBoard several curves as one.
    writes = config.save_summary_steps and config.is_chief
    hook = LossLoggingHook(
        every_n_steps=every_n_steps,
        batch_size=batch_size,
        output_dir=config.model_dir if writes else None,
        loss=spec.loss,
    )
    return spec._replace(training_hooks=tuple(spec.training_hooks) + (hook,))


def _replicas(config, mode: str) -> int:
    """How many replicas share one step's batch in ``mode`` (1 without a strategy)."""
    strategy = {_MODES.TRAIN: config.train_distribute, _MODES.EVAL: config.eval_distribute}
    strategy = strategy.get(mode)
    return strategy.num_replicas_in_sync if strategy is not None else 1


def _check_replica_batch_sizes(config, batch_sizes: dict) -> None:
    """Refuses a batch size a distribution strategy's replicas cannot share equally."""
    for mode, batch_size in batch_sizes.items():
        replicas = _replicas(config, mode)
        if batch_size is not None and batch_size % replicas:
            name = _BATCH_ARG[mode]
            raise ValueError(
                f"`{name}` is the global batch size, shared by the {replicas} replicas of the "
                f"distribution strategy (params['batch_size'] is each one's share): make it a "
                f"multiple of {replicas}. Got: {name}={batch_size}"
            )


def _without_second_loss_line(spec, hooks=(), is_chief=True):
    """Leaves out the fallback's loss line when a ``ProgressHook`` prints the loss already.

    Both lines every interval, with throughputs measured over different intervals, read as
    two disagreeing reports. The fallback's hook stays when it writes the ``global_step/sec``
    and ``examples/sec`` summaries (TensorBoard's curves), without its line.

    Args:
      spec: the ``EstimatorSpec`` to train with; its training hooks hold the fallback's.
      hooks: every other hook of the run (``train(hooks=…)``, the input_fn's).
      is_chief: whether this task runs the spec's ``training_chief_hooks`` (a ProgressHook
        among them prints nothing on the other tasks).
    """
    chief_hooks = tuple(spec.training_chief_hooks) if is_chief else ()
    every = tuple(hooks) + tuple(spec.training_hooks) + chief_hooks
    if not any(isinstance(hook, ProgressHook) for hook in every):
        return spec
    kept = []
    for hook in spec.training_hooks:
        if isinstance(hook, LossLoggingHook):
            if not hook.writes_summaries:
                continue
            hook.log_lines = False
        kept.append(hook)
    return spec._replace(training_hooks=tuple(kept))


@contextlib.contextmanager
def _missing_batch_size_named(mode: str, unset: bool):
    """Turns ``KeyError('batch_size')`` into an error naming the constructor argument to set.

    Like the official class, a mode whose batch size is None gets no ``params['batch_size']``
    (an input_fn that batches by itself works); one that reads it should say what is missing.
    With ``unset`` False (the batch size was given, or an export has none) nothing changes.
    """
    try:
        yield
    except KeyError as e:
        if not unset or e.args != ("batch_size",):
            raise
        name = _BATCH_ARG[mode]
        raise ValueError(
            f"`{name}` must be set on TPUEstimator to call {_METHOD[mode]}(): it becomes "
            f"params['batch_size']. Got: {name}=None"
        ) from e


def _with_between_graph_defaults(config):
    """Gives a TPU RunConfig read from a TF_CONFIG cluster the plain RunConfig's ConfigProto.

    tpu.RunConfig skips the device filters RunConfig sets for between-graph training (a TPU runs
    in-graph). Without a TPU this is between-graph training, and without the filters every
    session of the chief waits for every worker: its final predict hung on a worker that had
    finished and exited.
    """
    if config.session_config is not None or not config.cluster_spec:
        return config
    if "TF_CONFIG" not in os.environ:
        return config
    # The ConfigProto a plain RunConfig would pick from the same TF_CONFIG.
    return config.replace(session_config=session_config())


# Whether "No TPU found" was said, and which unused settings were named: once per process,
# as programs build a TPUEstimator per evaluation or per export too.
_said_no_tpu_found = [False]
_said_ignored: set[tuple[bool, tuple[str, ...]]] = set()  # (as a warning?, settings)


def _say_no_tpu_found(ignored: list[str]) -> bool:
    """Warns, once per process, that a TPU was asked for and none is here; False if said before.

    A warning, not an INFO line: TensorFlow shows only warnings by default, and a TF1 script
    that asks for a TPU learns nothing else about where it runs. The TPU-only settings that go
    unused are named in the same line.
    """
    if _said_no_tpu_found[0]:
        return False
    _said_no_tpu_found[0] = True
    _said_ignored.add((True, tuple(sorted(ignored))))
    unused = f"; ignoring TPU-only settings: {', '.join(sorted(ignored))}" if ignored else ""
    tf.logging.warning(
        "No TPU found: TPUEstimator runs as a tf.estimator.Estimator on CPU/GPU%s.", unused
    )
    return True


class TPUEstimator(tf_estimator.Estimator):
    """``TPUEstimator`` with the official signature that runs everywhere.

    ``TPUEstimator(...)`` returns the official ``tf.compat.v1.estimator.tpu.TPUEstimator`` when
    ``use_tpu`` is True / ``"auto"`` and a TPU is reachable (local TPU devices, or the TPU
    named by ``RunConfig(cluster=…)``, a ``grpc://`` master or ``TPU_NAME``). Otherwise it is
    this class, a plain ``tf.estimator.Estimator`` whose model_fn wraps yours:

    * ``params['batch_size']`` is the train / eval / predict batch size of the mode, in
      ``model_fn`` and in ``input_fn`` (``input_fn`` may also take no ``params``); as in the
      official class, there is no such key when that batch size is None, and reading it then
      raises a ``ValueError`` naming the argument to set. Under a distribution strategy
      (``tfest_kit.run_config(cpu_replicas=N)``, ``train_distribute``) each replica gets its
      share of the global batch size, as each TPU core does;
      ``params['use_tpu']`` is False; ``params`` may not contain ``batch_size`` or ``context``.
    * A ``TPUEstimatorSpec`` becomes an ``EstimatorSpec``: ``eval_metrics`` (tensors as list or
      dict) -> ``eval_metric_ops``; ``scaffold_fn`` is called (``init_from_checkpoint`` inside
      works); ``host_call`` runs every train / eval step with a default summary writer on
      ``model_dir`` (``eval_dir(name)`` in evaluation) and the global step; hooks and
      ``export_outputs`` are kept. An ``EstimatorSpec`` passes through.
    * One line ``loss = …, step = … (… sec); global_step/sec: …, examples/sec: …`` every
      ``log_step_count_steps`` (``TPUConfig.iterations_per_loop`` has no say off a TPU), without
      Estimator's per-step fetches and without the false "global step has not been increased"
      warnings of its ``StepCounterHook`` (which is switched off, as the official class does).
      With a ``tfest_kit.hooks.ProgressHook`` among the training hooks (``train(hooks=…)``, a
      ``TrainSpec``'s, the spec's), which prints the loss and throughput already, there is no
      such line; the ``global_step/sec`` and ``examples/sec`` summaries are still written.
    * TPU-only settings (``TPUConfig`` fields other than ``iterations_per_loop``,
      ``batch_axis``, ``embedding_config_spec``) are ignored with one line naming them, once
      per process for the same settings: a warning, or an info line with ``use_tpu=False``,
      where ignoring them was asked for.
    * ``export_saved_model()`` writes a CPU SavedModel (one warning if ``export_to_tpu`` and
      a TPU was asked for: ``use_tpu`` True or ``"auto"``).
    * Keras layers built in ``model_fn`` (``tf.layers.dense`` among them) take their initial
      weights from ``RunConfig(tf_random_seed=…)``, as under TensorFlow 1.x; Keras 2.10+
      seeds them from Python's ``random`` otherwise.

    Args:
      model_fn: ``model_fn(features, labels, mode, params, config)`` returning a
        ``TPUEstimatorSpec`` or ``EstimatorSpec``.
      model_dir: as for ``Estimator``.
      config: a ``tfest_kit.tpu.RunConfig`` (= ``tf.compat.v1.estimator.tpu.RunConfig``) or a
        plain ``tf.estimator.RunConfig``; None uses ``RunConfig()``. On a TPU, where the
        official class takes a ``tpu.RunConfig`` only, a plain one is turned into a
        ``tpu.RunConfig`` with the same settings and the default ``TPUConfig``.
      params: dict of hyper-parameters.
      use_tpu: True, False or ``"auto"`` (True falls back too, with an info line). Other
        values count by their truth value, as in the official class (``0``, ``None``: no
        TPU); a string other than ``"auto"`` is refused.
      train_batch_size: global batch size for ``train()``; None is fine for an ``input_fn``
        and ``model_fn`` that do not read ``params['batch_size']``. With a
        ``train_distribute`` strategy it must be a multiple of its replica count.
      eval_batch_size: batch size for ``evaluate()``; None as for ``train_batch_size``.
      predict_batch_size: batch size for ``predict()``; None as for ``train_batch_size``.
      batch_axis: TPU only.
      eval_on_tpu: TPU only (evaluation runs on CPU/GPU in the fallback).
      export_to_tpu: TPU only; a CPU SavedModel is written instead, with a warning unless
        ``use_tpu`` is False.
      export_to_cpu: write the CPU SavedModel (off a TPU it is written regardless).
      warm_start_from: as for ``Estimator``.
      embedding_config_spec: TPU only.
      export_saved_model_api_version: 1 or 2 (TPU only).

    Raises:
      ValueError: reserved ``params`` keys, a bad batch size, ``use_tpu`` or export flags, a
        ``model_dir`` that is a file; when input_fn / model_fn run, ``params['batch_size']``
        read with that batch size None, a spec for another mode or a checkpoint in
        ``model_dir`` from another model.
      TypeError: ``config`` is not a ``RunConfig`` or ``params`` not a dict; when evaluate()
        runs, a dict of ``eval_metrics`` tensors whose keys ``metric_fn`` does not take.

    Example:

        def model_fn(features, labels, mode, params):  # a TF1 TPU-style model_fn
            batch_size = params["batch_size"]
            ...
            return tpu.TPUEstimatorSpec(mode, loss=loss, train_op=train_op,
                                        eval_metrics=(metric_fn, [labels, logits]))

        est = tpu.TPUEstimator(model_fn, config=tpu.RunConfig(model_dir="/tmp/run"),
                               use_tpu="auto", train_batch_size=32, eval_batch_size=32)
        est.train(input_fn, max_steps=1000)   # logs "loss = …, step = …" on CPU/GPU too
    """

    def __new__(
        cls, model_fn=None, model_dir=None, config=None, params=None, use_tpu=True, *a, **kw
    ):
        if cls is TPUEstimator and _wants_official(use_tpu, config):
            mark_tpu_in_use()
            tf.logging.info(
                "TPU found: using the official tf.compat.v1.estimator.tpu.TPUEstimator."
            )
            # The official class takes a tpu.RunConfig only, and use_tpu as a bool.
            return tf_estimator.tpu.TPUEstimator(
                model_fn, model_dir, _official_config(config), params, True, *a, **kw
            )
        return super().__new__(cls)

    def __init__(
        self,
        model_fn: Optional[Callable] = None,
        model_dir: Optional[str] = None,
        config: Optional[tf_estimator.RunConfig] = None,
        params: Optional[dict] = None,
        use_tpu: Union[bool, str] = True,
        train_batch_size: Optional[int] = None,
        eval_batch_size: Optional[int] = None,
        predict_batch_size: Optional[int] = None,
        batch_axis: Any = None,
        eval_on_tpu: bool = True,
        export_to_tpu: bool = True,
        export_to_cpu: bool = True,
        warm_start_from: Any = None,
        embedding_config_spec: Any = None,
        export_saved_model_api_version: Any = 1,
    ) -> None:
        del eval_on_tpu  # evaluation always runs where training does in the fallback
        use_tpu = _use_tpu_arg(use_tpu)
        model_fn_args(model_fn)
        if params is not None and not isinstance(params, Mapping):
            # The official class requires a dict too (and fails on `k in params` otherwise).
            fix = ""
            if isinstance(params, argparse.Namespace):
                fix = "; pass vars(args) for an argparse.Namespace"
            raise TypeError(f"`params` must be a dict{fix}. Got: {type(params).__name__}")
        if params is not None and any(k in params for k in RESERVED_PARAMS_KEYS):
            raise ValueError(
                f"{list(RESERVED_PARAMS_KEYS)} are reserved keys but existed in params {params}. "
                "Pass batch sizes as train_batch_size / eval_batch_size / predict_batch_size."
            )
        train_batch_size = check_int("train_batch_size", train_batch_size, allow_none=True)
        eval_batch_size = check_int("eval_batch_size", eval_batch_size, allow_none=True)
        predict_batch_size = check_int("predict_batch_size", predict_batch_size, allow_none=True)
        if not export_to_cpu and not export_to_tpu:
            raise ValueError(
                "One of `export_to_cpu` and `export_to_tpu` must be True. Got: both False"
            )
        if str(
            getattr(export_saved_model_api_version, "value", export_saved_model_api_version)
        ) not in (
            "1",
            "2",
        ):
            raise ValueError(
                "`export_saved_model_api_version` must be 1 or 2. "
                f"Got: {export_saved_model_api_version!r}"
            )
        if config is None:
            config = _default_run_config()
        if not isinstance(config, tf_estimator.RunConfig):
            raise TypeError(
                "`config` must be a tfest_kit.tpu.RunConfig or tf.estimator.RunConfig. "
                f"Got: {type(config).__name__}"
            )
        ignored = _ignored_tpu_settings(config, batch_axis, embedding_config_spec)
        if config.master and "TF_CONFIG" not in os.environ:
            # The master is the TPU that did not resolve; a session on it would hang.
            ignored.append(f"master={config.master!r}")
            config = copy.copy(config)
            config._master = ""  # not replaceable through RunConfig.replace
            config._evaluation_master = ""
        # A TPU was asked for: the first such warning also names the unused settings.
        said_both = use_tpu is True and _say_no_tpu_found(ignored)
        # BERT-style scripts set num_shards etc. whatever use_tpu says: with use_tpu=False
        # ignoring them is what was asked for, not something to warn about.
        said = (use_tpu is not False, tuple(sorted(ignored)))
        if ignored and not said_both and said not in _said_ignored:
            _said_ignored.add(said)
            log = tf.logging.warning if use_tpu is not False else tf.logging.info
            log("No TPU: ignoring TPU-only settings: %s.", ", ".join(sorted(ignored)))
        config = _with_between_graph_defaults(config)
        # Every log_step_count_steps, whatever iterations_per_loop says: off a TPU there is no
        # host loop, and BERT's 1000 steps per loop left a 343-step fine-tuning one line.
        self._log_every = config.log_step_count_steps or None
        self._batch_sizes = {
            _MODES.TRAIN: train_batch_size,
            _MODES.EVAL: eval_batch_size,
            _MODES.PREDICT: predict_batch_size,
        }
        _check_replica_batch_sizes(config, self._batch_sizes)
        self._user_model_fn = model_fn
        # With use_tpu=False a CPU SavedModel is what was asked for, whatever export_to_tpu
        # says (it defaults to True), so only a TPU run that fell back gets the warning.
        self._warn_cpu_export = export_to_tpu and use_tpu is not False
        self._export_warned = False
        # Graphs input_fn ran in (-> the evaluation's name): model_fn in one of them
        # is train / evaluate / predict (every replica of a distribution strategy too); anywhere
        # else it is an export.
        self._input_graphs = weakref.WeakKeyDictionary()
        self._eval_name = None  # the name evaluate() was called with, while it runs
        super().__init__(
            model_fn=self._make_model_fn(),
            model_dir=model_dir,
            # Estimator's LoggingTensorHook + StepCounterHook are replaced by one hook.
            config=config.replace(log_step_count_steps=None),
            params=dict(params or {}),
            warm_start_from=warm_start_from,
        )
        if tf.io.gfile.exists(self.model_dir) and not tf.io.gfile.isdir(self.model_dir):
            raise ValueError(
                f"`model_dir` must be a directory (or not exist yet); it is a file, not a "
                f"directory. Got: {self.model_dir!r}"
            )

    def _assert_members_are_not_overridden(self) -> None:
        # Estimator forbids overriding train / evaluate / predict / export except for classes
        # named TPUEstimator (the official one wraps them the same way). This class wraps
        # train() and evaluate() to check the cluster task first, and evaluate() to learn the
        # evaluation's name; it must stay subclassable under other names.
        return None

    @property
    def train_batch_size(self) -> Optional[int]:
        return self._batch_sizes[_MODES.TRAIN]

    @property
    def eval_batch_size(self) -> Optional[int]:
        return self._batch_sizes[_MODES.EVAL]

    @property
    def predict_batch_size(self) -> Optional[int]:
        return self._batch_sizes[_MODES.PREDICT]

    def _replica_batch_size(self, mode: str) -> Optional[int]:
        """``params['batch_size']`` in ``mode``: the global batch size over the strategy's replicas.

        As on a TPU, where each core gets ``train_batch_size / num_shards``: every replica of
        a distribution strategy takes a batch of its own from the input pipeline.
        """
        batch_size = self._batch_sizes[mode]
        replicas = _replicas(self._config, mode)
        return batch_size // replicas if batch_size is not None else None

    def _make_model_fn(self) -> Callable:
        user_model_fn = self._user_model_fn

        def model_fn(features, labels, mode, params, config):
            # Like the official class: input_fn runs before model_fn in train / evaluate /
            # predict but not in export, where the batch size is unknown.
            graph = tf.get_default_graph()
            is_export = graph not in self._input_graphs
            params = dict(params)
            if not is_export and self._batch_sizes.get(mode) is not None:
                params["batch_size"] = self._replica_batch_size(mode)
            # Always False, as the official class sets it off a TPU: TF1 scripts pass
            # params={"use_tpu": FLAGS.use_tpu}, and a model_fn that believes it would build
            # TPU-only ops (CrossShardOptimizer's CrossReplicaSum) that fail on CPU/GPU.
            params["use_tpu"] = False
            # An export has no batch size whatever the arguments (as in the official class).
            unset = not is_export and "batch_size" not in params
            with _missing_batch_size_named(mode, unset):
                spec = call_model_fn(
                    user_model_fn,
                    features=features,
                    labels=labels,
                    mode=mode,
                    params=params,
                    config=config,
                )
            spec_mode = getattr(spec, "mode", mode)
            if spec_mode != mode:
                # Estimator would fail later with "None values not supported" or similar.
                raise ValueError(
                    f"model_fn returned a spec for mode {spec_mode!r} when called for {mode!r}: "
                    "pass the `mode` argument through to the (TPU)EstimatorSpec. "
                    f"Got: {type(spec).__name__}(mode={spec_mode!r})"
                )
            summary_dir = config.model_dir or ""
            if mode == _MODES.EVAL:  # Estimator.eval_dir(name)
                name = self._input_graphs.get(graph)
                summary_dir = os.path.join(summary_dir, "eval_" + name if name else "eval")
            spec = to_estimator_spec(spec, mode, summary_dir)
            saver = check_model_dir(config.model_dir, spec.scaffold, mode=mode)
            if saver is not None and mode == _MODES.PREDICT:  # an export restores with it
                spec = spec._replace(scaffold=with_saver(spec.scaffold, saver))
            if mode == _MODES.TRAIN and self._log_every and config.train_distribute is None:
                # (With a strategy: in _train_with_estimator_spec, where the loss is all
                # replicas' rather than this one's.)
                spec = _with_loss_line(
                    spec, config, self._log_every, self._batch_sizes[_MODES.TRAIN]
                )
            return spec

        return model_fn

    def _train_with_estimator_spec(
        self, estimator_spec, worker_hooks, hooks, global_step_tensor, saving_listeners
    ):
        if self._log_every and self._config.train_distribute is not None:
            # Here, not in model_fn: this spec's loss is the replicas' together (Estimator
            # reduces it), while model_fn sees one replica's.
            estimator_spec = _with_loss_line(
                estimator_spec, self._config, self._log_every, self._batch_sizes[_MODES.TRAIN]
            )
        # The one place where the train(hooks=…) are known; a saver hook among them replaces
        # the default one, as in Estimator. (Distribution strategies keep Estimator's own.)
        estimator_spec = _without_second_loss_line(
            estimator_spec, tuple(worker_hooks) + tuple(hooks), self._config.is_chief
        )
        if self._config.train_distribute is None:
            estimator_spec = _with_checkpoint_saver(
                estimator_spec, self._config, tuple(worker_hooks) + tuple(hooks)
            )
        else:
            check = ReplicaSyncCheckHook(self._config.train_distribute)
            hooks_with_check = tuple(estimator_spec.training_hooks) + (check,)
            estimator_spec = estimator_spec._replace(training_hooks=hooks_with_check)
        return super()._train_with_estimator_spec(
            estimator_spec, worker_hooks, hooks, global_step_tensor, saving_listeners
        )

    def _call_input_fn(self, input_fn, mode, input_context=None):
        """Calls ``input_fn`` with ``params['batch_size']`` of the mode, as the official class does.

        Estimator calls this wherever it builds an input pipeline: in train / evaluate / predict
        and from outside them (``tf.estimator.experimental.InMemoryEvaluatorHook``), so every
        one of them gets the batch size.
        """
        if not callable(input_fn):
            raise ValueError(f"`input_fn` must be a callable. Got: {input_fn!r}")
        # model_fn in this graph serves train / evaluate / predict, not an export.
        self._input_graphs[tf.get_default_graph()] = (
            self._eval_name if mode == _MODES.EVAL else None
        )
        params = self.params  # Estimator's property: a copy
        batch_size = self._replica_batch_size(mode)
        if batch_size is not None:  # the official class leaves the key out otherwise
            params["batch_size"] = batch_size
        # The input pipeline goes where Estimator puts it.
        with tf.device("/cpu:0"), _missing_batch_size_named(mode, batch_size is None):
            return call_with_args(
                input_fn, mode=mode, params=params, config=self.config, input_context=input_context
            )

    def train(
        self,
        input_fn: Callable,
        hooks: Optional[list] = None,
        steps: Optional[int] = None,
        max_steps: Optional[int] = None,
        saving_listeners: Optional[list] = None,
    ) -> TPUEstimator:
        """As ``Estimator.train``, guarding model_dir (see ``tfest_kit._model_dir.training``).

        Raises:
          TfestKitError: another process trains into model_dir (``ModelDirLockedError``);
            model_dir holds checkpoint files but none is intact; the disk filled up.
          NanLossError: the loss became NaN (naming the step and a finite checkpoint).
          ValueError: as ``Estimator.train``; and when called directly on a ``TF_CONFIG``
            cluster task that cannot train by itself (a ps or evaluator task, or a chief /
            worker whose server nothing started), naming the task and
            ``tfest_kit.train_and_evaluate`` (TensorFlow's error showed a ``RunConfig`` repr,
            or there was none: the session waited forever).
        """
        check_direct_call(self.config, "train")
        with _model_dir.training(self) as counter:
            return super().train(
                input_fn,
                hooks=[*(hooks or ()), counter],
                steps=steps,
                max_steps=max_steps,
                saving_listeners=saving_listeners,
            )

    def evaluate(
        self,
        input_fn: Callable,
        steps: Optional[int] = None,
        hooks: Optional[list] = None,
        checkpoint_path: Optional[str] = None,
        name: Optional[str] = None,
    ) -> dict:
        """As ``Estimator.evaluate``; ``params['batch_size'] = eval_batch_size``.

        Args:
          input_fn: the evaluation ``input_fn`` (``params['batch_size']`` is set).
          steps: batches to evaluate; None evaluates until the data ends.
          hooks: evaluation ``SessionRunHook``s.
          checkpoint_path: the checkpoint to evaluate; None: model_dir's latest.
          name: the evaluation's name (metrics go to ``eval_dir(name)``).

        Returns:
          The metrics, as ``Estimator.evaluate`` returns them.

        Raises:
          ValueError: unlike ``Estimator.evaluate``, where the official loop would read a
            ``repeat()``ed Dataset forever (``steps=None``) or report zeros for no data; on a
            ``TF_CONFIG`` cluster's ps task, naming it and ``tfest_kit.train_and_evaluate``.
        """
        check_direct_call(self.config, "evaluate")
        # Estimator does not hand the name on to the graph it builds; host_call summaries of
        # this evaluation go to eval_dir(name).
        self._eval_name = name
        hooks = list(hooks or ())
        if not any(isinstance(hook, EvalGuard) for hook in hooks):  # train_and_evaluate's
            hooks.append(EvalGuard(steps, "steps", "input_fn"))
        try:
            with label_errors():
                return super().evaluate(
                    input_fn, steps=steps, hooks=hooks, checkpoint_path=checkpoint_path, name=name
                )
        finally:
            self._eval_name = None

    def _warn_export(self) -> None:
        if self._warn_cpu_export and not self._export_warned:
            tf.logging.warning(
                "export_to_tpu=True but there is no TPU: writing a CPU SavedModel only."
            )
            self._export_warned = True

    def export_saved_model(self, export_dir_base, serving_input_receiver_fn, *args, **kwargs):
        """As ``Estimator.export_saved_model``; writes a CPU SavedModel."""
        self._warn_export()
        return super().export_saved_model(
            export_dir_base, serving_input_receiver_fn, *args, **kwargs
        )

    def experimental_export_all_saved_models(
        self, export_dir_base, input_receiver_fn_map, *a, **kw
    ):
        """As ``Estimator.experimental_export_all_saved_models``; CPU SavedModels."""
        self._warn_export()
        return super().experimental_export_all_saved_models(
            export_dir_base, input_receiver_fn_map, *a, **kw
        )
