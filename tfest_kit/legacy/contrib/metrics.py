"""``tf.contrib.metrics`` as TF 1.15 had it, over ``tf.compat.v1.metrics``.

TF 1.15's ``streaming_*`` functions called ``tf.metrics`` with the same variables (``accuracy/
total``, ``accuracy/count`` …) but took ``(predictions, labels, …)`` where ``tf.metrics`` takes
``(labels, predictions, …)``.  Each one here is the ``tf.compat.v1.metrics`` function with the
first two arguments in contrib's order (keywords pass through), so a script's positional calls
keep their meaning and its metric variables keep TF 1.15's names.  Also served:
``streaming_recall_at_k`` (the mean of ``in_top_k``), ``accuracy`` (contrib's non-streaming
one), ``aggregate_metrics`` and ``aggregate_metric_map``.

The metrics contrib implemented itself (``streaming_pearson_correlation``,
``streaming_covariance``, ``streaming_concat``, ``cohen_kappa``, ``f1_score`` …) are
``tf_slim.metrics``' (contrib's code carried on), imported when a script first asks for one.

Example:

    accuracy, update = tf.contrib.metrics.streaming_accuracy(predictions, labels)
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Callable, Optional

from tfest_kit._tf import tf

# tf.contrib.metrics.<name> -> the tf.compat.v1.metrics function taking (labels, predictions).
_SWAPPED = {
    "streaming_accuracy": "accuracy",
    "streaming_precision": "precision",
    "streaming_recall": "recall",
    "streaming_auc": "auc",
    "streaming_true_positives": "true_positives",
    "streaming_true_negatives": "true_negatives",
    "streaming_false_positives": "false_positives",
    "streaming_false_negatives": "false_negatives",
    "streaming_precision_at_thresholds": "precision_at_thresholds",
    "streaming_recall_at_thresholds": "recall_at_thresholds",
    "streaming_sensitivity_at_specificity": "sensitivity_at_specificity",
    "streaming_specificity_at_sensitivity": "specificity_at_sensitivity",
    "streaming_mean_absolute_error": "mean_absolute_error",
    "streaming_mean_squared_error": "mean_squared_error",
    "streaming_root_mean_squared_error": "root_mean_squared_error",
    "streaming_mean_relative_error": "mean_relative_error",
    "streaming_mean_cosine_distance": "mean_cosine_distance",
    "streaming_mean_iou": "mean_iou",
    "streaming_sparse_precision_at_k": "precision_at_k",
    "streaming_sparse_recall_at_k": "recall_at_k",
    "streaming_sparse_average_precision_at_k": "average_precision_at_k",
}
# Same arguments as the tf.compat.v1.metrics function.
_SAME = {
    "streaming_mean": "mean",
    "streaming_mean_tensor": "mean_tensor",
    "streaming_percentage_less": "percentage_below",
}

__all__ = [
    *_SWAPPED,
    *_SAME,
    "streaming_recall_at_k",
    "accuracy",
    "aggregate_metrics",
    "aggregate_metric_map",
    "BACKING",
    "NOT_SERVED",
]

BACKING = {
    **{
        name: f"tf.compat.v1.metrics.{tf_name} (arguments swapped)"
        for name, tf_name in _SWAPPED.items()
    },
    **{name: f"tf.compat.v1.metrics.{tf_name}" for name, tf_name in _SAME.items()},
    "streaming_recall_at_k": "tf.compat.v1.metrics.mean of tf.nn.in_top_k",
    "accuracy": "tfest_kit.legacy.contrib.metrics.accuracy (tf.compat.v1 ops, as TF 1.15)",
    "aggregate_metrics": "tfest_kit.legacy.contrib.metrics.aggregate_metrics (as TF 1.15)",
    "aggregate_metric_map": "tfest_kit.legacy.contrib.metrics.aggregate_metric_map (as TF 1.15)",
}

# The rest of TF 1.15's tf.contrib.metrics (streaming_pearson_correlation, streaming_concat,
# cohen_kappa, f1_score …) is served from tf_slim.metrics, which carries contrib's code on.
NOT_SERVED = {}
NOT_SERVED["confusion_matrix"] = "tf.confusion_matrix (labels, predictions)"
NOT_SERVED["set_size"] = "tf.sets.size"
NOT_SERVED["set_intersection"] = "tf.sets.intersection"
NOT_SERVED["set_union"] = "tf.sets.union"
NOT_SERVED["set_difference"] = "tf.sets.difference"


def _swapped(contrib_name: str, tf_name: str) -> Callable:
    metric = getattr(tf.metrics, tf_name)
    params = list(inspect.signature(metric).parameters.values())
    params[0], params[1] = params[1], params[0]  # (predictions, labels, …)

    def streaming(predictions, labels, *args, **kwargs):
        return metric(labels, predictions, *args, **kwargs)

    streaming.__name__ = streaming.__qualname__ = contrib_name
    streaming.__signature__ = inspect.Signature(params)
    streaming.__doc__ = (
        f"``tf.contrib.metrics.{contrib_name}``: ``tf.compat.v1.metrics.{tf_name}`` with "
        f"contrib's argument order {tuple(p.name for p in params[:2])}; same variables and "
        "return value ``(value, update_op)``.\n\nExample:\n\n"
        f"    value, update_op = tf.contrib.metrics.{contrib_name}(predictions, labels)\n"
    )
    return streaming


for _contrib_name, _tf_name in _SWAPPED.items():
    globals()[_contrib_name] = _swapped(_contrib_name, _tf_name)
for _contrib_name, _tf_name in _SAME.items():
    globals()[_contrib_name] = getattr(tf.metrics, _tf_name)


def streaming_recall_at_k(
    predictions,
    labels,
    k: int,
    weights=None,
    metrics_collections=None,
    updates_collections=None,
    name: Optional[str] = None,
):
    """``tf.contrib.metrics.streaming_recall_at_k``: how often ``labels`` is in the top ``k``.

    Args:
      predictions: ``[batch, num_classes]`` scores.
      labels: ``[batch]`` class ids.
      k: how many top predictions count.
      weights: optional weights, as for ``tf.metrics.mean``.
      metrics_collections: collections for the value.
      updates_collections: collections for the update op.
      name: variable scope; default ``recall_at_<k>``.

    Returns:
      ``(recall_at_k, update_op)``.

    Example:

        recall, update = streaming_recall_at_k(logits, labels, 5)
    """
    in_top_k = tf.cast(tf.nn.in_top_k(predictions, labels, k), tf.float32)
    return tf.metrics.mean(
        in_top_k, weights, metrics_collections, updates_collections, name or f"recall_at_{k}"
    )


def accuracy(predictions, labels, weights=None, name: Optional[str] = None):
    """``tf.contrib.metrics.accuracy``: the (weighted) fraction of equal entries, not streaming.

    Args:
      predictions: a tensor of any shape.
      labels: a tensor of the same shape.
      weights: optional weights of the same shape.
      name: name scope; default ``accuracy``.

    Returns:
      A scalar float32 tensor.

    Example:

        value = accuracy(predictions, labels)
    """
    with tf.name_scope(name, "accuracy", values=[predictions, labels]):
        predictions = tf.convert_to_tensor(predictions)
        labels = tf.convert_to_tensor(labels, dtype=predictions.dtype)
        predictions.get_shape().assert_is_compatible_with(labels.get_shape())
        correct = tf.cast(tf.equal(predictions, labels), tf.float32)
        if weights is None:
            return tf.reduce_mean(correct)
        correct = tf.multiply(correct, weights)
        total = tf.multiply(weights, tf.ones_like(correct))
        return tf.div(tf.reduce_sum(correct), tf.reduce_sum(total))


def aggregate_metrics(*value_update_tuples: tuple) -> tuple[list, list]:
    """``tf.contrib.metrics.aggregate_metrics``: ``(values, updates)`` of ``(value, update)``s.

    Raises:
      ValueError: if no tuple is given.

    Example:

        values, updates = aggregate_metrics(streaming_mean(x), streaming_mean(y))
    """
    if not value_update_tuples:
        raise ValueError("Expected at least one value_tensor/update_op pair. Got: none")
    values, updates = zip(*value_update_tuples)
    return list(values), list(updates)


def aggregate_metric_map(names_to_tuples: Mapping[str, tuple]) -> tuple[dict, dict]:
    """``tf.contrib.metrics.aggregate_metric_map``: ``({name: value}, {name: update})``.

    Example:

        values, updates = aggregate_metric_map({'mean': streaming_mean(x)})
    """
    names = list(names_to_tuples)
    values, updates = aggregate_metrics(*[names_to_tuples[n] for n in names])
    return dict(zip(names, values)), dict(zip(names, updates))
