"""Interval logging hooks: :class:`ProgressHook` and the fallback TPUEstimator's loss line.

Both hooks share one rule: the loss and the global step are fetched only on the steps that print.
Between prints the step is predicted from a local counter: one ``session.run`` moves the step by
as much as it did on average since the last print (one, the Estimator and
``MonitoredTrainingSession`` contract, until a print shows otherwise, as in a GAN loop whose run
applies two optimizers). Each print re-reads the real global step, so a model that advances the
step differently is corrected at the next print instead of drifting.

Rates are measured from the first print on: the time before it, from session creation to the
end of the first step, is mostly set-up (graph optimisation, the first input batch), so the
first line has no rate and no ETA.
"""

from __future__ import annotations

import logging
import math
import sys
import time
from typing import IO, Optional, Union

import numpy as np

from tfest_kit._checks import check_int
from tfest_kit._tf import tf

__all__ = ["ProgressHook", "LossLoggingHook", "find_loss_tensor"]


def find_loss_tensor(loss: Union[None, str, tf.Tensor] = None) -> tf.Tensor:
    """Returns the loss tensor of the default graph.

    Args:
      loss: a tensor, a tensor name (``"total_loss:0"`` or ``"total_loss"``) or None. With None
        the last distinct tensor of the ``tf.GraphKeys.LOSSES`` collection is used; Estimator
        appends its model_fn's loss there before the hooks start.

    Returns:
      A scalar tensor.

    Raises:
      ValueError: if no loss can be found (the message says how to pass one).
    """
    graph = tf.get_default_graph()
    if loss is None:
        seen, unique = set(), []
        for tensor in tf.get_collection(tf.GraphKeys.LOSSES):
            if id(tensor) not in seen:
                seen.add(id(tensor))
                unique.append(tensor)
        if not unique:
            raise ValueError(
                "No loss found: the tf.GraphKeys.LOSSES collection is empty. Pass the loss "
                "tensor or its name, e.g. ProgressHook(loss=loss) or loss='total_loss:0', or "
                "add it with tf.compat.v1.add_to_collection(tf.GraphKeys.LOSSES, loss)."
            )
        return unique[-1]
    if isinstance(loss, str):
        name = loss if ":" in loss else loss + ":0"
        try:
            return graph.get_tensor_by_name(name)
        except (KeyError, ValueError) as e:
            raise ValueError(f"`loss` must name a tensor of the graph. Got: {loss!r}") from e
    if isinstance(loss, (tf.Tensor, tf.Variable)):
        return loss
    raise TypeError(f"`loss` must be None, a tensor or a tensor name. Got: {loss!r}")


def _format_duration(secs: float) -> str:
    secs = int(round(secs))
    hours, rest = divmod(secs, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{seconds:02d}s"
    if minutes:
        return f"{minutes}m{seconds:02d}s"
    return f"{seconds}s"


def _plain_number(value: float, digits: int) -> str:
    """``value`` rounded to ``digits`` significant digits, written without an exponent.

    ``%g`` switches to ``1.064e+04`` from 10^digits on; a rate reads better as ``10640``.
    """
    if not math.isfinite(value) or value == 0:
        return f"{value:g}"
    decimals = digits - 1 - math.floor(math.log10(abs(value)))
    if decimals <= 0:
        return f"{round(value, decimals):.0f}"
    text = f"{value:.{decimals}f}"
    return text.rstrip("0").rstrip(".")


# The warnings _warn_if_info_hidden gave, each once per process.
_WARNED_INFO_HIDDEN: set = set()

_FIX_INFO_HIDDEN = (
    "Call tfest_kit.logs.setup() (or "
    "tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO))"
)


def _warn_if_info_hidden(message: str) -> None:
    """Logs ``message`` once per process if TensorFlow's INFO lines are not shown."""
    if message in _WARNED_INFO_HIDDEN or logging.getLogger("tensorflow").isEnabledFor(logging.INFO):
        return
    _WARNED_INFO_HIDDEN.add(message)
    tf.logging.warning(message)


def _terminal_handlers() -> list:
    """The handlers that may print to the terminal: TensorFlow's logger's and the root logger's.

    The root logger's are there for records that propagate (and for absl's handler, which
    ``tfest_kit.logs.setup`` sends TensorFlow's records to under ``absl.app.run``). Files are
    left out: a line written to one does not touch the terminal.
    """
    handlers = []
    for logger in (logging.getLogger("tensorflow"), logging.getLogger()):
        for handler in logger.handlers:
            if not isinstance(handler, logging.FileHandler) and handler not in handlers:
                handlers.append(handler)
    return handlers


def _moves_global_step() -> bool:
    """Whether the default graph increments its global step, i.e. it is a training graph."""
    global_step = tf.train.get_global_step()
    if global_step is None:
        return False
    name = global_step.op.name
    return any(
        op.type in ("AssignAdd", "AssignAddVariableOp") and op.inputs[0].op.name == name
        for op in tf.get_default_graph().get_operations()
    )


class _IntervalHook(tf.train.SessionRunHook):
    """Fetches ``{loss, step}`` every ``every_n_steps`` global steps and calls ``_report``.

    With ``_count_runs`` set by a subclass's ``begin()`` (evaluation and prediction, where the
    global step stands still) the step is the number of session runs instead, and the loss
    is fetched only when ``_find_loss`` returns one.
    """

    _count_runs = False

    def __init__(self, every_n_steps: int, loss=None, report_first_step: bool = True) -> None:
        self._every_n = check_int("every_n_steps", every_n_steps)
        self._loss_arg = loss
        self._report_first = report_first_step

    def begin(self) -> None:
        self._global_step = tf.train.get_global_step()
        if self._global_step is None and not self._count_runs:
            raise RuntimeError(
                f"{type(self).__name__} needs a global step: call "
                "tf.compat.v1.train.get_or_create_global_step() before building the train op."
            )
        self._loss = self._find_loss()
        if self._loss is not None and self._loss.shape.num_elements() not in (None, 1):
            # float() of a per-example loss failed at the first printed step, with NumPy's
            # "only length-1 arrays can be converted", and stopped training.
            raise ValueError(
                f"{type(self).__name__} shows a scalar loss, but {self._loss.name} has shape "
                f"{self._loss.shape}: a per-example loss (tf.losses.*(reduction=NONE) puts one "
                f"in tf.GraphKeys.LOSSES). Pass {type(self).__name__}(loss=tf.reduce_mean(…)) "
                "or the loss you minimize."
            )
        self._step = None  # predicted global step after the last run
        self._fetching = False
        self._last_time = None
        self._last_step = None
        self._rate_step = None  # where the average rate for the ETA starts: the first print
        self._rate_time = None

    def _find_loss(self) -> Optional[tf.Tensor]:
        return find_loss_tensor(self._loss_arg)

    def after_create_session(self, session, coord) -> None:
        del coord
        self._step = 0 if self._count_runs else int(session.run(self._global_step))
        self._last_step = self._step
        self._last_time = time.monotonic()
        self._reported_once = False
        self._steps_per_run = 1.0
        self._runs_since_report = 0

    def before_run(self, run_context):
        # Predicted from the step the last run ended at; after_run checks the step it reads.
        self._fetching = self._due(self._step + self._steps_per_run, self._step)
        if self._fetching and self._loss is not None:
            return tf.train.SessionRunArgs(self._loss)
        return None

    def _due(self, step: float, since: float) -> bool:
        """Whether ``step`` gets a line: the first, the last, or past a multiple of every_n_steps.

        The multiple is counted from ``since`` (runs of one step land on it).
        """
        return (
            step // self._every_n > since // self._every_n
            or (self._report_first and not self._reported_once)
            or self._reaches_end(step)
        )

    def _reaches_end(self, next_step: float) -> bool:
        """Whether the coming run is predicted to be the last one; the base class knows none."""
        del next_step
        return False

    def after_run(self, run_context, run_values) -> None:
        self._runs_since_report += 1
        if not self._fetching:
            self._step += self._steps_per_run
            return
        step = self._read_step(run_context.session)
        if not self._due(step, self._last_step):
            # The prediction crossed a multiple of every_n_steps, the step did not (on a
            # cluster other workers move it too): printing here and again once it crosses
            # gave two lines a few steps apart ("step 1698", "step 1701").
            self._step = step
            return
        loss = None if self._loss is None else float(np.mean(run_values.results))
        self._report_now(loss, step)

    def _read_step(self, session) -> int:
        if self._count_runs:
            return self._last_step + self._runs_since_report
        # A separate read after the step: the value is the step just finished, whereas a
        # fetch in the same run races with the increment in models that assign the step.
        return int(session.run(self._global_step))

    def _report_now(self, loss: Optional[float], step: int, final: bool = False) -> None:
        now = time.monotonic()
        steps = step - self._last_step
        # Before the first print the time since session creation is mostly set-up, not steps:
        # a rate from it was several times too low (and the ETA as much too long).
        elapsed = now - self._last_time if self._reported_once else None
        self._report(loss, step, elapsed, steps, final)
        if not self._reported_once:
            self._rate_step, self._rate_time = step, now
        self._reported_once = True
        if steps > 0:
            self._steps_per_run = steps / self._runs_since_report
        self._runs_since_report = 0
        self._step, self._last_step, self._last_time = step, step, now

    def _report(
        self, loss: Optional[float], step: int, elapsed: Optional[float], steps: int, final: bool
    ) -> None:
        """Prints one line.

        Args:
          loss: the loss at ``step``, or None when it was not fetched.
          step: the global step (or the number of runs) just finished.
          elapsed: seconds since the last print; None at the first print, where no rate is
            measured yet.
          steps: steps (or runs) since the last print.
          final: the line is printed as the session ends, not after a run.
        """
        raise NotImplementedError


class LossLoggingHook(_IntervalHook):
    """Logs ``loss = …, step = … (… sec)`` plus steps/sec and examples/sec, one line per interval.

    Used by the fallback ``TPUEstimator`` in place of Estimator's ``LoggingTensorHook`` plus
    ``StepCounterHook`` pair, which print two to three lines per interval and fetch the step and
    loss on every step.

    Args:
      every_n_steps: print every this many global steps (and after the first step).
      batch_size: global batch size for examples/sec; None leaves it out.
      output_dir: where to write ``global_step/sec`` and ``examples/sec`` summaries (as
        Estimator's ``StepCounterHook`` does); None writes none.
      loss: the loss tensor or its name; None finds it (see :func:`find_loss_tensor`).

    Attributes:
      log_lines: print the lines (True); False writes the summaries only, for a run whose
        other hooks print the loss already (the fallback TPUEstimator sets it).

    Example:

        hook = LossLoggingHook(every_n_steps=100, batch_size=32)
    """

    def __init__(
        self,
        every_n_steps: int = 100,
        batch_size: Optional[int] = None,
        output_dir: Optional[str] = None,
        loss=None,
    ) -> None:
        super().__init__(every_n_steps, loss)
        self._batch_size = batch_size
        self._output_dir = output_dir
        self.log_lines = True

    @property
    def writes_summaries(self) -> bool:
        """Whether the hook writes ``global_step/sec`` summaries (it has an ``output_dir``)."""
        return bool(self._output_dir)

    def begin(self) -> None:
        super().begin()
        self._writer = (
            tf.summary.FileWriterCache.get(self._output_dir) if self._output_dir else None
        )
        if self.log_lines:
            # TensorFlow shows WARNING and up by default: the fallback TPUEstimator's promised
            # loss lines would not appear, without a word.
            _warn_if_info_hidden(
                "Loss lines (LossLoggingHook, which tfest_kit's TPUEstimator adds) will not "
                f"appear: TensorFlow's INFO lines are not shown. {_FIX_INFO_HIDDEN}."
            )

    def _report(
        self, loss: float, step: int, elapsed: Optional[float], steps: int, final: bool
    ) -> None:
        del final  # this hook prints after runs only
        if elapsed is None or steps <= 0 or elapsed <= 0:
            if self.log_lines:
                # As Estimator's LoggingTensorHook, whose first line has no time either.
                tf.logging.info("loss = %g, step = %d", loss, step)
            return
        steps_per_sec = steps / elapsed
        line = "loss = %g, step = %d (%.3f sec); global_step/sec: %s"
        args = [loss, step, elapsed, _plain_number(steps_per_sec, 4)]
        values = [tf.Summary.Value(tag="global_step/sec", simple_value=steps_per_sec)]
        if self._batch_size:
            examples_per_sec = steps_per_sec * self._batch_size
            line += ", examples/sec: %.1f"
            args.append(examples_per_sec)
            values.append(tf.Summary.Value(tag="examples/sec", simple_value=examples_per_sec))
        if self.log_lines:
            tf.logging.info(line, *args)
        if self._writer is not None:
            self._writer.add_summary(tf.Summary(value=values), step)


class ProgressHook(_IntervalHook):
    """Shows step / total, loss, steps/sec, examples/sec and ETA every ``every_n_steps`` steps.

    On a terminal (``stream.isatty()``) the hook redraws one live line with ``\\r``; a log line
    printed meanwhile (through TensorFlow's or the root logger's handlers) first ends the bar's
    line, so it starts a line of its own. Otherwise the hook writes one plain line per
    interval: to ``stream`` when one is given, else through ``tf.logging`` at INFO (with a
    warning, once, when INFO lines are not shown). The loss is fetched only on the steps that
    print, so the other steps cost nothing. The first line (after the first step) has no rate
    or ETA: that step's time is mostly set-up. The last step always gets a line: with its loss
    when it is ``total_steps``; without, and ``stopped`` instead of an ETA, when training stops
    between two intervals for another reason (data exhausted, a stop hook, Ctrl-C).

    In ``evaluate()`` (and ``EvalSpec(hooks=…)``) and ``predict()`` the global step does not
    move, so the hook counts batches instead (``eval batch 10/40``, ``batch 10``); the loss is
    shown when the graph has one in ``tf.GraphKeys.LOSSES`` (or ``loss`` names it).

    State is reset in ``begin()``, so one instance can be reused across ``train()`` calls.

    Args:
      every_n_steps: update every this many global steps (and after the first step).
      total_steps: the step training ends at (e.g. ``max_steps``), for the percentage and ETA;
        in evaluation or prediction, the number of batches.
      batch_size: global batch size, for examples/sec.
      loss: the loss tensor or its name; None uses the last tensor of
        ``tf.GraphKeys.LOSSES`` (Estimator puts its loss there).
      stream: where the lines go (a live bar when it is a terminal); None: a live bar on
        ``sys.stderr`` when that is a terminal, else ``tf.logging``.

    Raises:
      ValueError: for a non-positive ``every_n_steps``, ``total_steps`` or ``batch_size``.
      RuntimeError: when the session starts, in a training graph without a global step (as
        the official ``StepCounterHook`` does).

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
        # Prediction: no loss, no train op (Estimator puts its training loss in LOSSES) and
        # nothing that moves the global step (a TF1 loop's minimize(loss, global_step)).
        self._count_runs = self._evaluating or (
            self._loss_arg is None
            and not tf.get_collection(tf.GraphKeys.LOSSES)
            and not tf.get_collection(tf.GraphKeys.TRAIN_OP)
            and not _moves_global_step()
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
            # Handlers filter a record just before they print it: the moment to end the bar's
            # line (a filter on the handler also sees records that propagate from other loggers).
            self._watched_handlers = _terminal_handlers()
            for handler in self._watched_handlers:
                handler.addFilter(self._end_bar_line)
        elif self._stream_arg is None:
            _warn_if_info_hidden(
                "ProgressHook: output is not a terminal and TensorFlow's INFO lines are not "
                f"shown, so progress lines will not appear. {_FIX_INFO_HIDDEN}, or pass "
                "ProgressHook(stream=sys.stderr)."
            )

    def after_create_session(self, session, coord) -> None:
        super().after_create_session(session, coord)
        if self._total and not self._count_runs and self._step >= self._total:
            # train(steps=N) on a model_dir with a checkpoint: the lines would read
            # "step 1030/1000 (100%), ETA 0s" all the way.
            tf.logging.warning(
                "ProgressHook: training starts at step %d, already at total_steps=%d, so the "
                "percentage and ETA mean nothing. total_steps is the global step training "
                "ends at: with train(steps=N) pass total_steps=%d + N, or call "
                "train(max_steps=…) instead.",
                self._step,
                self._total,
                self._step,
            )

    def _reaches_end(self, next_step: float) -> bool:
        # The last step gets its line, with its loss, also between two intervals.
        return self._total is not None and self._step < self._total <= next_step

    def _find_loss(self) -> Optional[tf.Tensor]:
        if self._loss_arg is None and not tf.get_collection(tf.GraphKeys.LOSSES):
            if not self._count_runs:
                # A TF1 loop's own loss (tf.reduce_mean …) is in no collection.
                tf.logging.info(
                    "ProgressHook: no loss in tf.GraphKeys.LOSSES, so the lines show none; "
                    "pass ProgressHook(loss=loss) to show it."
                )
            # Estimator keeps its evaluation loss out of LOSSES; tf.losses.* put theirs there.
            return None
        return find_loss_tensor(self._loss_arg)

    def _line(
        self, loss: Optional[float], step: int, elapsed: Optional[float], steps: int, final: bool
    ) -> str:
        unit = "batch" if self._count_runs else "step"
        label = "eval batch" if self._evaluating else unit
        parts = [f"{label} {step}/{self._total}" if self._total else f"{label} {step}"]
        if self._total:
            percent = round(100 * step / self._total)
            # Rounded as tqdm does, but step 995 of 1000 is not 100 % done.
            percent = min(percent, 99) if step < self._total else 100
            parts[0] += f" ({percent}%)"
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
            # The session ends short of total_steps (a stop was requested, the data ran out):
            # an ETA would promise steps that will not run.
            parts.append("stopped")
        return ", ".join(parts)

    def _report(
        self, loss: Optional[float], step: int, elapsed: Optional[float], steps: int, final: bool
    ) -> None:
        line = self._line(loss, step, elapsed, steps, final)
        if not self._live:
            if self._stream_arg is None:
                tf.logging.info("%s", line)
            else:
                self._stream.write(line + "\n")
                self._stream.flush()
            return
        if self._total:
            width = 20
            done = int(width * min(1.0, step / self._total))
            line = "[" + "#" * done + "." * (width - done) + "] " + line
        self._stream.write("\r" + line + "\033[K")
        self._stream.flush()
        self._bar_open = True

    def _end_bar_line(self, record: Optional[logging.LogRecord] = None) -> bool:
        """Ends the line the live bar is on, if open; as a logging filter, lets every record pass.

        The bar ends without a newline so that it can be redrawn in place; a log line printed
        then would start on the bar's line (``… ETA 1s\\x1b[KINFO:tensorflow:…``). Ending the
        bar's line first leaves the bar as it was, on a line of its own, with the record below;
        the next update draws a new bar under the record.
        """
        del record
        if self._bar_open:
            self._bar_open = False
            self._stream.write("\n")
            self._stream.flush()
        return True

    def end(self, session) -> None:
        # Training that stops between two intervals (data exhausted, a stop hook, a step
        # short of total_steps) ends on a line of where it stopped; its loss was not fetched.
        if self._runs_since_report:
            step = self._read_step(session)
            if step > self._last_step:
                self._report_now(None, step, final=True)
        elif self._reported_once and self._total and self._last_step < self._total:
            # The stop came right after a printed step, whose line has an ETA for steps that
            # will not run: say where it stopped.
            self._report(None, self._last_step, None, 0, True)
        self._stop_watching()
        self._end_bar_line()

    def _stop_watching(self) -> None:
        for handler in self._watched_handlers:
            handler.removeFilter(self._end_bar_line)
        self._watched_handlers = []
