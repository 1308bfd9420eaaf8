"""A checkpoint the chief deleted while the evaluator evaluated or exported it: found, skipped.

With frequent saves the chief's ``keep_checkpoint_max`` deletes the one being evaluated, and the
official loop ended the evaluator with "Restoring from checkpoint failed" (training, serving).
"""

import contextlib
import os
import re
from typing import Any, Callable, Optional

from tfest_kit._model_dir import dir_entries
from tfest_kit._tf import tf

KEEP_MORE = (
    "The chief keeps only the newest RunConfig(keep_checkpoint_max=…) checkpoints (default 5): "
    "raise it (or save less often) so that checkpoints outlive their evaluation and export."
)


def vanished_checkpoint(
    error: BaseException, model_dir: str, checkpoint_path: Optional[str] = None
) -> Optional[str]:
    """The checkpoint ``error`` names (``checkpoint_path`` or any in model_dir) if it is gone."""
    if not isinstance(error, (tf.errors.NotFoundError, ValueError)):
        return None
    message = str(error)
    if checkpoint_path:
        named = [checkpoint_path] if checkpoint_path in message else []
    else:
        named = re.findall(re.escape(os.path.join(model_dir, "")) + r"[^\s'\"/]+?-\d+", message)
    for path in named:
        if not (tf.gfile.Exists(path + ".index") and tf.gfile.Glob(path + ".data-*")):
            return path
    return None


def _temp_dirs(export_path: str) -> set[str]:
    return {os.path.join(export_path, e) for e in dir_entries(export_path) if e.startswith("temp-")}


def export_unless_vanished(
    export: Callable[[], Any], name: str, export_path: str, checkpoint_path: Optional[str]
) -> Any:
    """``export()``, or None with a warning if ``checkpoint_path`` vanished meanwhile; a failed
    export's half-written ``export_path/temp-*`` is deleted."""
    before = _temp_dirs(export_path)
    try:
        return export()
    except Exception as e:
        for path in sorted(_temp_dirs(export_path) - before):
            with contextlib.suppress(tf.errors.NotFoundError):
                tf.gfile.DeleteRecursively(path)  # gs:// too, where shutil sees nothing
        model_dir = os.path.dirname(checkpoint_path or "")
        if not checkpoint_path or not vanished_checkpoint(e, model_dir, checkpoint_path):
            raise
        tf.logging.warning(
            f"Exporter {name!r}: checkpoint {checkpoint_path} was deleted while it was being "
            f"exported; this export is skipped ({type(e).__name__}). {KEEP_MORE}"
        )
        return None
