"""Hooks that stop training safely: :class:`NanGuardHook` and :class:`PreemptionHook`."""

from __future__ import annotations

import glob
import math
import numbers
import os
import signal
import threading
from collections.abc import Sequence
from typing import Optional, Union

from tfest_kit._checks import check_bool
from tfest_kit._errors import TfestKitError
from tfest_kit._progress import find_loss_tensor
from tfest_kit._tf import tf
from tfest_kit.cluster import is_chief_task

__all__ = ["NanGuardHook", "NanLossError", "PreemptionHook"]


SignalArg = Union[int, str, signal.Signals]


# Signals Python cannot install a handler for.
_UNCATCHABLE = {getattr(signal, name) for name in ("SIGKILL", "SIGSTOP") if hasattr(signal, name)}


def _check_signals(signals) -> tuple:
    """``signals`` (one signal or a list) as a tuple of distinct ``signal.Signals``."""
    if isinstance(signals, (numbers.Integral, str)):  # one signal; signal.Signals is an int
        signals = [signals]
    try:
        entries = list(signals)
    except TypeError:
        raise TypeError(
            "`signals` must be a signal or a list of signals (numbers, signal.Signals or names "
            f"like 'SIGTERM'). Got: {signals!r}"
        ) from None
    if not entries:
        raise ValueError(f"`signals` must name at least one signal. Got: {signals!r}")
    checked = []
    for entry in entries:
        if isinstance(entry, str):
            if entry not in signal.Signals.__members__:
                raise ValueError(
                    "`signals` entries must be signal names such as 'SIGTERM' (see "
                    f"signal.Signals). Got: {entry!r}"
                )
            entry = signal.Signals[entry]
        elif isinstance(entry, numbers.Integral) and not isinstance(entry, bool):
            try:
                entry = signal.Signals(int(entry))
            except ValueError:
                raise ValueError(
                    "`signals` entries must be signal numbers such as signal.SIGTERM. "
                    f"Got: {entry!r}"
                ) from None
        else:
            raise TypeError(
                "`signals` entries must be signal numbers, signal.Signals or names like "
                f"'SIGTERM'. Got: {entry!r}"
            )
        if entry in _UNCATCHABLE:
            raise ValueError(
                "`signals` entries must be signals a process can catch (not SIGKILL or SIGSTOP); "
                f"use SIGTERM or SIGINT. Got: {entry.name}"
            )
        if entry not in checked:
            checked.append(entry)
    return tuple(checked)


class NanLossError(TfestKitError, tf.train.NanLossDuringTrainingError):
    """The loss became NaN or infinite. Also a ``tf.train.NanLossDuringTrainingError``.

    Attributes:
      step: the global step whose loss was not finite.
      last_finite_loss: the last finite loss seen, or None.
      last_finite_step: the step of ``last_finite_loss``, or None.
    """

    def __init__(self, message: str, step: int, last_finite_loss, last_finite_step) -> None:
        super().__init__(message)
        self.message = message
        self.step = step
        self.last_finite_loss = last_finite_loss
        self.last_finite_step = last_finite_step

    def __str__(self) -> str:  # NanLossDuringTrainingError hard-codes its text
        return self.message


class NanGuardHook(tf.train.SessionRunHook):
    """Stops training when the loss becomes NaN or infinite, naming the step and last good loss.

    By default it raises :class:`NanLossError` (a ``tfest_kit.TfestKitError`` and a
    ``tf.compat.v1.train.NanLossDuringTrainingError``, so code that catches either keeps
    working). The last checkpoint saved before stays the latest: the session closes on the
    exception without a final save, and when the session's checkpoint saver ran first in the
    same step (Estimator and ``MonitoredTrainingSession`` run it before the hooks passed to
    them), the checkpoint it wrote of the diverged weights is renamed ``diverged-<name>``
    and taken out of the directory's checkpoint list; the message says so. With
    ``fail=False`` it logs the same message and requests a stop instead, for
    ``MonitoredTrainingSession`` loops; a checkpoint saver in that session then saves the
    diverged weights as the latest checkpoint. Under Estimator ``fail=False`` does not
    help: Estimator's own ``NanTensorHook`` raises right after.

    Without a global step (a hand-written loop) the message counts session runs instead.
    The step named is the one the failing run started at, the step its loss was computed for.

    The loss is fetched every step; it is the same tensor Estimator already fetches, so the
    run does no extra work.

    Args:
      loss: the loss tensor or its name; None uses the last tensor of ``tf.GraphKeys.LOSSES``.
      fail: raise (True) or just stop (False).

    Raises:
      TypeError: if ``fail`` is not a bool.

    Example:

        estimator.train(input_fn, max_steps=1000, hooks=[NanGuardHook()])
    """

    def __init__(self, loss=None, fail: bool = True) -> None:
        self._loss_arg = loss
        self._fail = check_bool("fail", fail)

    def begin(self) -> None:
        self._loss = find_loss_tensor(self._loss_arg)
        self._global_step = tf.train.get_global_step()
        self._last_finite = None
        self._last_finite_step = None
        self._runs = 0
        self._first_step = None

    def after_create_session(self, session, coord) -> None:
        if self._global_step is not None:
            self._first_step = int(session.run(self._global_step))

    def before_run(self, run_context):
        fetches = {"loss": self._loss}
        if self._global_step is not None:
            fetches["step"] = self._global_step
        return tf.train.SessionRunArgs(fetches)

    def after_run(self, run_context, run_values) -> None:
        loss = float(run_values.results["loss"])
        self._runs += 1
        step, where = self._step(run_values.results.get("step")), "step"
        if self._global_step is None:
            step, where = self._runs, "session run"
        if math.isfinite(loss):
            self._last_finite, self._last_finite_step = loss, step
            return
        if self._last_finite is None:
            previous = "no finite loss was seen before"
        else:
            previous = (
                f"the last finite loss was {self._last_finite:g} at {where} "
                f"{self._last_finite_step}"
            )
        message = (
            f"Loss became {loss} at {where} {step}; {previous}. Lower the learning rate, clip "
            "gradients or check the input for NaN/inf values."
        )
        if self._fail and step is not None and self._global_step is not None:
            message += _set_aside_checkpoints_after(step)
        tf.logging.error("%s", message)
        if self._fail:
            raise NanLossError(message, step, self._last_finite, self._last_finite_step)
        run_context.request_stop()

    def _step(self, fetched: Optional[int]) -> Optional[int]:
        """The global step this run started at.

        The step fetched with the loss is read while the train op increments it, so it is
        either that step or the next one, by thread timing. Counted from the step at session
        start it is exact; the fetched value wins only when it is further off than the
        increment, i.e. other workers move the step too.
        """
        if fetched is None or self._first_step is None:
            return fetched
        counted = self._first_step + self._runs - 1
        return counted if 0 <= int(fetched) - counted <= 1 else int(fetched)


def _set_aside_checkpoints_after(step: int) -> str:
    """Renames the checkpoints savers wrote after ``step`` (the weights its NaN loss updated).

    Returns a sentence for the error message, or "" when there were none.
    """
    moved = []
    for saver in tf.get_collection(tf.GraphKeys.SAVERS):
        for path in list(getattr(saver, "last_checkpoints", [])):
            saved_at = _checkpoint_step(path)
            if saved_at is None or saved_at <= step:
                continue
            directory, name = os.path.split(path)
            for data in tf.gfile.Glob(glob.escape(path) + ".*"):  # "lr[0.1]" is no pattern
                renamed = os.path.join(directory, "diverged-" + os.path.basename(data))
                tf.gfile.Rename(data, renamed, overwrite=True)
            state = tf.train.get_checkpoint_state(directory)
            if state is not None:
                kept = [p for p in state.all_model_checkpoint_paths if os.path.basename(p) != name]
                if kept:
                    tf.train.update_checkpoint_state(directory, kept[-1], kept)
                else:  # nothing saved before: no checkpoint is the latest
                    tf.gfile.Rename(
                        os.path.join(directory, "checkpoint"),
                        os.path.join(directory, "diverged-checkpoint"),
                        overwrite=True,
                    )
            moved.append((name, directory))
    if not moved:
        return ""
    latest = tf.train.latest_checkpoint(moved[-1][1])
    names = ", ".join(name for name, _ in moved)
    return (
        f" The checkpoint saved after that step ({names}) holds the diverged weights, so "
        "its files were renamed with the prefix 'diverged-'; the latest checkpoint is "
        + (os.path.basename(latest) if latest else "none (there was no earlier one)")
        + "."
    )


def _checkpoint_step(path: str) -> Optional[int]:
    suffix = path.rsplit("-", 1)[-1]
    return int(suffix) if suffix.isdigit() else None


class PreemptionHook(tf.train.SessionRunHook):
    """On SIGTERM / SIGINT: finish the current step, save a checkpoint there, stop cleanly.

    The signal only sets a flag; the step that is running completes, then the hook saves a
    checkpoint at that global step (chief only) and requests a stop, so ``train()`` returns
    normally and a restart resumes from exactly that step. A second signal while stopping goes
    to the previous handler (e.g. Ctrl-C twice kills the program). Previous handlers are put
    back in ``end()`` (after a run that raised: at the next signal, which then goes to them).
    Several hooks may run at once; each sees the signal. After training, :attr:`preempted`
    tells the program whether to exit instead of going on to evaluation or export.

    Where the checkpoint goes: ``checkpoint_dir`` when given (the hook saves with its own
    ``tf.train.Saver``); otherwise the session's own ``CheckpointSaverHook`` writes it when the
    session closes - present under Estimator unless ``RunConfig`` switches checkpoints off, and
    in ``MonitoredTrainingSession`` when it has a ``checkpoint_dir`` and a save interval.

    The hook logs one line: ``SIGINT received: stopping after step 207``, with ``; saved PATH``
    when it saved the checkpoint itself (``checkpoint_dir``). The session's
    ``CheckpointSaverHook`` logs its own save.

    Caveat: Python signal handlers can only be installed from the main thread; elsewhere the
    hook logs a warning and does nothing.

    Args:
      checkpoint_dir: directory to save to; None relies on the session's checkpoint saver.
      signals: the signals to catch: a list of ``signal.Signals``, signal numbers or names
        (``"SIGTERM"``), or one of them.
      is_chief: whether this task saves checkpoints; None reads ``TF_CONFIG`` (like
        ``RunConfig``). Non-chief tasks only stop.

    Raises:
      ValueError: for no signals, an unknown signal or one that cannot be caught (SIGKILL,
        SIGSTOP).
      TypeError: for a signal that is neither a number nor a name, or an ``is_chief`` that is
        neither None nor a bool.

    Example:

        hook = PreemptionHook()
        estimator.train(input_fn, max_steps=10000, hooks=[hook])
        if hook.preempted:
            sys.exit(0)   # the scheduler restarts us; training resumes from the checkpoint
    """

    def __init__(
        self,
        checkpoint_dir: Optional[str] = None,
        signals: Union[SignalArg, Sequence[SignalArg]] = (signal.SIGTERM, signal.SIGINT),
        is_chief: Optional[bool] = None,
    ) -> None:
        self._checkpoint_dir = checkpoint_dir
        # Checked here: a bad entry would otherwise fail only when training starts and the
        # handlers are installed.
        self._signals = _check_signals(signals)
        if is_chief is not None:
            check_bool("is_chief", is_chief, "or None")
        self._is_chief_arg = is_chief
        self._preempted: Optional[int] = None
        self._session = None

    @property
    def preempted(self) -> Optional[int]:
        """The signal number that stopped the last run, or None."""
        return self._preempted

    def begin(self) -> None:
        # A run that ended in an exception never reached end(): leave the dispatcher first.
        _unregister(self)
        self._preempted = None
        self._saved_step = None
        self._session = None
        if self._is_chief_arg is None:
            self._is_chief = is_chief_task("PreemptionHook")
        else:
            self._is_chief = bool(self._is_chief_arg)
        self._global_step = tf.train.get_global_step()
        self._saver = None
        if self._checkpoint_dir and self._is_chief:
            # Built here because the graph is finalized once the session exists.
            self._saver = tf.train.Saver(sharded=True, save_relative_paths=True)
            tf.gfile.MakeDirs(self._checkpoint_dir)

    def after_create_session(self, session, coord) -> None:
        del coord
        if threading.current_thread() is not threading.main_thread():
            tf.logging.warning(
                "PreemptionHook: not in the main thread, so signal handlers cannot be "
                "installed; preemption will not be handled."
            )
            return
        self._session = session
        _register(self)

    def _is_live(self) -> bool:
        # A run that raised never called end(); its closed session marks the hook as stale.
        session = self._session
        return session is not None and not getattr(session, "_closed", False)

    def after_run(self, run_context, run_values) -> None:
        if self._preempted is None or self._saved_step is not None:
            return
        step = None
        if self._global_step is not None:
            step = int(run_context.session.run(self._global_step))
        name = signal.Signals(self._preempted).name
        where = "this step" if step is None else f"step {step}"
        if self._saver is not None:
            path = self._saver.save(
                run_context.session,
                os.path.join(self._checkpoint_dir, "model.ckpt"),
                global_step=step,
            )
            tf.logging.warning("%s received: stopping after %s; saved %s", name, where, path)
        else:
            # Whether the session's CheckpointSaverHook (Estimator's, unless checkpoints are
            # off) saves as it closes, a hook cannot tell: the savers' lists also hold what
            # was restored, and file times are in whole seconds. So the line claims nothing;
            # the saver hook logs its own "Saving checkpoints for N".
            tf.logging.warning("%s received: stopping after %s", name, where)
        self._saved_step = step if step is not None else -1
        run_context.request_stop()

    def end(self, session) -> None:
        del session
        _unregister(self)


# One handler per signal for all PreemptionHooks, so that several hooks (a recipe's and the
# user's) each see the signal and each puts back exactly what was there before the first.
_ACTIVE: list = []
_ORIGINAL: dict = {}


def _register(hook: PreemptionHook) -> None:
    if hook not in _ACTIVE:
        _ACTIVE.append(hook)
    for signum in hook._signals:
        if signum not in _ORIGINAL:
            _ORIGINAL[signum] = signal.getsignal(signum)
            signal.signal(signum, _dispatch)


def _unregister(hook: PreemptionHook) -> None:
    if hook in _ACTIVE:
        _ACTIVE.remove(hook)
    _release_unused()


def _release_unused() -> None:
    wanted = {signum for hook in _ACTIVE for signum in hook._signals}
    for signum in list(_ORIGINAL):
        if signum not in wanted:
            _release(signum)


def _release(signum: int):
    previous = _ORIGINAL.pop(signum)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signum, previous if previous is not None else signal.SIG_DFL)
    return previous


def _dispatch(signum, frame) -> None:
    for hook in [hook for hook in _ACTIVE if not hook._is_live()]:
        _ACTIVE.remove(hook)
    listening = [hook for hook in _ACTIVE if signum in hook._signals]
    waiting = [hook for hook in listening if hook._preempted is None]
    for hook in waiting:
        hook._preempted = signum
    if waiting:
        return
    # A second signal while stopping (the user insists), or no live run left: hand it to
    # whoever had it before the first hook.
    previous = _release(signum) if signum in _ORIGINAL else signal.SIG_DFL
    if callable(previous):
        previous(signum, frame)
    elif previous != signal.SIG_IGN:
        signal.raise_signal(signum)
