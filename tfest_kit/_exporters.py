"""Export directories: finding the newest complete export, and an exporter that keeps the best.

See :mod:`tfest_kit.serving` for the public names.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from typing import Any, Callable, Optional

import numpy as np

from tfest_kit._checks import check_int
from tfest_kit._errors import TfestKitError
from tfest_kit._eval_events import eval_dirs, metrics_by_step
from tfest_kit._metric_direction import higher_is_better
from tfest_kit._tf import estimator, tf
from tfest_kit._vanished_checkpoint import export_unless_vanished

__all__ = [
    "ExportNotFoundError",
    "best_exporter",
    "latest_export",
    "complete_exports",
    "METRICS_FILE",
]

# Written into each export by the best exporter (through ``assets_extra``, so it appears
# atomically with the export) to remember which metric value the export had.
METRICS_FILE = "tfest_kit_eval_metrics.json"


class ExportNotFoundError(TfestKitError, FileNotFoundError):
    """No complete SavedModel export was found where one was expected."""


def _is_complete(path: str) -> bool:
    has_graph = tf.gfile.Exists(os.path.join(path, "saved_model.pb")) or tf.gfile.Exists(
        os.path.join(path, "saved_model.pbtxt")
    )
    return has_graph and tf.gfile.Exists(os.path.join(path, "variables", "variables.index"))


def complete_exports(export_dir_base: str) -> list[str]:
    """Returns the complete numbered exports under ``export_dir_base``, oldest first.

    ``temp-*`` directories (an export in progress or one that crashed) and numbered directories
    without ``saved_model.pb`` and ``variables/variables.index`` are left out.
    """
    if not tf.gfile.IsDirectory(export_dir_base):
        return []
    versions = []
    for entry in tf.gfile.ListDirectory(export_dir_base):
        entry = entry.rstrip("/")
        if entry.isdigit() and _is_complete(os.path.join(export_dir_base, entry)):
            versions.append(int(entry))
    return [os.path.join(export_dir_base, str(v)) for v in sorted(versions)]


def latest_export(export_dir_base: str) -> str:
    """Returns the newest complete export under ``export_dir_base``.

    Exports are the numbered (timestamp) directories ``Estimator.export_saved_model`` writes.
    One without ``saved_model.pb`` and ``variables/variables.index`` (a crash mid-export or a
    partial copy) and ``temp-*`` directories are never returned.

    Args:
      export_dir_base: the directory given to ``export_saved_model``, e.g.
        ``model_dir/export/best``.

    Returns:
      The path of the newest complete export.

    Raises:
      ExportNotFoundError: (a ``TfestKitError`` and ``FileNotFoundError``) if there is none;
        the message lists what the directory holds.

    Example:

        predictor = Predictor(latest_export(os.path.join(model_dir, "export", "best")))
    """
    exports = complete_exports(export_dir_base)
    if exports:
        return exports[-1]
    if not tf.gfile.IsDirectory(export_dir_base):
        raise ExportNotFoundError(
            f"No export found: {export_dir_base!r} is not a directory. Pass the directory given "
            "to export_saved_model (or an exporter's model_dir/export/NAME)."
        )
    entries = sorted(e.rstrip("/") for e in tf.gfile.ListDirectory(export_dir_base))
    raise ExportNotFoundError(
        f"No complete export in {export_dir_base!r}: expected numbered directories holding "
        f"saved_model.pb and variables/variables.index. It contains: {entries or 'nothing'}"
    )


def _read_export_metrics(export_dir: str) -> Optional[dict]:
    path = os.path.join(export_dir, "assets.extra", METRICS_FILE)
    if not tf.gfile.Exists(path):
        return None
    try:
        with tf.gfile.GFile(path) as f:
            return json.load(f)
    except (ValueError, OSError) as e:
        tf.logging.warning("Ignoring unreadable export metrics %s: %s", path, e)
        return None


def _scalar(value: Any) -> Optional[float]:
    try:
        number = float(np.asarray(value))
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _eval_history(eval_dir: str, monitor: str) -> list[tuple[int, float]]:
    return [
        (step, metrics[monitor])
        for step, metrics in metrics_by_step(eval_dir).items()
        if monitor in metrics
    ]


class _BestExporter(estimator.BestExporter):
    """``tf.estimator.BestExporter`` that decides from the best so far, recovered after restarts.

    The official exporter makes the export, its ``assets_extra`` and the garbage collection.
    Whether to export is decided here, because the official one exports on its first call
    after a restart whatever its event files say (tensorflow issue 47396), reads only
    ``eval/`` and keeps an in-memory best across a wiped model_dir. The best so far comes from
    the metrics file stored in each previous export, or, when no export has one (the official
    exporter's), from the eval event files of whichever ``eval``/``eval_<name>`` directory
    holds this evaluation.
    """

    def __init__(
        self,
        serving_input_receiver_fn: Callable,
        monitor: str,
        mode: str,
        exports_to_keep: Optional[int],
        name: str,
        assets_extra: Optional[dict] = None,
        as_text: bool = False,
    ):
        self._monitor = monitor
        self._mode = mode
        self._best: Optional[float] = None
        self._restored_for: Optional[tuple[str, str]] = None
        # The official exporter copies the assets_extra files at each export; this one is
        # rewritten before each, so every export records the values it was exported for.
        self._metrics_path = os.path.join(tempfile.mkdtemp(prefix="tfest_kit_best_"), METRICS_FILE)
        super().__init__(
            name=name,
            serving_input_receiver_fn=serving_input_receiver_fn,
            event_file_pattern=None,  # the history is read in _restore_best
            # export() has decided already; the official comparison would keep a best from a
            # wiped model_dir.
            compare_fn=lambda best_eval_result, current_eval_result: True,
            assets_extra={**(assets_extra or {}), METRICS_FILE: self._metrics_path},
            as_text=as_text,
            exports_to_keep=exports_to_keep,
        )

    def _better(self, value: float, best: Optional[float]) -> bool:
        if best is None:
            return True
        return value < best if self._mode == "min" else value > best

    def _best_of(self, values) -> Optional[float]:
        best = None
        for value in values:
            if value is not None and self._better(value, best):
                best = value
        return best

    def _restore_best(self, model_dir: str, export_path: str, eval_result: dict) -> None:
        """Recovers the best value so far (this instance may be new after a restart)."""
        exports = complete_exports(export_path)
        if not exports:
            self._best = None
            tf.logging.info("Best exporter %r: no earlier export in %s", self.name, export_path)
            return
        values = []
        for path in exports:
            metrics = _read_export_metrics(path)
            if metrics and metrics.get("monitor") == self._monitor:
                values.append(_scalar(metrics.get("value")))
        if any(v is not None for v in values):
            # Its own exports say what was exported. An evaluation whose export was skipped
            # (its checkpoint deleted first) is in the eval history with a better value, which
            # would have kept every later, exported improvement out.
            self._best = self._best_of(values)
            tf.logging.info(
                "Best exporter %r: best %s so far = %s (from %d earlier exports)",
                self.name,
                self._monitor,
                self._best,
                len(exports),
            )
            return
        # Exports without their metrics (the official BestExporter's): the eval history says.
        current = _scalar(eval_result[self._monitor])
        step = eval_result.get("global_step")
        step = None if step is None else int(np.asarray(step))
        for eval_dir in eval_dirs(model_dir):
            history = _eval_history(eval_dir, self._monitor)
            # The evaluation now being exported was already written to its own eval dir; that
            # entry identifies the directory, and is left out of "the best so far".
            if step is not None and not any(
                s == step and current is not None and math.isclose(v, current, rel_tol=1e-6)
                for s, v in history
            ):
                continue
            # Through the same finiteness filter as the metrics files: a NaN from a diverged
            # evaluation would otherwise become the best, and nothing compares better than NaN.
            values.extend(_scalar(v) for s, v in history if s != step)
        self._best = self._best_of(values)
        tf.logging.info(
            "Best exporter %r: best %s so far = %s (from %d earlier exports and eval events)",
            self.name,
            self._monitor,
            self._best,
            len(exports),
        )

    def export(self, estimator, export_path, checkpoint_path, eval_result, is_the_final_export):
        """Exports if ``eval_result[monitor]`` beats the best so far; see the class docstring."""
        if not eval_result or self._monitor not in eval_result:
            raise ValueError(
                f"best_exporter {self.name!r}: monitor {self._monitor!r} is not in the "
                f"evaluation result. Available metrics: {sorted(eval_result or {})}"
            )
        value = _scalar(eval_result[self._monitor])
        if value is None:
            tf.logging.warning(
                "Best exporter %r: %s = %s is not a finite number; not exporting",
                self.name,
                self._monitor,
                eval_result[self._monitor],
            )
            return None
        key = (estimator.model_dir, export_path)
        # Also when the export directory holds no complete export: it was wiped (a new run
        # reusing this instance) or never written, and then the first evaluation is exported,
        # never compared with a best remembered from a run whose exports are gone.
        if self._restored_for != key or not complete_exports(export_path):
            self._restore_best(estimator.model_dir, export_path, eval_result)
            self._restored_for = key
        if not self._better(value, self._best):
            tf.logging.info(
                "Best exporter %r: %s = %.6g is not better than %.6g; not exporting",
                self.name,
                self._monitor,
                value,
                self._best,
            )
            return None
        if checkpoint_path and not tf.gfile.Exists(checkpoint_path + ".index"):
            # In a cluster the chief may delete an old checkpoint (keep_checkpoint_max) while
            # the evaluator is still on it; exporting it would fail with "not a valid
            # checkpoint". The next evaluation gets its chance.
            tf.logging.warning(
                "Best exporter %r: %s = %.6g improved, but checkpoint %s was deleted before it "
                "could be exported; not exporting. Raise RunConfig(keep_checkpoint_max=…) so "
                "checkpoints outlive their evaluation.",
                self.name,
                self._monitor,
                value,
                checkpoint_path,
            )
            return None
        metrics = {
            "monitor": self._monitor,
            "mode": self._mode,
            "value": value,
            "checkpoint_path": checkpoint_path,
            "eval_result": {k: _scalar(v) for k, v in eval_result.items()},
        }
        with open(self._metrics_path, "w") as f:
            json.dump(metrics, f, indent=1, sort_keys=True)
        # Checked again while exporting: the chief can delete the checkpoint after the check
        # above, and the export then fails in restoring it.
        result = export_unless_vanished(
            lambda: super(_BestExporter, self).export(
                estimator, export_path, checkpoint_path, eval_result, is_the_final_export
            ),
            self.name,
            export_path,
            checkpoint_path,
        )
        if result is None:
            return None
        tf.logging.info(
            "Best exporter %r: %s improved %s -> %.6g; exported %s",
            self.name,
            self._monitor,
            "none" if self._best is None else f"{self._best:.6g}",
            value,
            _text(result),
        )
        self._best = value
        return result


def _text(path: Any) -> str:
    return path.decode() if isinstance(path, bytes) else str(path)


def best_exporter(
    serving_input_receiver_fn: Callable,
    monitor: str = "loss",
    mode: str = "auto",
    exports_to_keep: Optional[int] = 2,
    name: str = "best",
    *,
    assets_extra: Optional[dict] = None,
    as_text: bool = False,
) -> estimator.Exporter:
    """Returns an exporter that writes a SavedModel only when ``monitor`` improves.

    Use it in ``EvalSpec(exporters=...)`` or :func:`tfest_kit.train_and_evaluate`. Exports go
    to ``model_dir/export/<name>/<timestamp>``; each holds
    ``assets.extra/tfest_kit_eval_metrics.json`` with the metric values it was exported for.

    Unlike ``tf.estimator.BestExporter``: any metric can be monitored, in either direction;
    after a restart the best value so far is recovered from the earlier exports' metrics files
    (or, when no export has one, from the eval event files in ``eval/`` or
    ``eval_<EvalSpec name>/``), so a worse model is
    not exported on the first evaluation (tensorflow issue 47396); a monitor missing from the
    evaluation is an error, not a silent no-op. Its defaults differ too: ``name="best"`` (exports
    in ``export/best``, not ``export/best_exporter``) and ``exports_to_keep=2`` (not 5).

    Caveat: when the export directory holds no complete export yet, the first evaluation is
    always exported, even if the eval events show a better earlier value (there is no model to
    keep otherwise). Exports are made on the evaluator (or the chief in local mode) only. On a
    cluster the chief may delete the checkpoint (``RunConfig(keep_checkpoint_max=…)``) before
    or while it is exported: that export is skipped with a warning, and its value does not
    become the best.

    Args:
      serving_input_receiver_fn: builds the serving inputs, e.g. :func:`raw_receiver`'s result.
      monitor: key of the evaluation result to compare, e.g. ``"loss"``, ``"accuracy"``.
      mode: ``"min"`` (lower is better), ``"max"`` or ``"auto"``: as in
        :func:`tfest_kit.hooks.early_stopping`, max for accuracy-, AUC-, precision-, recall-
        and F1-like names and min for losses and errors (the choice is logged).
      exports_to_keep: keep this many newest exports (which are the best ones); ``None``
        keeps all.
      name: export sub-directory name.
      assets_extra: extra files for ``assets.extra``, as for ``export_saved_model``.
      as_text: write ``saved_model.pbtxt`` instead of ``saved_model.pb``.

    Returns:
      A ``tf.estimator.Exporter``.

    Raises:
      ValueError: for a bad argument; at export time, if ``monitor`` is not in the
        evaluation result (the message lists the available metrics).
      TypeError: if ``serving_input_receiver_fn`` is not callable.

    Example:

        exporter = best_exporter(raw_receiver({"x": (tf.float32, [4])}), "accuracy", "max")
        tfest_kit.train_and_evaluate(est, train_fn, eval_fn, max_steps=1000,
                                     exporters=[exporter])
    """
    if not callable(serving_input_receiver_fn):
        raise TypeError(
            f"`serving_input_receiver_fn` must be callable. Got: {serving_input_receiver_fn!r}"
        )
    if not isinstance(monitor, str) or not monitor:
        raise ValueError(f"`monitor` must be a metric name (str). Got: {monitor!r}")
    # Resolved here, so the metrics file of each export records "min" or "max".
    mode = "max" if higher_is_better(monitor, mode, "best_exporter") else "min"
    exports_to_keep = check_int("exports_to_keep", exports_to_keep, allow_none=True)
    if not isinstance(name, str) or not name or os.sep in name:
        raise ValueError(f"`name` must be a non-empty directory name. Got: {name!r}")
    return _BestExporter(
        serving_input_receiver_fn, monitor, mode, exports_to_keep, name, assets_extra, as_text
    )
