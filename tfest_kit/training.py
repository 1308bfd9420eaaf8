"""``train_and_evaluate`` with sane defaults over the official ``tf.estimator.train_and_evaluate``.

What changes from the official call: evaluation covers the whole eval set unless told
otherwise (``EvalSpec(steps=100)`` silently truncates it), hooks and exporters are plain
arguments, and the final evaluation metrics are returned (and logged on one line) instead of
``(metrics, export_results)`` locally and ``None`` under ``TF_CONFIG``.

Example:

    import tfest_kit
    from tfest_kit import serving

    metrics = tfest_kit.train_and_evaluate(
        est, train_input_fn, eval_input_fn, max_steps=2000,
        exporters=[serving.best_exporter(receiver, monitor="accuracy", mode="max")])
    print(metrics["accuracy"])
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterable
from typing import Any, Callable, Optional

import numpy as np

from tfest_kit import _model_dir
from tfest_kit._checks import check_int, check_number
from tfest_kit._eval_guard import EvalGuard
from tfest_kit._evaluator import TaskExecutor, export_unless_vanished
from tfest_kit._guards import PreemptionHook
from tfest_kit._model_dir import metrics_by_step, saved_step
from tfest_kit._tf import estimator as tf_estimator
from tfest_kit._tf import estimator_training, tf
from tfest_kit._tf_config import validate_tf_config

__all__ = ["train_and_evaluate", "latest_eval_metrics"]


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


class _EndAfterEarlyStop(estimator_training._ContinuousEvalListener):
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
        if eval_result.status == estimator_training._EvalStatus.EVALUATED:
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


class _NoEvalAfterPreemption(estimator_training._ContinuousEvalListener):
    """Local training: no evaluation once a ``PreemptionHook`` among the hooks has fired.

    Estimator evaluates (and exports) the final checkpoint however training ended. After a
    SIGTERM that evaluation can outlast the grace period, and after Ctrl-C it delays the
    exit; the resumed run evaluates the checkpoints that follow. A checkpoint at
    ``max_steps`` is evaluated and exported all the same: no run would follow to do it.

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


def _preempted(train_hooks: list) -> bool:
    return any(getattr(hook, "preempted", None) for hook in train_hooks)


def _at_max_steps(model_dir: str, max_steps: int) -> bool:
    step = saved_step(model_dir)
    return step is not None and step >= max_steps


class _EvaluationInterrupted(Exception):
    """A training ``PreemptionHook``'s signal arrived during an evaluation."""


class _StopEvalOnPreemption(tf_estimator.SessionRunHook):
    """Ends an evaluation once a ``PreemptionHook`` among the training hooks has its signal.

    Locally, Estimator evaluates inside ``train()``, after a checkpoint is saved, where the
    training hooks do not run: Ctrl-C did nothing until the whole eval set was done. The
    evaluation is abandoned by an exception (its metrics are not written, no exporter runs);
    the checkpoint it was evaluating is saved already. The evaluation of a checkpoint at
    ``max_steps`` goes on: it makes the final export, which no later run would make.

    Args:
      train_hooks: the training hooks, among which the ``PreemptionHook``s.
      model_dir: the Estimator's model_dir, whose latest checkpoint is being evaluated.
      max_steps: the step training goes to.
    """

    def __init__(self, train_hooks: list, model_dir: str, max_steps: int) -> None:
        self._train_hooks = train_hooks
        self._model_dir = model_dir
        self._max_steps = max_steps

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
        listener = _NoEvalAfterPreemption(train_hooks, estimator.model_dir, train_spec.max_steps)
        result = estimator_training._TrainingExecutor(
            estimator, train_spec, eval_spec, continuous_eval_listener=listener
        ).run()
        metrics = result[0]
        if _stopped_early(train_hooks) and not _preempted(train_hooks) and metrics:
            return result, int(metrics[tf.GraphKeys.GLOBAL_STEP])
        return result, None
    # As the official call runs a cluster task, through TaskExecutor: its evaluator skips a
    # checkpoint the chief deleted under it instead of ending, and logs its waits once.
    if config.task_type != "evaluator":
        return TaskExecutor(estimator, train_spec, eval_spec).run(), None
    if config.task_id > 0:  # the official check, before anything runs
        raise ValueError(
            "For distributed training, there can only be one `evaluator` task (with task id "
            f"0).  Given task id {config.task_id}"
        )
    listener = _EndAfterEarlyStop(estimator.model_dir)
    executor = TaskExecutor(estimator, train_spec, eval_spec, continuous_eval_listener=listener)
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
    ps, evaluator). Evaluations happen on checkpoints (``RunConfig.save_checkpoints_steps``
    / ``_secs``) at most every ``throttle_secs``; the last checkpoint is always evaluated
    and passed to the exporters with ``is_the_final_export=True``, also after an early stop
    by ``tfest_kit.hooks.early_stopping`` (where the official call passes False, so a
    ``FinalExporter`` exported nothing): an exporter that skipped that checkpoint (returned
    None, which the ``Exporter`` contract reserves for a skipped export) is called for it
    once more, as the final export. ``LatestExporter``, ``BestExporter`` and
    ``serving.best_exporter`` ignore the flag and are not called again.

    After a ``tfest_kit.hooks.PreemptionHook`` among ``hooks`` stopped local training
    (SIGTERM, Ctrl-C), the checkpoint it stopped at is not evaluated or exported, so the
    program can exit within a preemption's grace period; the newest metrics in the eval
    directory are returned (``{}`` if there are none), and the resumed run evaluates later
    checkpoints. An evaluation running when the signal arrives stops at its next batch,
    without writing its metrics (locally Estimator evaluates inside ``train()``, where the
    hook cannot act). A checkpoint at ``max_steps`` is still evaluated and exported: no
    later run would make its final export. (On a cluster the evaluator task evaluates every
    checkpoint whatever the chief received.)

    Before training, the chief (or the only process) takes model_dir's writer lock and
    resumes from the newest intact checkpoint where the ``checkpoint`` state file is unreadable
    or names a damaged one, with one warning (see docs/model_dir.md). With
    ``eval_steps=None`` and an eval input of unknown length (a generator), a warning after
    100, 1,000, … batches says the input has not ended yet.

    Caveat: in a distributed run only the evaluator computes metrics; the official call
    returns ``None`` on every task. Here the chief, workers and the evaluator then return the
    newest metrics found in the eval directory (possibly from an earlier checkpoint than the
    final one on the chief: check ``"global_step"``), or ``{}`` if there are none yet.
    A ps task never returns. An evaluator task returns once it has evaluated a checkpoint
    at ``max_steps`` (as in the official call) or, after the chief stopped early (see
    ``tfest_kit.hooks.early_stopping``), the checkpoint training ended with: the official
    evaluator would wait for ``max_steps`` forever. If training was already complete (the
    checkpoint is at ``max_steps``), the last checkpoint is evaluated once more so metrics are
    still returned (exporters are not called then). The chief deletes all but the newest
    ``RunConfig(keep_checkpoint_max=…)`` checkpoints (default 5); one deleted while the
    evaluator was evaluating or exporting it is skipped with a warning (the official evaluator
    ended there): raise ``keep_checkpoint_max`` if the warning comes. Every task must use the
    same ``model_dir`` on a file system they all share; a chief that finds no eval metrics at
    the end says so.

    Args:
      estimator: a ``tf.estimator.Estimator`` (or subclass, e.g. tfest_kit's TPUEstimator).
      train_input_fn: training ``input_fn``; should repeat, ``max_steps`` ends training
        (one that runs out of data ends it earlier, and a warning says so).
      eval_input_fn: evaluation ``input_fn``; with ``eval_steps=None`` it must end (no
        ``repeat()``: a Dataset that repeats forever is refused), and the whole set is
        evaluated.
      max_steps: global step to train to.
      eval_steps: number of eval batches, or ``None`` for the whole eval set.
      hooks: training ``SessionRunHook``s, e.g. ``tfest_kit.hooks.early_stopping(...)``.
      eval_hooks: evaluation ``SessionRunHook``s.
      exporters: a ``tf.estimator.Exporter`` or a list, e.g. ``serving.best_exporter(...)``.
      throttle_secs: fewest seconds between evaluations (official default 600); at least 1
        on an evaluator task, whose wait for the next checkpoint would otherwise spin.
      start_delay_secs: seconds an evaluator task waits before its first evaluation.
      eval_name: ``EvalSpec`` name; metrics go to ``model_dir/eval_<name>``.

    Returns:
      The final evaluation metrics as plain Python numbers, including ``"global_step"``
      (after a preemption: the newest ones found, see above).

    Raises:
      TypeError: if ``estimator`` is not an Estimator, an input_fn is not callable, or a
        hook / exporter has the wrong type.
      ValueError: for ``max_steps`` / ``eval_steps`` that are not positive ints or negative
        seconds; when ``train_input_fn`` (locally) or ``eval_input_fn`` yields no batch, or
        ``eval_input_fn`` returns a Dataset that repeats forever and ``eval_steps`` is None;
        for a malformed ``TF_CONFIG`` (see ``tfest_kit.cluster.validate_tf_config``); for one
        hook object in both ``hooks`` and ``eval_hooks``.
      TfestKitError: on a cluster task whose gRPC server cannot start (its port in
        ``TF_CONFIG`` in use, or a host that is not this machine); the message names the task
        and its address. Also when another process trains into ``model_dir``, when it holds
        checkpoint files of which none is intact, or when the disk fills during a save (see
        docs/model_dir.md).
      NanLossError: the loss became NaN (``tfest_kit.hooks.NanLossError``), naming the step
        and the newest checkpoint with finite weights.

    Example:

        metrics = train_and_evaluate(est, train_fn, eval_fn, max_steps=1000,
                                     hooks=[hooks.early_stopping(est, "loss",
                                                                 patience_steps=200)])
    """
    if not isinstance(estimator, tf_estimator.Estimator):
        raise TypeError(f"`estimator` must be a tf.estimator.Estimator. Got: {estimator!r}")
    for name, fn in (("train_input_fn", train_input_fn), ("eval_input_fn", eval_input_fn)):
        if not callable(fn):
            raise TypeError(f"`{name}` must be a callable input_fn. Got: {fn!r}")
    max_steps = check_int("max_steps", max_steps)
    eval_steps = check_int("eval_steps", eval_steps, allow_none=True)
    train_hooks = _as_list("hooks", hooks, tf_estimator.SessionRunHook)
    evaluation_hooks = _as_list("eval_hooks", eval_hooks, tf_estimator.SessionRunHook)
    exporter_list = [
        _FinalAfterEarlyStop(e) for e in _as_list("exporters", exporters, tf_estimator.Exporter)
    ]
    if eval_name is not None and (not isinstance(eval_name, str) or not eval_name):
        raise ValueError(f"`eval_name` must be a non-empty str or None. Got: {eval_name!r}")
    shared = [hook for hook in train_hooks if any(hook is e for e in evaluation_hooks)]
    if shared:
        # Locally, evaluations run inside the training session: a hook in both lists starts
        # its evaluation (begin(), ...) while its training run is still going, and the two
        # overwrite each other's state (a ProgressHook's training lines turned into eval
        # batches).
        raise ValueError(
            f"The same {type(shared[0]).__name__} object is in both `hooks` and `eval_hooks`. "
            "Pass a separate instance to each, e.g. eval_hooks=[ProgressHook(…)] next to "
            "hooks=[ProgressHook(…)]."
        )
    # A malformed TF_CONFIG otherwise surfaces as a KeyError deep in the distribute coordinator.
    validate_tf_config(workers_only_allowed=estimator.config.train_distribute is not None)

    with _model_dir.training(estimator) as step_counter:
        return _train_and_evaluate(
            estimator,
            train_input_fn,
            eval_input_fn,
            max_steps,
            eval_steps,
            train_hooks,
            evaluation_hooks,
            exporter_list,
            step_counter,
            start_delay_secs,
            throttle_secs,
            eval_name,
        )


def _train_and_evaluate(
    estimator,
    train_input_fn,
    eval_input_fn,
    max_steps,
    eval_steps,
    train_hooks,
    evaluation_hooks,
    exporter_list,
    step_counter,
    start_delay_secs,
    throttle_secs,
    eval_name,
) -> dict:
    """train_and_evaluate once its arguments are checked and model_dir is ready to train into."""
    evaluation_hooks += [
        EvalGuard(eval_steps, "eval_steps", "eval_input_fn"),
        _StopEvalOnPreemption(train_hooks, estimator.model_dir, max_steps),
    ]
    start_step = saved_step(estimator.model_dir)

    train_spec = tf_estimator.TrainSpec(
        train_input_fn, max_steps=max_steps, hooks=[*train_hooks, step_counter]
    )
    eval_spec = tf_estimator.EvalSpec(
        eval_input_fn,
        steps=eval_steps,
        name=eval_name,
        hooks=evaluation_hooks,
        exporters=exporter_list,
        start_delay_secs=check_number("start_delay_secs", start_delay_secs, hint="seconds"),
        throttle_secs=_evaluator_throttle(estimator, throttle_secs),
    )
    distributed_chief = estimator.config.cluster_spec.jobs and estimator.config.is_chief
    if distributed_chief:
        # An earlier run's record would end this run's evaluator at that step.
        _forget_early_stop(estimator.model_dir)
    interrupted_evaluation = None  # the signal that stopped an evaluation
    try:
        result, early_stop_step = _run(estimator, train_spec, eval_spec, train_hooks)
    except _EvaluationInterrupted:
        result, early_stop_step = (None, None), None  # as a local run returns
        interrupted_evaluation = _release_preemption_hooks(train_hooks) or "A signal"
    stopped_early = _stopped_early(train_hooks)
    if distributed_chief and stopped_early:
        _record_early_stop(estimator.model_dir)
    if early_stop_step is not None:
        for exporter in exporter_list:
            exporter.export_as_final(early_stop_step)
    metrics = result[0] if isinstance(result, tuple) else None
    last_step = saved_step(estimator.model_dir)
    # Stopped by a signal before its last checkpoint was evaluated (_NoEvalAfterPreemption,
    # _StopEvalOnPreemption): a checkpoint at max_steps is evaluated all the same.
    preempted = (
        _preempted(train_hooks)
        and isinstance(result, tuple)
        and (metrics or {}).get(tf.GraphKeys.GLOBAL_STEP) != last_step
    )
    if preempted:
        metrics = _newest_metrics(estimator.eval_dir(eval_name))
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
    elif metrics is None and isinstance(result, tuple):
        # Local run whose checkpoint was already at max_steps: nothing was trained or evaluated.
        tf.logging.info("Training was already complete; evaluating the last checkpoint")
        metrics = estimator.evaluate(
            eval_input_fn, steps=eval_steps, hooks=evaluation_hooks, name=eval_name
        )
    elif metrics is None:
        eval_dir = estimator.eval_dir(eval_name)
        tf.logging.info(
            "Distributed task %r: reading the newest eval metrics from %s",
            estimator.config.task_type,
            eval_dir,
        )
        metrics = _newest_metrics(eval_dir)
        if not metrics:
            # A chief that trained to the end while its eval dir stayed empty usually does
            # not share model_dir with the evaluator, which writes the metrics there.
            tf.logging.warning(
                "No eval metrics found in %s%s",
                eval_dir,
                _UNSHARED_MODEL_DIR if distributed_chief else "",
            )
    metrics = {k: _plain(v) for k, v in metrics.items()}
    if (
        isinstance(result, tuple)
        and not preempted
        and start_step is not None
        and start_step < max_steps
        and metrics.get("global_step") == start_step
    ):
        raise ValueError(
            "`train_input_fn` yielded no batch: training ended at global step "
            f"{start_step} without taking a step (max_steps={max_steps}). Check that the "
            "training data is not empty (files, filters, `take()`). Got: 0 steps"
        )
    final_step = metrics.get("global_step")
    if (
        isinstance(result, tuple)
        and not (preempted or stopped_early)
        and start_step is not None
        and isinstance(final_step, int)
        and start_step < final_step < max_steps
    ):
        # Estimator ends training without a word when the input runs out before max_steps;
        # the metrics then look like those of a complete run.
        tf.logging.warning(
            "Training ended at global step %d, before max_steps=%d: `train_input_fn` ran out "
            "of data (repeat it, e.g. inputs.from_arrays(..., num_epochs=None), or lower "
            "max_steps), or a hook stopped it.",
            final_step,
            max_steps,
        )
    if not preempted:
        _log_metrics(metrics)
    return metrics
