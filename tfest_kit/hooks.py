"""Session-run hooks for ``Estimator.train(hooks=…)``, ``TrainSpec`` and TF1 loops.

:func:`early_stopping` wraps the official ``make_early_stopping_hook``. Upstream has no progress
line and no preemption handling, and its ``NanTensorHook`` misses inf and names no step.
"""

import math
import os
import signal
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Optional

import numpy as np

from tfest_kit import _model_dir, logs
from tfest_kit._checks import TfestKitError, check_int, check_number
from tfest_kit._model_dir import MWMS, checkpoint_step, metrics_by_step, newest_finite_checkpoint
from tfest_kit._tf import tf

__all__ = ["ProgressHook", "early_stopping", "NanGuardHook", "NanLossError", "PreemptionHook"]

# One handler per signal for all PreemptionHooks: each hook sees the signal, and what was
# installed before the first is put back after the last.
_ACTIVE, _ORIGINAL = [], {}


def _loss_tensor(loss=None, required: bool = True) -> Optional[tf.Tensor]:
    if loss is None:
        losses = tf.get_collection(tf.GraphKeys.LOSSES)
        if not losses and required:
            raise ValueError("No loss in tf.GraphKeys.LOSSES: pass `loss`, the loss tensor.")
        return losses[-1] if losses else None
    try:  # else ~70 lines at the first step
        return tf.get_default_graph().as_graph_element(loss, allow_operation=False)
    except (TypeError, ValueError, KeyError, AttributeError) as e:  # an eager tensor
        raise ValueError(
            f"`loss` must be a tensor of the graph trained, or its name. Got: {loss!r} ({e})"
        ) from None


class _IntervalHook(tf.train.SessionRunHook):
    """Reports at multiples of ``every_n_steps`` global steps, fetching nothing on other steps
    (unlike ``LoggingTensorHook``): runs move the step as they did on average (2 in a GAN)."""

    _then = ""  # " + the final evaluation"
    _loss_required = True  # without `loss`, one in tf.GraphKeys.LOSSES

    def __init__(  # ProgressHook's arguments
        self,
        every_n_steps: int = 100,
        total_steps: Optional[int] = None,
        batch_size: Optional[int] = None,
        loss: Optional[tf.Tensor] = None,
    ) -> None:
        self._every_n, self._loss_arg = check_int("every_n_steps", every_n_steps), loss
        total_steps = check_int("total_steps", total_steps, allow_none=True)
        self._given = (total_steps, check_int("batch_size", batch_size, allow_none=True))
        self._filled = (None, None, None)  # total_steps, more_steps, batch_size

    def begin(self) -> None:
        self._global_step = tf.train.get_global_step()
        if self._global_step is None:
            raise RuntimeError(
                f"{type(self).__name__} needs a global step: call "
                "tf.compat.v1.train.get_or_create_global_step() before building the train op."
            )
        self._loss = _loss_tensor(self._loss_arg, self._loss_required)
        self._batch_size = self._given[1] or self._filled[2]

    def after_create_session(self, session, coord) -> None:
        self._step = int(session.run(self._global_step))
        stop = self._filled[0] or (self._filled[1] and self._step + self._filled[1])
        self._total, self._stop = self._given[0] or stop, stop  # this run ends at _stop
        self._last_step, self._last_time = self._step, time.monotonic()
        self._reported_once, self._steps_per_run, self._runs_since_report = False, 1.0, 0

    def before_run(self, run_context):
        self._fetching = self._due(self._step + self._steps_per_run, self._step)
        fetch = self._fetching and self._loss is not None
        return tf.train.SessionRunArgs(self._loss) if fetch else None

    def _due(self, step: float, since: float) -> bool:
        """Whether ``step`` gets a line: the first, the last, or past a multiple of the interval."""
        last = any(end and self._step < end <= step for end in (self._total, self._stop))
        return step // self._every_n > since // self._every_n or not self._reported_once or last

    def after_run(self, run_context, run_values) -> None:
        self._runs_since_report += 1
        if not self._fetching:
            self._step += self._steps_per_run
            return
        # Read after the run: fetched beside the train op it races with the increment.
        step = int(run_context.session.run(self._global_step))
        if not self._due(step, self._last_step):
            # Other workers moved the step: a line now and at the crossing came steps apart.
            self._step = step
            return
        loss = None if self._loss is None else np.mean(run_values.results)
        self._report_now(loss, step, final=bool(self._stop) and step >= self._stop)

    def _report_now(self, loss: Optional[float], step: int, final: bool = False) -> None:
        now, steps = time.monotonic(), step - self._last_step
        elapsed = now - self._last_time if self._reported_once else None  # set-up before
        self._report(loss, step, elapsed, steps, final)
        if not self._reported_once:
            self._rate_step, self._rate_time = step, now  # the ETA's average starts here
        if steps > 0:
            self._steps_per_run = steps / self._runs_since_report
        self._runs_since_report, self._reported_once = 0, True
        self._step, self._last_step, self._last_time = step, step, now

    def _percent(self, step: int) -> int:
        return min(round(100 * step / self._total), 99) if step < self._total else 100

    def _eta(self, step: int, final: bool) -> str:
        """``ETA 12s`` from the average rate since the first line (evaluations included)."""
        if not self._total or final or step >= self._total or not self._reported_once:
            return ""
        rate = (step - self._rate_step) / max(time.monotonic() - self._rate_time, 1e-9)
        return "" if rate <= 0 else f"ETA {max(0, self._total - step) / rate:.0f}s" + self._then


def fill_progress_totals(hooks, max_steps, estimator=None, steps=None, then="") -> None:
    """Gives the progress hooks the run's end and ``estimator``'s batch size where not given (as
    :class:`ProgressHook` says); ``then``: what comes after the last step, said after the ETA."""
    params = getattr(estimator, "params", None)  # any object a model_fn takes, as in TF 1.x
    from_params = params.get("batch_size") if isinstance(params, Mapping) else None
    batch_size = getattr(estimator, "train_batch_size", None) or from_params
    for hook in hooks:
        if isinstance(hook, _IntervalHook):
            hook._filled = (max_steps, None if max_steps else steps, batch_size)
            hook._then = then and f" + {then}" or hook._then


class LossLoggingHook(_IntervalHook):
    """The fallback ``TPUEstimator``'s loss line (TF1's text, then ``; 10% of 1000 steps, ETA
    6s``), for ``LoggingTensorHook`` and ``StepCounterHook``; ``output_dir``: their summaries."""

    def __init__(self, every_n_steps=100, batch_size=None, output_dir=None, loss=None) -> None:
        super().__init__(every_n_steps, batch_size=batch_size, loss=loss)
        self.output_dir, self.log_lines = output_dir, True  # output_dir: summaries, or None

    def begin(self) -> None:
        super().begin()
        self._writer = self.output_dir and tf.summary.FileWriterCache.get(self.output_dir)

    def _report(self, loss, step, elapsed, steps, final) -> None:
        progress = ""
        if self._total:
            eta = self._eta(step, final)
            progress = f"; {self._percent(step)}% of {self._total} steps" + (eta and ", " + eta)
        if elapsed is None or steps <= 0 or elapsed <= 0:
            if self.log_lines:  # no time on the first line, as in LoggingTensorHook
                tf.logging.info("loss = %s, step = %d%s", loss, step, progress)
            return
        rate = steps / elapsed
        line = "loss = %s, step = %d (%.3f sec); global_step/sec: %g"
        args = [loss, step, elapsed, rate]
        values = [tf.Summary.Value(tag="global_step/sec", simple_value=rate)]
        if self._batch_size:
            line += ", examples/sec: %.1f"
            args.append(rate * self._batch_size)
            values.append(tf.Summary.Value(tag="examples/sec", simple_value=args[-1]))
        if self.log_lines:
            tf.logging.info(line + "%s", *args, progress)
        if self._writer:
            self._writer.add_summary(tf.Summary(value=values), step)


class ProgressHook(_IntervalHook):
    """Logs step / total, loss, steps/sec, examples/sec and ETA every ``every_n_steps`` steps.

    One ``tf.logging`` INFO line an interval, and one for the last step (``stopped`` when short
    of ``total_steps``).

    Args:
      every_n_steps: a line every this many global steps (and after the first).
      total_steps: the step training ends at, for % and ETA; None: the ``max_steps`` (or
        ``steps``) of ``tfest_kit.train_and_evaluate`` or a tfest_kit estimator's ``train``.
      batch_size: global batch size, for examples/sec; None: a ``tpu.TPUEstimator``'s
        ``train_batch_size`` or ``params["batch_size"]``.
      loss: the loss tensor; None: the last of ``tf.GraphKeys.LOSSES``, if any.

    Raises:
      ValueError: for a non-positive ``every_n_steps``, ``total_steps`` or ``batch_size``.
      RuntimeError: at session start, for a graph without a global step.

    Example:

        hook = ProgressHook(every_n_steps=50, total_steps=1000, batch_size=32)
        estimator.train(input_fn, max_steps=1000, hooks=[hook])
    """

    _loss_required = False

    def _report(self, loss, step, elapsed, steps, final) -> None:
        within = self._total and step <= self._total  # a total_steps too small: no "5/2"
        of = f"/{self._total} ({self._percent(step)}%)" if within else ""
        parts = [f"step {step}{of}"]
        if loss is not None:
            parts.append(f"loss = {loss:.6g}")
        if elapsed and steps > 0:
            rate = steps / elapsed
            parts.append(f"{rate:.2f} steps/sec")
            if self._batch_size:
                parts.append(f"{rate * self._batch_size:.0f} examples/sec")
            parts.append(self._eta(step, final))
        if final and self._total and step < self._total:
            parts.append("stopped")  # no ETA for steps that will not run
        tf.logging.info("%s", ", ".join(p for p in parts if p))

    def end(self, session) -> None:
        if self._runs_since_report:  # stopped between two lines: where, without a loss
            step = int(session.run(self._global_step))
            if step > self._last_step:
                self._report_now(None, step, final=True)
        self._then = ""  # told again by the next train_and_evaluate


class NanLossError(TfestKitError, tf.train.NanLossDuringTrainingError):
    """The loss became NaN or infinite; also a ``tf.train.NanLossDuringTrainingError``.

    Attributes:
      step: the global step whose loss was not finite.
      last_finite_loss: the last finite loss seen, or None.
      last_finite_step: the step of ``last_finite_loss``, or None.
    """

    def __init__(self, message: str, step: int, last_finite_loss=None, last_finite_step=None):
        super().__init__(message)
        self.step = step
        self.last_finite_loss, self.last_finite_step = last_finite_loss, last_finite_step

    def __str__(self) -> str:  # NanLossDuringTrainingError hard-codes its text
        return self.args[0]


def _checkpoints_note(step: int) -> str:
    """Names the newest checkpoint up to ``step`` with finite weights (read), and a later latest."""
    savers = tf.get_collection(tf.GraphKeys.SAVERS)
    paths = [path for saver in savers for path in getattr(saver, "last_checkpoints", [])]
    saved = sorted((p for p in paths if checkpoint_step(p) is not None), key=checkpoint_step)
    if not saved:
        return ""
    directory = os.path.dirname(saved[-1])
    if (good := newest_finite_checkpoint(directory, step - 1)) is None:  # step's weights failed
        return " No checkpoint from before it has finite weights."
    note = f" The newest checkpoint with finite weights from before it is {os.path.basename(good)}"
    if checkpoint_step(saved[-1]) != checkpoint_step(good):
        note += (
            f"; the latest, {os.path.basename(saved[-1])}, holds the diverged weights: to resume "
            "from it, delete the checkpoints after it (a newer one is resumed from) and run "
            f"tf.compat.v1.train.update_checkpoint_state({directory!r}, {good!r})"
        )
    return note + "."


class NanGuardHook(tf.train.SessionRunHook):
    """Stops training with :class:`NanLossError` when the loss becomes NaN or infinite.

    Unlike the official ``NanTensorHook`` it catches inf and names the step, the last finite
    loss and the newest checkpoint from before. Without a global step it counts session runs.

    Args:
      loss: the loss tensor; None: the last of ``tf.GraphKeys.LOSSES``.

    Example:

        estimator.train(input_fn, max_steps=1000, hooks=[NanGuardHook()])
    """

    def __init__(self, loss: Optional[tf.Tensor] = None) -> None:
        self._loss_arg = loss

    def begin(self) -> None:
        self._global_step = tf.train.get_global_step()
        self._fetches = {"loss": _loss_tensor(self._loss_arg)}
        if self._global_step is not None:
            self._fetches["step"] = self._global_step
        self._last_finite, self._last_finite_step, self._runs = None, None, 0

    def after_create_session(self, session, coord) -> None:
        if self._global_step is not None:
            self._first_step = int(session.run(self._global_step))

    def before_run(self, run_context):
        return tf.train.SessionRunArgs(self._fetches)

    def after_run(self, run_context, run_values) -> None:
        loss = float(run_values.results["loss"])
        self._runs += 1
        step, where = self._runs, "session run"
        if self._global_step is not None:
            # The fetched step races with the increment: count, unless other workers moved it.
            step, where = self._first_step + self._runs - 1, "step"
            if not 0 <= run_values.results["step"] - step <= 1:
                step = int(run_values.results["step"])
        if math.isfinite(loss):
            self._last_finite, self._last_finite_step = loss, step
            return
        previous, last = "no finite loss was seen before", self._last_finite
        if last is not None:
            previous = f"the last finite loss was {last:g} at {where} {self._last_finite_step}"
        message = (
            f"Loss became {loss} at {where} {step}; {previous}. Lower the learning rate, clip "
            "gradients or check the input for NaN/inf values."
        )
        if self._global_step is not None:
            message += _checkpoints_note(step)
        tf.logging.error("%s", message)
        raise NanLossError(message, step, self._last_finite, self._last_finite_step)


class PreemptionHook(tf.train.SessionRunHook):
    """On SIGTERM / SIGINT: finish the current step, then stop cleanly.

    Logs ``SIGTERM received: stopping after step 207`` and requests a stop: ``train()`` returns,
    the session's ``CheckpointSaverHook`` saves there, and a restart resumes. A second signal
    goes to the previous handler (Ctrl-C twice kills). Handlers need the main thread.

    Args:
      signals: the signals to catch (``signal.Signals``, their numbers or names).

    Raises:
      ValueError: for a number that is no signal.

    Example:

        hook = PreemptionHook()
        estimator.train(input_fn, max_steps=10000, hooks=[hook])
        if hook.preempted:
            sys.exit(0)  # the scheduler restarts us; training resumes from the checkpoint
    """

    def __init__(self, signals: Sequence[int] = (signal.SIGTERM, signal.SIGINT)) -> None:
        by_name = signal.Signals.__members__  # "SIGTERM" too
        self._signals = tuple(by_name.get(signum) or signal.Signals(signum) for signum in signals)
        self._preempted, self._session = None, None  # the signal that stopped a run; its session

    @property
    def preempted(self) -> Optional[int]:
        """The signal number that stopped the last run, or None."""
        return self._preempted

    def begin(self) -> None:
        _unregister(self)  # a run that raised never reached end()
        self._preempted, self._session, self._stopping = None, None, False
        self._global_step = tf.train.get_global_step()

    def after_create_session(self, session, coord) -> None:
        if threading.current_thread() is not threading.main_thread():
            tf.logging.warning("PreemptionHook: signal handlers need the main thread; none set.")
            return
        self._session = session
        if self not in _ACTIVE:
            _ACTIVE.append(self)
        for signum in self._signals:
            if signum not in _ORIGINAL:
                _ORIGINAL[signum] = signal.getsignal(signum)
                signal.signal(signum, _dispatch)

    def after_run(self, run_context, run_values) -> None:
        if self._preempted is None or self._stopping:
            return
        self._stopping = True
        where = "this step"
        if self._global_step is not None:
            where = f"step {int(run_context.session.run(self._global_step))}"
        name = signal.Signals(self._preempted).name
        tf.logging.warning("%s received: stopping after %s", name, where)
        run_context.request_stop()

    def end(self, session) -> None:
        _unregister(self)


def _unregister(hook: PreemptionHook) -> None:
    _ACTIVE[:] = [active for active in _ACTIVE if active is not hook]
    wanted = {signum for active in _ACTIVE for signum in active._signals}
    for signum in [signum for signum in _ORIGINAL if signum not in wanted]:
        _release(signum)


def _release(signum: int):
    previous = _ORIGINAL.pop(signum)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signum, previous if previous is not None else signal.SIG_DFL)
    return previous


def _dispatch(signum, frame) -> None:
    # A run that raised never called end(); its closed session marks the hook as stale.
    _ACTIVE[:] = [h for h in _ACTIVE if not getattr(h._session, "_closed", True)]
    waiting = [h for h in _ACTIVE if signum in h._signals and h._preempted is None]
    for hook in waiting:
        hook._preempted = signum
    if waiting:
        return
    # A second signal while stopping, or no live run left: to whoever had it before.
    previous = _release(signum) if signum in _ORIGINAL else signal.SIG_DFL
    if callable(previous):
        previous(signum, frame)
    elif previous != signal.SIG_IGN:
        signal.raise_signal(signum)


class _NoImprovement:
    """True after ``patience_steps`` without an improvement over ``min_delta``; unlike
    ``stop_if_no_*_hook``'s: NaN never best, evaluations before the metric existed skipped."""

    def __init__(self, eval_dir, monitor, higher, min_delta, patience_steps):
        self._eval_dir, self._monitor, self._higher = eval_dir, monitor, higher
        self._min_delta, self._patience = min_delta, patience_steps
        self.fired, self._nan_said = False, None

    def __call__(self) -> bool:
        results = metrics_by_step(self._eval_dir)
        having = [step for step in results if self._monitor in results[step]]
        # Evaluations before the metric existed are skipped; after, a lack is an error.
        if lacking := [s for s in results if not having or (s > having[0] and s not in having)]:
            raise ValueError(
                f"early_stopping: `monitor` {self._monitor!r} is not among the eval metrics "
                f"in {self._eval_dir} at step {lacking[-1]}. Available: "
                f"{sorted(results[lacking[-1]])}."
            )
        last = having[-1] if having else None
        if last is not None and math.isnan(results[last][self._monitor]) and last != self._nan_said:
            self._nan_said = last  # never an improvement: say why it may stop
            tf.logging.warning(
                f'early_stopping: "{self._monitor}" is NaN at step {last} (NaN in the eval data?)'
            )
        sign, best, best_step = (1 if self._higher else -1), None, None
        for step in having:
            value = results[step][self._monitor]
            if not math.isnan(value) and (best is None or sign * (value - best) > self._min_delta):
                best, best_step = value, step
            since = step - (having[0] if best_step is None else best_step)
            if since >= self._patience:
                tf.logging.info(
                    f"early_stopping: no improvement of more than {self._min_delta:g} in "
                    f'"{self._monitor}" for {since} steps; stopping.'
                )
                self.fired = True
                return True
        return False


def _stand_in_estimator(model_dir: str):
    """A chief Estimator without ``train_distribute`` (the factory takes any for multi-worker:
    its test of a generator is always true); ``TF_CONFIG`` hidden, as the caller decided."""
    saved = os.environ.pop("TF_CONFIG", None)
    try:
        with logs.quieted():  # it would log its whole config
            config = tf.estimator.RunConfig()
            return tf.estimator.Estimator(lambda features, labels, mode: None, model_dir, config)
    finally:
        if saved is not None:
            os.environ["TF_CONFIG"] = saved


def _stop_flag_out_of_checkpoints(summed: bool = False) -> tf.Variable:
    """The official hooks' ``signal_early_stopping/STOP`` flag, created first, in no collection:
    theirs, saved with the model, broke resuming a model_dir trained without it. The chief
    initialises ours (a local variable misses a model_fn's own ``local_init_op``)."""
    kind = {"dtype": tf.bool, "initializer": tf.initializers.constant(False)}
    if summed:
        kind = {"dtype": tf.int32, "initializer": tf.initializers.constant(0)}
        kind["synchronization"] = tf.VariableSynchronization.ON_WRITE
        kind["aggregation"] = tf.VariableAggregation.SUM
    with tf.variable_scope("signal_early_stopping", values=[], reuse=tf.AUTO_REUSE):
        return tf.get_variable("STOP", shape=[], collections=[], trainable=False, **kind)


class _StopFlagOutOfCheckpoints(tf.train.SessionRunHook):
    """The official hook, its flag out of checkpoints; ``stopped_early`` for train_and_evaluate."""

    def __init__(self, hook, predicate: _NoImprovement, summed: bool = False) -> None:
        self._hook, self._predicate, self._summed = hook, predicate, summed
        self.eval_dir = predicate._eval_dir  # train_and_evaluate checks it is the one written
        # Once the session exists, each run is the official hook's.
        self.before_run, self.after_run = hook.before_run, hook.after_run

    @property
    def stopped_early(self) -> bool:
        return self._predicate.fired

    def begin(self) -> None:
        # Built here: under a strategy the initializer is a new group op.
        self._init_flag = _stop_flag_out_of_checkpoints(self._summed).initializer
        self._global_step = tf.train.get_global_step()
        self._hook.begin()

    def after_create_session(self, session, coord) -> None:
        session.run(self._init_flag)  # before the official hook reads it
        self._start = int(session.run(self._global_step))
        self._hook.after_create_session(session, coord)

    def end(self, session) -> None:
        self._hook.end(session)
        ran = int(session.run(self._global_step)) - self._start
        if ran >= self._predicate._patience and not metrics_by_step(self.eval_dir):
            tf.logging.warning(
                f"early_stopping: {ran} steps trained, and no evaluation in {self.eval_dir} to "
                "stop on: evaluate there (train_and_evaluate, or evaluate() between train() calls)"
            )


class _StopWhenTheChiefSays(tf.train.SessionRunHook):
    """A non-chief's official ``_CheckForStoppingHook``, waiting for the chief to init the flag."""

    def begin(self) -> None:
        flag = _stop_flag_out_of_checkpoints()
        self._stop, self._initialized = flag.read_value(), tf.is_variable_initialized(flag)
        self._seen_initialized = False

    def before_run(self, run_context):
        return tf.train.SessionRunArgs(self._stop if self._seen_initialized else self._initialized)

    def after_run(self, run_context, run_values) -> None:
        if not self._seen_initialized:
            self._seen_initialized = bool(run_values.results)
        elif run_values.results:
            tf.logging.info("Early stopping requested, suspending run.")
            run_context.request_stop()


def early_stopping(
    estimator: tf.estimator.Estimator,
    monitor: str = "loss",
    *,
    mode: str = "auto",
    min_delta: float = 0.0,
    patience_steps: int,
    run_every_steps: Optional[int] = None,
    run_every_secs: Optional[float] = 60,
    eval_name: Optional[str] = None,
) -> tf.train.SessionRunHook:
    """Returns a hook that stops training when an eval metric stops improving.

    The official ``make_early_stopping_hook`` with ``min_delta``, ``mode="auto"`` (accuracy /
    auc / f1 … up, loss / mse … down), NaN never best, the metrics listed when ``monitor`` is
    missing, and a one-machine ``train_distribute`` not taken for multi-worker.

    Args:
      estimator: the ``tf.estimator.Estimator`` trained; its ``eval_dir()`` is read.
      monitor: the eval metric name, e.g. ``"loss"``, ``"accuracy"``.
      mode: ``"min"``, ``"max"`` or ``"auto"`` (guessed from the words of ``monitor``).
      min_delta: the smallest change that counts as an improvement (>= 0).
      patience_steps: stop after this many global steps without improvement.
      run_every_steps: check every this many steps (needed under multi-worker strategies).
      run_every_secs: else check at most every this many seconds.
      eval_name: the evaluation's name (``train_and_evaluate``'s ``eval_name``), if any.

    Returns:
      A ``tf.compat.v1.train.SessionRunHook`` for ``train()`` or a ``TrainSpec``.

    Raises:
      TypeError: if ``estimator`` is not an Estimator.
      ValueError: for a bad argument.

    Example:

        hook = early_stopping(est, "loss", patience_steps=1000, run_every_steps=100)
        est.train(input_fn, max_steps=100000, hooks=[hook])
    """
    if not isinstance(estimator, tf.estimator.Estimator):
        raise TypeError(f"`estimator` must be a tf.estimator.Estimator. Got: {type(estimator)}")
    if not isinstance(monitor, str) or not monitor:
        raise ValueError(f"`monitor` must be a metric name. Got: {monitor!r}")
    higher = _model_dir.higher_is_better(monitor, mode, "early_stopping")
    min_delta = float(check_number("min_delta", min_delta))
    patience_steps = check_int("patience_steps", patience_steps)
    run_every_steps = check_int("run_every_steps", run_every_steps, allow_none=True)
    strategy = estimator.config.train_distribute
    multi_worker = type(strategy).__name__.startswith(MWMS)
    if run_every_steps is not None:
        run_every_secs = None
    elif not multi_worker:  # SecondOrStepTimer's error named every_secs / every_steps
        run_every_secs = check_number("run_every_secs", run_every_secs, hint="or run_every_steps")
    else:  # the official message blamed the default run_every_secs=60
        raise ValueError(
            f"early_stopping under {type(strategy).__name__}: every worker must check at the "
            "same steps. Pass run_every_steps=…, e.g. your save_checkpoints_steps."
        )
    eval_dir = estimator.eval_dir(eval_name)
    tf.gfile.MakeDirs(eval_dir)
    if not multi_worker and not estimator.config.is_chief:
        return _StopWhenTheChiefSays()
    predicate = _NoImprovement(eval_dir, monitor, higher, min_delta, patience_steps)
    made_for = estimator if multi_worker else _stand_in_estimator(eval_dir)
    every = dict(run_every_secs=run_every_secs, run_every_steps=run_every_steps)
    hook = tf.estimator.experimental.make_early_stopping_hook(made_for, predicate, **every)
    return _StopFlagOutOfCheckpoints(hook, predicate, summed=multi_worker)
