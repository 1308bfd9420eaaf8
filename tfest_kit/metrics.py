"""Streaming multi-class precision, recall, F1 (micro, macro, weighted) and recall@k.

``tf.compat.v1.metrics`` has binary ones only. Each returns ``(value_op, update_op)`` over a
``LOCAL_VARIABLES`` confusion matrix (``eval_metric_ops``, TPU ``metric_fn``). Averages follow
scikit-learn (``zero_division=0``); ``"macro"`` skips weight-0-only classes (BERT's padding).
"""

from typing import Optional

from tfest_kit._checks import check_int
from tfest_kit._tf import tf

__all__ = ["AVERAGES", "precision", "recall", "f1", "recall_at_k"]

AVERAGES = ("micro", "macro", "weighted")
_SCORE_DOC = """Streaming multi-class {what}, averaged ``"macro"``, ``"micro"`` or ``"weighted"``.

    Args:
      labels: int class ids, ``[batch]`` or ``[batch, 1]``.
      predictions: int predicted class ids (e.g. ``argmax(logits)``), same shape.
      num_classes: number of classes (>= 2).
      average: one of :data:`AVERAGES`; ``"macro"`` as the model_fn builders' ``"{metric}"``.
      weights: per-example weights like ``labels``.
      name: variable scope (default ``"{metric}"``).

    Returns:
      ``(value_op, update_op)``: float32 scalars over all batches so far.

    Raises:
      ValueError: for ``num_classes`` < 2, an unknown ``average``, a wrong shape, or scores
        instead of class ids in ``predictions``.

    Example:

        eval_metric_ops = {{"{metric}": metrics.{metric}(labels, class_ids, num_classes=5)}}
    """


def _flat(tensor, name: str, dtype=None):
    """``[B]`` / ``[B, 1]`` -> ``[B]``; anything wider is refused."""
    tensor = tf.convert_to_tensor(tensor)
    shape = tensor.shape
    if shape.rank is not None and shape[1:].as_list() not in ([], [1], [None]):
        raise ValueError(f"`{name}` must have shape [batch] or [batch, 1]. Got: {shape.as_list()}")
    tensor = tf.reshape(tensor, [-1])
    return tf.cast(tensor, dtype) if dtype is not None else tensor


def _streaming_confusion_matrix(labels, predictions, num_classes, weights):
    """``(matrix_variable, update_op)``; ``matrix[i, j]`` counts label i predicted j."""
    labels, predictions = _flat(labels, "labels", tf.int64), _flat(predictions, "predictions")
    # A cast floors scores (0.9 -> class 0): probabilities passed by mistake would score wrong.
    if not (predictions.dtype.is_integer or predictions.dtype.is_bool):
        raise ValueError(
            "`predictions` must be integer class ids, not scores: pass tf.argmax(logits, -1). "
            f"Got: dtype {predictions.dtype.name}"
        )
    weights = None if weights is None else _flat(weights, "weights", tf.float64)
    total = tf.Variable(
        lambda: tf.zeros([num_classes, num_classes], tf.float64),
        trainable=False,
        collections=[tf.GraphKeys.LOCAL_VARIABLES, tf.GraphKeys.METRIC_VARIABLES],
        synchronization=tf.VariableSynchronization.ON_READ,
        aggregation=tf.VariableAggregation.SUM,
        name="total_confusion_matrix",
    )
    batch = tf.math.confusion_matrix(
        labels, tf.cast(predictions, tf.int64), num_classes, weights=weights, dtype=tf.float64
    )
    return total, tf.assign_add(total, batch)


def _scores(matrix, metric: str, average: str):
    """Precision, recall or F1 of a confusion matrix, as float32."""
    divide = tf.math.divide_no_nan
    true_positives = tf.linalg.diag_part(matrix)
    support = tf.reduce_sum(matrix, axis=1)  # examples whose label is the class
    predicted = tf.reduce_sum(matrix, axis=0)  # examples predicted as the class
    if average == "micro":
        # Single-label data: micro precision == recall == F1 == accuracy.
        return tf.cast(divide(tf.reduce_sum(true_positives), tf.reduce_sum(matrix)), tf.float32)
    precision, recall = divide(true_positives, predicted), divide(true_positives, support)
    f1 = divide(2.0 * precision * recall, precision + recall)
    per_class = {"precision": precision, "recall": recall, "f1": f1}
    # Macro: the classes seen in labels or predictions, each once; weighted: by support.
    counted = tf.cast(support + predicted > 0, tf.float64) if average == "macro" else support
    value = divide(tf.reduce_sum(per_class[metric] * counted), tf.reduce_sum(counted))
    return tf.cast(value, tf.float32)


def _score_function(metric: str, what: str):
    def score(
        labels,
        predictions,
        num_classes: int,
        *,
        average: str = "macro",
        weights=None,
        name: Optional[str] = None,
    ):
        num_classes = check_int("num_classes", num_classes, 2)
        if average not in AVERAGES:
            raise ValueError(f"`average` must be one of {list(AVERAGES)}. Got: {average!r}")
        values = [t for t in (labels, predictions, weights) if t is not None]
        with tf.variable_scope(name, default_name=metric, values=values):
            matrix, update = _streaming_confusion_matrix(labels, predictions, num_classes, weights)
            value_op = tf.identity(_scores(matrix, metric, average), name="value")
            update_op = tf.identity(_scores(update, metric, average), name="update_op")
        return value_op, update_op

    score.__name__ = score.__qualname__ = metric
    score.__doc__ = _SCORE_DOC.format(what=what, metric=metric)
    return score


precision = _score_function("precision", "precision")
recall = _score_function("recall", "recall")
f1 = _score_function("f1", "F1 score")


def recall_at_k(labels, logits_or_probs, k: int, *, weights=None, name: Optional[str] = None):
    """Streaming share of examples whose true class is among the ``k`` highest scores.

    ``tf.compat.v1.metrics.recall_at_k`` (top-k accuracy for single-label data) for ``[batch]``
    or ``[batch, 1]`` labels, with a float32 result.

    Args:
      labels: int class ids, ``[batch]`` or ``[batch, 1]``.
      logits_or_probs: float scores ``[batch, num_classes]``.
      k: how many top classes count as a hit (1 <= k <= num_classes).
      weights: per-example weights like ``labels``.
      name: variable scope (default ``"recall_at_<k>"``).

    Returns:
      ``(value_op, update_op)``, float32 scalars.

    Raises:
      ValueError: for ``labels`` or ``weights`` of another shape.

    Example:

        eval_metric_ops = {"recall_at_5": metrics.recall_at_k(labels, logits, k=5)}
    """
    weights = None if weights is None else _flat(weights, "weights", tf.float32)
    labels = _flat(labels, "labels", tf.int64)
    name = name or f"recall_at_{k}"
    ops = tf.metrics.recall_at_k(labels, logits_or_probs, k, weights=weights, name=name)
    return tuple(tf.cast(op, tf.float32) for op in ops)
