"""``train_and_evaluate`` with sane defaults over the official ``tf.estimator.train_and_evaluate``.

What changes from the official call: evaluation covers the whole eval set unless told
otherwise (``EvalSpec(steps=100)`` silently truncates it), hooks and exporters are plain
arguments, and the final evaluation metrics are returned (and logged on one line) instead of
``(metrics, export_results)`` locally and ``None`` under ``TF_CONFIG``. One loop serves one
machine and every task of a ``TF_CONFIG`` cluster (``_TaskExecutor``).

Example:

    import tfest_kit
    from tfest_kit import serving

    metrics = tfest_kit.train_and_evaluate(
        est, train_input_fn, eval_input_fn, max_steps=2000,
        exporters=[serving.best_exporter(receiver, monitor="accuracy", mode="max")])
    print(metrics["accuracy"])
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import signal
import time
from collections.abc import Iterable
from typing import Any, Callable, Optional

import numpy as np

from tfest_kit import _model_dir
from tfest_kit._checks import check_int, check_number
from tfest_kit._errors import TfestKitError
from tfest_kit._eval_guard import EvalGuard
from tfest_kit._model_dir import metrics_by_step, saved_step
from tfest_kit._tf import (
    ContinuousEvalListener,
    EvalStatus,
    TrainingExecutor,
    tf,
    tf2,
)
from tfest_kit._tf import estimator as tf_estimator
from tfest_kit._vanished_checkpoint import KEEP_MORE, export_unless_vanished, vanished_checkpoint
from tfest_kit.cluster import validate_tf_config
from tfest_kit.hooks import PreemptionHook

__all__ = ["latest_eval_metrics", "train_and_evaluate"]


def _as_list(name: str, value: Any, kind: type) -> list:
    items = [value] if isinstance(value, kind) else list(value or ())
    bad = [v for v in items if not isinstance(v, kind)]
    if bad:
        raise TypeError(f"`{name}` must hold {kind.__name__} instances. Got: {bad!r}")
    return items


# Fewest seconds an evaluator task waits between evaluations.
_EVALUATOR_MIN_THROTTLE_SECS = 1


def _evaluator_throttle(estimator, throttle_secs: float) -> float:
    """``throttle_secs``, raised to a second on an evaluator task.

    There TensorFlow polls for the next checkpoint in a loop that sleeps ``throttle_secs``:
    with 0 it spins on a core and logs "throttle_secs is set as 0" on every turn (tens of
    thousands of lines while the chief trains). In local training 0 means "evaluate each
    checkpoint", which is left as it is.
    """
    throttle_secs = check_number("throttle_secs", throttle_secs, hint="seconds")
    if estimator.config.task_type == "evaluator" and throttle_secs < _EVALUATOR_MIN_THROTTLE_SECS:
        tf.logging.info(
            "Evaluator: throttle_secs=%s raised to %s s, so that waiting for the next "
            "checkpoint does not spin",
            throttle_secs,
            _EVALUATOR_MIN_THROTTLE_SECS,
        )
        return _EVALUATOR_MIN_THROTTLE_SECS
    return throttle_secs


# In model_dir, written by the chief of a distributed run that stopped early:
# {"global_step": the step of the checkpoint training ended with}.
_STOPPED_EARLY_FILE = "stopped_early.json"


def _record_early_stop(model_dir: str) -> None:
    step = saved_step(model_dir)
    path = os.path.join(model_dir, _STOPPED_EARLY_FILE)
    with tf.gfile.GFile(path + ".tmp", "w") as f:
        f.write(json.dumps({"global_step": step}))
    tf.gfile.Rename(path + ".tmp", path, overwrite=True)
    tf.logging.info("Training stopped early at global step %s; recorded in %s", step, path)


def _forget_early_stop(model_dir: str) -> None:
    path = os.path.join(model_dir, _STOPPED_EARLY_FILE)
    if tf.gfile.Exists(path):
        tf.gfile.Remove(path)


def _early_stop_step(path: str) -> Optional[int]:
    try:
        with tf.gfile.GFile(path) as f:
            return int(json.load(f)["global_step"])
    except (tf.errors.NotFoundError, ValueError, KeyError, TypeError):
        return None


class _EndAfterEarlyStop(ContinuousEvalListener):
    """Ends an evaluator task's continuous evaluation once the chief has stopped early.

    Estimator's evaluator exits only after evaluating a checkpoint at ``max_steps``, which
    never comes after an early stop: on a cluster it would wait for one forever. The chief
    records the step its training ended at (``_STOPPED_EARLY_FILE``); the evaluator ends
    once it has evaluated a checkpoint at that step or later. The chief deletes the record
    of an earlier run when it starts; one the evaluator reads before that (a step not above
    the checkpoint that existed when the evaluator started) is ignored. ``ended_at`` is the
    step evaluated last when it ended so, else None.
    """

    def __init__(self, model_dir: str) -> None:
        self._path = os.path.join(model_dir, _STOPPED_EARLY_FILE)
        start = saved_step(model_dir)
        self._start_step = -1 if start is None else start
        self._evaluated = -1
        self.ended_at: Optional[int] = None

    def after_eval(self, eval_result) -> bool:
        if eval_result.status == EvalStatus.EVALUATED:
            self._evaluated = int(eval_result.metrics[tf.GraphKeys.GLOBAL_STEP])
        stop_step = _early_stop_step(self._path)
        if stop_step is None or stop_step <= self._start_step or self._evaluated < stop_step:
            return True
        tf.logging.info(
            "Training stopped early at global step %d, which is evaluated: the evaluator ends",
            stop_step,
        )
        self.ended_at = self._evaluated
        return False


def _preempted(train_hooks: list) -> bool:
    return any(getattr(hook, "preempted", None) for hook in train_hooks)


def _at_max_steps(model_dir: str, max_steps: int) -> bool:
    step = saved_step(model_dir)
    return step is not None and step >= max_steps


class _EvaluationInterrupted(Exception):
    """A training ``PreemptionHook``'s signal arrived during an evaluation."""


class _Preemption(ContinuousEvalListener, tf_estimator.SessionRunHook):
    """Local training: no evaluation once a ``PreemptionHook`` among the hooks has fired.

    As a listener it skips the final evaluation: Estimator evaluates (and exports) the last
    checkpoint however training ended, which can outlast a SIGTERM's grace period and delays
    Ctrl-C. As an eval hook it abandons a running evaluation by an exception (its metrics are
    not written, no exporter runs): locally Estimator evaluates inside ``train()``, where the
    training hooks do not run, and Ctrl-C did nothing until the whole eval set was done. A
    checkpoint at ``max_steps`` is evaluated and exported all the same: no run would follow.

    Args:
      train_hooks: the training hooks, among which the ``PreemptionHook``s.
      model_dir: the Estimator's model_dir.
      max_steps: the step training goes to.
    """

    def __init__(self, train_hooks: list, model_dir: str, max_steps: int) -> None:
        self._train_hooks = train_hooks
        self._model_dir = model_dir
        self._max_steps = max_steps

    def before_eval(self) -> bool:
        return not _preempted(self._train_hooks) or _at_max_steps(self._model_dir, self._max_steps)

    def begin(self) -> None:
        self._final = _at_max_steps(self._model_dir, self._max_steps)

    def after_run(self, run_context, run_values) -> None:
        if not self._final and _preempted(self._train_hooks):
            raise _EvaluationInterrupted()


def _stopped_early(train_hooks: list) -> bool:
    return any(getattr(hook, "stopped_early", False) for hook in train_hooks)


class _FinalAfterEarlyStop(tf_estimator.Exporter):
    """An exporter that is asked once more, as the final export, after an early stop.

    Estimator passes ``is_the_final_export=True`` only with a checkpoint at ``max_steps``,
    which training stopped early never reaches: a ``FinalExporter`` then exported nothing.
    The wrapper remembers its newest call; :meth:`export_as_final` repeats it with the flag
    set when that call was for the checkpoint training ended with and exported nothing.
    Exporters that ignore the flag (``LatestExporter``, ``BestExporter``, tfest_kit's
    ``best_exporter``) are never asked twice.
    """

    def __init__(self, exporter: tf_estimator.Exporter) -> None:
        self.exporter = exporter
        self._last_call: Optional[dict] = None
        self._last_result = None

    @property
    def name(self) -> str:
        return self.exporter.name

    def export(self, estimator, export_path, checkpoint_path, eval_result, is_the_final_export):
        self._last_call = dict(
            estimator=estimator,
            export_path=export_path,
            checkpoint_path=checkpoint_path,
            eval_result=eval_result,
            is_the_final_export=is_the_final_export,
        )
        # An exporter whose checkpoint the chief deleted meanwhile skips it with a warning.
        self._last_result = export_unless_vanished(
            lambda: self.exporter.export(**self._last_call),
            self.name,
            export_path,
            checkpoint_path,
        )
        return self._last_result

    def export_as_final(self, step: int) -> None:
        """Repeats the export of ``step`` as the final one if it exported nothing."""
        call = self._last_call
        if (
            call is None
            or call["is_the_final_export"]
            or self._last_result is not None
            or isinstance(self.exporter, _FLAG_IGNORED_BY)
            or (call["eval_result"] or {}).get(tf.GraphKeys.GLOBAL_STEP) != step
        ):
            return
        tf.logging.info(
            "Training stopped early at global step %d: exporter %r makes the final export",
            step,
            self.name,
        )
        self.export(**{**call, "is_the_final_export": True})


# Exporters whose export does not depend on is_the_final_export.
_FLAG_IGNORED_BY = (tf_estimator.LatestExporter, tf_estimator.BestExporter)


# -- cluster tasks ---------------------------------------------------------------------------

# TensorFlow's evaluator message that comes on every turn of its loop.
_EVERY_TURN = "before starting next eval run"


class _QuietWaits(logging.Filter):
    """Drops TensorFlow's per-turn "Waiting … secs before starting next eval run" while waiting.

    It is kept after an evaluation, where it says how long the evaluator rests. TensorFlow's
    "No new checkpoint ready for evaluation" warning is kept: it comes at most every 10
    minutes, and at TensorFlow's default level it is the sign of life of an evaluator waiting
    for a chief that may be gone.
    """

    def __init__(self) -> None:
        super().__init__()
        self.waiting = False

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.msg if isinstance(record.msg, str) else ""
        return not (self.waiting and _EVERY_TURN in text)


class _NoteWaits(ContinuousEvalListener):
    """Tells ``_QuietWaits`` whether the turn evaluated; says once that the evaluator waits.

    Wraps the executor's listener: the official loop calls ``after_eval`` before it logs
    (and sleeps) "Waiting … before starting next eval run".
    """

    def __init__(self, listener, waits: _QuietWaits, model_dir: str) -> None:
        self._listener = listener
        self._waits = waits
        self._model_dir = model_dir
        self._evaluated: Optional[str] = None

    def before_eval(self) -> bool:
        return self._listener.before_eval()

    def after_eval(self, eval_result) -> bool:
        waiting = eval_result.status != EvalStatus.EVALUATED
        if not waiting:
            self._evaluated = eval_result.checkpoint_path
        elif not self._waits.waiting:
            tf.logging.info(
                "Evaluator: waiting for a new checkpoint in %s (evaluated last: %s)",
                self._model_dir,
                self._evaluated or "none",
            )
        self._waits.waiting = waiting
        return self._listener.after_eval(eval_result)


def _step(path: str) -> int:
    return int(path.rsplit("-", 1)[1])


def _not_older(path: str, newest: Optional[str]) -> bool:
    """Whether checkpoint ``path`` is the turn's newest (or a later one), not an older file."""
    if newest is None:
        return True
    return os.path.dirname(path) == os.path.dirname(newest) and _step(path) >= _step(newest)


class _TaskExecutor(TrainingExecutor):
    """``tf.estimator``'s executor of a cluster task, with what its loop lacks.

    The evaluator skips a checkpoint the chief deleted while it was being evaluated
    (``RunConfig(keep_checkpoint_max=…)``; one warning, the turn throttled as the official
    loop throttles one; the official loop ended there) and logs its wait for a new checkpoint
    once (TensorFlow logs it every turn). A gRPC server that cannot start raises
    ``TfestKitError`` naming the task and its address; a task's server is reused by the next
    executor of the same task in this process (the official one failed to start a second).
    """

    def __init__(self, estimator, train_spec, eval_spec, continuous_eval_listener=None) -> None:
        self._waits = _QuietWaits()
        self._vanished: set[str] = set()
        listener = _NoteWaits(
            continuous_eval_listener or ContinuousEvalListener(),
            self._waits,
            estimator.model_dir,
        )
        super().__init__(estimator, train_spec, eval_spec, continuous_eval_listener=listener)

    def run_evaluator(self):
        # Only while this task evaluates: the filter holds the evaluator loop's state.
        logger = tf2.get_logger()
        logger.addFilter(self._waits)
        try:
            return super().run_evaluator()
        finally:
            logger.removeFilter(self._waits)

    def _execute_evaluator_once(self, evaluator, continuous_eval_listener, throttle_secs):
        start = time.time()
        # The turn evaluates the newest checkpoint (or one the chief writes meanwhile): only
        # its vanishing is skipped, not an error about any other file (an --init_checkpoint).
        newest = self._estimator.latest_checkpoint()
        try:
            return super()._execute_evaluator_once(
                evaluator, continuous_eval_listener, throttle_secs
            )
        except (tf.errors.NotFoundError, ValueError) as e:
            path = vanished_checkpoint(e, self._estimator.model_dir)
            if path is None or not _not_older(path, newest) or path in self._vanished:
                # The same checkpoint again: the checkpoint state names files that are gone
                # for good, which no later turn will fix.
                raise
            self._vanished.add(path)
            tf.logging.warning(
                "Evaluator: checkpoint %s was deleted while it was being evaluated; it is "
                "skipped and the next checkpoint is evaluated (%s). %s",
                path,
                type(e).__name__,
                KEEP_MORE,
            )
            # As the official loop throttles a turn; with no result it then goes on.
            time.sleep(max(0.0, throttle_secs - (time.time() - start)))
            return None, False

    def _start_std_server(self, config):
        # One server per task and process: a program that trains several models one after
        # another (one train_and_evaluate each) runs as the same task each time, and the
        # official call started a second server on the task's port, which failed.
        key = (
            json.dumps(config.cluster_spec.as_dict(), sort_keys=True),
            config.task_type,
            config.task_id,
        )
        if key in _SERVERS:
            tf.logging.info(
                "Task %s:%s: reusing the server this process started for it",
                config.task_type,
                config.task_id,
            )
            return _SERVERS[key]
        try:
            server = super()._start_std_server(config)
        except tf.errors.UnknownError as e:
            if "Could not start gRPC server" not in str(e):
                raise
            task = f"{config.task_type}:{config.task_id}"
            address = config.cluster_spec.task_address(config.task_type, config.task_id)
            port = address.rsplit(":", 1)[-1]
            raise TfestKitError(
                f"Task {task} could not start its gRPC server on {address!r}, its address in "
                f"TF_CONFIG (cluster.{config.task_type}[{config.task_id}]). Check that the "
                f"port is free (`ss -ltnp | grep :{port}`: a task of an earlier run may still "
                "be running; end it or pick another port) and that the host is this machine. "
                f"Got: {type(e).__name__}: {e.message}"
            ) from e
        if server is not None:  # None: a one-task cluster, which needs no server
            _SERVERS[key] = server
        return server


# The servers _TaskExecutor started in this process, by (cluster, task type, task index); a
# server cannot be stopped, and it serves every graph of its task.
_SERVERS: dict[tuple[str, str, int], Any] = {}


def _run(estimator, train_spec, eval_spec, train_hooks: list) -> tuple[Any, Optional[int]]:
    """``tf.estimator.train_and_evaluate`` with the listeners above.

    Returns:
      What the official call returns, and the step training stopped early at when this
      process evaluated it (locally, or as the evaluator), else None.
    """
    config = estimator.config
    if getattr(config, "_distribute_coordinator_mode", None):
        return tf_estimator.train_and_evaluate(estimator, train_spec, eval_spec), None
    if not config.cluster_spec and config.task_type != "evaluator":
        listener = _Preemption(train_hooks, estimator.model_dir, train_spec.max_steps)
        result = TrainingExecutor(
            estimator, train_spec, eval_spec, continuous_eval_listener=listener
        ).run()
        metrics = result[0]
        if _stopped_early(train_hooks) and not _preempted(train_hooks) and metrics:
            return result, int(metrics[tf.GraphKeys.GLOBAL_STEP])
        return result, None
    # As the official call runs a cluster task, through _TaskExecutor: its evaluator skips a
    # checkpoint the chief deleted under it instead of ending, and logs its waits once.
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


def _release_preemption_hooks(train_hooks: list) -> Optional[str]:
    """Puts back the signal handlers; returns the name of the signal received, if any.

    The exception that stopped an evaluation skipped the hooks' ``end()``, where a
    ``PreemptionHook`` puts back the handlers it replaced.
    """
    names = []
    for hook in train_hooks:
        if getattr(hook, "preempted", None):
            names.append(signal.Signals(hook.preempted).name)
        if isinstance(hook, PreemptionHook):
            hook.end(None)
    return names[0] if names else None


def _plain(value: Any) -> Any:
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    return value.item() if isinstance(value, np.generic) else value


def latest_eval_metrics(eval_dir: str) -> dict:
    """Reads the newest evaluation's scalar metrics from the event files in ``eval_dir``.

    Args:
      eval_dir: an Estimator eval directory, e.g. ``estimator.eval_dir()`` (``model_dir/eval``)
        or ``estimator.eval_dir(name)`` (``model_dir/eval_<name>``).

    Returns:
      ``{metric: value, "global_step": step}`` for the highest step found, or ``{}`` when the
      directory has no eval events (a warning says so).

    Example:

        latest_eval_metrics(est.eval_dir())["loss"]
    """
    metrics = _newest_metrics(eval_dir)
    if not metrics:
        tf.logging.warning("No eval metrics found in %s", eval_dir)
    return metrics


def _newest_metrics(eval_dir: str) -> dict:
    by_step = metrics_by_step(eval_dir)
    if not by_step:
        return {}
    step = max(by_step)
    return {**by_step[step], "global_step": step}


_UNSHARED_MODEL_DIR = (
    ". Every task of the cluster (chief, workers, ps, evaluator) must use the same model_dir, "
    "on a file system they all share (e.g. gs://… or NFS): the evaluator writes its metrics "
    "there. If it does, the evaluator has not finished an evaluation yet."
)


def _log_metrics(metrics: dict) -> None:
    if not metrics:
        return
    step = metrics.get("global_step")
    text = " ".join(
        f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v}"
        for k, v in sorted(metrics.items())
        if k != "global_step"
    )
    tf.logging.info("Final eval metrics (step %s): %s", step, text)


@dataclasses.dataclass
class _Plan:
    """``train_and_evaluate``'s arguments, checked."""

    max_steps: int
    eval_steps: Optional[int]
    train_hooks: list
    eval_hooks: list
    exporters: list  # of _FinalAfterEarlyStop
    eval_name: Optional[str]
    start_delay_secs: float
    throttle_secs: float


def train_and_evaluate(
    estimator: tf_estimator.Estimator,
    train_input_fn: Callable,
    eval_input_fn: Callable,
    *,
    max_steps: int,
    eval_steps: Optional[int] = None,
    hooks: Iterable[tf_estimator.SessionRunHook] = (),
    eval_hooks: Iterable[tf_estimator.SessionRunHook] = (),
    exporters: Any = (),
    throttle_secs: float = 600,
    start_delay_secs: float = 120,
    eval_name: Optional[str] = None,
) -> dict:
    """Trains to ``max_steps``, evaluating on each new checkpoint; returns the final metrics.

    Wraps ``tf.estimator.train_and_evaluate(estimator, TrainSpec, EvalSpec)``, so it runs
    locally or, when ``TF_CONFIG`` names a cluster, as this process's task (chief, worker,
    ps, evaluator). Evaluations happen on checkpoints at most every ``throttle_secs``; the
    last checkpoint is always evaluated and passed to the exporters with
    ``is_the_final_export=True``, also after an early stop by ``hooks.early_stopping``
    (where the official call passes False): an exporter that skipped that checkpoint
    (returned None) is called for it once more. ``LatestExporter``, ``BestExporter`` and
    ``serving.best_exporter`` ignore the flag and are not called again.

    After a ``hooks.PreemptionHook`` stopped local training (SIGTERM, Ctrl-C), the checkpoint
    it stopped at is not evaluated or exported, so the program exits within a preemption's
    grace period; the newest metrics in the eval directory are returned (``{}`` if none). An
    evaluation running when the signal arrives stops at its next batch. A checkpoint at
    ``max_steps`` is still evaluated and exported: no later run would make its final export.

    Before training, the chief (or the only process) takes model_dir's writer lock and
    resumes from the newest intact checkpoint (docs/model_dir.md). With ``eval_steps=None``
    and an eval input of unknown length, a warning after 100, 1,000, … batches says the
    input has not ended yet.

    Caveat: in a distributed run only the evaluator computes metrics, and the official call
    returns ``None`` on every task. Here the chief, workers and the evaluator return the
    newest metrics in the eval directory (check ``"global_step"``), or ``{}``. A ps task
    never returns. The evaluator returns once it has evaluated a checkpoint at ``max_steps``
    or, after the chief stopped early, the checkpoint training ended with (the official one
    would wait forever); if training was already complete, the last checkpoint is evaluated
    once more. A checkpoint the chief deleted (``RunConfig(keep_checkpoint_max=…)``) while
    the evaluator evaluated or exported it is skipped with a warning. Every task must use
    the same ``model_dir`` on a file system they all share.

    Args:
      estimator: a ``tf.estimator.Estimator`` (or subclass, e.g. tfest_kit's TPUEstimator).
      train_input_fn: training ``input_fn``; should repeat: ``max_steps`` ends training (one
        that runs out of data ends it earlier, and a warning says so).
      eval_input_fn: evaluation ``input_fn``; with ``eval_steps=None`` it must end (a Dataset
        that repeats forever is refused), and the whole set is evaluated.
      max_steps: global step to train to.
      eval_steps: number of eval batches, or ``None`` for the whole eval set.
      hooks: training ``SessionRunHook``s, e.g. ``tfest_kit.hooks.early_stopping(...)``.
      eval_hooks: evaluation ``SessionRunHook``s.
      exporters: a ``tf.estimator.Exporter`` or a list, e.g. ``serving.best_exporter(...)``.
      throttle_secs: fewest seconds between evaluations (at least 1 on an evaluator task,
        whose wait for the next checkpoint would otherwise spin).
      start_delay_secs: seconds an evaluator task waits before its first evaluation.
      eval_name: ``EvalSpec`` name; metrics go to ``model_dir/eval_<name>``.

    Returns:
      The final evaluation metrics as plain Python numbers, including ``"global_step"``.

    Raises:
      TypeError: for an ``estimator`` that is no Estimator, an input_fn that is not callable,
        a hook or exporter of the wrong type.
      ValueError: for a malformed count, duration or ``TF_CONFIG``; an input that yields no
        batch; an eval Dataset that repeats forever with ``eval_steps=None``; one hook object
        in both ``hooks`` and ``eval_hooks``.
      TfestKitError: for a cluster task whose gRPC server cannot start (naming the task and
        its address), another process training into ``model_dir``, no intact checkpoint,
        a full disk (docs/model_dir.md).
      NanLossError: the loss became NaN (``tfest_kit.hooks.NanLossError``).

    Example:

        metrics = train_and_evaluate(est, train_fn, eval_fn, max_steps=1000,
                                     hooks=[hooks.early_stopping(est, "loss",
                                                                 patience_steps=200)])
    """
    plan = _check_arguments(
        estimator, train_input_fn, eval_input_fn, max_steps, eval_steps, hooks, eval_hooks,
        exporters, throttle_secs, start_delay_secs, eval_name,
    )  # fmt: skip
    # A malformed TF_CONFIG otherwise surfaces as a KeyError deep in the distribute coordinator.
    validate_tf_config(workers_only_allowed=estimator.config.train_distribute is not None)
    with _model_dir.training(estimator) as step_counter:
        return _train_and_evaluate(estimator, train_input_fn, eval_input_fn, plan, step_counter)


def _check_arguments(
    estimator, train_input_fn, eval_input_fn, max_steps, eval_steps, hooks, eval_hooks,
    exporters, throttle_secs, start_delay_secs, eval_name,
) -> _Plan:  # fmt: skip
    if not isinstance(estimator, tf_estimator.Estimator):
        raise TypeError(f"`estimator` must be a tf.estimator.Estimator. Got: {estimator!r}")
    for name, fn in (("train_input_fn", train_input_fn), ("eval_input_fn", eval_input_fn)):
        if not callable(fn):
            raise TypeError(f"`{name}` must be a callable input_fn. Got: {fn!r}")
    max_steps = check_int("max_steps", max_steps)
    eval_steps = check_int("eval_steps", eval_steps, allow_none=True)
    train_hooks = _as_list("hooks", hooks, tf_estimator.SessionRunHook)
    evaluation_hooks = _as_list("eval_hooks", eval_hooks, tf_estimator.SessionRunHook)
    exporter_list = _as_list("exporters", exporters, tf_estimator.Exporter)
    if eval_name is not None and (not isinstance(eval_name, str) or not eval_name):
        raise ValueError(f"`eval_name` must be a non-empty str or None. Got: {eval_name!r}")
    shared = [hook for hook in train_hooks if any(hook is e for e in evaluation_hooks)]
    if shared:
        # Locally, evaluations run inside the training session: a hook in both lists starts
        # its evaluation while its training run is still going, and the two overwrite each
        # other's state.
        raise ValueError(
            f"The same {type(shared[0]).__name__} object is in both `hooks` and `eval_hooks`. "
            "Pass a separate instance to each, e.g. eval_hooks=[ProgressHook(…)] next to "
            "hooks=[ProgressHook(…)]."
        )
    return _Plan(
        max_steps=max_steps,
        eval_steps=eval_steps,
        train_hooks=train_hooks,
        eval_hooks=evaluation_hooks,
        exporters=[_FinalAfterEarlyStop(e) for e in exporter_list],
        eval_name=eval_name,
        start_delay_secs=check_number("start_delay_secs", start_delay_secs, hint="seconds"),
        throttle_secs=_evaluator_throttle(estimator, throttle_secs),
    )


def _specs(estimator, train_input_fn, eval_input_fn, plan: _Plan, step_counter) -> tuple:
    """The official ``TrainSpec`` and ``EvalSpec``, with tfest_kit's hooks added."""
    train_spec = tf_estimator.TrainSpec(
        train_input_fn, max_steps=plan.max_steps, hooks=[*plan.train_hooks, step_counter]
    )
    plan.eval_hooks += [
        EvalGuard(plan.eval_steps, "eval_steps", "eval_input_fn"),
        _Preemption(plan.train_hooks, estimator.model_dir, plan.max_steps),
    ]
    eval_spec = tf_estimator.EvalSpec(
        eval_input_fn,
        steps=plan.eval_steps,
        name=plan.eval_name,
        hooks=plan.eval_hooks,
        exporters=plan.exporters,
        start_delay_secs=plan.start_delay_secs,
        throttle_secs=plan.throttle_secs,
    )
    return train_spec, eval_spec


def _train_and_evaluate(estimator, train_input_fn, eval_input_fn, plan: _Plan, counter) -> dict:
    """train_and_evaluate once its arguments are checked and model_dir is ready to train into."""
    start_step = saved_step(estimator.model_dir)
    train_spec, eval_spec = _specs(estimator, train_input_fn, eval_input_fn, plan, counter)
    distributed_chief = bool(estimator.config.cluster_spec.jobs and estimator.config.is_chief)
    if distributed_chief:
        # An earlier run's record would end this run's evaluator at that step.
        _forget_early_stop(estimator.model_dir)
    interrupted_evaluation = None  # the signal that stopped an evaluation
    try:
        result, early_stop_step = _run(estimator, train_spec, eval_spec, plan.train_hooks)
    except _EvaluationInterrupted:
        result, early_stop_step = (None, None), None  # as a local run returns
        interrupted_evaluation = _release_preemption_hooks(plan.train_hooks) or "A signal"
    if distributed_chief and _stopped_early(plan.train_hooks):
        _record_early_stop(estimator.model_dir)
    if early_stop_step is not None:
        for exporter in plan.exporters:
            exporter.export_as_final(early_stop_step)
    local = isinstance(result, tuple)  # the official call returns None on a cluster task
    metrics = result[0] if local else None
    last_step = saved_step(estimator.model_dir)
    # Stopped by a signal before its last checkpoint was evaluated (_Preemption): a
    # checkpoint at max_steps is evaluated all the same.
    preempted = (
        local
        and _preempted(plan.train_hooks)
        and (metrics or {}).get(tf.GraphKeys.GLOBAL_STEP) != last_step
    )
    if preempted:
        metrics = _newest_metrics(estimator.eval_dir(plan.eval_name))
        _log_preemption(interrupted_evaluation, last_step, metrics)
    elif metrics is None and local:
        # Local run whose checkpoint was already at max_steps: nothing was trained or evaluated.
        tf.logging.info("Training was already complete; evaluating the last checkpoint")
        metrics = estimator.evaluate(
            eval_input_fn, steps=plan.eval_steps, hooks=plan.eval_hooks, name=plan.eval_name
        )
    elif metrics is None:
        metrics = _task_metrics(estimator, plan.eval_name, distributed_chief)
    metrics = {k: _plain(v) for k, v in metrics.items()}
    if local and not preempted:
        _check_progress(metrics, start_step, plan)
    if not preempted:
        _log_metrics(metrics)
    return metrics


def _log_preemption(interrupted_evaluation: Optional[str], last_step, metrics: dict) -> None:
    log, what = tf.logging.info, "Training interrupted"
    if interrupted_evaluation:
        log = tf.logging.warning
        what = (
            f"{interrupted_evaluation} received during an evaluation, which stopped; "
            "training stopped"
        )
    log(
        "%s at global step %s: its checkpoint is not evaluated (the resumed run evaluates "
        "the ones that follow); newest eval metrics: step %s",
        what,
        last_step,
        metrics.get("global_step", "none"),
    )


def _task_metrics(estimator, eval_name: Optional[str], distributed_chief: bool) -> dict:
    """A cluster task's result: the newest metrics the evaluator wrote."""
    eval_dir = estimator.eval_dir(eval_name)
    tf.logging.info(
        "Distributed task %r: reading the newest eval metrics from %s",
        estimator.config.task_type,
        eval_dir,
    )
    metrics = _newest_metrics(eval_dir)
    if not metrics:
        # A chief that trained to the end while its eval dir stayed empty usually does not
        # share model_dir with the evaluator, which writes the metrics there.
        tf.logging.warning(
            "No eval metrics found in %s%s", eval_dir, _UNSHARED_MODEL_DIR * distributed_chief
        )
    return metrics


def _check_progress(metrics: dict, start_step: Optional[int], plan: _Plan) -> None:
    """Names a local training that took no step, or ended before ``max_steps``."""
    final_step = metrics.get("global_step")
    if start_step is None or start_step >= plan.max_steps:
        return
    if final_step == start_step:
        raise ValueError(
            "`train_input_fn` yielded no batch: training ended at global step "
            f"{start_step} without taking a step (max_steps={plan.max_steps}). Check that the "
            "training data is not empty (files, filters, `take()`). Got: 0 steps"
        )
    if (
        not _stopped_early(plan.train_hooks)
        and isinstance(final_step, int)
        and start_step < final_step < plan.max_steps
    ):
        # Estimator ends training without a word when the input runs out before max_steps;
        # the metrics then look like those of a complete run.
        tf.logging.warning(
            "Training ended at global step %d, before max_steps=%d: `train_input_fn` ran out "
            "of data (repeat it, e.g. inputs.from_arrays(..., num_epochs=None), or lower "
            "max_steps), or a hook stopped it.",
            final_step,
            plan.max_steps,
        )
