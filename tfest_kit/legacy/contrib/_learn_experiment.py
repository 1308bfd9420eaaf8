"""TF 1.15's ``tf.contrib.learn`` driver for ``tf.estimator`` Estimators, ported.

2017-18 Estimator programs build a ``tf.estimator.Estimator`` and hand it to
``tf.contrib.learn.Experiment``, run by ``learn_runner.run(experiment_fn, run_config=
tf.contrib.learn.RunConfig(...), schedule=..., hparams=...)``.  This is TF 1.15's code path for
such an Estimator (its ``_core_estimator_used`` branch), on the official Estimator:

- ``Experiment``: ``train``, ``evaluate``, ``train_and_evaluate`` (a ``ValidationMonitor``
  every ``min_eval_frequency`` steps, or ``checkpoint_and_export``'s listener), ``test``,
  ``continuous_eval``, ``continuous_train_and_eval``, ``run_std_server``, export strategies;
- ``run`` and ``tune``: ``learn_runner``'s.

``RunConfig``, ``ExportStrategy`` and ``ValidationMonitor`` are in
:mod:`tfest_kit.legacy.contrib.learn`.

``tf.contrib.learn``'s own Estimators (``fit``, ``eval_metrics``) are not served, so an
Experiment takes a ``tf.estimator`` Estimator only.

Example:

    def experiment_fn(run_config, hparams):
        estimator = tf.estimator.Estimator(model_fn, params=hparams, config=run_config)
        return Experiment(estimator, train_input_fn, eval_input_fn, train_steps=1000)

    run(experiment_fn, run_config=RunConfig(model_dir="/tmp/run"), hparams=HParams(lr=0.1))
"""

from __future__ import annotations

import functools
import inspect
import math
import os
import time
from typing import Any, Callable, Optional

from tfest_kit._tf import estimator as tf_estimator
from tfest_kit._tf import tf
from tfest_kit.legacy.contrib.learn import (
    Environment,
    ExportStrategy,
    RunConfig,
    ValidationMonitor,
)
from tfest_kit.legacy.contrib.training import HParams

__all__ = ["Experiment", "run", "tune"]

# TensorFlow's logging functions, so that absl's format names this file as TF 1.15 named its own.
_log = tf.compat.v1.logging


class _EvalAndExportListener(tf.compat.v1.train.CheckpointSaverListener):
    """Evaluates and exports each checkpoint as it is saved (``checkpoint_and_export``)."""

    def __init__(self, eval_fn: Callable, export_fn: Callable, model_dir: str) -> None:
        self._eval_fn, self._export_fn, self._model_dir = eval_fn, export_fn, model_dir
        self._latest_path = self.eval_result = self.export_results = None

    def after_save(self, session: Any, global_step_value: int) -> None:
        _log.info("Checking for checkpoint in %s", self._model_dir)
        latest_path = tf.compat.v1.train.latest_checkpoint(self._model_dir)
        if not latest_path:
            _log.warning("Skipping evaluation and export since model has not been saved yet.")
        elif latest_path == self._latest_path:
            _log.warning("Skipping evaluation due to same latest checkpoint %s.", latest_path)
        else:
            self._latest_path = latest_path
            self.eval_result = self._eval_fn(
                name="intermediate_export", checkpoint_path=latest_path
            )
            self.export_results = self._export_fn(self.eval_result, checkpoint_path=latest_path)


def _predicate(predicate_fn: Optional[Callable]) -> Optional[Callable]:
    """``predicate_fn`` taking ``(eval_results, checkpoint_path)``, whichever it takes."""
    if predicate_fn is None:
        return None
    if not callable(predicate_fn):
        raise ValueError("`continuous_eval_predicate_fn` must be a callable, or None.")
    if "checkpoint_path" in inspect.signature(predicate_fn).parameters:
        return predicate_fn
    return lambda eval_results, checkpoint_path: predicate_fn(eval_results)


class Experiment:
    """TF 1.15's ``tf.contrib.learn.Experiment``: trains and evaluates a ``tf.estimator``
    Estimator.

    Its methods are ``learn_runner.run``'s schedules: ``train``, ``evaluate``,
    ``train_and_evaluate`` (the default on one machine), ``continuous_eval``,
    ``continuous_eval_on_train_data``, ``continuous_train_and_eval``, ``local_run``, ``test``,
    ``run_std_server``.  The arguments are TF 1.15's; see its documentation.

    Raises:
      ValueError: ``estimator`` is not a ``tf.estimator`` Estimator, ``eval_metrics`` is
        given, an export strategy is not an ``ExportStrategy``, or
        ``train_steps_per_iteration`` is not an integer.

    Example:

        experiment = Experiment(estimator, train_input_fn, eval_input_fn, train_steps=1000,
                                min_eval_frequency=100)
        experiment.train_and_evaluate()
    """

    def __init__(
        self,
        estimator: Any,
        train_input_fn: Callable,
        eval_input_fn: Callable,
        eval_metrics: Any = None,
        train_steps: Optional[int] = None,
        eval_steps: Optional[int] = 100,
        train_monitors: Optional[list] = None,
        eval_hooks: Optional[list] = None,
        local_eval_frequency: Optional[int] = None,
        eval_delay_secs: float = 120,
        continuous_eval_throttle_secs: float = 60,
        min_eval_frequency: Optional[int] = None,
        delay_workers_by_global_step: bool = False,
        export_strategies: Any = None,
        train_steps_per_iteration: Optional[int] = None,
        checkpoint_and_export: bool = False,
        saving_listeners: Optional[list] = None,
        check_interval_secs: float = 5,
    ) -> None:
        if not isinstance(estimator, tf_estimator.Estimator):
            raise ValueError(
                f"`estimator` must be a tf.estimator.Estimator, got {type(estimator).__name__}: "
                "the legacy runner does not serve tf.contrib.learn's own Estimators."
            )
        if eval_metrics is not None:
            raise ValueError(
                "`eval_metrics` must be `None` with `tf.estimator.Estimator`. "
                "Use `eval_metric_ops` in `tf.estimator.EstimatorSpec` instead."
            )
        self._estimator = estimator
        # TF 1.15's attributes, which subclasses read (google/seq2seq's Experiment).
        self._eval_metrics, self._core_estimator_used = None, True
        self._train_input_fn, self._eval_input_fn = train_input_fn, eval_input_fn
        self._train_steps, self._eval_steps = train_steps, eval_steps
        self._local_eval_frequency = local_eval_frequency
        self._eval_delay_secs = eval_delay_secs
        self._continuous_eval_throttle_secs = continuous_eval_throttle_secs
        self._checkpoint_and_export = checkpoint_and_export
        self._saving_listeners = saving_listeners
        self._min_eval_frequency = 1 if min_eval_frequency is None else min_eval_frequency
        self._check_interval_secs = check_interval_secs
        self._delay_workers_by_global_step = delay_workers_by_global_step
        self._train_monitors = list(train_monitors or ())
        self._eval_hooks = list(eval_hooks or ())
        self._set_export_strategies(export_strategies)
        if train_steps_per_iteration is not None and not isinstance(train_steps_per_iteration, int):
            raise ValueError("`train_steps_per_iteration` must be an integer.")
        self._train_steps_per_iteration = train_steps_per_iteration

    @property
    def estimator(self) -> Any:
        """The Estimator."""
        return self._estimator

    @property
    def eval_metrics(self) -> Any:
        """None unless a subclass sets ``_eval_metrics`` (a ``tf.estimator`` Estimator's metrics
        are its ``eval_metric_ops``)."""
        return self._eval_metrics

    @property
    def train_steps(self) -> Optional[int]:
        """The steps ``train`` runs to (None: forever)."""
        return self._train_steps

    @property
    def eval_steps(self) -> Optional[int]:
        """The steps of one evaluation (None: until its input ends)."""
        return self._eval_steps

    def _set_export_strategies(self, values: Any) -> None:
        if isinstance(values, ExportStrategy):
            values = [values]
        for value in values or ():
            if not isinstance(value, ExportStrategy):
                raise ValueError(
                    "`export_strategies` must be an ExportStrategy, an iterable of "
                    f"ExportStrategy, or `None`, found {value}."
                )
        self._export_strategies = tuple(values or ())

    def extend_train_hooks(self, additional_hooks: list) -> None:
        """Adds hooks to training."""
        self._train_monitors.extend(additional_hooks)

    def reset_export_strategies(self, new_export_strategies: Any = None) -> tuple:
        """Replaces the export strategies; returns the old ones."""
        old = self._export_strategies
        self._set_export_strategies(new_export_strategies)
        return old

    def train(self, delay_secs: Optional[float] = None) -> Any:
        """Trains to ``train_steps``, after ``delay_secs`` (None: 5 s per worker index, at most
        60 s, or by global step with ``delay_workers_by_global_step``); returns the Estimator.
        """
        start = time.time()
        config = self._estimator.config
        if isinstance(config, RunConfig):
            if config.cluster_spec and config.master and config.environment == Environment.LOCAL:
                _log.warning(
                    "ClusterSpec and master are provided, but environment is set to 'local'. "
                    "Set environment to 'cloud' if you intend to use the distributed runtime."
                )
            distributed = config.cluster_spec and config.master
            if distributed and config.environment not in (Environment.LOCAL, Environment.GOOGLE):
                self._start_server()
        elif config.cluster_spec and config.master:
            raise ValueError(
                "For distributed runtime, Experiment class only works with "
                f"tf.contrib.learn.RunConfig for now, but provided {type(config)}"
            )
        extra_hooks = []
        if delay_secs is None:
            task_id = config.task_id or 0
            if self._delay_workers_by_global_step:
                steps = int(8000.0 * math.log(task_id + 1))
                extra_hooks.append(tf.compat.v1.train.GlobalStepWaiterHook(steps))
                delay_secs = 0
            else:
                delay_secs = min(60, task_id * 5)
        if delay_secs > 0:
            _log.info("Waiting %d secs before starting training.", delay_secs - time.time() + start)
            time.sleep(delay_secs)
        return self._call_train(
            input_fn=self._train_input_fn,
            max_steps=self._train_steps,
            hooks=self._train_monitors + extra_hooks,
            saving_listeners=self._saving_listeners,
        )

    def evaluate(self, delay_secs: Optional[float] = None, name: Optional[str] = None) -> dict:
        """Evaluates after ``delay_secs`` (None: ``eval_delay_secs``); returns the metrics."""
        delay_secs = self._eval_delay_secs if delay_secs is None else delay_secs
        if delay_secs:
            _log.info("Waiting %d secs before starting eval.", delay_secs)
            time.sleep(delay_secs)
        return self._call_evaluate(
            input_fn=self._eval_input_fn, name=name or "one_pass", hooks=self._eval_hooks
        )

    def local_run(self) -> tuple:
        """``train_and_evaluate`` with ``local_eval_frequency`` as ``min_eval_frequency``."""
        saved, self._min_eval_frequency = self._min_eval_frequency, self._local_eval_frequency
        try:
            return self.train_and_evaluate()
        finally:
            self._min_eval_frequency = saved

    def _continuous_eval(
        self,
        input_fn: Callable,
        name: str,
        delay_secs: Optional[float],
        throttle_delay_secs: Optional[float],
        evaluate_checkpoint_only_once: bool = True,
        continuous_eval_predicate_fn: Optional[Callable] = None,
        export: bool = True,
    ) -> None:
        predicate_fn = _predicate(continuous_eval_predicate_fn)
        delay_secs = self._eval_delay_secs if delay_secs is None else delay_secs
        if throttle_delay_secs is None:
            throttle_delay_secs = self._continuous_eval_throttle_secs
        if delay_secs:
            _log.info("Waiting %f secs before starting eval.", delay_secs)
            time.sleep(delay_secs)
        previous_path = eval_result = None
        last_warning_time = 0
        while not predicate_fn or predicate_fn(eval_result, checkpoint_path=previous_path):
            if self._has_training_stopped(eval_result):
                _log.info(
                    "Exiting continuous eval, global_step=%s >= train_step=%s",
                    eval_result["global_step"],
                    self._train_steps,
                )
                return
            start = time.time()
            latest_path = tf.compat.v1.train.latest_checkpoint(self._estimator.model_dir)
            error_msg = None
            if not latest_path:
                error_msg = (
                    "Estimator is not fitted yet. "
                    "Will start an evaluation when a checkpoint is ready."
                )
            elif evaluate_checkpoint_only_once and latest_path == previous_path:
                error_msg = "No new checkpoint ready for evaluation."
            if error_msg:
                eval_result = {}
                if time.time() - last_warning_time > 600:
                    _log.warning(error_msg)
                    last_warning_time = time.time()
            else:
                eval_result = self._call_evaluate(
                    input_fn=input_fn,
                    name=name,
                    checkpoint_path=latest_path,
                    hooks=self._eval_hooks,
                )
                eval_result = eval_result or {}
                if export:
                    self._maybe_export(eval_result, checkpoint_path=latest_path)
                last_warning_time = 0
                previous_path = latest_path
            duration = time.time() - start
            if duration < throttle_delay_secs:
                _log.info(
                    "Waiting %f secs before starting next eval run.",
                    throttle_delay_secs - duration,
                )
                time.sleep(throttle_delay_secs - duration)

    def _has_training_stopped(self, eval_result: Optional[dict]) -> bool:
        global_step = (eval_result or {}).get("global_step")
        return bool(global_step and self._train_steps and global_step >= self._train_steps)

    def continuous_eval(
        self,
        delay_secs: Optional[float] = None,
        throttle_delay_secs: Optional[float] = None,
        evaluate_checkpoint_only_once: bool = True,
        continuous_eval_predicate_fn: Optional[Callable] = None,
        name: str = "continuous",
    ) -> None:
        """Evaluates each new checkpoint until training reaches ``train_steps`` (or the
        predicate says stop), exporting each."""
        self._continuous_eval(
            self._eval_input_fn,
            name,
            delay_secs,
            throttle_delay_secs,
            evaluate_checkpoint_only_once,
            continuous_eval_predicate_fn,
        )

    def continuous_eval_on_train_data(
        self,
        delay_secs: Optional[float] = None,
        throttle_delay_secs: Optional[float] = None,
        continuous_eval_predicate_fn: Optional[Callable] = None,
        name: str = "continuous_on_train_data",
    ) -> None:
        """``continuous_eval`` on the training input, without exports."""
        self._continuous_eval(
            self._train_input_fn,
            name,
            delay_secs,
            throttle_delay_secs,
            continuous_eval_predicate_fn=continuous_eval_predicate_fn,
            export=False,
        )

    def train_and_evaluate(self) -> tuple:
        """Trains, evaluating each new checkpoint every ``min_eval_frequency`` steps (0: only
        at the end), then evaluates and exports; returns ``(eval_result, export_results)``."""
        saved_monitors = self._train_monitors
        config = self._estimator.config
        intermediate_export = self._checkpoint_and_export and (
            config.save_checkpoints_secs or config.save_checkpoints_steps
        )
        try:
            self._train_monitors = list(self._train_monitors)
            if intermediate_export:
                eval_fn = functools.partial(
                    self._call_evaluate, input_fn=self._eval_input_fn, hooks=self._eval_hooks
                )
                listener = _EvalAndExportListener(
                    eval_fn, self._maybe_export, self._estimator.model_dir
                )
                self._train_monitors.append(
                    tf.compat.v1.train.CheckpointSaverHook(
                        self._estimator.model_dir,
                        save_secs=config.save_checkpoints_secs,
                        save_steps=config.save_checkpoints_steps,
                        listeners=[listener],
                    )
                )
            elif self._min_eval_frequency:
                self._train_monitors.append(
                    ValidationMonitor(
                        input_fn=self._eval_input_fn,
                        eval_steps=self._eval_steps,
                        every_n_steps=self._min_eval_frequency,
                        check_interval_secs=self._check_interval_secs,
                        hooks=self._eval_hooks,
                    )
                )
            self.train(delay_secs=0)
        finally:
            self._train_monitors = saved_monitors
        if intermediate_export:
            return listener.eval_result, listener.export_results
        eval_result = self._call_evaluate(input_fn=self._eval_input_fn, hooks=self._eval_hooks)
        return eval_result, self._maybe_export(eval_result)

    def continuous_train_and_eval(
        self, continuous_eval_predicate_fn: Optional[Callable] = None
    ) -> tuple:
        """Trains ``train_steps_per_iteration`` steps (default: a tenth of ``train_steps``, or
        1000), evaluates and exports, in turns, until ``train_steps`` (or the predicate says
        stop); returns the last ``(eval_result, export_results)``."""
        predicate_fn = _predicate(continuous_eval_predicate_fn)
        export_results = latest_checkpoint = eval_result = None
        steps = self._train_steps_per_iteration
        if steps is None:
            steps = 1000 if self._train_steps is None else int(self._train_steps / 10)
        while not predicate_fn or predicate_fn(
            eval_result, checkpoint_path=latest_checkpoint if eval_result else None
        ):
            if self._has_training_stopped(eval_result):
                _log.info("Stop training model as max steps reached")
                break
            _log.info("Training model for %s steps", steps)
            self._call_train(
                input_fn=self._train_input_fn,
                steps=steps,
                hooks=self._train_monitors,
                saving_listeners=self._saving_listeners,
            )
            _log.info("Evaluating model now.")
            latest_checkpoint = tf.compat.v1.train.latest_checkpoint(self._estimator.model_dir)
            eval_result = self._call_evaluate(
                input_fn=self._eval_input_fn,
                name="one_pass",
                checkpoint_path=latest_checkpoint,
                hooks=self._eval_hooks,
            )
            export_results = self._maybe_export(eval_result)
        return eval_result, export_results

    def _maybe_export(self, eval_result: Any, checkpoint_path: Optional[str] = None) -> list:
        export_dir_base = os.path.join(self._estimator.model_dir, "export")
        return [
            strategy.export(
                self._estimator,
                os.path.join(export_dir_base, strategy.name),
                checkpoint_path=checkpoint_path,
                eval_result=eval_result,
            )
            for strategy in self._export_strategies
        ]

    def run_std_server(self) -> None:
        """Starts this task's TensorFlow server and joins it (a parameter server's schedule)."""
        self._start_server().join()

    def test(self) -> dict:
        """Trains one step, evaluates one step and exports; returns the evaluation."""
        self._call_train(
            input_fn=self._train_input_fn,
            steps=1,
            hooks=self._train_monitors,
            saving_listeners=self._saving_listeners,
        )
        eval_result = self._call_evaluate(input_fn=self._eval_input_fn, steps=1, name="one_pass")
        self._maybe_export(eval_result)
        return eval_result

    def _start_server(self) -> Any:
        config = self._estimator.config
        if not (config.cluster_spec and config.task_type and config.master) or (
            config.task_id is None
        ):
            raise ValueError(
                "Could not start server; be sure to specify cluster_spec, task_type, master, "
                "and task in RunConfig or set the TF_CONFIG environment variable."
            )
        server = tf.distribute.Server(
            config.cluster_spec,
            job_name=config.task_type,
            task_index=config.task_id,
            config=getattr(config, "tf_config", None),
            start=False,
        )
        server.start()
        return server

    def _call_train(self, input_fn, steps=None, hooks=None, max_steps=None, saving_listeners=None):
        # TF 1.15 handed monitors their Estimator, and ran them on the chief only.
        hooks = [
            hook
            for hook in hooks or ()
            if not isinstance(hook, ValidationMonitor) or self._estimator.config.is_chief
        ]
        for hook in hooks:
            if isinstance(hook, ValidationMonitor):
                hook.set_estimator(self._estimator)
        return self._estimator.train(
            input_fn=input_fn,
            steps=steps,
            max_steps=max_steps,
            hooks=hooks,
            saving_listeners=saving_listeners,
        )

    def _call_evaluate(self, input_fn, steps=..., name=None, checkpoint_path=None, hooks=None):
        return self._estimator.evaluate(
            input_fn=input_fn,
            steps=self._eval_steps if steps is ... else steps,
            name=name,
            checkpoint_path=checkpoint_path,
            hooks=hooks,
        )


def _checked_experiment_fn(experiment_fn: Callable, require_hparams: bool = False) -> Callable:
    """``experiment_fn`` checking that its Estimator was given ``run_config`` (its ``uid``)."""

    def wrapped(run_config: Any, hparams: Any) -> Experiment:
        if not isinstance(run_config, RunConfig):
            raise ValueError("`run_config` must be `tf.contrib.learn.RunConfig` instance")
        if not run_config.model_dir:
            raise ValueError("Must specify a model directory `model_dir` in `run_config`.")
        if hparams is not None and not isinstance(hparams, HParams):
            raise ValueError("`hparams` must be `HParams` instance")
        if require_hparams and hparams is None:
            raise ValueError("`hparams` cannot be `None`.")
        expected_uid = run_config.uid()
        experiment = experiment_fn(run_config, hparams)
        if not isinstance(experiment, Experiment):
            raise TypeError(
                "Experiment builder did not return an Experiment instance, "
                f"got {type(experiment)} instead."
            )
        config = experiment.estimator.config
        if not hasattr(config, "uid"):
            raise RuntimeError(
                "Pass `run_config` argument of the `experiment_fn` to the Estimator in "
                "Experiment. It is likely a different `RunConfig` is passed to `Estimator` or "
                "the `config` constructor argument in `Estimator` is not set."
            )
        if config.uid() != expected_uid:
            raise RuntimeError(
                "`RunConfig` instance is expected to be used by the `Estimator` inside the "
                f"`Experiment`. expected {expected_uid}, but got {config.uid()}"
            )
        return experiment

    return wrapped


def _default_schedule(config: Any) -> str:
    """TF 1.15's schedule for a task: one machine or a master trains and evaluates, a ps
    serves, a worker trains."""
    spec = config.cluster_spec if config else None
    if not spec or sum(len(spec.job_tasks(job)) for job in spec.jobs) <= 1:
        return "train_and_evaluate"
    schedules = {"master": "train_and_evaluate", "ps": "run_std_server", "worker": "train"}
    if not config.task_type:
        raise ValueError("Must specify a schedule")
    if config.task_type not in schedules:
        raise ValueError(f"No default schedule for task type: {config.task_type}")
    return schedules[config.task_type]


def run(
    experiment_fn: Callable,
    output_dir: Optional[str] = None,
    schedule: Optional[str] = None,
    run_config: Optional[RunConfig] = None,
    hparams: Optional[HParams] = None,
) -> Any:
    """TF 1.15's ``learn_runner.run``: builds an ``Experiment`` and runs its ``schedule``.

    Args:
      experiment_fn: ``(run_config, hparams) -> Experiment``, or ``(output_dir) ->
        Experiment`` with ``output_dir``.
      output_dir: the model directory of the older signature.
      schedule: the Experiment method to run (default: ``train_and_evaluate`` on one machine;
        by task type in a cluster).
      run_config: a ``RunConfig`` with ``model_dir``, to be given to the Estimator.
      hparams: an ``HParams``, given to ``experiment_fn``.

    Returns:
      What the schedule returns.

    Raises:
      ValueError: both or neither of ``output_dir`` and ``run_config``, no ``model_dir``, or
        a ``schedule`` the Experiment does not have.
      TypeError: ``experiment_fn`` is not callable or returns no Experiment, or ``schedule``
        names a non-method.
      RuntimeError: the Estimator was not given ``run_config``.

    Example:

        run(experiment_fn, run_config=RunConfig(model_dir="/tmp/run"), schedule="train")
    """
    if output_dir is not None and run_config is not None:
        raise ValueError("Cannot provide both `output_dir` and `run_config`")
    if output_dir is None and run_config is None:
        raise ValueError("Must set value for `output_dir` or `run_config`")
    if not callable(experiment_fn):
        raise TypeError(f'Experiment builder "{experiment_fn}" is not callable.')
    if run_config is not None:
        experiment = _checked_experiment_fn(experiment_fn)(run_config=run_config, hparams=hparams)
    else:
        if not output_dir:
            raise ValueError("Must specify an output directory")
        if hparams is not None:
            raise ValueError("Must set `hparams` as None for `experiment_fn` with `output_dir`.")
        experiment = experiment_fn(output_dir=output_dir)
        if not isinstance(experiment, Experiment):
            raise TypeError(
                "Experiment builder did not return an Experiment instance, "
                f"got {type(experiment)} instead."
            )
    schedule = schedule or _default_schedule(run_config or experiment.estimator.config)
    task = getattr(experiment, schedule, None)
    if not callable(task):
        allowed = [n for n in dir(experiment) if not n.startswith("_")]
        allowed = ", ".join(n for n in allowed if callable(getattr(experiment, n)))
        what = "non-existent task" if task is None else "non-callable member"
        error = ValueError if task is None else TypeError
        raise error(
            f"Schedule references {what} {schedule}: allowed values for this experiment are "
            f"{allowed}."
        )
    return task()


def tune(experiment_fn: Callable, tuner: Any) -> None:
    """TF 1.15's ``learn_runner.tune``: runs ``experiment_fn`` for each of ``tuner``'s trials.

    Args:
      experiment_fn: ``(run_config, hparams) -> Experiment``.
      tuner: an object with ``next_trial()`` and ``run_experiment(experiment_fn)``.

    Example:

        tune(experiment_fn, my_tuner)
    """
    while tuner.next_trial():
        tuner.run_experiment(_checked_experiment_fn(experiment_fn, require_hparams=True))
