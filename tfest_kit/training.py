"""``train_and_evaluate`` with sane defaults over the official ``tf.estimator.train_and_evaluate``.

One loop serves one machine and every task of a ``TF_CONFIG`` cluster (``_TaskExecutor``).
"""

import contextlib
import json
import os
import signal
import time
from collections.abc import Iterable
from typing import Any, Callable, Optional, Union

import numpy as np

from tfest_kit import _model_dir
from tfest_kit._model_dir import ModelDirLockedError, checkpoint_step, metrics_by_step, saved_step
from tfest_kit._task_guard import EvalGuard
from tfest_kit._tf import ContinuousEvalListener, EvalStatus, TrainingExecutor, tf
from tfest_kit.cluster import validate_tf_config
from tfest_kit.hooks import PreemptionHook, fill_progress_totals

__all__ = ["ModelDirLockedError", "latest_eval_metrics", "train_and_evaluate", "writer_lock"]

_STOPPED_EARLY_FILE = "stopped_early.json"  # in model_dir: a cluster's early stop, by its chief
# The servers _TaskExecutor started in this process, by (cluster, task type, task index); a
# server cannot be stopped, and it serves every graph of its task.
_SERVERS: dict[tuple[str, str, int], Any] = {}
_SPECS = (tf.estimator.TrainSpec, tf.estimator.EvalSpec)


def _preempted(train_hooks: list) -> bool:
    return any(getattr(hook, "preempted", None) for hook in train_hooks)


def _stopped_early(train_hooks: list) -> bool:
    return any(getattr(hook, "stopped_early", False) for hook in train_hooks)


class _EndAfterEarlyStop(ContinuousEvalListener):
    """Ends the evaluator task once it evaluated the step the chief stopped early at. The official
    evaluator waits for a checkpoint at ``max_steps``, which then never comes. A record older than
    the evaluator's start (a step not above its first checkpoint) is ignored."""

    def __init__(self, model_dir: str) -> None:
        self._path = os.path.join(model_dir, _STOPPED_EARLY_FILE)
        start = saved_step(model_dir)
        self._start_step, self._evaluated = (-1 if start is None else start), -1
        self.ended_at: Optional[int] = None

    def after_eval(self, eval_result) -> bool:
        if eval_result.status == EvalStatus.EVALUATED:
            self._evaluated = int(eval_result.metrics[tf.GraphKeys.GLOBAL_STEP])
        try:
            with tf.gfile.GFile(self._path) as f:
                stop = int(json.load(f)["global_step"])
        except (tf.errors.NotFoundError, ValueError, KeyError, TypeError):
            return True
        if stop <= self._start_step or self._evaluated < stop:
            return True
        tf.logging.info(f"Training stopped early at global step {stop}, which is evaluated: done")
        self.ended_at = self._evaluated
        return False


class _EvaluationInterrupted(Exception):
    """A training ``PreemptionHook``'s signal arrived during an evaluation."""


class _Preemption(ContinuousEvalListener, tf.estimator.SessionRunHook):
    """Local training: no evaluation once a ``PreemptionHook`` has fired, unless at max_steps. As a
    listener it skips the final evaluation (which can outlast a SIGTERM's grace period); as an eval
    hook it abandons a running one: locally Estimator evaluates inside ``train()``, where the
    training hooks do not run, and Ctrl-C waited for the whole eval set."""

    def __init__(self, train_hooks: list, model_dir: str, max_steps: int) -> None:
        self._train_hooks, self._model_dir, self._max_steps = train_hooks, model_dir, max_steps

    def _at_max_steps(self) -> bool:
        step = saved_step(self._model_dir)
        return step is not None and self._max_steps is not None and step >= self._max_steps

    def before_eval(self) -> bool:
        return not _preempted(self._train_hooks) or self._at_max_steps()

    def begin(self) -> None:
        self._final = self._at_max_steps()

    def after_run(self, run_context, run_values) -> None:
        if not self._final and _preempted(self._train_hooks):
            raise _EvaluationInterrupted()


class _FinalAfterEarlyStop(tf.estimator.Exporter):
    """An exporter asked once more, as the final export, after an early stop. Estimator sets
    ``is_the_final_export`` only at ``max_steps``, which an early stop never reaches: a
    ``FinalExporter`` exported nothing. Exporters that ignore the flag are not asked."""

    def __init__(self, exporter: tf.estimator.Exporter) -> None:
        self.exporter = exporter
        self._last_call, self._last_result = None, None  # export()'s arguments, its result

    @property
    def name(self) -> str:
        return self.exporter.name

    def export(self, estimator, export_path, checkpoint_path, eval_result, is_the_final_export):
        call = dict(estimator=estimator, export_path=export_path, eval_result=eval_result)
        call.update(checkpoint_path=checkpoint_path, is_the_final_export=is_the_final_export)
        self._last_call = call
        self._last_result = _model_dir.export_unless_vanished(
            lambda: self.exporter.export(**self._last_call), self.name, export_path, checkpoint_path
        )
        return self._last_result

    def export_as_final(self, step: int) -> None:
        call = self._last_call
        if (
            call is None
            or call["is_the_final_export"]
            or self._last_result is not None
            or isinstance(self.exporter, (tf.estimator.LatestExporter, tf.estimator.BestExporter))
            or (call["eval_result"] or {}).get(tf.GraphKeys.GLOBAL_STEP) != step
        ):
            return
        tf.logging.info(
            f"Training stopped early at global step {step}: exporter {self.name!r} makes the "
            "final export"
        )
        self.export(**{**call, "is_the_final_export": True})


class _TaskExecutor(TrainingExecutor):
    """The official executor of a cluster task, with what its loop lacks. The evaluator skips a
    checkpoint the chief deleted under it (the official loop ended); a task's server is reused by
    the next executor of the task in this process (the official one failed to start a second)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # the official executor's arguments
        self._vanished: set[str] = set()
        super().__init__(*args, **kwargs)

    def _execute_evaluator_once(self, evaluator, listener, throttle_secs):  # called positionally
        start = time.time()
        # Only the vanishing of this turn's checkpoint (or a later one) is skipped, not an
        # error about another file (an --init_checkpoint).
        newest = self._estimator.latest_checkpoint()
        try:
            return super()._execute_evaluator_once(evaluator, listener, throttle_secs)
        except (tf.errors.NotFoundError, ValueError) as e:
            path = _model_dir.vanished_checkpoint(e, self._estimator.model_dir)
            newest = newest or path  # without one before, whichever vanished is this turn's
            same_dir = path and os.path.dirname(path) == os.path.dirname(newest)
            older = same_dir and checkpoint_step(path) < checkpoint_step(newest)
            if not same_dir or older or path in self._vanished:
                raise  # the same one again: the checkpoint state names files gone for good
            self._vanished.add(path)
            tf.logging.warning(
                f"Evaluator: checkpoint {path} was deleted while being evaluated; it is skipped "
                f"and the next checkpoint is evaluated ({type(e).__name__}). {_model_dir.KEEP_MORE}"
            )
            time.sleep(max(0.0, throttle_secs - (time.time() - start)))  # as the official loop
            return None, False

    def _start_std_server(self, config):
        task = f"{config.task_type}:{config.task_id}"
        key = (json.dumps(config.cluster_spec.as_dict(), sort_keys=True), task)
        if key in _SERVERS:
            tf.logging.info("Task %s: reusing the server this process started for it", task)
            return _SERVERS[key]
        try:
            server = super()._start_std_server(config)
        except tf.errors.UnknownError as e:  # "Could not start gRPC server"
            address = config.cluster_spec.task_address(config.task_type, config.task_id)
            raise OSError(
                f"Task {task} cannot listen on {address} (TF_CONFIG): {e.message}. Another "
                "process holds the port (an earlier run's task?): stop it, or use a free port"
            ) from None
        if server is not None:  # None: a one-task cluster, which needs no server
            _SERVERS[key] = server
        return server


def _run(estimator, train_spec, eval_spec, train_hooks: list) -> tuple[Any, Optional[int]]:
    """The official call's result, and the early-stop step when this process evaluated it."""
    config = estimator.config
    if getattr(config, "_distribute_coordinator_mode", None):
        return tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec), None
    if not config.cluster_spec and config.task_type != "evaluator":
        listener = _Preemption(train_hooks, estimator.model_dir, train_spec.max_steps)
        result = TrainingExecutor(
            estimator, train_spec, eval_spec, continuous_eval_listener=listener
        ).run()
        if _stopped_early(train_hooks) and not _preempted(train_hooks) and result[0]:
            return result, int(result[0][tf.GraphKeys.GLOBAL_STEP])
        return result, None
    if config.task_type != "evaluator":
        return _TaskExecutor(estimator, train_spec, eval_spec).run(), None
    if config.task_id > 0:  # the official check, before anything runs
        raise ValueError(
            "For distributed training, there can only be one `evaluator` task (with task id "
            f"0).  Given task id {config.task_id}"
        )
    listener = _EndAfterEarlyStop(estimator.model_dir)
    executor = _TaskExecutor(estimator, train_spec, eval_spec, continuous_eval_listener=listener)
    return executor.run(), listener.ended_at


def latest_eval_metrics(eval_dir: str) -> dict:
    """Reads the newest evaluation's scalar metrics from the event files in ``eval_dir``.

    Args:
      eval_dir: an Estimator eval directory, e.g. ``estimator.eval_dir(name)``.

    Returns:
      ``{metric: value, "global_step": step}`` for the highest step, or ``{}`` (with a warning).

    Example:

        latest_eval_metrics(est.eval_dir())["loss"]
    """
    if not (metrics := _newest_metrics(eval_dir)):
        tf.logging.warning("No eval metrics found in %s", eval_dir)
    return metrics


def _newest_metrics(eval_dir: str) -> dict:
    by_step = metrics_by_step(eval_dir)
    step = max(by_step, default=None)
    return {**by_step[step], "global_step": step} if by_step else {}


def train_and_evaluate(
    estimator: tf.estimator.Estimator,
    train_spec: Union[tf.estimator.TrainSpec, Callable],
    eval_spec: Union[tf.estimator.EvalSpec, Callable],
    *,
    max_steps: Optional[int] = None,
    eval_steps: Optional[int] = None,
    hooks: Iterable[tf.estimator.SessionRunHook] = (),
    eval_hooks: Iterable[tf.estimator.SessionRunHook] = (),
    exporters: Any = (),
    throttle_secs: Optional[float] = None,
    start_delay_secs: Optional[float] = None,
    eval_name: Optional[str] = None,
) -> dict:
    """Trains to ``max_steps``, evaluating on each new checkpoint; returns the final metrics.

    Wraps ``tf.estimator.train_and_evaluate`` (locally or as this ``TF_CONFIG`` task) and takes
    its call unchanged; the short form takes input_fns, evaluating the whole eval set on every
    checkpoint. Unlike it: returns the final metrics (a cluster task: the newest, or ``{}``);
    names an input that ends before ``max_steps``; after an early stop exports the last
    checkpoint as final and ends the evaluator; skips evaluating after a ``PreemptionHook``
    fired and a checkpoint deleted under the evaluator; locks model_dir and resumes from the
    newest intact checkpoint; progress hooks count to ``max_steps``.

    Args:
      estimator: a ``tf.estimator.Estimator`` (or subclass, e.g. ``tpu.TPUEstimator``).
      train_spec: a ``tf.estimator.TrainSpec``, or the training ``input_fn`` (should repeat).
      eval_spec: a ``tf.estimator.EvalSpec``, or the eval ``input_fn`` (must end if
        ``eval_steps=None``).
      max_steps: global step to train to (input_fns only, as are the arguments below).
      eval_steps: number of eval batches, or ``None`` for the whole eval set.
      hooks: training ``SessionRunHook``s (or one), e.g. ``hooks.early_stopping(...)``.
      eval_hooks: evaluation ``SessionRunHook``s (other objects than ``hooks``).
      exporters: a ``tf.estimator.Exporter`` or a list, e.g. ``serving.best_exporter(...)``.
      throttle_secs: fewest seconds between evaluations (0; at least 1 on an evaluator).
      start_delay_secs: seconds an evaluator task waits before its first evaluation (0).
      eval_name: ``EvalSpec`` name; metrics go to ``model_dir/eval_<name>``.

    Returns:
      The final evaluation metrics as plain Python numbers, including ``"global_step"``.

    Raises:
      TypeError: ``estimator`` is not an Estimator; specs mixed with input_fns or keywords;
        input_fns without ``max_steps``.
      ValueError: a malformed ``TF_CONFIG``; an input that yields no batch; an eval input that
        never ends with ``eval_steps=None``. ``TrainSpec`` / ``EvalSpec``'s own errors.
      TfestKitError: another process trains into ``model_dir``, no intact checkpoint, a full
        disk (docs/model_dir.md).

    Example:

        metrics = train_and_evaluate(est, train_fn, eval_fn, max_steps=1000,
                                     hooks=[hooks.early_stopping(est, "loss", patience_steps=200)])
        metrics = train_and_evaluate(est, tf.estimator.TrainSpec(train_fn, max_steps=1000),
                                     tf.estimator.EvalSpec(eval_fn, steps=None))
    """
    if not isinstance(estimator, tf.estimator.Estimator):
        raise TypeError(f"`estimator` must be a tf.estimator.Estimator. Got: {estimator!r}")
    keywords = dict(max_steps=max_steps, eval_steps=eval_steps, hooks=hooks or None)
    keywords.update(eval_hooks=eval_hooks or None, exporters=exporters or None, eval_name=eval_name)
    keywords.update(throttle_secs=throttle_secs, start_delay_secs=start_delay_secs)
    given = sorted(name for name, value in keywords.items() if value is not None)
    specs = [isinstance(spec, kind) for spec, kind in zip((train_spec, eval_spec), _SPECS)]
    one = tf.train.SessionRunHook  # hooks=hook: "object is not iterable" before
    hooks, eval_hooks = ([h] if isinstance(h, one) else h for h in (hooks, eval_hooks))
    if any(specs) and not (all(specs) and not given):
        raise TypeError(
            "`train_and_evaluate` takes a TrainSpec with an EvalSpec (the official call), or "
            "two input_fns with `max_steps` and the keywords. Got: "
            f"{type(train_spec).__name__}, {type(eval_spec).__name__}, keywords {given}"
        )
    if not any(specs):
        if max_steps is None:
            raise TypeError("`max_steps` is required with input_fns (or pass a TrainSpec).")
        train_spec = tf.estimator.TrainSpec(train_spec, max_steps=max_steps, hooks=list(hooks))
        evaluation = dict(steps=eval_steps, name=eval_name, hooks=list(eval_hooks))
        delays = dict(start_delay_secs=start_delay_secs or 0, throttle_secs=throttle_secs or 0)
        eval_spec = tf.estimator.EvalSpec(eval_spec, exporters=exporters, **evaluation, **delays)
    train_hooks = list(train_spec.hooks)
    then = "" if estimator.config.cluster_spec else "final evaluation"  # (the evaluator's)
    fill_progress_totals(train_hooks, train_spec.max_steps, estimator, then=then)
    # A malformed TF_CONFIG otherwise surfaces as a KeyError deep in the distribute coordinator.
    validate_tf_config(workers_only_allowed=estimator.config.train_distribute is not None)
    written = estimator.eval_dir(eval_spec.name)  # what early_stopping reads, else it never fires
    if others := {getattr(hook, "eval_dir", written) for hook in train_hooks} - {written}:
        raise ValueError(
            f"early_stopping reads {others.pop()}, but this run's evaluations go to {written}: "
            f"make it for this estimator with eval_name={eval_spec.name!r}"
        )
    # With 0 an evaluator's wait for the next checkpoint spins, logging on every turn.
    throttle = max(eval_spec.throttle_secs, 1 if estimator.config.task_type == "evaluator" else 0)
    exporters = [_FinalAfterEarlyStop(e) for e in eval_spec.exporters]  # EvalSpec checked them
    guard = EvalGuard(eval_spec.steps, "eval_steps", "eval_input_fn")
    preemption = _Preemption(train_hooks, estimator.model_dir, train_spec.max_steps)
    guarded = (*eval_spec.hooks, guard, preemption)
    eval_spec = eval_spec._replace(hooks=guarded, exporters=exporters, throttle_secs=throttle)
    with _model_dir.training(estimator, train_spec.max_steps) as step_counter:
        train_spec = train_spec._replace(hooks=(step_counter, *train_hooks))
        return _train_and_evaluate(estimator, train_spec, eval_spec, train_hooks, step_counter)


def writer_lock(model_dir: str) -> contextlib.AbstractContextManager:
    """Holds ``model_dir``'s writer lock in a ``with`` block, where ``train_and_evaluate`` would.

    Take it before writing into ``model_dir`` (data caches, records): a second run is then
    refused with ``ModelDirLockedError`` before it writes a file. Nested holds are allowed; on a
    ``TF_CONFIG`` cluster only the chief (TF1's ``master``; worker 0 without one) takes it.

    Example:

        with training.writer_lock(model_dir):
            run(model_dir)  # writes model_dir/data, trains, exports
    """
    validate_tf_config(workers_only_allowed=True)
    held = _model_dir.writes_checkpoints()
    return _model_dir.writer_lock(model_dir) if held else contextlib.nullcontext()


def _train_and_evaluate(estimator, train_spec, eval_spec, train_hooks, counter) -> dict:
    model_dir, config = estimator.model_dir, estimator.config
    distributed_chief = bool(config.cluster_spec.jobs and config.is_chief)
    early_stop_file = os.path.join(model_dir, _STOPPED_EARLY_FILE)
    if distributed_chief and tf.gfile.Exists(early_stop_file):
        tf.gfile.Remove(early_stop_file)  # it would end this run's evaluator at that step
    how = "interrupted"  # or stopped by the signal that arrived during an evaluation
    try:
        result, early_stop_step = _run(estimator, train_spec, eval_spec, train_hooks)
    except _EvaluationInterrupted:
        result, early_stop_step = (None, None), None  # as a local run returns
        fired = [getattr(h, "preempted", None) for h in train_hooks]
        names = [signal.Signals(number).name for number in fired if number]
        how = f"stopped by {names[0] if names else 'A signal'} during an evaluation"
        for hook in train_hooks:  # puts back the signal handlers: the evaluation skipped end()
            if isinstance(hook, PreemptionHook):
                hook.end(None)
    if distributed_chief and _stopped_early(train_hooks):
        step = saved_step(model_dir)
        with tf.gfile.GFile(early_stop_file + ".tmp", "w") as f:
            f.write(json.dumps({"global_step": step}))
        tf.gfile.Rename(early_stop_file + ".tmp", early_stop_file, overwrite=True)
        tf.logging.info(f"Training stopped early at global step {step}: noted in {early_stop_file}")
    if early_stop_step is not None:
        for exporter in eval_spec.exporters:  # the _FinalAfterEarlyStop wrappers
            exporter.export_as_final(early_stop_step)
    local = isinstance(result, tuple)  # the official call returns None on a cluster task
    metrics = result[0] if local else None
    last_step = saved_step(model_dir)
    # Stopped by a signal before its last checkpoint was evaluated (_Preemption).
    evaluated_step = (metrics or {}).get(tf.GraphKeys.GLOBAL_STEP)
    if preempted := _preempted(train_hooks) and (not local or evaluated_step != last_step):
        metrics = _newest_metrics(estimator.eval_dir(eval_spec.name))
        tf.logging.warning(
            f"Training {how} at global step {last_step}: its checkpoint is not evaluated; "
            f"newest eval metrics: step {metrics.get('global_step', 'none')}"
        )
    elif metrics is None and local:  # the checkpoint was already at max_steps
        tf.logging.info("Training was already complete; evaluating the last checkpoint")
        metrics = estimator.evaluate(
            eval_spec.input_fn, steps=eval_spec.steps, hooks=eval_spec.hooks, name=eval_spec.name
        )
    elif metrics is None:
        metrics = latest_eval_metrics(estimator.eval_dir(eval_spec.name))
    metrics = {k: _plain(v) for k, v in metrics.items()}
    if local and not preempted:
        counter.check_ran("train_input_fn")
        # Named: a local training that ended short (Estimator ends it silently).
        final_step, max_steps = metrics.get("global_step"), train_spec.max_steps
        short = None not in (final_step, max_steps) and final_step < max_steps
        if short and not _stopped_early(train_hooks):
            tf.logging.warning(
                f"Training ended at global step {final_step}, before max_steps={max_steps}: "
                "`train_input_fn` ran out of data (or a hook stopped it). To reach max_steps, "
                "repeat the data (e.g. inputs.from_arrays(…, num_epochs=None))."
            )
    if metrics and not preempted:
        shown = {k: f"{v:.6g}" if isinstance(v, float) else v for k, v in sorted(metrics.items())}
        text = " ".join(f"{k}={v}" for k, v in shown.items() if k != "global_step")
        tf.logging.info("Final eval metrics (step %s): %s", metrics.get("global_step"), text)
    return metrics


def _plain(value: Any) -> Any:
    value = value[()] if isinstance(value, np.ndarray) and value.ndim == 0 else value
    return value.item() if isinstance(value, np.generic) else value
