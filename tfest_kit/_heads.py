"""Loss, predictions, metrics and export outputs of the classifier and regressor builders.

Each head is a handful of plain functions that :func:`tfest_kit.model_fn.build` calls; the
public builders in :mod:`tfest_kit.model_fn` check their arguments and bind these.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Sequence
from typing import Callable

from tfest_kit import metrics as _metrics
from tfest_kit._tf import estimator, tf

__all__ = [
    "CLASSIFIER_METRICS",
    "REGRESSOR_METRICS",
    "check_metric_names",
    "classifier_parts",
    "label_errors",
    "regressor_parts",
]

# Bare "precision" / "recall" / "f1" are macro averages: for single-label data the micro average
# equals accuracy and would add nothing.
_SCORE_NAMES = {
    f"{score}{suffix}": (score, average)
    for score in ("precision", "recall", "f1")
    for suffix, average in (
        ("", "macro"),
        ("_macro", "macro"),
        ("_micro", "micro"),
        ("_weighted", "weighted"),
    )
}
CLASSIFIER_METRICS = ("accuracy", "auc", *_SCORE_NAMES, "recall_at_<k>")
REGRESSOR_METRICS = ("mse", "mae", "rmse")
_RECALL_AT = re.compile(r"^recall_at_(\d+)$")
# The classifier's label check (`labels_fn` below) failing, as TensorFlow reports it.
_LABELS_ASSERTION = re.compile(
    r"assertion failed: \[(`labels` must be class ids[^\]]*)\] \[(-?\d+)\] \[to\] \[(-?\d+)\]"
)


@contextlib.contextmanager
def label_errors() -> Iterator[None]:
    """Re-raises the classifier's failed label check as a short ``ValueError``.

    TensorFlow reports it as ``InvalidArgumentError: Graph execution error`` with the op's
    creation stack, about forty lines around the one that matters. Only the label check is
    translated; every other error passes unchanged, and the check costs nothing until it fails.

    Example:

        with label_errors():
            est.train(input_fn, max_steps=100)
    """
    try:
        yield
    except tf.errors.InvalidArgumentError as e:
        match = _LABELS_ASSERTION.search(str(e.message))
        if match is None:
            raise
        text, low, high = match.groups()
        raise ValueError(
            f"{text} {low} to {high}. Map the labels to class ids 0…num_classes-1 in the "
            "input_fn (or raise num_classes)."
        ) from None


def _shape(tensor) -> str:
    return str(tensor.shape.as_list()) if tensor.shape.rank is not None else "unknown"


def check_metric_names(metrics: Sequence[str], accepted: Sequence[str], num_classes=None):
    """Returns the metric names as a tuple; ValueError naming the accepted ones otherwise."""
    if isinstance(metrics, str) or not isinstance(metrics, (list, tuple)):
        raise TypeError(f"`metrics` must be a list or tuple of names. Got: {metrics!r}")
    for name in metrics:
        if name == "recall_at_<k>" and name in accepted:
            # Listed among the accepted names to show the pattern; it is no metric by itself.
            k = min(5, num_classes - 1) if num_classes else 5
            raise ValueError(
                "`metrics` entry 'recall_at_<k>' is a pattern: put the number k in it, "
                f"use e.g. 'recall_at_{k}'. Got: {name!r}"
            )
        known = name in accepted
        match = _RECALL_AT.match(name) if isinstance(name, str) else None
        if match and "recall_at_<k>" in accepted:
            k = int(match.group(1))
            if not 1 <= k <= num_classes:
                raise ValueError(
                    f"`metrics` entry {name!r} needs 1 <= k <= num_classes ({num_classes}). "
                    f"Got: k={k}"
                )
            known = True
        if name == "auc" and "auc" in accepted and num_classes != 2:
            raise ValueError(
                f"`metrics` entry 'auc' needs num_classes == 2. Got: num_classes={num_classes}"
            )
        if not known:
            raise ValueError(f"`metrics` entries must be among {list(accepted)}. Got: {name!r}")
    return tuple(metrics)


def _flat_labels(labels, dtype, num_columns: int):
    if labels is None:
        raise ValueError("`labels` must be given in TRAIN and EVAL mode. Got: None")
    if isinstance(labels, dict):
        raise TypeError(f"`labels` must be a tensor, not a dict. Got: keys {sorted(labels)}")
    labels = tf.convert_to_tensor(labels)
    rank = labels.shape.rank
    wide = rank == 2 and labels.shape[1] is not None and labels.shape[1] != num_columns
    if rank is None or rank > 2 or wide or (rank == 1 and num_columns != 1):
        expected = "[batch] or [batch, 1]" if num_columns == 1 else f"[batch, {num_columns}]"
        raise ValueError(f"`labels` must have shape {expected}. Got: shape {_shape(labels)}")
    return labels


# ---------------------------------------------------------------------------- classification


def _average_loss(example_losses: Callable, weights) -> dict:
    """``{"average_loss": …}``, the (weighted) mean loss per example over the eval set.

    ``example_losses()`` builds the per-example losses.

    Estimator's ``loss`` is the mean of the batches' losses, each reduced as TF1 losses are
    (weighted sum / number of non-zero weights): it counts a short last batch as much as a full
    one, and grows with the weights' scale. The canned heads report this metric for that.
    """
    return {"average_loss": tf.metrics.mean(example_losses(), weights=weights)}


def classifier_parts(num_classes: int, metrics: Sequence[str], top_k) -> dict[str, Callable]:
    """The functions :func:`tfest_kit.model_fn.build` needs for a softmax classifier."""

    def check_outputs(logits):
        if not isinstance(logits, (tf.Tensor, tf.Variable)):
            raise TypeError(
                f"`network_fn` must return a logits tensor [batch, {num_classes}]. Got: {logits!r}"
            )
        if logits.shape.rank != 2 or logits.shape[1] not in (None, num_classes):
            raise ValueError(
                f"`network_fn` must return logits of shape [batch, num_classes={num_classes}]. "
                f"Got: shape {_shape(logits)}"
            )
        return tf.ensure_shape(tf.cast(logits, tf.float32), [None, num_classes])

    def labels_fn(labels):
        labels = _flat_labels(labels, tf.int64, 1)
        if not labels.dtype.is_integer:
            fix = (
                "map class names to ids in the input_fn (e.g. with tf.lookup.StaticHashTable)"
                if labels.dtype == tf.string
                else "cast them in the input_fn: tf.cast(labels, tf.int64)"
            )
            raise ValueError(
                f"`labels` must be integer class ids in [0, num_classes); {fix}. "
                f"Got: dtype {labels.dtype.name}"
            )
        labels = tf.reshape(tf.cast(labels, tf.int32), [-1])
        # Out of range, the loss fails with its own message but the confusion-matrix metrics
        # fail first in EVAL with "Condition x < y" and the first three labels, not the bad one.
        in_range = tf.reduce_all((labels >= 0) & (labels < num_classes))
        check = tf.Assert(
            in_range,
            [
                f"`labels` must be class ids in [0, num_classes={num_classes}). Got: labels from",
                tf.reduce_min(labels),
                "to",
                tf.reduce_max(labels),
            ],
            name="check_labels",
        )
        with tf.control_dependencies([check]):
            return tf.identity(labels, name="labels")

    def predictions_fn(logits):
        predictions = {
            "logits": logits,
            "probabilities": tf.nn.softmax(logits, name="probabilities"),
            "class_ids": tf.argmax(logits, axis=-1, name="class_ids"),
        }
        if top_k:
            values, indices = tf.math.top_k(predictions["probabilities"], k=top_k)
            predictions["top_k_probabilities"] = values
            predictions["top_k_class_ids"] = tf.cast(indices, tf.int64)
        return predictions

    def loss_fn(labels, logits, weights):
        return tf.losses.sparse_softmax_cross_entropy(
            labels, logits, weights=1.0 if weights is None else weights
        )

    def metric_fn(labels, logits, weights):
        class_ids = tf.argmax(logits, axis=-1)
        ops = _average_loss(
            lambda: tf.losses.sparse_softmax_cross_entropy(
                labels, logits, reduction=tf.losses.Reduction.NONE
            ),
            weights,
        )
        for name in metrics:
            if name == "accuracy":
                ops[name] = tf.metrics.accuracy(labels, class_ids, weights=weights)
            elif name == "auc":
                ops[name] = tf.metrics.auc(
                    labels, tf.nn.softmax(logits)[:, 1], weights=weights, name="auc"
                )
            elif name in _SCORE_NAMES:
                score, average = _SCORE_NAMES[name]
                ops[name] = getattr(_metrics, score)(
                    labels, class_ids, num_classes, average=average, weights=weights, name=name
                )
            else:
                k = int(_RECALL_AT.match(name).group(1))
                ops[name] = _metrics.recall_at_k(labels, logits, k, weights=weights, name=name)
        return ops

    def export_outputs_fn(predictions):
        names = tf.constant([str(i) for i in range(num_classes)])
        batch = tf.shape(predictions["probabilities"])[0]
        classes = tf.tile(names[None, :], [batch, 1])
        return {
            "classification": estimator.export.ClassificationOutput(
                scores=predictions["probabilities"], classes=classes
            )
        }

    return {
        "check_outputs": check_outputs,
        "labels_fn": labels_fn,
        "predictions_fn": predictions_fn,
        "loss_fn": loss_fn,
        "metric_fn": metric_fn,
        "export_outputs_fn": export_outputs_fn,
    }


# -------------------------------------------------------------------------------- regression


def regressor_parts(label_dimension: int, metrics: Sequence[str]) -> dict[str, Callable]:
    """The functions :func:`tfest_kit.model_fn.build` needs for a mean-squared-error regressor."""

    def check_outputs(outputs):
        if not isinstance(outputs, (tf.Tensor, tf.Variable)):
            raise TypeError(
                f"`network_fn` must return a tensor [batch, {label_dimension}]. Got: {outputs!r}"
            )
        rank = outputs.shape.rank
        if rank == 1 and label_dimension == 1:
            outputs = outputs[:, None]
        elif rank != 2 or outputs.shape[1] not in (None, label_dimension):
            accepted = "[batch] or [batch, 1]" if label_dimension == 1 else ""
            raise ValueError(
                f"`network_fn` must return predictions of shape "
                f"{accepted or f'[batch, label_dimension={label_dimension}]'}. "
                f"Got: shape {_shape(outputs)}"
            )
        return tf.ensure_shape(tf.cast(outputs, tf.float32), [None, label_dimension])

    def labels_fn(labels):
        labels = _flat_labels(labels, tf.float32, label_dimension)
        # Unchecked, a string label fails only when the first step runs, as an
        # UnimplementedError about a cast.
        if not (labels.dtype.is_integer or labels.dtype.is_floating or labels.dtype == tf.bool):
            raise ValueError(
                "`labels` must be numeric for a regressor; parse them into numbers in the "
                f"input_fn. Got: dtype {labels.dtype.name}"
            )
        return tf.reshape(tf.cast(labels, tf.float32), [-1, label_dimension])

    def predictions_fn(outputs):
        return {"predictions": outputs}

    def loss_fn(labels, outputs, weights):
        weights = 1.0 if weights is None else tf.reshape(weights, [-1, 1])
        return tf.losses.mean_squared_error(labels, outputs, weights=weights)

    def metric_fn(labels, outputs, weights):
        ops = _average_loss(lambda: tf.reduce_mean(tf.square(labels - outputs), axis=1), weights)
        weights = None if weights is None else tf.reshape(weights, [-1, 1])
        functions = {
            "mse": tf.metrics.mean_squared_error,
            "mae": tf.metrics.mean_absolute_error,
            "rmse": tf.metrics.root_mean_squared_error,
        }
        ops.update({name: functions[name](labels, outputs, weights=weights) for name in metrics})
        return ops

    def export_outputs_fn(predictions):
        if label_dimension != 1:
            return {}
        return {"regression": estimator.export.RegressionOutput(value=predictions["predictions"])}

    return {
        "check_outputs": check_outputs,
        "labels_fn": labels_fn,
        "predictions_fn": predictions_fn,
        "loss_fn": loss_fn,
        "metric_fn": metric_fn,
        "export_outputs_fn": export_outputs_fn,
    }
