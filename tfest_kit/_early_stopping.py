"""Early stopping on eval metrics, over the official ``tf.estimator.experimental`` hooks."""

from __future__ import annotations

import math
import os
from typing import Optional

from tfest_kit import logs
from tfest_kit._checks import check_bool, check_int, check_number
from tfest_kit._metric_direction import higher_is_better
from tfest_kit._model_dir import eval_dirs, metrics_by_step
from tfest_kit._tf import estimator as tf_estimator
from tfest_kit._tf import tf
from tfest_kit._tf_config import is_chief_task

__all__ = ["early_stopping"]

_MULTI_WORKER = ("CollectiveAllReduceStrategy", "MultiWorkerMirroredStrategy")


class _NoImprovement:
    """The stop predicate: no improvement larger than ``min_delta`` for ``patience_steps``."""

    def __init__(self, eval_dir, monitor, higher, min_delta, patience_steps, min_steps):
        self._eval_dir = eval_dir
        self._monitor = monitor
        self._higher = higher
        self._min_delta = min_delta
        self._patience = patience_steps
        self._min_steps = min_steps
        self._said_empty = False
        self._warned_elsewhere = False
        self.fired = False  # returned True: the chief's hook then stops training

    def _better(self, value: float, best: float) -> bool:
        if self._higher:
            return value > best + self._min_delta
        return value < best - self._min_delta

    def _warn_if_elsewhere(self) -> None:
        """Names the sibling eval directories that have results (``EvalSpec(name=…)``)."""
        own = os.path.normpath(self._eval_dir)
        others = [
            path
            for path in eval_dirs(os.path.dirname(own))
            if os.path.normpath(path) != own and metrics_by_step(path)
        ]
        if not others:
            return
        name = os.path.basename(others[0])[len("eval_") :] or None
        tf.logging.warning(
            "early_stopping: no eval results in %s, but %s has some, so training will not "
            "stop early. An EvalSpec(name=%r) writes there; watch it with "
            "early_stopping(estimator, …, eval_dir=estimator.eval_dir(%r)).",
            self._eval_dir,
            ", ".join(others),
            name,
            name,
        )
        self._warned_elsewhere = True

    def __call__(self) -> bool:
        results = metrics_by_step(self._eval_dir)
        if not results:
            if not self._said_empty:
                # Every fresh run starts this way (no evaluation can have run before the first
                # checkpoint), so it is news, not a warning; results that go to another eval
                # directory, the suspicious case, get a warning below.
                tf.logging.info(
                    "early_stopping: no eval results in %s yet; training continues until the "
                    "first evaluation writes some (evaluate(), train_and_evaluate, or the "
                    "summaries of your own evaluation).",
                    self._eval_dir,
                )
                self._said_empty = True
            if not self._warned_elsewhere:
                self._warn_if_elsewhere()
            return False
        steps = [step for step in results if step >= self._min_steps]
        having = [step for step in steps if self._monitor in results[step]]
        # Evaluations from before the metric existed (a metric added when resuming) are
        # skipped: they would make the model_dir unusable with this monitor. One without it
        # after that (a renamed metric) would leave the patience never running out.
        first = having[0] if having else None
        lacking = [
            s for s in steps if first is None or (s > first and self._monitor not in results[s])
        ]
        if lacking:
            raise ValueError(
                f"early_stopping: `monitor` {self._monitor!r} is not among the eval metrics "
                f"in {self._eval_dir} at step {lacking[-1]}. Available: "
                f"{sorted(results[lacking[-1]])}."
            )
        steps = having
        best = best_step = None
        for step in steps:
            value = results[step][self._monitor]
            # A NaN is never an improvement (as in Keras' EarlyStopping): as the first value it
            # would be a best that nothing beats, and stop a run that improves after it.
            if not math.isnan(value) and (best is None or self._better(value, best)):
                best, best_step = value, step
            since = step - (steps[0] if best_step is None else best_step)
            if since >= self._patience:
                tf.logging.info(
                    'early_stopping: no %s of more than %g in "%s" for %d steps (%s); ' "stopping.",
                    "increase" if self._higher else "decrease",
                    self._min_delta,
                    self._monitor,
                    since,
                    "no value but NaN" if best is None else f"best {best:g} at step {best_step}",
                )
                self.fired = True
                return True
        return False


def _dispatch_estimator(est):
    """Works around the official multi-worker check, which is true for every strategy.

    ``make_early_stopping_hook`` tests ``train_distribute and (generator)``; a generator is
    always truthy, so a single-machine ``MirroredStrategy`` gets the multi-worker hook (which
    rejects ``run_every_secs`` and needs a cross-replica variable). For strategies that are not
    multi-worker the official factory is given a stand-in Estimator whose config has no
    ``train_distribute``, so it picks the chief / non-chief hooks as intended.
    """
    strategy = est.config.train_distribute
    if strategy is None or type(strategy).__name__.startswith(_MULTI_WORKER):
        return est
    return _stand_in_estimator(est.config.replace(train_distribute=None), est.model_dir)


def _stand_in_estimator(config, model_dir: str):
    """An Estimator that is never run: the official factory reads only its ``RunConfig``."""
    with logs.quieted():  # it would log its whole config
        return tf_estimator.Estimator(
            model_fn=lambda features, labels, mode: None, model_dir=model_dir, config=config
        )


def _single_process_config() -> tf_estimator.RunConfig:
    """A chief's ``RunConfig`` whatever ``TF_CONFIG`` says, for the chief's stand-in Estimator.

    Outside an Estimator the caller has already decided this task is the chief (``is_chief``
    may overrule ``TF_CONFIG``, whose ps-and-workers cluster RunConfig refuses); the official
    factory only reads ``is_chief`` and ``train_distribute`` from it. RunConfig has no
    argument for that: it reads the environment, so ``TF_CONFIG`` is hidden while it does.
    """
    saved = os.environ.pop("TF_CONFIG", None)
    try:
        return tf_estimator.RunConfig()
    finally:
        if saved is not None:
            os.environ["TF_CONFIG"] = saved


def _stop_flag_out_of_checkpoints(summed: bool = False) -> tf.Variable:
    """The official hooks' ``signal_early_stopping/STOP`` flag, created first in no collection.

    The official hooks create it as a *global* variable, so it is saved with the model: a
    model_dir trained without early stopping then cannot be resumed with it ("Key
    signal_early_stopping/STOP not found in checkpoint"), and on a cluster the ``True`` of an
    early stop is restored by every later run, whose workers then stop at their first step.
    Created first (the official hooks reuse it by name) in no collection, no Saver writes it
    and no ``ready_op`` checks it; the chief initialises it to False when its session starts.
    It cannot be a local variable: a model_fn's ``Scaffold(local_init_op=...)`` is built
    before the hooks' ``begin()``, would not initialise it, and the session would never
    become ready. On a cluster the device function of the graph puts it on a ps task, where
    the chief's stop reaches the workers, as the official flag does.

    With ``summed`` it is the multi-worker hook's flag instead: an int32 that every worker
    adds its vote to, summed across the workers (created under the strategy, in ``begin()``).
    """
    if tf.train.get_global_step() is None:
        # The official hook would fail at its first check with a TypeError about None.
        raise ValueError(
            "early_stopping needs a global step: its patience and the eval results are "
            "counted in global steps. Create one before the session, e.g. "
            "global_step = tf.compat.v1.train.get_or_create_global_step(), and pass it to "
            "optimizer.minimize(loss, global_step=global_step)"
        )
    # The official hooks' own arguments but for `collections`; they then reuse it by name.
    kind = (
        {
            "dtype": tf.int32,
            "initializer": tf.initializers.constant(0),
            "synchronization": tf.VariableSynchronization.ON_WRITE,
            "aggregation": tf.VariableAggregation.SUM,
        }
        if summed
        else {"dtype": tf.bool, "initializer": tf.initializers.constant(False)}
    )
    with tf.variable_scope("signal_early_stopping", values=[], reuse=tf.AUTO_REUSE):
        return tf.get_variable("STOP", shape=[], collections=[], trainable=False, **kind)


class _StopFlagOutOfCheckpoints(tf.train.SessionRunHook):
    """Runs the official (chief's) early-stopping hook with its flag kept out of checkpoints.

    See :func:`_stop_flag_out_of_checkpoints`; this hook initialises the flag once the
    session exists, before the official hook can set it (under a multi-worker strategy on
    every worker, each of which runs the official hook). ``stopped_early`` says whether the
    official hook stopped training (``tfest_kit.train_and_evaluate`` then tells the
    evaluator).
    """

    def __init__(
        self, hook: tf.train.SessionRunHook, predicate: _NoImprovement, summed: bool = False
    ) -> None:
        self._hook = hook
        self._predicate = predicate
        self._summed = summed
        self._init_flag = None

    @property
    def stopped_early(self) -> bool:
        return self._predicate.fired

    def begin(self) -> None:
        flag = _stop_flag_out_of_checkpoints(self._summed)
        # Built here: the graph is final by after_create_session, and under a distribution
        # strategy the flag is a distributed variable whose initializer is a new group op.
        self._init_flag = flag.initializer
        self._hook.begin()

    def after_create_session(self, session, coord) -> None:
        # Before the official hook, which may read the flag.
        session.run(self._init_flag)
        self._hook.after_create_session(session, coord)

    def before_run(self, run_context):
        return self._hook.before_run(run_context)

    def after_run(self, run_context, run_values) -> None:
        self._hook.after_run(run_context, run_values)

    def end(self, session) -> None:
        self._hook.end(session)


class _StopWhenTheChiefSays(tf.train.SessionRunHook):
    """A non-chief worker's hook: stops when the chief has set the flag.

    The official ``_CheckForStoppingHook`` fetches the flag at every step. Kept out of
    checkpoints, the flag is initialised by the chief, and a worker may run steps before
    that: until the flag is initialised this hook fetches whether it is, and reads it from
    the next step on.
    """

    def begin(self) -> None:
        flag = _stop_flag_out_of_checkpoints()
        self._stop = flag.read_value()
        self._initialized = tf.is_variable_initialized(flag)
        self._seen_initialized = False

    def before_run(self, run_context):
        del run_context
        fetch = self._stop if self._seen_initialized else self._initialized
        return tf.train.SessionRunArgs(fetch)

    def after_run(self, run_context, run_values) -> None:
        if not self._seen_initialized:
            self._seen_initialized = bool(run_values.results)
        elif run_values.results:
            tf.logging.info("Early stopping requested, suspending run.")
            run_context.request_stop()


def early_stopping(
    estimator: Optional[tf_estimator.Estimator],
    monitor: str = "loss",
    *,
    mode: str = "auto",
    min_delta: float = 0.0,
    patience_steps: int,
    min_steps: int = 0,
    run_every_steps: Optional[int] = None,
    run_every_secs: Optional[float] = 60,
    eval_dir: Optional[str] = None,
    is_chief: Optional[bool] = None,
) -> tf.train.SessionRunHook:
    """Returns a hook that stops training when an eval metric stops improving.

    Built on the official ``tf.estimator.experimental.make_early_stopping_hook`` with the
    predicate of ``stop_if_no_decrease_hook`` / ``stop_if_no_increase_hook``, plus:

    * the eval directory is created if missing (the official hook silently never fires);
    * an info line (once) while no eval results exist yet, and a warning when another eval
      directory (``EvalSpec(name=…)``) has them;
    * a ``ValueError`` listing the available metrics when ``monitor`` is not among them;
    * ``min_delta``: smaller changes do not count as improvement;
    * ``mode="auto"``: max when a word of the name (split at ``/``, ``_``, ``@``, ``-`` …) is
      accuracy / acc / auc / precision / recall / f1 (or map, ndcg, iou, r2, top5) and no word
      names an error (loss, error, mse, mae, mape, rmse …), else min; the choice is logged;
    * a single-machine ``train_distribute`` (e.g. ``MirroredStrategy``) is no longer treated as
      multi-worker;
    * its stop flag is kept out of checkpoints, so a model_dir trained without early stopping
      can be resumed with it (on one machine or a cluster, ``MultiWorkerMirroredStrategy``
      included), and on a cluster the workers of a run after an early stop no longer stop at
      their first step;
    * NaN values never count as an improvement, and evaluations from before ``monitor``
      existed (a metric added when resuming) are skipped.

    Example:

    ```python
    hook = early_stopping(est, "loss", patience_steps=1000, run_every_steps=100)
    tf.estimator.train_and_evaluate(
        est, tf.estimator.TrainSpec(train_input_fn, max_steps=100000, hooks=[hook]), eval_spec)
    ```

    In a hand-written ``MonitoredTrainingSession`` loop, pass ``estimator=None`` and the
    ``eval_dir`` your evaluation writes to: scalar summaries tagged ``monitor`` at the global
    step, in event files (``tf.compat.v1.summary.FileWriter(eval_dir)``, which is what
    ``Estimator.evaluate`` writes, or ``tf.summary.scalar`` under a
    ``tf.summary.create_file_writer(eval_dir)``). The loop needs a global step. On a cluster,
    pass the ``is_chief`` you give ``MonitoredTrainingSession``.

    Under ``MultiWorkerMirroredStrategy`` every worker runs the check and their votes are
    summed, so all of them must check at the same steps: pass ``run_every_steps``.

    Caveat: as with the official hook, in a distributed run the chief decides and the other
    workers stop when told. Estimator's evaluator job exits by itself only at ``max_steps``;
    run through ``tfest_kit.train_and_evaluate``, it also exits once it has evaluated the
    checkpoint an early stop ended training at (the chief records that step in
    ``model_dir/stopped_early.json``), and there as on one machine that checkpoint gets the
    final export (``is_the_final_export=True``, which the official call passes only at
    ``max_steps``).

    Args:
      estimator: the ``tf.estimator.Estimator`` being trained (its ``eval_dir()`` is read and
        its ``RunConfig`` says whether this task is the chief); None outside Estimator, with
        ``eval_dir`` (``TF_CONFIG`` then says which task is the chief).
      monitor: the eval metric name, e.g. ``"loss"``, ``"accuracy"``.
      mode: ``"min"``, ``"max"`` or ``"auto"`` (guess from the words of ``monitor``).
      min_delta: the smallest change that counts as an improvement (>= 0).
      patience_steps: stop after this many global steps without improvement.
      min_steps: ignore evaluations before this global step.
      run_every_steps: check every this many steps (then ``run_every_secs`` is ignored).
      run_every_secs: check at most every this many seconds (not under a multi-worker
        strategy).
      eval_dir: read this directory instead of ``estimator.eval_dir()``.
      is_chief: with ``estimator=None``, whether this task is the chief (the one whose check
        stops the others); None reads ``TF_CONFIG`` (without one: the chief). With an
        Estimator its ``RunConfig`` says so.

    Returns:
      A ``tf.compat.v1.train.SessionRunHook`` for ``train()`` or a ``TrainSpec``.

    Raises:
      TypeError: if ``estimator`` is neither a ``tf.estimator.Estimator`` nor None.
      ValueError: for a bad ``mode``, ``min_delta``, ``patience_steps`` or interval, for
        ``estimator=None`` without ``eval_dir``, for ``is_chief`` with an Estimator or a
        ``TF_CONFIG`` that does not say which task is the chief, and (when the session
        starts) if the graph has no global step.
    """
    if estimator is None:
        if not eval_dir:
            raise ValueError(
                "early_stopping(None, …) reads the eval results from `eval_dir`: pass the "
                "directory your evaluation writes its summaries to, or pass the Estimator. "
                "Got: eval_dir=None"
            )
        chief = is_chief_task("early_stopping") if is_chief is None else is_chief
        check_bool("is_chief", chief, "or None")
        estimator_config = None
    elif isinstance(estimator, tf_estimator.Estimator):
        if is_chief is not None:
            raise ValueError(
                "early_stopping: `is_chief` is for estimator=None (a hand-written loop); an "
                "Estimator's RunConfig says whether this task is the chief. Leave it out. "
                f"Got: is_chief={is_chief!r}"
            )
        estimator_config = estimator.config
        chief = estimator_config.is_chief
    else:
        raise TypeError(
            "`estimator` must have type `tf.estimator.Estimator`, or be None with `eval_dir` "
            f"(a hand-written training loop). Got: {type(estimator)}"
        )
    if not isinstance(monitor, str) or not monitor:
        raise ValueError(f"`monitor` must be a metric name. Got: {monitor!r}")
    higher = higher_is_better(monitor, mode, "early_stopping")
    min_delta = check_number("min_delta", min_delta)
    patience_steps = check_int("patience_steps", patience_steps)
    min_steps = check_int("min_steps", min_steps, 0)
    run_every_steps = check_int("run_every_steps", run_every_steps, allow_none=True)
    strategy = estimator_config.train_distribute if estimator_config else None
    multi_worker = strategy is not None and type(strategy).__name__.startswith(_MULTI_WORKER)
    if run_every_steps is not None:
        run_every_secs = None
    elif multi_worker:
        # The official message ("run_every_secs should not be set") blamed the default of 60.
        raise ValueError(
            f"early_stopping under {type(strategy).__name__}: every worker runs the check and "
            "the votes are summed, so they must check at the same steps. Pass "
            "run_every_steps=…, e.g. your save_checkpoints_steps."
        )
    elif run_every_secs is None or run_every_secs <= 0:
        raise ValueError(
            "Set `run_every_steps` (int >= 1) or `run_every_secs` (> 0). "
            f"Got: run_every_steps=None, run_every_secs={run_every_secs!r}"
        )
    eval_dir = eval_dir or estimator.eval_dir()
    tf.gfile.MakeDirs(eval_dir)
    if not multi_worker and not chief:
        # Only the chief evaluates the predicate; the official non-chief hook is replaced.
        return _StopWhenTheChiefSays()
    predicate = _NoImprovement(
        eval_dir, monitor, higher, float(min_delta), patience_steps, min_steps
    )
    hook = tf_estimator.experimental.make_early_stopping_hook(
        _dispatch_estimator(estimator)
        if estimator is not None
        else _stand_in_estimator(_single_process_config(), eval_dir),
        predicate,
        run_every_secs=run_every_secs,
        run_every_steps=run_every_steps,
    )
    return _StopFlagOutOfCheckpoints(hook, predicate, summed=multi_worker)
