"""Scalar eval metrics by step, read from an Estimator eval directory's event files.

One reader for early stopping, the best exporter, ``train_and_evaluate``'s result on
distributed tasks, and the eval directories the ``inspect`` / ``plot`` commands show. (The
official ``read_eval_metrics`` does the same but is not exported.)
"""

from __future__ import annotations

import os

from tfest_kit._tf import tf

__all__ = ["eval_dirs", "metrics_by_step"]


def eval_dirs(model_dir: str) -> list[str]:
    """Returns ``MODEL_DIR/eval`` and every ``MODEL_DIR/eval_<name>`` directory, sorted.

    ``EvalSpec(name=…)`` / ``evaluate(name=…)`` write to ``eval_<name>``; readers that look
    only at ``eval/`` miss them.

    Example:

        eval_dirs("/tmp/run")   # ['/tmp/run/eval', '/tmp/run/eval_holdout']
    """
    if not tf.gfile.IsDirectory(model_dir):
        return []
    names = sorted(entry.rstrip("/") for entry in tf.gfile.ListDirectory(model_dir))
    return [
        os.path.join(model_dir, name)
        for name in names
        if (name == "eval" or name.startswith("eval_"))
        and tf.gfile.IsDirectory(os.path.join(model_dir, name))
    ]


def _scalar(value) -> float | None:
    """A summary value's number: a TF1 ``simple_value`` or a TF2 ``tf.summary.scalar`` tensor.

    TF2's summaries (Keras' TensorBoard callback, ``tf.summary.scalar`` under a
    ``create_file_writer``) store a rank-0 tensor instead of a ``simple_value``; tensors of
    other plugins (text, histograms, images) are not scalars and are left out.
    """
    if value.HasField("simple_value"):
        return value.simple_value
    if not value.HasField("tensor"):
        return None
    if value.metadata.plugin_data.plugin_name not in ("", "scalars"):
        return None
    try:
        array = tf.make_ndarray(value.tensor)
    except (TypeError, ValueError):
        return None
    # The same test as the plot command's reader: one number of a numeric type.
    if array.size != 1 or array.dtype.kind not in "fiu":
        return None
    return float(array.reshape(()))


def metrics_by_step(eval_dir: str) -> dict[int, dict[str, float]]:
    """Returns ``{step: {tag: value}}`` for the scalar summaries in ``eval_dir``, by step.

    Both TF1 summaries (``simple_value``, what ``Estimator.evaluate`` writes) and TF2 ones
    (``tf.summary.scalar``) are read.

    Files are read in name order and a later value for the same step and tag wins. A torn last
    record (the evaluator may be appending to the file right now) ends that file's reading.

    Args:
      eval_dir: e.g. ``estimator.eval_dir()``; a missing directory reads as empty.

    Returns:
      The metrics of each evaluated step, in step order; ``{}`` when there are none.

    Example:

        history = metrics_by_step(est.eval_dir())   # {100: {"loss": 0.7, ...}, 200: {...}}
    """
    by_step: dict[int, dict[str, float]] = {}
    # Listed, not globbed: a model_dir such as "lr[0.1]" is no pattern.
    names = tf.gfile.ListDirectory(eval_dir) if tf.gfile.IsDirectory(eval_dir) else []
    for path in sorted(os.path.join(eval_dir, n) for n in names if ".tfevents." in n):
        try:
            for event in tf.train.summary_iterator(path):
                for value in event.summary.value:
                    number = _scalar(value)
                    if number is not None:
                        by_step.setdefault(int(event.step), {})[value.tag] = number
        except tf.errors.DataLossError as e:
            tf.logging.debug("Eval events: stopped reading %s at a torn record: %s", path, e)
    return dict(sorted(by_step.items()))
