"""Exports a recipe's trained model once: a re-run that trained nothing reuses the export.

``Estimator.export_saved_model`` writes a new timestamped directory on every call, so each
re-run of a recipe in the same ``--model_dir`` (``already trained to step N``) used to leave
another identical copy of the model beside the last one. The newest export is reused when it
holds exactly the values of the checkpoint that would be exported.

The serving signature is not compared: the recipes record the flags that shape their
receivers (``--image_size``) with ``_previous_run``, so a reused export takes this run's inputs.
"""

from __future__ import annotations

import contextlib
import os
from typing import Callable, Optional

import numpy as np

from tfest_kit import serving
from tfest_kit._tf import tf

__all__ = ["export_once", "say_exported"]

# Written by the object-based saver: a description of the object graph, not a model value.
_OBJECT_GRAPH = "_CHECKPOINTABLE_OBJECT_GRAPH"


def _holds_checkpoint(export_dir: str, checkpoint: str) -> bool:
    """True if every variable of the export has the same value in ``checkpoint``.

    An export holds the model's variables under the names of the checkpoint it was made from
    (without the optimizer's slots), whether the names are TF1 ones (``dnn/hiddenlayer_0/…``)
    or object-based ones (``layer_with_weights-0/…``, ``keras_bridge.to_estimator``).
    """
    exported = tf.train.load_checkpoint(os.path.join(export_dir, "variables", "variables"))
    trained = tf.train.load_checkpoint(checkpoint)
    names = set(exported.get_variable_to_shape_map()) - {_OBJECT_GRAPH}
    if not names or not names <= set(trained.get_variable_to_shape_map()):
        return False
    return all(
        np.array_equal(exported.get_tensor(name), trained.get_tensor(name)) for name in names
    )


def export_once(
    estimator: tf.estimator.Estimator,
    export_dir_base: str,
    serving_input_receiver_fn: Callable,
) -> tuple[str, bool]:
    """Exports the estimator's latest checkpoint unless the newest export already holds it.

    Args:
      estimator: a trained Estimator.
      export_dir_base: where the exports go, e.g. ``model_dir/export``.
      serving_input_receiver_fn: the receiver, as for ``export_saved_model``.

    Returns:
      ``(export_dir, reused)``: the export's path (a ``str``), and whether it was there before.

    Example:

        path, reused = export_once(est, os.path.join(model_dir, "export"), receiver)
    """
    checkpoint = estimator.latest_checkpoint()
    newest: Optional[str] = None
    if checkpoint:
        with contextlib.suppress(serving.ExportNotFoundError):
            newest = serving.latest_export(export_dir_base)
    if newest and _holds_checkpoint(newest, checkpoint):
        return newest, True
    path = estimator.export_saved_model(export_dir_base, serving_input_receiver_fn)
    return (path.decode() if isinstance(path, bytes) else path), False


def say_exported(export_dir: str, reused: bool = False, earlier_best: bool = False) -> None:
    """Prints the export line, worded the same in every recipe.

    Args:
      export_dir: the export's path.
      reused: whether :func:`export_once` found it already there.
      earlier_best: the export is a best exporter's from an earlier run, whose checkpoint
        may be older than this run's (this run's model was not better).

    Example:
      >>> say_exported("/tmp/run/export/1700000000")
      SavedModel exported: /tmp/run/export/1700000000
    """
    if earlier_best:
        done = "(the best so far, exported by an earlier run)"
    else:
        done = "already exported from this checkpoint:" if reused else "exported:"
    print(f"SavedModel {done} {export_dir}")
