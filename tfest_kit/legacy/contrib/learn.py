"""``tf.contrib.learn`` as TF 1.15 had it for ``tf.estimator`` Estimators.

TF 1.15's ``tf.contrib.learn`` was deprecated whole.  What programs that train a
``tf.estimator`` Estimator read from it is served:

- the driver of 2017-18 Estimator programs: ``Experiment`` and ``learn_runner.run`` (a port,
  :mod:`tfest_kit.legacy.contrib._learn_experiment`), ``RunConfig``, ``ExportStrategy``,
  ``make_export_strategy`` and ``monitors.ValidationMonitor`` (ports, here);
- ``ModeKeys``: ``TRAIN`` ``'train'``, ``EVAL`` ``'eval'``, ``INFER`` ``'infer'`` (learn's
  name for ``tf.estimator.ModeKeys.PREDICT``, the same string);
- ``PredictionKey``, ``ProblemType``, ``TaskType``: the keys of learn's prediction dicts, its
  export problem types and its cluster task types;
- ``preprocessing``: ``VocabularyProcessor`` & co., a port
  (:mod:`tfest_kit.legacy.contrib._learn_preprocessing`);
- ``datasets``: ``mnist`` (``read_data_sets``, ``DataSet`` …) and ``base``, a port
  (:mod:`tfest_kit.legacy.contrib._learn_datasets`), also as
  ``tensorflow.contrib.learn.python.learn.datasets``.

learn's own Estimators (``tf.contrib.learn.Estimator``, ``DNNClassifier`` …, with ``fit`` and
``eval_metrics``) live on in ``tf.estimator`` with other arguments, a rewrite the legacy runner
does not make: they stay refused, and their first use says what replaces them.

Example:

    if mode == tf.contrib.learn.ModeKeys.INFER:
        return sample_ids
    config = tf.contrib.learn.RunConfig(model_dir="/tmp/run", save_checkpoints_steps=100)
"""

from __future__ import annotations

import collections
import copy
import inspect
import json
import os
import time
from typing import Any, Callable, Optional

from tfest_kit._tf import estimator as tf_estimator
from tfest_kit._tf import tf

# What tf.contrib.learn serves (ValidationMonitor is in its monitors module, Environment in
# run_config: tfest_kit.legacy._contrib).
_TOP = ("ModeKeys", "PredictionKey", "ProblemType", "TaskType", "RunConfig", "ExportStrategy")
_TOP += ("make_export_strategy",)
__all__ = [*_TOP, "ValidationMonitor", "Environment", "BACKING", "NOT_SERVED"]

_PORT = "tfest_kit.legacy.contrib.learn (a port of TF 1.15's)"
BACKING = dict.fromkeys(_TOP, _PORT)
OTHERS = (
    "tf.estimator (out of scope for the legacy runner): tf.contrib.learn.Estimator -> "
    "tf.estimator.Estimator, learn.DNNClassifier -> tf.estimator.DNNClassifier & co. (other "
    "arguments); Experiment and learn_runner serve a tf.estimator Estimator"
)
# TensorFlow's logging functions, so that absl's format names this file as TF 1.15 named its own.
_log = tf.compat.v1.logging
NOT_SERVED: dict[str, str] = {}


class ModeKeys:
    """TF 1.15's ``tf.contrib.learn.ModeKeys``: standard names for model modes.

    Example:

        if mode == tf.contrib.learn.ModeKeys.INFER:   # 'infer', as tf.estimator's PREDICT
            return predictions
    """

    TRAIN = "train"
    EVAL = "eval"
    INFER = "infer"

    @classmethod
    def validate(cls, key: Any) -> None:
        """Raises ``ValueError`` unless ``key`` is one of the three modes."""
        if key not in (cls.TRAIN, cls.EVAL, cls.INFER):
            raise ValueError(f"Invalid mode {key}.")


class PredictionKey:
    """TF 1.15's ``tf.contrib.learn.PredictionKey``: keys of learn's prediction dicts.

    Example:

        probabilities = predictions[tf.contrib.learn.PredictionKey.PROBABILITIES]
    """

    CLASSES = "classes"
    PROBABILITIES = "probabilities"
    LOGITS = "logits"
    LOGISTIC = "logistic"
    SCORES = "scores"
    TOP_K = "top_k"
    GENERIC = "output"


class ProblemType:
    """TF 1.15's ``tf.contrib.learn.ProblemType``: the problem a model solves, for export.

    Example:

        problem = tf.contrib.learn.ProblemType.CLASSIFICATION   # 1
    """

    UNSPECIFIED = 0
    CLASSIFICATION = 1
    LINEAR_REGRESSION = 2
    LOGISTIC_REGRESSION = 3


class TaskType:
    """TF 1.15's ``tf.contrib.learn.TaskType``: the task types of a learn cluster.

    Example:

        is_ps = task_type == tf.contrib.learn.TaskType.PS   # 'ps'
    """

    MASTER = "master"
    PS = "ps"
    WORKER = "worker"


# What RunConfig.uid() leaves out: the properties a user may change without changing the run
# (TF 1.15's name: programs overriding uid() read it).
_DEFAULT_UID_WHITE_LIST = [
    "tf_random_seed",
    "save_summary_steps",
    "save_checkpoints_steps",
    "save_checkpoints_secs",
    "session_config",
    "keep_checkpoint_max",
    "keep_checkpoint_every_n_hours",
    "log_step_count_steps",
]


class Environment:
    """TF 1.15's ``run_config.Environment``: ``TF_CONFIG``'s ``environment`` values.

    Example:

        if config.environment == run_config.Environment.CLOUD:
            experiment.run_std_server()
    """

    LOCAL = "local"
    CLOUD = "cloud"
    GOOGLE = "google"


class RunConfig(tf_estimator.RunConfig):
    """TF 1.15's ``tf.contrib.learn.RunConfig``: a ``tf.estimator.RunConfig`` with learn's
    arguments.

    ``master``, ``evaluation_master`` and ``model_dir`` as learn had them (``TF_CONFIG`` when
    not given); ``num_cores``, ``log_device_placement`` and ``gpu_memory_fraction`` make
    ``tf_config``, the ``ConfigProto`` ``Experiment.run_std_server`` starts its server with;
    the rest are ``tf.estimator.RunConfig``'s.  ``save_checkpoints_secs`` is 600 unless
    ``save_checkpoints_steps`` is given.

    Example:

        config = RunConfig(model_dir="/tmp/run", save_checkpoints_steps=100)
    """

    _USE_DEFAULT = 0

    def __init__(
        self,
        master: Optional[str] = None,
        num_cores: int = 0,
        log_device_placement: bool = False,
        gpu_memory_fraction: float = 1,
        tf_random_seed: Optional[int] = None,
        save_summary_steps: int = 100,
        save_checkpoints_secs: Optional[int] = _USE_DEFAULT,
        save_checkpoints_steps: Optional[int] = None,
        keep_checkpoint_max: int = 5,
        keep_checkpoint_every_n_hours: int = 10000,
        log_step_count_steps: int = 100,
        protocol: Optional[str] = None,
        evaluation_master: str = "",
        model_dir: Optional[str] = None,
        session_config: Any = None,
        session_creation_timeout_secs: int = 7200,
    ) -> None:
        if save_checkpoints_secs == self._USE_DEFAULT:
            save_checkpoints_secs = 600 if save_checkpoints_steps is None else None
        super().__init__(
            model_dir=model_dir,
            tf_random_seed=tf_random_seed,
            save_summary_steps=save_summary_steps,
            save_checkpoints_steps=save_checkpoints_steps,
            save_checkpoints_secs=save_checkpoints_secs,
            session_config=session_config,
            keep_checkpoint_max=keep_checkpoint_max,
            keep_checkpoint_every_n_hours=keep_checkpoint_every_n_hours,
            log_step_count_steps=log_step_count_steps,
            protocol=protocol,
            session_creation_timeout_secs=session_creation_timeout_secs,
        )
        if master is not None:
            self._master = master
        self._evaluation_master = evaluation_master or self._evaluation_master
        tf_config = json.loads(os.environ.get("TF_CONFIG") or "{}")
        self._environment = tf_config.get("environment", Environment.LOCAL)
        gpu_options = tf.compat.v1.GPUOptions(per_process_gpu_memory_fraction=gpu_memory_fraction)
        self._tf_config = tf.compat.v1.ConfigProto(
            log_device_placement=log_device_placement,
            inter_op_parallelism_threads=num_cores,
            intra_op_parallelism_threads=num_cores,
            gpu_options=gpu_options,
        )

    @property
    def tf_config(self) -> Any:
        """The ``ConfigProto`` of ``num_cores``, ``log_device_placement`` …"""
        return self._tf_config

    @property
    def environment(self) -> str:
        """``TF_CONFIG``'s ``environment`` (``'local'`` unless it says ``'cloud'``)."""
        return self._environment

    @staticmethod
    def get_task_id() -> int:
        """``TF_CONFIG['task']['index']``, 0 when not set."""
        task = json.loads(os.environ.get("TF_CONFIG") or "{}").get("task", {})
        return int(task.get("index") or 0)

    def uid(self, whitelist: Optional[list] = None) -> str:
        """A string of every field but ``whitelist``'s, as TF 1.15's (``run`` compares it).

        Args:
          whitelist: property names left out (default: the seed, the summary and checkpoint
            intervals and counts, ``session_config``).

        Returns:
          ``"_field=value, …"`` in field order.
        """
        state = {k: v for k, v in self.__dict__.items() if not k.startswith("__")}
        for name in _DEFAULT_UID_WHITE_LIST if whitelist is None else whitelist:
            state.pop("_" + name, None)
        state = collections.OrderedDict(sorted(state.items()))
        if state.get("_cluster_spec") is not None:
            state["_cluster_spec"] = collections.OrderedDict(
                sorted(state["_cluster_spec"].as_dict().items())
            )
        return ", ".join(f"{k}={v!r}" for k, v in state.items())


class ValidationMonitor(tf.compat.v1.train.SessionRunHook):
    """TF 1.15's ``tf.contrib.learn.monitors.ValidationMonitor``, for a ``tf.estimator``
    Estimator.

    Every ``every_n_steps`` steps, and at most once per ``check_interval_secs``, evaluates the
    newest checkpoint if it is new, logging ``Validation (step N): name = value, …``; with
    ``early_stopping_rounds`` it stops training when ``early_stopping_metric`` has not
    improved for that many steps.  An ``Experiment`` sets its Estimator; used on its own,
    call :meth:`set_estimator` before training.

    Args:
      x: TF 1.15 took it for learn's Estimators only: must be None.
      y: as ``x``.
      input_fn: the evaluation input.
      batch_size: as ``x``.
      eval_steps: evaluation steps (None: until the input ends).
      every_n_steps: steps between looks for a new checkpoint.
      metrics: as ``x``.
      hooks: hooks for ``evaluate``.
      early_stopping_rounds: steps without improvement before stopping (None: never).
      early_stopping_metric: the metric watched.
      early_stopping_metric_minimize: whether lower is better.
      name: the evaluation's name (``eval_<name>`` directory).
      check_interval_secs: seconds between looks for a new checkpoint (None: no limit).

    Raises:
      ValueError: ``x``, ``y``, ``batch_size`` or ``metrics`` given, or no ``input_fn``.

    Example:

        monitor = ValidationMonitor(input_fn=eval_input_fn, every_n_steps=100,
                                    early_stopping_rounds=500)
    """

    def __init__(
        self,
        x: Any = None,
        y: Any = None,
        input_fn: Optional[Callable] = None,
        batch_size: Optional[int] = None,
        eval_steps: Optional[int] = None,
        every_n_steps: int = 100,
        metrics: Any = None,
        hooks: Optional[list] = None,
        early_stopping_rounds: Optional[int] = None,
        early_stopping_metric: str = "loss",
        early_stopping_metric_minimize: bool = True,
        name: Optional[str] = None,
        check_interval_secs: Optional[float] = 5,
    ) -> None:
        if input_fn is None:
            raise ValueError("Either x or input_fn should be provided.")
        if any(arg is not None for arg in (x, y, batch_size, metrics)):
            raise ValueError(
                "tf.estimator.Estimator does not support following arguments: x, y, "
                "batch_size, metrics. Should set as `None` in ValidationMonitor"
            )
        self.input_fn, self.eval_steps, self.hooks, self.name = input_fn, eval_steps, hooks, name
        self.early_stopping_rounds = early_stopping_rounds
        self.early_stopping_metric = early_stopping_metric
        self.early_stopping_metric_minimize = early_stopping_metric_minimize
        self._every_n_steps = every_n_steps
        self._check_interval_secs = check_interval_secs
        self._estimator = None
        self._best_value_step = self._best_value = self._best_metrics = None
        self._early_stopped = False
        self._latest_path = self._last_check_time = None
        self._step = None
        self._last_active_step = 0

    def set_estimator(self, estimator: Any) -> None:
        """Sets the Estimator whose checkpoints are evaluated."""
        self._estimator = estimator

    @property
    def early_stopped(self) -> bool:
        """Whether this monitor stopped training."""
        return self._early_stopped

    @property
    def best_step(self) -> Optional[int]:
        """The step of the best ``early_stopping_metric`` so far."""
        return self._best_value_step

    @property
    def best_value(self) -> Any:
        """The best ``early_stopping_metric`` so far."""
        return self._best_value

    @property
    def best_metrics(self) -> Optional[dict]:
        """The evaluation that gave :attr:`best_value`."""
        return self._best_metrics

    def begin(self) -> None:
        if self._estimator is None:
            raise ValueError("Missing call to set_estimator.")
        self._global_step = tf.compat.v1.train.get_global_step()

    def after_create_session(self, session: Any, coord: Any) -> None:
        # TF 1.15's monitors saw the step about to run.
        self._step = session.run(self._global_step) + 1

    def after_run(self, run_context: Any, run_values: Any) -> None:
        if self._step >= self._every_n_steps + self._last_active_step:
            if self._validate(self._step):
                run_context.request_stop()
            self._last_active_step = self._step
        self._step += 1

    def _validate(self, step: int) -> bool:
        """Evaluates a new checkpoint; True to stop training."""
        now = time.time()
        if (
            self._check_interval_secs is not None
            and self._last_check_time is not None
            and now - self._last_check_time <= self._check_interval_secs
        ):
            return False
        self._last_check_time = now
        latest_path = tf.compat.v1.train.latest_checkpoint(self._estimator.model_dir)
        if latest_path is None or latest_path == self._latest_path:
            return False
        self._latest_path = latest_path
        outputs = self._estimator.evaluate(
            input_fn=self.input_fn, steps=self.eval_steps, hooks=self.hooks, name=self.name
        )
        stats = ", ".join(f"{name} = {value!s}" for name, value in outputs.items())
        _log.info("Validation (step %d): %s", step, stats)
        if self.early_stopping_rounds is None:
            return False
        if self.early_stopping_metric not in outputs:
            raise ValueError(
                f"Metric {self.early_stopping_metric} missing from outputs {set(outputs)}."
            )
        value, best = outputs[self.early_stopping_metric], self._best_value
        minimize = self.early_stopping_metric_minimize
        if best is None or (value < best if minimize else value > best):
            self._best_value, self._best_value_step = value, step
            self._best_metrics = copy.deepcopy(outputs)
        if step - self._best_value_step >= self.early_stopping_rounds:
            _log.info(
                "Stopping. Best step: %s with %s = %s.",
                self._best_value_step,
                self.early_stopping_metric,
                self._best_value,
            )
            self._early_stopped = True
            return True
        return False


class ExportStrategy(
    collections.namedtuple("ExportStrategy", ["name", "export_fn", "strip_default_attrs"])
):
    """TF 1.15's ``tf.contrib.learn.ExportStrategy``: a named export function.

    ``export_fn`` takes ``(estimator, export_path)`` and, if it names them,
    ``checkpoint_path``, ``eval_result`` (only with ``checkpoint_path``) and
    ``strip_default_attrs``.

    Example:

        strategy = ExportStrategy("Servo", lambda estimator, path: my_export(estimator, path))
    """

    def __new__(cls, name: str, export_fn: Callable, strip_default_attrs: Any = None):
        return super().__new__(cls, name, export_fn, strip_default_attrs)

    def export(
        self,
        estimator: Any,
        export_path: str,
        checkpoint_path: Optional[str] = None,
        eval_result: Optional[dict] = None,
    ) -> Any:
        """Exports ``estimator`` under ``export_path``.

        Args:
          estimator: the Estimator.
          export_path: the directory the export goes under.
          checkpoint_path: the checkpoint (None: the newest).
          eval_result: the evaluation of that checkpoint.

        Returns:
          What ``export_fn`` returns (its export's path).

        Raises:
          ValueError: ``export_fn`` takes ``eval_result`` but not ``checkpoint_path``.
        """
        takes = inspect.signature(self.export_fn).parameters
        kwargs = {}
        if "checkpoint_path" in takes:
            kwargs["checkpoint_path"] = checkpoint_path
        if "eval_result" in takes:
            if "checkpoint_path" not in takes:
                raise ValueError(
                    "An export_fn accepting eval_result must also accept checkpoint_path."
                )
            kwargs["eval_result"] = eval_result
        if "strip_default_attrs" in takes:
            kwargs["strip_default_attrs"] = self.strip_default_attrs
        return self.export_fn(estimator, export_path, **kwargs)


def make_export_strategy(
    serving_input_fn: Callable,
    default_output_alternative_key: Optional[str] = None,
    assets_extra: Optional[dict] = None,
    as_text: bool = False,
    exports_to_keep: Optional[int] = 5,
    strip_default_attrs: Any = None,
) -> ExportStrategy:
    """TF 1.15's ``tf.contrib.learn.make_export_strategy``, for a ``tf.estimator`` Estimator.

    Args:
      serving_input_fn: returns a ``tf.estimator.export.ServingInputReceiver``.
      default_output_alternative_key: learn's Estimators only: must be None.
      assets_extra: files copied into the export's ``assets.extra``.
      as_text: write the SavedModel as text.
      exports_to_keep: the newest exports kept (None: all).
      strip_default_attrs: kept for ``ExportStrategy`` (TensorFlow 2 always strips them).

    Returns:
      An ``ExportStrategy`` named ``'Servo'``.

    Raises:
      ValueError: at export, when ``default_output_alternative_key`` is given.

    Example:

        Experiment(..., export_strategies=[make_export_strategy(serving_input_fn)])
    """

    def export_fn(estimator: Any, export_dir_base: str, checkpoint_path: Optional[str] = None):
        if default_output_alternative_key is not None:
            raise ValueError(
                "default_output_alternative_key is not supported in core Estimator. "
                f"Given: {default_output_alternative_key}"
            )
        exporter = tf_estimator.LatestExporter(
            "Servo", serving_input_fn, assets_extra, as_text, exports_to_keep
        )
        return exporter.export(estimator, export_dir_base, checkpoint_path, None, True)

    return ExportStrategy("Servo", export_fn, strip_default_attrs)
