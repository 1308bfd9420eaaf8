"""``tf.contrib.losses`` as TF 1.15 had it: a port of contrib's ``loss_ops``.

TF 1.15 kept TF 1.0's losses here, deprecated for ``tf.losses``, whose functions take their
arguments in another order (``softmax_cross_entropy(logits, onehot_labels)`` here,
``(onehot_labels, logits)`` there) and, for ``hinge_loss``, reduce where contrib's did not.
Older TF1 scripts call them positionally, so they are ports of contrib's own, on TensorFlow's
ops: the same losses, the same ``weights`` rules (a weight per example scales the sum over its
other dimensions; the mean is over the present, non-zero-weighted entries), each mean added
to ``GraphKeys.LOSSES``. ``metric_learning`` (``triplet_semihard_loss`` …) is tf_slim's.

Example:

    loss = tf.contrib.losses.softmax_cross_entropy(logits, onehot_labels)
    total = tf.contrib.losses.get_total_loss()
"""

from __future__ import annotations

from typing import Any, Optional

from tfest_kit._tf import tf

__all__ = [
    "absolute_difference",
    "add_loss",
    "compute_weighted_loss",
    "cosine_distance",
    "get_losses",
    "get_regularization_losses",
    "get_total_loss",
    "hinge_loss",
    "log_loss",
    "mean_pairwise_squared_error",
    "mean_squared_error",
    "sigmoid_cross_entropy",
    "softmax_cross_entropy",
    "sparse_softmax_cross_entropy",
    "BACKING",
]

BACKING = {
    name: f"tfest_kit.legacy.contrib.losses.{name} (a port of TF 1.15's, on TensorFlow's ops)"
    for name in __all__[:-1]
}


def _scale_losses(losses: Any, weights: Any) -> Any:
    # Each weight scales the sum of the losses over the dimensions it does not have.
    axis = list(range(max(0, weights.get_shape().ndims), losses.get_shape().ndims))
    return tf.reduce_sum(tf.multiply(tf.reduce_sum(losses, axis=axis), weights))


def _num_present(losses: Any, weights: Any, per_batch: bool = False) -> Any:
    """How many entries of ``losses`` count: those whose (broadcast) weight is not zero."""
    if weights.get_shape().ndims == 0:
        batch_size = tf.reshape(tf.slice(tf.shape(losses), [0], [1]), [])
        per_example = tf.cast(tf.size(losses), tf.float32) / tf.cast(batch_size, tf.float32)
        per_example = tf.where(tf.equal(weights, 0), 0.0, per_example)
        num = tf.ones(tf.reshape(batch_size, [1])) * per_example
    else:
        axis = list(range(1, weights.get_shape().ndims))
        nonzero = tf.reduce_sum(tf.cast(tf.not_equal(weights, 0), tf.float32), axis=axis)
        rest = tf.slice(tf.shape(losses), [weights.get_shape().ndims], [-1])
        num = nonzero * tf.cast(tf.reduce_prod(rest), tf.float32)
    return num if per_batch else tf.reduce_sum(num)


def compute_weighted_loss(losses: Any, weights: Any = 1.0, scope: Optional[str] = None) -> Any:
    """Returns the weighted mean of ``losses``, added to ``GraphKeys.LOSSES``.

    Args:
      losses: a tensor of losses, its first dimension the batch.
      weights: a scalar, or a tensor of rank ≤ the losses' (one weight per example …).
      scope: the op's name scope.

    Returns:
      A scalar of the losses' dtype.

    Raises:
      ValueError: losses or weights of unknown rank.

    Example:

        loss = tf.contrib.losses.compute_weighted_loss(per_token, weights=mask)
    """
    with tf.name_scope(scope, "weighted_loss", [losses, weights]):
        losses = tf.convert_to_tensor(losses)
        dtype = losses.dtype
        losses = tf.cast(losses, tf.float32)
        weights = tf.cast(tf.convert_to_tensor(weights), tf.float32)
        if losses.get_shape().ndims is None:
            raise ValueError("losses.get_shape().ndims cannot be None")
        shape = weights.get_shape()
        if shape.ndims is None:
            raise ValueError("weights.get_shape().ndims cannot be None")
        if shape.ndims > 1 and shape.dims[-1].is_compatible_with(1):
            weights = tf.squeeze(weights, [-1])
        total = _scale_losses(losses, weights)
        mean = tf.math.divide_no_nan(total, _num_present(losses, weights), name="value")
        mean = tf.cast(mean, dtype)
        add_loss(mean)
        return mean


def add_loss(loss: Any, loss_collection: Optional[str] = tf.GraphKeys.LOSSES) -> None:
    """Adds ``loss`` to ``loss_collection`` (none if it is empty).

    Example:

        tf.contrib.losses.add_loss(my_loss)
    """
    if loss_collection:
        tf.add_to_collection(loss_collection, loss)


def get_losses(scope: Optional[str] = None, loss_collection: str = tf.GraphKeys.LOSSES) -> list:
    """Returns the losses in ``loss_collection`` (under ``scope``).

    Example:

        losses = tf.contrib.losses.get_losses()
    """
    return tf.get_collection(loss_collection, scope)


def get_regularization_losses(scope: Optional[str] = None) -> list:
    """Returns the regularization losses (under ``scope``).

    Example:

        penalties = tf.contrib.losses.get_regularization_losses()
    """
    return tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES, scope)


def get_total_loss(add_regularization_losses: bool = True, name: str = "total_loss") -> Any:
    """Returns the sum of the losses, with the regularization losses by default.

    Example:

        total = tf.contrib.losses.get_total_loss()
    """
    losses = get_losses()
    if add_regularization_losses:
        losses += get_regularization_losses()
    return tf.add_n(losses, name=name)


def _as_float(predictions: Any, labels: Any) -> tuple[Any, Any]:
    predictions.get_shape().assert_is_compatible_with(labels.get_shape())
    return tf.cast(predictions, tf.float32), tf.cast(labels, tf.float32)


def absolute_difference(
    predictions: Any, labels: Any = None, weights: Any = 1.0, scope: Optional[str] = None
) -> Any:
    """Weighted mean of ``|predictions - labels|``.

    Example:

        loss = tf.contrib.losses.absolute_difference(predictions, labels)
    """
    with tf.name_scope(scope, "absolute_difference", [predictions, labels, weights]) as scope:
        predictions, labels = _as_float(predictions, labels)
        return compute_weighted_loss(tf.abs(predictions - labels), weights, scope=scope)


def sigmoid_cross_entropy(
    logits: Any,
    multi_class_labels: Any,
    weights: Any = 1.0,
    label_smoothing: float = 0,
    scope: Optional[str] = None,
) -> Any:
    """Weighted mean of the sigmoid cross-entropy (labels smoothed towards 1/2).

    Example:

        loss = tf.contrib.losses.sigmoid_cross_entropy(logits, multi_hot_labels)
    """
    names = [logits, multi_class_labels, weights]
    with tf.name_scope(scope, "sigmoid_cross_entropy_loss", names) as scope:
        logits.get_shape().assert_is_compatible_with(multi_class_labels.get_shape())
        labels = tf.cast(multi_class_labels, logits.dtype)
        if label_smoothing > 0:
            labels = labels * (1 - label_smoothing) + 0.5 * label_smoothing
        losses = tf.nn.sigmoid_cross_entropy_with_logits(
            labels=labels, logits=logits, name="xentropy"
        )
        return compute_weighted_loss(losses, weights, scope=scope)


def softmax_cross_entropy(
    logits: Any,
    onehot_labels: Any,
    weights: Any = 1.0,
    label_smoothing: float = 0,
    scope: Optional[str] = None,
) -> Any:
    """Weighted mean of the softmax cross-entropy (labels smoothed towards uniform).

    Example:

        loss = tf.contrib.losses.softmax_cross_entropy(logits, tf.one_hot(labels, 10))
    """
    names = [logits, onehot_labels, weights]
    with tf.name_scope(scope, "softmax_cross_entropy_loss", names) as scope:
        logits.get_shape().assert_is_compatible_with(onehot_labels.get_shape())
        labels = tf.cast(onehot_labels, logits.dtype)
        if label_smoothing > 0:
            num_classes = tf.cast(tf.shape(labels)[1], logits.dtype)
            labels = labels * (1.0 - label_smoothing) + label_smoothing / num_classes
        losses = tf.nn.softmax_cross_entropy_with_logits_v2(
            labels=tf.stop_gradient(labels), logits=logits, name="xentropy"
        )
        return compute_weighted_loss(losses, weights, scope=scope)


def sparse_softmax_cross_entropy(
    logits: Any, labels: Any, weights: Any = 1.0, scope: Optional[str] = None
) -> Any:
    """Weighted mean of the softmax cross-entropy of class ids ``[batch]`` or ``[batch, 1]``.

    Example:

        loss = tf.contrib.losses.sparse_softmax_cross_entropy(logits, labels)
    """
    names = [logits, labels, weights]
    with tf.name_scope(scope, "sparse_softmax_cross_entropy_loss", names) as scope:
        labels = tf.reshape(labels, shape=[tf.shape(labels)[0]])
        losses = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=labels, logits=logits, name="xentropy"
        )
        return compute_weighted_loss(losses, weights, scope=scope)


def log_loss(
    predictions: Any,
    labels: Any = None,
    weights: Any = 1.0,
    epsilon: float = 1e-7,
    scope: Optional[str] = None,
) -> Any:
    """Weighted mean of the log loss of probabilities ``predictions``.

    Example:

        loss = tf.contrib.losses.log_loss(tf.sigmoid(logits), labels)
    """
    with tf.name_scope(scope, "log_loss", [predictions, labels, weights]) as scope:
        predictions, labels = _as_float(predictions, labels)
        losses = -tf.multiply(labels, tf.log(predictions + epsilon)) - tf.multiply(
            1 - labels, tf.log(1 - predictions + epsilon)
        )
        return compute_weighted_loss(losses, weights, scope=scope)


def hinge_loss(logits: Any, labels: Any = None, scope: Optional[str] = None) -> Any:
    """The hinge loss of each entry, not reduced (labels 0 / 1), as TF 1.15's.

    Example:

        per_example = tf.contrib.losses.hinge_loss(logits, labels)
    """
    with tf.name_scope(scope, "hinge_loss", [logits, labels]):
        logits.get_shape().assert_is_compatible_with(labels.get_shape())
        labels = tf.cast(labels, tf.float32)
        ones = tf.ones_like(labels)
        return tf.nn.relu(ones - (2 * labels - ones) * logits)


def mean_squared_error(
    predictions: Any, labels: Any = None, weights: Any = 1.0, scope: Optional[str] = None
) -> Any:
    """Weighted mean of ``(predictions - labels) ** 2``.

    Example:

        loss = tf.contrib.losses.mean_squared_error(predictions, targets)
    """
    with tf.name_scope(scope, "mean_squared_error", [predictions, labels, weights]) as scope:
        predictions, labels = _as_float(predictions, labels)
        losses = tf.squared_difference(predictions, labels)
        return compute_weighted_loss(losses, weights, scope=scope)


def mean_pairwise_squared_error(
    predictions: Any, labels: Any = None, weights: Any = 1.0, scope: Optional[str] = None
) -> Any:
    """Weighted mean of the squared differences between pairs of entries of each example.

    Raises:
      ValueError: differences or weights of unknown rank.

    Example:

        loss = tf.contrib.losses.mean_pairwise_squared_error(depths, true_depths)
    """
    names = [predictions, labels, weights]
    with tf.name_scope(scope, "mean_pairwise_squared_error", names):
        predictions, labels = _as_float(predictions, labels)
        weights = tf.cast(tf.convert_to_tensor(weights), tf.float32)
        diffs = predictions - labels
        if diffs.get_shape().ndims is None:
            raise ValueError("diffs.get_shape().ndims cannot be None")
        if weights.get_shape().ndims is None:
            raise ValueError("weights.get_shape().ndims cannot be None")
        axis = list(range(1, diffs.get_shape().ndims))
        present = _num_present(diffs, weights, per_batch=True)
        sum_squares = tf.reduce_sum(tf.square(diffs), axis=axis)
        term1 = 2.0 * tf.math.divide_no_nan(sum_squares, present, name="value")
        sum_diff = tf.reduce_sum(diffs, axis=axis)
        term2 = 2.0 * tf.math.divide_no_nan(tf.square(sum_diff), tf.square(present), name="value")
        loss = _scale_losses(term1 - term2, weights)
        mean = tf.where(tf.reduce_sum(present) > 0, loss, tf.zeros_like(loss), name="value")
        add_loss(mean)
        return mean


def cosine_distance(
    predictions: Any,
    labels: Any = None,
    axis: Optional[int] = None,
    weights: Any = 1.0,
    scope: Optional[str] = None,
    dim: Optional[int] = None,
) -> Any:
    """Weighted mean of ``1 - sum(predictions * labels, axis)`` (unit-normalised inputs).

    Raises:
      ValueError: neither ``axis`` nor the deprecated ``dim`` given, or both.

    Example:

        loss = tf.contrib.losses.cosine_distance(normalized, targets, axis=1)
    """
    if axis is not None and dim is not None:
        raise ValueError("Cannot specify both 'axis' and 'dim'")
    axis = dim if axis is None else axis
    if axis is None:
        raise ValueError("You must specify 'axis'.")
    with tf.name_scope(scope, "cosine_distance_loss", [predictions, labels, weights]) as scope:
        predictions, labels = _as_float(predictions, labels)
        losses = 1 - tf.reduce_sum(tf.multiply(predictions, labels), axis=[axis])
        return compute_weighted_loss(losses, weights, scope=scope)
