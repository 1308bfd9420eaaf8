"""A checkpoint the chief deleted while the evaluator evaluated or exported it: found, skipped.

The evaluator task of a cluster evaluates (and exports) checkpoints the chief writes, and the
chief deletes all but the newest ``RunConfig(keep_checkpoint_max=…)`` of them (default 5). With
frequent saves it deletes the one being evaluated: the official loop then ends the evaluator
with "Restoring from checkpoint failed" or "not a valid checkpoint". Shared by ``training``
(the evaluator's loop, every exporter it calls) and ``serving`` (``best_exporter``).
"""

from __future__ import annotations

import contextlib
import os
import re
from typing import Any, Callable, Optional

from tfest_kit._tf import tf

__all__ = ["KEEP_MORE", "export_unless_vanished", "vanished_checkpoint"]

# What to do about it, in every warning about a checkpoint deleted under the evaluator.
KEEP_MORE = (
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
            KEEP_MORE,
        )
        return None
