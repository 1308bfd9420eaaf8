"""Cluster tasks under tf.estimator's ``_TrainingExecutor``, with what its evaluator loop lacks.

The evaluator task of a cluster evaluates (and exports) checkpoints the chief writes, and the
chief deletes all but the newest ``RunConfig(keep_checkpoint_max=…)`` of them (default 5). With
frequent saves it deletes the one being evaluated: the official loop then ends the evaluator
with "Restoring from checkpoint failed" or "not a valid checkpoint", and no later checkpoint
is evaluated or exported. :class:`TaskExecutor` skips such a checkpoint with one warning and
goes on to the next; its loop also logs its wait for a new checkpoint once, where TensorFlow
logs "Waiting … before starting next eval run" on every turn (every second with
``throttle_secs=1``). On the other tasks, a gRPC server that cannot start names the task and
its address from ``TF_CONFIG``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import time
from typing import Any, Callable, Optional

from tfest_kit._errors import TfestKitError
from tfest_kit._tf import ContinuousEvalListener, EvalStatus, TrainingExecutor, tf, tf2

__all__ = ["TaskExecutor", "export_unless_vanished", "vanished_checkpoint"]

# What to do about it, in every warning about a checkpoint deleted under the evaluator.
_KEEP_MORE = (
    "The chief keeps only the newest RunConfig(keep_checkpoint_max=…) checkpoints (default 5): "
    "raise it (or save less often) so that checkpoints outlive their evaluation and export."
)


def _checkpoint_exists(path: str) -> bool:
    return tf.gfile.Exists(path + ".index") and bool(tf.gfile.Glob(path + ".data-*"))


def vanished_checkpoint(
    error: BaseException, model_dir: str, checkpoint_path: Optional[str] = None
) -> Optional[str]:
    """The checkpoint ``error`` is about, if its files are gone; else None.

    Only a ``NotFoundError`` or ``ValueError`` whose message names the checkpoint counts
    (``checkpoint_path``, or else any ``model_dir/<name>-<step>``), and only when that
    checkpoint's files are no longer all there, checked now: any other error is not
    one to skip.
    """
    if not isinstance(error, (tf.errors.NotFoundError, ValueError)):
        return None
    message = str(error)
    if checkpoint_path:
        named = [checkpoint_path] if checkpoint_path in message else []
    else:
        prefix = os.path.join(model_dir, "")
        named = re.findall(re.escape(prefix) + r"[^\s'\"/]+?-\d+", message)
    return next((path for path in named if not _checkpoint_exists(path)), None)


def _step(path: str) -> int:
    return int(path.rsplit("-", 1)[1])


def _not_older(path: str, newest: Optional[str]) -> bool:
    """Whether checkpoint ``path`` is the turn's newest (or a later one), not an older file."""
    if newest is None:
        return True
    return os.path.dirname(path) == os.path.dirname(newest) and _step(path) >= _step(newest)


def _temp_dirs(export_path: str) -> set[str]:
    if not tf.gfile.IsDirectory(export_path):
        return set()
    entries = (e.rstrip("/") for e in tf.gfile.ListDirectory(export_path))
    return {os.path.join(export_path, e) for e in entries if e.startswith("temp-")}


def export_unless_vanished(
    export: Callable[[], Any], name: str, export_path: str, checkpoint_path: Optional[str]
) -> Any:
    """Returns ``export()``; None, with a warning, if ``checkpoint_path`` vanished meanwhile.

    ``export_saved_model`` builds the export in ``export_path/temp-<timestamp>`` and restores
    the checkpoint into it; when the chief deletes the checkpoint first, it fails ("not a
    valid checkpoint") and leaves that directory behind. It is deleted here, and the next
    evaluation's export gets its chance. Errors while the checkpoint still exists propagate.

    Args:
      export: makes the export, e.g. ``lambda: exporter.export(...)``.
      name: the exporter's name, for the warning.
      export_path: the exporter's directory, where ``temp-*`` directories are made.
      checkpoint_path: the checkpoint being exported.
    """
    before = _temp_dirs(export_path)
    try:
        return export()
    except (tf.errors.NotFoundError, ValueError) as e:
        if not checkpoint_path or not vanished_checkpoint(
            e, os.path.dirname(checkpoint_path), checkpoint_path
        ):
            raise
        for path in sorted(_temp_dirs(export_path) - before):
            with contextlib.suppress(tf.errors.NotFoundError):
                tf.gfile.DeleteRecursively(path)  # gs:// too, where shutil sees nothing
        tf.logging.warning(
            "Exporter %r: checkpoint %s was deleted while it was being exported; this export is "
            "skipped (%s). %s",
            name,
            checkpoint_path,
            type(e).__name__,
            _KEEP_MORE,
        )
        return None


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


class TaskExecutor(TrainingExecutor):
    """``tf.estimator``'s executor of a cluster task, for ``train_and_evaluate``.

    The same as the official one, except that: the evaluator skips a checkpoint deleted
    while it was being evaluated (see the module docstring; one warning, the turn throttled as
    the official loop throttles one, and the error raised if the same checkpoint is missing
    again) and logs its waits once; a gRPC server that cannot start raises ``TfestKitError``
    naming the task and its address.

    Args:
      estimator: the Estimator.
      train_spec: the ``TrainSpec``.
      eval_spec: the ``EvalSpec``.
      continuous_eval_listener: the evaluator loop's ``_ContinuousEvalListener``, or None.
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
                _KEEP_MORE,
            )
            # As the official loop throttles a turn; with no result it then goes on.
            time.sleep(max(0.0, throttle_secs - (time.time() - start)))
            return None, False

    def _start_std_server(self, config):
        try:
            return super()._start_std_server(config)
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
