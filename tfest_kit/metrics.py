"""Streaming multi-class eval metrics: precision, recall, F1 and recall@k.

``tf.compat.v1.metrics`` has binary precision / recall only; these average over classes.
Each returns ``(value_op, update_op)`` like ``tf.compat.v1.metrics``, its state a confusion
matrix in a local variable of ``LOCAL_VARIABLES`` and ``METRIC_VARIABLES`` (reset before every
evaluation), so the result over many batches equals the metric over the whole set. They work
in ``eval_metric_ops`` and in a TPU ``metric_fn`` (which runs on the host CPU).

Averages follow scikit-learn's ``precision_recall_fscore_support``:

* ``"micro"``: pool every example; for single-label multi-class data precision, recall and F1
  all equal (weighted) accuracy.
* ``"macro"``: unweighted mean of the per-class scores over the classes that occur in the labels
  or in the predictions seen so far (a class absent from both is not averaged in). With
  ``weights``, a class that occurs only in examples of weight 0 counts as absent, so padding
  rows masked out with weight 0 (BERT's ``is_real_example``) do not pull the mean down;
  scikit-learn instead averages such a class in with a score of 0.
* ``"weighted"``: mean of the per-class scores weighted by each class's (weighted) support.

A per-class score whose denominator is 0 counts as 0 (scikit-learn's ``zero_division=0``).
The default, ``"macro"``, is what the model_fn builders' bare ``"f1"`` etc. report. Arguments
after ``num_classes`` (or ``k``) are keyword-only: ``tf.compat.v1.metrics`` take ``weights``
there, which a ported call would pass as something else.

Example:

    from tfest_kit import metrics

    def metric_fn(labels, logits):
        class_ids = tf.argmax(logits, axis=-1)
        return {
            "f1_macro": metrics.f1(labels, class_ids, num_classes=10),
            "recall_at_5": metrics.recall_at_k(labels, logits, k=5),
        }
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

from tfest_kit._checks import check_int
from tfest_kit._tf import tf

__all__ = ["AVERAGES", "confusion_matrix", "precision", "recall", "f1", "recall_at_k"]

AVERAGES = ("micro", "macro", "weighted")

_LOCAL_METRIC_COLLECTIONS = [tf.GraphKeys.LOCAL_VARIABLES, tf.GraphKeys.METRIC_VARIABLES]


def _check_average(average) -> str:
    if average not in AVERAGES:
        raise ValueError(f"`average` must be one of {list(AVERAGES)}. Got: {average!r}")
    return average


def _flat(tensor, name: str, dtype=None):
    """Flattens ``[B]`` / ``[B, 1]`` tensors to ``[B]``; rejects anything wider."""
    tensor = tf.convert_to_tensor(tensor)
    shape = tensor.shape
    if shape.rank is not None and (
        shape.rank > 2 or (shape.rank == 2 and shape[1] is not None and shape[1] != 1)
    ):
        raise ValueError(
            f"`{name}` must have shape [batch] or [batch, 1]. Got: shape {shape.as_list()}"
        )
    tensor = tf.reshape(tensor, [-1])
    return tf.cast(tensor, dtype) if dtype is not None else tensor


def _class_ids(predictions):
    """Flattens ``predictions`` to int64 class ids; refuses scores, which a cast would floor."""
    predictions = _flat(predictions, "predictions")
    # Casting 0.9 to int64 gives class 0, so probabilities passed by mistake scored quietly wrong.
    # Labels stay lenient: float labels holding class ids are common (classifier heads take them).
    if not (predictions.dtype.is_integer or predictions.dtype.is_bool):
        raise ValueError(
            "`predictions` must be integer class ids, not scores: pass tf.argmax(logits, -1), "
            "or tf.cast(probabilities > 0.5, tf.int64) for 2 classes. "
            f"Got: dtype {predictions.dtype.name}"
        )
    return tf.cast(predictions, tf.int64)


def _metric_variable(shape, dtype, name: str):
    """A zero-initialised local variable in the collections tf.compat.v1.metrics uses."""
    return tf.Variable(
        lambda: tf.zeros(shape, dtype),
        trainable=False,
        collections=list(_LOCAL_METRIC_COLLECTIONS),
        synchronization=tf.VariableSynchronization.ON_READ,
        aggregation=tf.VariableAggregation.SUM,
        validate_shape=True,
        name=name,
    )


def _add_to_collections(collections: Optional[Sequence[str]], value) -> None:
    for collection in collections or ():
        tf.add_to_collections(collection, value)


def _streaming_confusion_matrix(labels, predictions, num_classes, weights):
    """Returns ``(matrix_variable, update_op)``; ``matrix[i, j]`` counts label i predicted j."""
    labels = _flat(labels, "labels", tf.int64)
    predictions = _class_ids(predictions)
    if weights is not None:
        weights = tf.convert_to_tensor(weights)
        if weights.shape.rank == 0:  # one weight for every example, as tf.compat.v1.metrics allow
            weights = tf.fill(tf.shape(labels), tf.cast(weights, tf.float64))
        weights = _flat(weights, "weights", tf.float64)
    total = _metric_variable([num_classes, num_classes], tf.float64, "total_confusion_matrix")
    batch = tf.math.confusion_matrix(
        labels, predictions, num_classes=num_classes, weights=weights, dtype=tf.float64
    )
    return total, tf.assign_add(total, batch)


_safe_div = tf.math.divide_no_nan


def _scores(matrix, metric: str, average: str):
    """Computes precision, recall or F1 from a confusion matrix, as float32."""
    true_positives = tf.linalg.diag_part(matrix)
    support = tf.reduce_sum(matrix, axis=1)  # examples whose label is the class
    predicted = tf.reduce_sum(matrix, axis=0)  # examples predicted as the class
    if average == "micro":
        # Single-label data: every false positive of one class is a false negative of another,
        # so micro precision == micro recall == micro F1 == accuracy.
        value = _safe_div(tf.reduce_sum(true_positives), tf.reduce_sum(matrix))
        return tf.cast(value, tf.float32)
    per_class_precision = _safe_div(true_positives, predicted)
    per_class_recall = _safe_div(true_positives, support)
    if metric == "precision":
        per_class = per_class_precision
    elif metric == "recall":
        per_class = per_class_recall
    else:
        per_class = _safe_div(
            2.0 * per_class_precision * per_class_recall,
            per_class_precision + per_class_recall,
        )
    if average == "macro":
        present = tf.cast((support + predicted) > 0, tf.float64)
        value = _safe_div(tf.reduce_sum(per_class * present), tf.reduce_sum(present))
    else:
        value = _safe_div(tf.reduce_sum(per_class * support), tf.reduce_sum(support))
    return tf.cast(value, tf.float32)


def _streaming_score(
    metric,
    labels,
    predictions,
    num_classes,
    average,
    weights,
    metrics_collections,
    updates_collections,
    name,
):
    num_classes = check_int("num_classes", num_classes, 2)
    average = _check_average(average)
    with tf.variable_scope(
        name,
        default_name=metric,
        values=[t for t in (labels, predictions, weights) if t is not None],
    ):
        matrix, update_matrix = _streaming_confusion_matrix(
            labels, predictions, num_classes, weights
        )
        value_op = tf.identity(_scores(matrix, metric, average), name="value")
        update_op = tf.identity(_scores(update_matrix, metric, average), name="update_op")
    _add_to_collections(metrics_collections, value_op)
    _add_to_collections(updates_collections, update_op)
    return value_op, update_op


def confusion_matrix(
    labels,
    predictions,
    num_classes: int,
    *,
    weights=None,
    metrics_collections: Optional[Sequence[str]] = None,
    updates_collections: Optional[Sequence[str]] = None,
    name: Optional[str] = None,
):
    """Streaming confusion matrix: ``matrix[i, j]`` is the (weighted) count of label i predicted j.

    Args:
      labels: int tensor of true class ids, shape ``[batch]`` or ``[batch, 1]``.
      predictions: int tensor of predicted class ids, same shape as ``labels``.
      num_classes: number of classes (>= 2); ids must lie in ``[0, num_classes)``.
      weights: optional per-example weights, shape ``[batch]`` or ``[batch, 1]``, or one
        scalar for all.
      metrics_collections: collections to add ``value_op`` to.
      updates_collections: collections to add ``update_op`` to.
      name: variable scope name (default ``"confusion_matrix"``).

    Returns:
      ``(value_op, update_op)``: float64 ``[num_classes, num_classes]`` tensors, the
      accumulated matrix before and after adding this batch.

    Raises:
      ValueError: if ``num_classes`` < 2, a tensor has the wrong shape, or ``predictions`` is
        not of an integer (or bool) dtype.

    Example:

        matrix, update = metrics.confusion_matrix(labels, class_ids, num_classes=3)
    """
    num_classes = check_int("num_classes", num_classes, 2)
    with tf.variable_scope(name, default_name="confusion_matrix", values=(labels, predictions)):
        matrix, update_op = _streaming_confusion_matrix(labels, predictions, num_classes, weights)
        value_op = tf.identity(matrix, name="value")
    _add_to_collections(metrics_collections, value_op)
    _add_to_collections(updates_collections, update_op)
    return value_op, update_op


_SCORE_DOC = """Streaming multi-class {what}, averaged ``"micro"``, ``"macro"`` or ``"weighted"``.

    Args:
      labels: int tensor of true class ids, shape ``[batch]`` or ``[batch, 1]``.
      predictions: int tensor of predicted class ids (e.g. ``argmax(logits)``), same shape.
      num_classes: number of classes (>= 2); ids must lie in ``[0, num_classes)``.
      average: ``"macro"`` (the default, as the model_fn builders' bare ``"{metric}"``),
        ``"micro"`` or ``"weighted"`` (see the module docstring).
      weights: optional per-example weights, shape ``[batch]`` or ``[batch, 1]``, or one
        scalar for all.
      metrics_collections: collections to add ``value_op`` to.
      updates_collections: collections to add ``update_op`` to.
      name: variable scope name (default ``"{metric}"``).

    Returns:
      ``(value_op, update_op)``: float32 scalars, the metric over all batches seen so far,
      before and after this batch.

    Raises:
      ValueError: if ``num_classes`` < 2, ``average`` is unknown, a tensor has the wrong
        shape, or ``predictions`` is not of an integer (or bool) dtype (scores, not class ids).

    Example:

        eval_metric_ops = {{
            "{metric}": metrics.{metric}(labels, class_ids, num_classes=5),
            "{metric}_weighted": metrics.{metric}(
                labels, class_ids, num_classes=5, average="weighted"),
        }}
    """


def _score_function(metric: str, what: str):
    def score(
        labels,
        predictions,
        num_classes: int,
        *,
        average: str = "macro",
        weights=None,
        metrics_collections: Optional[Sequence[str]] = None,
        updates_collections: Optional[Sequence[str]] = None,
        name: Optional[str] = None,
    ):
        return _streaming_score(
            metric,
            labels,
            predictions,
            num_classes,
            average,
            weights,
            metrics_collections,
            updates_collections,
            name,
        )

    score.__name__ = score.__qualname__ = metric
    score.__doc__ = _SCORE_DOC.format(what=what, metric=metric)
    return score


precision = _score_function("precision", "precision")
recall = _score_function("recall", "recall")
f1 = _score_function("f1", "F1 score")


def recall_at_k(
    labels,
    logits_or_probs,
    k: int,
    *,
    weights=None,
    metrics_collections: Optional[Sequence[str]] = None,
    updates_collections: Optional[Sequence[str]] = None,
    name: Optional[str] = None,
):
    """Streaming share of examples whose true class is among the ``k`` highest scores.

    For single-label data this is top-k accuracy: ``tf.compat.v1.metrics.recall_at_k`` with the
    labels' shapes checked and a float32 result. Ties go to the lower class id (``tf.math.top_k``).

    Args:
      labels: int tensor of true class ids, shape ``[batch]`` or ``[batch, 1]``.
      logits_or_probs: float tensor ``[batch, num_classes]`` of scores (any monotonic scale).
      k: how many top classes count as a hit (1 <= k <= num_classes).
      weights: optional per-example weights, shape ``[batch]`` or ``[batch, 1]``, or one
        scalar for all.
      metrics_collections: collections to add ``value_op`` to.
      updates_collections: collections to add ``update_op`` to.
      name: variable scope name (default ``"recall_at_<k>"``).

    Returns:
      ``(value_op, update_op)``, float32 scalars.

    Raises:
      ValueError: if ``k`` < 1 or larger than the number of classes, or ``logits_or_probs``
        is not of rank 2.

    Example:

        eval_metric_ops = {"recall_at_5": metrics.recall_at_k(labels, logits, k=5)}
    """
    k = check_int("k", k)
    scores = tf.convert_to_tensor(logits_or_probs)
    if scores.shape.rank != 2:
        raise ValueError(
            "`logits_or_probs` must have shape [batch, num_classes]. "
            f"Got: shape {scores.shape.as_list() if scores.shape.rank is not None else None}"
        )
    num_classes = scores.shape[1]
    if num_classes is not None and k > num_classes:
        raise ValueError(f"`k` must be at most the number of classes ({num_classes}). Got: {k!r}")
    weights = None if weights is None else _flat(weights, "weights", tf.float32)
    value_op, update_op = tf.metrics.recall_at_k(
        _flat(labels, "labels", tf.int64),
        scores,
        k,
        weights=weights,
        name=name or f"recall_at_{k}",
    )
    # float32, as tf.compat.v1.metrics.mean and the other metrics here give.
    value_op, update_op = tf.cast(value_op, tf.float32), tf.cast(update_op, tf.float32)
    _add_to_collections(metrics_collections, value_op)
    _add_to_collections(updates_collections, update_op)
    return value_op, update_op
