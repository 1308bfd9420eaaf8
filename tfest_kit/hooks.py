"""Session-run hooks for ``Estimator.train(hooks=…)``, ``TrainSpec`` and TF1 loops.

:func:`early_stopping` wraps the official ``make_early_stopping_hook``. Upstream has no
progress line and no preemption handling, and its ``NanTensorHook`` misses inf and names no
step, so those hooks are ours. Each resets its state in ``begin()``.
"""

from __future__ import annotations

import glob
import logging
import math
import numbers
import os
import signal
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from typing import IO, Optional, Union

import numpy as np

from tfest_kit import logs
from tfest_kit._checks import check_bool, check_int, check_number
from tfest_kit._errors import TfestKitError
from tfest_kit._metric_direction import higher_is_better
from tfest_kit._model_dir import eval_dirs, metrics_by_step
from tfest_kit._tf import estimator as tf_estimator
from tfest_kit._tf import tf
from tfest_kit.cluster import is_chief_task

__all__ = ["ProgressHook", "early_stopping", "NanGuardHook", "NanLossError", "PreemptionHook"]


def _find_loss_tensor(loss=None) -> tf.Tensor:
    """``loss``, the tensor it names, or (None) the last tensor of ``tf.GraphKeys.LOSSES``."""
    if loss is None:
        losses = tf.get_collection(tf.GraphKeys.LOSSES)
        if not losses:
            raise ValueError("No loss in tf.GraphKeys.LOSSES: pass `loss`, the tensor or its name.")
        return losses[-1]
    if isinstance(loss, str):
        try:
            return tf.get_default_graph().get_tensor_by_name(loss if ":" in loss else loss + ":0")
        except (KeyError, ValueError) as e:
            raise ValueError(f"`loss` must name a tensor of the graph. Got: {loss!r}") from e
    if isinstance(loss, (tf.Tensor, tf.Variable)):
        return loss
    raise TypeError(f"`loss` must be None, a tensor or a tensor name. Got: {loss!r}")


def _plain_number(value: float, digits: int) -> str:
    """``value`` to ``digits`` significant digits, as ``10640`` rather than ``1.064e+04``."""
    if not math.isfinite(value) or value == 0:
        return f"{value:g}"
    decimals = digits - 1 - math.floor(math.log10(abs(value)))
    if decimals <= 0:
        return f"{round(value, decimals):.0f}"
    return f"{value:.{decimals}f}".rstrip("0").rstrip(".")


def _format_duration(secs: float) -> str:
    minutes, seconds = divmod(int(round(secs)), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{seconds:02d}s"
    return f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"


_WARNED_INFO_HIDDEN: set = set()


def _warn_if_info_hidden(what: str, fix: str = "") -> None:
    """Warns once per process that ``what`` will not appear, if TensorFlow's INFO is hidden."""
    if what in _WARNED_INFO_HIDDEN or logging.getLogger("tensorflow").isEnabledFor(logging.INFO):
        return
    _WARNED_INFO_HIDDEN.add(what)
    tf.logging.warning(
        f"{what} will not appear: TensorFlow's INFO lines are not shown. Call tfest_kit.logs."
        f"setup() (or tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)){fix}."
    )


def _moves_global_step() -> bool:
    """Whether the default graph increments its global step, i.e. it is a training graph."""
    global_step = tf.train.get_global_step()
    return global_step is not None and any(
        op.type in ("AssignAdd", "AssignAddVariableOp")
        and op.inputs[0].op.name == global_step.op.name
        for op in tf.get_default_graph().get_operations()
    )


class _IntervalHook(tf.train.SessionRunHook):
    """Reports at multiples of ``every_n_steps`` global steps, fetching nothing on other steps.

    Unlike ``LoggingTensorHook`` and ``StepCounterHook``, which fetch every run, it predicts the
    step (runs move it as they did on average: 2 in a GAN loop). ``_count_runs``: eval, predict.
    """

    _count_runs = False
    _total = None

    def __init__(self, every_n_steps: int, loss=None) -> None:
        self._every_n = check_int("every_n_steps", every_n_steps)
        self._loss_arg = loss

    def begin(self) -> None:
        name = type(self).__name__
        self._global_step = tf.train.get_global_step()
        if self._global_step is None and not self._count_runs:
            raise RuntimeError(
                f"{name} needs a global step: call "
                "tf.compat.v1.train.get_or_create_global_step() before building the train op."
            )
        self._loss = self._find_loss()
        if self._loss is not None and self._loss.shape.num_elements() not in (None, 1):
            # float() of it failed at the first report and stopped training.
            raise ValueError(
                f"{name} shows a scalar loss, but {self._loss.name} has shape {self._loss.shape}"
                f" (per example). Pass {name}(loss=tf.reduce_mean(…)) or the loss you minimize."
            )

    def _find_loss(self) -> Optional[tf.Tensor]:
        return _find_loss_tensor(self._loss_arg)

    def after_create_session(self, session, coord) -> None:
        self._step = 0 if self._count_runs else int(session.run(self._global_step))
        self._last_step, self._last_time = self._step, time.monotonic()
        self._reported_once = False
        self._steps_per_run = 1.0
        self._runs_since_report = 0

    def before_run(self, run_context):
        self._fetching = self._due(self._step + self._steps_per_run, self._step)
        if self._fetching and self._loss is not None:
            return tf.train.SessionRunArgs(self._loss)
        return None

    def _due(self, step: float, since: float) -> bool:
        """Whether ``step`` gets a line: the first, the last, or past a multiple of the interval."""
        return (
            step // self._every_n > since // self._every_n
            or not self._reported_once
            or self._total is not None
            and self._step < self._total <= step
        )

    def after_run(self, run_context, run_values) -> None:
        self._runs_since_report += 1
        if not self._fetching:
            self._step += self._steps_per_run
            return
        step = self._read_step(run_context.session)
        if not self._due(step, self._last_step):
            # Other workers moved the step: a line now and at the crossing came steps apart.
            self._step = step
            return
        self._report_now(None if self._loss is None else float(np.mean(run_values.results)), step)

    def _read_step(self, session) -> int:
        if self._count_runs:
            return self._last_step + self._runs_since_report
        # Read after the run: fetched beside the train op it races with the increment.
        return int(session.run(self._global_step))

    def _report_now(self, loss: Optional[float], step: int, final: bool = False) -> None:
        now = time.monotonic()
        steps = step - self._last_step
        elapsed = now - self._last_time if self._reported_once else None  # set-up before
        self._report(loss, step, elapsed, steps, final)
        if not self._reported_once:
            self._rate_step, self._rate_time = step, now  # the ETA's average starts here
        self._reported_once = True
        if steps > 0:
            self._steps_per_run = steps / self._runs_since_report
        self._runs_since_report = 0
        self._step, self._last_step, self._last_time = step, step, now


class LossLoggingHook(_IntervalHook):
    """The fallback ``TPUEstimator``'s one loss line an interval, for ``LoggingTensorHook`` plus
    ``StepCounterHook``'s two or three; ``output_dir`` gets their summaries too."""

    def __init__(self, every_n_steps=100, batch_size=None, output_dir=None, loss=None) -> None:
        super().__init__(every_n_steps, loss)
        self._batch_size = batch_size
        self._output_dir = output_dir
        self.log_lines = True

    @property
    def writes_summaries(self) -> bool:
        return bool(self._output_dir)

    def begin(self) -> None:
        super().begin()
        self._writer = self._output_dir and tf.summary.FileWriterCache.get(self._output_dir)
        if self.log_lines:
            _warn_if_info_hidden(
                "Loss lines (LossLoggingHook, which tfest_kit's TPUEstimator adds)"
            )

    def _report(self, loss, step, elapsed, steps, final) -> None:
        if elapsed is None or steps <= 0 or elapsed <= 0:
            if self.log_lines:  # no time on the first line, as in LoggingTensorHook
                tf.logging.info("loss = %g, step = %d", loss, step)
            return
        rate = steps / elapsed
        line = "loss = %g, step = %d (%.3f sec); global_step/sec: %s"
        args = [loss, step, elapsed, _plain_number(rate, 4)]
        values = [tf.Summary.Value(tag="global_step/sec", simple_value=rate)]
        if self._batch_size:
            line += ", examples/sec: %.1f"
            args.append(rate * self._batch_size)
            values.append(tf.Summary.Value(tag="examples/sec", simple_value=args[-1]))
        if self.log_lines:
            tf.logging.info(line, *args)
        if self._writer:
            self._writer.add_summary(tf.Summary(value=values), step)


class ProgressHook(_IntervalHook):
    """Shows step / total, loss, steps/sec, examples/sec and ETA every ``every_n_steps`` steps.

    A live bar on a terminal, else one line an interval; the last step gets a line (``stopped``
    when short of ``total_steps``). ``evaluate()`` and ``predict()`` count batches.

    Args:
      every_n_steps: update every this many global steps (and after the first).
      total_steps: the step training ends at (batches to evaluate), for the percentage and ETA.
      batch_size: global batch size, for examples/sec.
      loss: the loss tensor or its name; None: the last of ``tf.GraphKeys.LOSSES``.
      stream: where lines go; None: ``sys.stderr`` if a terminal, else ``tf.logging``.

    Raises:
      ValueError: for a non-positive ``every_n_steps``, ``total_steps`` or ``batch_size``.
      RuntimeError: at session start, for a training graph without a global step.

    Example:

        hook = ProgressHook(every_n_steps=50, total_steps=1000, batch_size=32)
        estimator.train(input_fn, max_steps=1000, hooks=[hook])
    """

    def __init__(
        self,
        every_n_steps: int = 100,
        total_steps: Optional[int] = None,
        batch_size: Optional[int] = None,
        loss=None,
        stream: Optional[IO[str]] = None,
    ) -> None:
        super().__init__(every_n_steps, loss)
        self._total = check_int("total_steps", total_steps, allow_none=True)
        self._batch_size = check_int("batch_size", batch_size, allow_none=True)
        self._stream_arg = stream
        self._watched_handlers: list = []  # handlers whose records end the live bar's line

    def begin(self) -> None:
        self._evaluating = bool(tf.get_collection(tf.GraphKeys.EVAL_STEP))
        # Prediction: no loss, no train op and nothing that moves the global step.
        self._count_runs = self._evaluating or not (
            self._loss_arg is not None
            or tf.get_collection(tf.GraphKeys.LOSSES)
            or tf.get_collection(tf.GraphKeys.TRAIN_OP)
            or _moves_global_step()
        )
        super().begin()
        self._stream = self._stream_arg if self._stream_arg is not None else sys.stderr
        try:
            self._live = bool(self._stream.isatty())
        except (AttributeError, ValueError):
            self._live = False
        self._bar_open = False
        self._stop_watching()  # a run that raised never reached end()
        if self._live:
            # A handler filters a record just before printing it: the moment to end the line.
            # absl's handler sits on the root logger.
            for logger in (logging.getLogger("tensorflow"), logging.getLogger()):
                for handler in logger.handlers:
                    if not isinstance(handler, logging.FileHandler):
                        handler.addFilter(self._end_bar_line)
                        self._watched_handlers.append(handler)
        elif self._stream_arg is None:
            _warn_if_info_hidden(
                "ProgressHook: output is not a terminal, and its lines",
                ", or pass ProgressHook(stream=sys.stderr)",
            )

    def after_create_session(self, session, coord) -> None:
        super().after_create_session(session, coord)
        if self._total and not self._count_runs and self._step >= self._total:
            tf.logging.warning(
                f"ProgressHook: training starts at step {self._step}, already at total_steps="
                f"{self._total}, the step training ends at: pass total_steps={self._step} + N."
            )

    def _find_loss(self) -> Optional[tf.Tensor]:
        if self._loss_arg is None and not tf.get_collection(tf.GraphKeys.LOSSES):
            if not self._count_runs:  # a TF1 loop's own loss is in no collection
                tf.logging.info(
                    "ProgressHook: no loss in LOSSES to show; pass ProgressHook(loss=loss)."
                )
            return None  # Estimator keeps its evaluation loss out of LOSSES
        return _find_loss_tensor(self._loss_arg)

    def _report(self, loss, step, elapsed, steps, final) -> None:
        label = "eval batch" if self._evaluating else "batch" if self._count_runs else "step"
        parts = [f"{label} {step}"]
        if self._total:
            percent = min(round(100 * step / self._total), 99) if step < self._total else 100
            parts[0] += f"/{self._total} ({percent}%)"
        if loss is not None:
            parts.append(f"loss = {loss:.6g}")
        if elapsed is not None and elapsed > 0 and steps > 0:
            rate = steps / elapsed
            per_sec = "batches/sec" if self._count_runs else "steps/sec"
            parts.append(f"{_plain_number(rate, 3)} {per_sec}")
            if self._batch_size:
                parts.append(f"{_plain_number(rate * self._batch_size, 4)} examples/sec")
            total_rate = (step - self._rate_step) / max(time.monotonic() - self._rate_time, 1e-9)
            if self._total and total_rate > 0 and not final:
                parts.append(f"ETA {_format_duration(max(0, self._total - step) / total_rate)}")
        if final and self._total and step < self._total:
            parts.append("stopped")  # no ETA for steps that will not run
        line = ", ".join(parts)
        if self._live:
            if self._total:
                done = int(20 * min(1.0, step / self._total))
                line = "[" + "#" * done + "." * (20 - done) + "] " + line
            self._stream.write("\r" + line + "\033[K")
            self._bar_open = True
        elif self._stream_arg is None:
            tf.logging.info("%s", line)
            return
        else:
            self._stream.write(line + "\n")
        self._stream.flush()

    def _end_bar_line(self, record: Optional[logging.LogRecord] = None) -> bool:
        """Ends the live bar's line, if open, so a log line starts its own; lets records pass."""
        if self._bar_open:
            self._bar_open = False
            self._stream.write("\n")
            self._stream.flush()
        return True

    def end(self, session) -> None:
        if self._runs_since_report:  # stopped between two lines: where, without a loss
            step = self._read_step(session)
            if step > self._last_step:
                self._report_now(None, step, final=True)
        elif self._reported_once and self._total and self._last_step < self._total:
            self._report(None, self._last_step, None, 0, True)  # the last line promised more
        self._stop_watching()
        self._end_bar_line()

    def _stop_watching(self) -> None:
        for handler in self._watched_handlers:
            handler.removeFilter(self._end_bar_line)
        self._watched_handlers = []


class NanLossError(TfestKitError, tf.train.NanLossDuringTrainingError):
    """The loss became NaN or infinite; also a ``tf.train.NanLossDuringTrainingError``.

    Attributes:
      step: the global step whose loss was not finite.
      last_finite_loss: the last finite loss seen, or None.
      last_finite_step: the step of ``last_finite_loss``, or None.
    """

    def __init__(self, message: str, step: int, last_finite_loss, last_finite_step) -> None:
        super().__init__(message)
        self.step = step
        self.last_finite_loss, self.last_finite_step = last_finite_loss, last_finite_step

    def __str__(self) -> str:  # NanLossDuringTrainingError hard-codes its text
        return self.args[0]


class NanGuardHook(tf.train.SessionRunHook):
    """Stops training when the loss becomes NaN or infinite, naming the step and last good loss.

    Unlike the official ``NanTensorHook`` it catches inf, names the step, and renames
    ``diverged-<name>`` a checkpoint saved after the failing step, so the latest checkpoint
    holds good weights. Without a global step it counts session runs.

    Args:
      loss: the loss tensor or its name; None: the last of ``tf.GraphKeys.LOSSES``.
      fail: raise :class:`NanLossError` (True) or request a stop (False, for a TF1 loop).

    Raises:
      TypeError: if ``fail`` is not a bool.

    Example:

        estimator.train(input_fn, max_steps=1000, hooks=[NanGuardHook()])
    """

    def __init__(self, loss=None, fail: bool = True) -> None:
        self._loss_arg = loss
        self._fail = check_bool("fail", fail)

    def begin(self) -> None:
        self._loss = _find_loss_tensor(self._loss_arg)
        self._global_step = tf.train.get_global_step()
        self._fetches = {"loss": self._loss}
        if self._global_step is not None:
            self._fetches["step"] = self._global_step
        self._last_finite = self._last_finite_step = None
        self._runs = 0

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
        previous = "no finite loss was seen before"
        if self._last_finite is not None:
            previous = f"the last finite loss was {self._last_finite:g} at {where} "
            previous += str(self._last_finite_step)
        message = (
            f"Loss became {loss} at {where} {step}; {previous}. Lower the learning rate, clip "
            "gradients or check the input for NaN/inf values."
        )
        if self._fail and self._global_step is not None:
            message += _set_aside_checkpoints_after(step)
        tf.logging.error("%s", message)
        if self._fail:
            raise NanLossError(message, step, self._last_finite, self._last_finite_step)
        run_context.request_stop()


def _set_aside_checkpoints_after(step: int) -> str:
    """Renames ``diverged-*`` the checkpoints saved after ``step``; a sentence saying so, or ""."""
    moved, directory = [], None
    for saver in tf.get_collection(tf.GraphKeys.SAVERS):
        for path in list(getattr(saver, "last_checkpoints", [])):
            suffix = path.rsplit("-", 1)[-1]
            if not suffix.isdigit() or int(suffix) <= step:
                continue
            directory, name = os.path.split(path)
            for data in tf.gfile.Glob(glob.escape(path) + ".*"):  # "lr[0.1]" is no pattern
                renamed = os.path.join(directory, "diverged-" + os.path.basename(data))
                tf.gfile.Rename(data, renamed, overwrite=True)
            state = tf.train.get_checkpoint_state(directory)
            paths = state.all_model_checkpoint_paths if state else []
            kept = [p for p in paths if os.path.basename(p) != name]
            if kept:
                tf.train.update_checkpoint_state(directory, kept[-1], kept)
            elif state:  # nothing saved before: no checkpoint is the latest
                tf.gfile.Rename(
                    os.path.join(directory, "checkpoint"),
                    os.path.join(directory, "diverged-checkpoint"),
                    overwrite=True,
                )
            moved.append(name)
    if not moved:
        return ""
    latest = tf.train.latest_checkpoint(directory)
    return (
        f" The checkpoint saved after that step ({', '.join(moved)}) holds the diverged "
        "weights, so its files were renamed with the prefix 'diverged-'; the latest checkpoint "
        f"is {os.path.basename(latest) if latest else 'none (there was no earlier one)'}."
    )


def _check_signals(signals) -> tuple:
    """``signals`` (one signal or a list) as a tuple of distinct, catchable ``signal.Signals``."""
    checked = []
    for entry in (
        signals if isinstance(signals, Iterable) and not isinstance(signals, str) else [signals]
    ):
        number = isinstance(entry, numbers.Integral) and not isinstance(entry, bool)
        if not (number or isinstance(entry, str)):
            raise TypeError(
                f"`signals` must be signal numbers or names like 'SIGTERM'. Got: {entry!r}"
            )
        try:
            checked.append(signal.Signals(int(entry)) if number else signal.Signals[entry])
        except (KeyError, ValueError):
            raise ValueError(
                f"`signals` must be signal numbers or names like 'SIGTERM'. Got: {entry!r}"
            ) from None
        if checked[-1] in (signal.SIGKILL, signal.SIGSTOP):
            raise ValueError(
                f"`signals` must be signals a process can catch: SIGTERM, SIGINT… Got: {entry!r}"
            )
    if not checked:
        raise ValueError(f"`signals` must name at least one signal. Got: {signals!r}")
    return tuple(dict.fromkeys(checked))


class PreemptionHook(tf.train.SessionRunHook):
    """On SIGTERM / SIGINT: finish the current step, save a checkpoint there, stop cleanly.

    Logs ``SIGTERM received: stopping after step 207`` (``; saved PATH`` when it saved), saves
    (chief only) and requests a stop, so ``train()`` returns and a restart resumes there. A
    second signal goes to the previous handler (Ctrl-C twice kills). Handlers need the main
    thread; elsewhere the hook warns and does nothing.

    Args:
      checkpoint_dir: directory to save to; None: the session's ``CheckpointSaverHook`` saves.
      signals: one or a list of ``signal.Signals``, numbers or names (``"SIGTERM"``).
      is_chief: whether this task saves; None reads ``TF_CONFIG``. Non-chief tasks only stop.

    Raises:
      ValueError: for no signals, an unknown one, or SIGKILL / SIGSTOP.
      TypeError: for a signal that is neither a number nor a name, or a non-bool ``is_chief``.

    Example:

        hook = PreemptionHook()
        estimator.train(input_fn, max_steps=10000, hooks=[hook])
        if hook.preempted:
            sys.exit(0)  # the scheduler restarts us; training resumes from the checkpoint
    """

    def __init__(
        self,
        checkpoint_dir: Optional[str] = None,
        signals: Union[int, str, Sequence[Union[int, str]]] = (signal.SIGTERM, signal.SIGINT),
        is_chief: Optional[bool] = None,
    ) -> None:
        self._checkpoint_dir = checkpoint_dir
        self._signals = _check_signals(signals)
        self._is_chief = (
            is_chief if is_chief is None else check_bool("is_chief", is_chief, "or None")
        )
        self._preempted: Optional[int] = None
        self._session = None

    @property
    def preempted(self) -> Optional[int]:
        """The signal number that stopped the last run, or None."""
        return self._preempted

    def begin(self) -> None:
        _unregister(self)  # a run that raised never reached end()
        self._preempted = self._session = self._saver = None
        self._stopping = False
        self._global_step = tf.train.get_global_step()
        is_chief = is_chief_task("PreemptionHook") if self._is_chief is None else self._is_chief
        if self._checkpoint_dir and is_chief:  # before the graph is finalized
            self._saver = tf.train.Saver(sharded=True, save_relative_paths=True)
            tf.gfile.MakeDirs(self._checkpoint_dir)

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
        step = (
            None if self._global_step is None else int(run_context.session.run(self._global_step))
        )
        where = f"{signal.Signals(self._preempted).name} received: stopping after " + (
            "this step" if step is None else f"step {step}"
        )
        if self._saver is None:  # whether the session's saver will save, a hook cannot tell
            tf.logging.warning("%s", where)
        else:
            prefix = os.path.join(self._checkpoint_dir, "model.ckpt")
            path = self._saver.save(run_context.session, prefix, global_step=step)
            tf.logging.warning("%s; saved %s", where, path)
        run_context.request_stop()

    def end(self, session) -> None:
        _unregister(self)


# One handler per signal for all PreemptionHooks: each hook sees the signal, and what was
# installed before the first is put back after the last.
_ACTIVE: list = []
_ORIGINAL: dict = {}


def _unregister(hook: PreemptionHook) -> None:
    if hook in _ACTIVE:
        _ACTIVE.remove(hook)
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


_MULTI_WORKER = ("CollectiveAllReduceStrategy", "MultiWorkerMirroredStrategy")


class _NoImprovement:
    """True after ``patience_steps`` without an improvement over ``min_delta``; unlike
    ``stop_if_no_*_hook``'s: NaN never best, evaluations before the metric existed skipped."""

    def __init__(self, eval_dir, monitor, higher, min_delta, patience_steps, min_steps):
        self._eval_dir, self._monitor, self._higher = eval_dir, monitor, higher
        self._min_delta, self._patience, self._min_steps = min_delta, patience_steps, min_steps
        self._said_empty = self._warned_elsewhere = False
        self.fired = False

    def __call__(self) -> bool:
        results = metrics_by_step(self._eval_dir)
        if not results:
            if not self._said_empty:  # every fresh run starts so: news, not a warning
                tf.logging.info("early_stopping: no eval results in %s yet.", self._eval_dir)
                self._said_empty = True
            own = os.path.normpath(self._eval_dir)
            others = (
                []
                if self._warned_elsewhere
                else [
                    path
                    for path in eval_dirs(os.path.dirname(own))
                    if os.path.normpath(path) != own and metrics_by_step(path)
                ]
            )
            if others:
                name = os.path.basename(others[0])[len("eval_") :] or None
                tf.logging.warning(
                    f"early_stopping: no eval results in {self._eval_dir}, but {', '.join(others)}"
                    f" has some: pass early_stopping(…, eval_dir=estimator.eval_dir({name!r}))."
                )
                self._warned_elsewhere = True
            return False
        steps = [step for step in results if step >= self._min_steps]
        having = [step for step in steps if self._monitor in results[step]]
        # Evaluations before the metric existed are skipped; after, a lack is an error.
        lacking = [s for s in steps if not having or (s > having[0] and s not in having)]
        if lacking:
            raise ValueError(
                f"early_stopping: `monitor` {self._monitor!r} is not among the eval metrics "
                f"in {self._eval_dir} at step {lacking[-1]}. Available: "
                f"{sorted(results[lacking[-1]])}."
            )
        sign = 1 if self._higher else -1
        best = best_step = None
        for step in having:
            value = results[step][self._monitor]
            if not math.isnan(value) and (best is None or sign * (value - best) > self._min_delta):
                best, best_step = value, step
            since = step - (having[0] if best_step is None else best_step)
            if since >= self._patience:
                best = "no value but NaN" if best is None else f"best {best:g} at step {best_step}"
                change = "increase" if self._higher else "decrease"
                tf.logging.info(
                    f"early_stopping: no {change} of more than {self._min_delta:g} in "
                    f'"{self._monitor}" for {since} steps ({best}); stopping.'
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
            return tf_estimator.Estimator(
                model_fn=lambda features, labels, mode: None,
                model_dir=model_dir,
                config=tf_estimator.RunConfig(),
            )
    finally:
        if saved is not None:
            os.environ["TF_CONFIG"] = saved


def _stop_flag_out_of_checkpoints(summed: bool = False) -> tf.Variable:
    """The official hooks' ``signal_early_stopping/STOP`` flag, created first, in no collection.

    Theirs is saved with the model: a model_dir trained without early stopping could not resume
    with it, and a cluster restored an early stop's ``True``. The chief initialises ours (a
    local variable misses a model_fn's own ``local_init_op``). ``summed``: multi-worker votes.
    """
    if tf.train.get_global_step() is None:  # the official hook fails with a TypeError
        raise ValueError(
            "early_stopping needs a global step: call tf.compat.v1.train."
            "get_or_create_global_step() and pass it to optimizer.minimize(loss, global_step)"
        )
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

    @property
    def stopped_early(self) -> bool:
        return self._predicate.fired

    def begin(self) -> None:
        # Built here: under a strategy the initializer is a new group op.
        self._init_flag = _stop_flag_out_of_checkpoints(self._summed).initializer
        self._hook.begin()

    def after_create_session(self, session, coord) -> None:
        session.run(self._init_flag)  # before the official hook reads it
        self._hook.after_create_session(session, coord)

    def before_run(self, run_context):
        return self._hook.before_run(run_context)

    def after_run(self, run_context, run_values) -> None:
        self._hook.after_run(run_context, run_values)

    def end(self, session) -> None:
        self._hook.end(session)


class _StopWhenTheChiefSays(tf.train.SessionRunHook):
    """A non-chief's official ``_CheckForStoppingHook``, waiting for the chief to init the flag."""

    def begin(self) -> None:
        flag = _stop_flag_out_of_checkpoints()
        self._stop = flag.read_value()
        self._initialized = tf.is_variable_initialized(flag)
        self._seen_initialized = False

    def before_run(self, run_context):
        return tf.train.SessionRunArgs(self._stop if self._seen_initialized else self._initialized)

    def after_run(self, run_context, run_values) -> None:
        if not self._seen_initialized:
            self._seen_initialized = bool(run_values.results)
        elif run_values.results:
            tf.logging.info("Early stopping requested, suspending run.")
            run_context.request_stop()


def _chief_of(estimator, eval_dir, is_chief) -> bool:
    """Checks ``estimator`` / ``eval_dir`` / ``is_chief``; whether this task is the chief."""
    if estimator is None:
        if not eval_dir:
            raise ValueError(
                "early_stopping(None, …) reads the eval results from `eval_dir`: pass it, or "
                "the Estimator. Got: eval_dir=None"
            )
        chief = is_chief_task("early_stopping") if is_chief is None else is_chief
        return check_bool("is_chief", chief, "or None")
    if not isinstance(estimator, tf_estimator.Estimator):
        raise TypeError(
            "`estimator` must have type `tf.estimator.Estimator`, or be None with `eval_dir` "
            f"(a hand-written training loop). Got: {type(estimator)}"
        )
    if is_chief is not None:
        raise ValueError(
            "early_stopping: `is_chief` is for estimator=None; an Estimator's RunConfig says "
            f"whether this task is the chief. Leave it out. Got: is_chief={is_chief!r}"
        )
    return estimator.config.is_chief


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

    The official ``make_early_stopping_hook`` with ``min_delta``, ``mode="auto"`` (accuracy /
    auc / f1 … up, loss / mse … down), NaN never best and the metrics listed when ``monitor``
    is missing. Fixed upstream defects: a missing eval directory (never fires), a one-machine
    ``train_distribute`` taken for multi-worker, a stop flag saved in checkpoints.

    Args:
      estimator: the ``tf.estimator.Estimator`` trained; None in a TF1 loop, with ``eval_dir``.
      monitor: the eval metric name, e.g. ``"loss"``, ``"accuracy"``.
      mode: ``"min"``, ``"max"`` or ``"auto"`` (guessed from the words of ``monitor``).
      min_delta: the smallest change that counts as an improvement (>= 0).
      patience_steps: stop after this many global steps without improvement.
      min_steps: ignore evaluations before this global step.
      run_every_steps: check every this many steps (needed under multi-worker strategies).
      run_every_secs: else check at most every this many seconds.
      eval_dir: read these summaries instead of ``estimator.eval_dir()``.
      is_chief: with ``estimator=None``, whether this task is the chief; None: ``TF_CONFIG``.

    Returns:
      A ``tf.compat.v1.train.SessionRunHook`` for ``train()`` or a ``TrainSpec``.

    Raises:
      TypeError: if ``estimator`` is neither an Estimator nor None.
      ValueError: for a bad argument, a ``TF_CONFIG`` without a chief, and (at session start)
        a graph without a global step.

    Example:

        hook = early_stopping(est, "loss", patience_steps=1000, run_every_steps=100)
        est.train(input_fn, max_steps=100000, hooks=[hook])
    """
    chief = _chief_of(estimator, eval_dir, is_chief)
    if not isinstance(monitor, str) or not monitor:
        raise ValueError(f"`monitor` must be a metric name. Got: {monitor!r}")
    higher = higher_is_better(monitor, mode, "early_stopping")
    min_delta = float(check_number("min_delta", min_delta))
    patience_steps = check_int("patience_steps", patience_steps)
    min_steps = check_int("min_steps", min_steps, 0)
    run_every_steps = check_int("run_every_steps", run_every_steps, allow_none=True)
    strategy = estimator.config.train_distribute if estimator is not None else None
    multi_worker = type(strategy).__name__.startswith(_MULTI_WORKER)
    if run_every_steps is not None:
        run_every_secs = None
    elif multi_worker:  # the official message blamed the default run_every_secs=60
        raise ValueError(
            f"early_stopping under {type(strategy).__name__}: every worker votes, so all must "
            "check at the same steps. Pass run_every_steps=…, e.g. your save_checkpoints_steps."
        )
    elif run_every_secs is None or run_every_secs <= 0:
        raise ValueError(
            "Set `run_every_steps` (int >= 1) or `run_every_secs` (> 0). "
            f"Got: run_every_steps=None, run_every_secs={run_every_secs!r}"
        )
    eval_dir = eval_dir or estimator.eval_dir()
    tf.gfile.MakeDirs(eval_dir)
    if not multi_worker and not chief:
        return _StopWhenTheChiefSays()
    predicate = _NoImprovement(eval_dir, monitor, higher, min_delta, patience_steps, min_steps)
    hook = tf_estimator.experimental.make_early_stopping_hook(
        estimator if multi_worker else _stand_in_estimator(eval_dir),
        predicate,
        run_every_secs=run_every_secs,
        run_every_steps=run_every_steps,
    )
    return _StopFlagOutOfCheckpoints(hook, predicate, summed=multi_worker)
