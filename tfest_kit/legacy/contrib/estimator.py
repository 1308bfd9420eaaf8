"""``tf.contrib.estimator`` as TF 1.15 had it, from the official Estimator package.

- The hooks and helpers that moved to ``tf.compat.v1.estimator.experimental``
  (``stop_if_no_decrease_hook`` and the other early-stopping hooks, ``InMemoryEvaluatorHook``,
  ``make_stop_at_checkpoint_step_hook``, ``call_logit_fn`` …), ``add_metrics`` and the head-taking
  estimators (``DNNEstimator``, ``LinearEstimator``, ``DNNLinearCombinedEstimator``) are the
  official ones; the Estimators they and ``forward_features`` give hold the protections of the
  runner's ``tf.estimator.Estimator`` (one writer per model_dir, a damaged state file survived);
- ``forward_features`` and ``clip_gradients_by_norm``, which TensorFlow Estimator 2.15 no longer
  has, are small ports of TF 1.15's.

- the v1 heads ``binary_classification_head``, ``multi_class_head``, ``regression_head``,
  ``poisson_regression_head`` and ``logistic_regression_head``: TF 1.15's factories (its
  arguments, the ``SUM_OVER_BATCH_SIZE`` default) around the v1 ``_Head`` classes
  ``tensorflow_estimator``'s ``canned/head.py`` still ships (the v1 canned Estimators use them);
  they take ``tf.train`` optimizers and ``train_op_fn`` as TF 1.15's did.

``multi_label_head`` and ``multi_head`` are not served: their v1 classes were contrib's own and
went with it (``tf.estimator.MultiLabelHead`` / ``MultiHead``, with other arguments).

Example:

    hook = tf.contrib.estimator.stop_if_no_decrease_hook(estimator, "loss", 1000)
    estimator = tf.contrib.estimator.add_metrics(estimator, my_metric_fn)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Union

from tfest_kit._tf import estimator as tf_estimator
from tfest_kit._tf import tf
from tfest_kit.legacy._estimator import LEGACY_ESTIMATORS
from tfest_kit.logs import quieted

from tensorflow_estimator.python.estimator.canned import head as head_v1

_FROM_EXPERIMENTAL = (
    "stop_if_higher_hook",
    "stop_if_lower_hook",
    "stop_if_no_decrease_hook",
    "stop_if_no_increase_hook",
    "make_early_stopping_hook",
    "make_stop_at_checkpoint_step_hook",
    "InMemoryEvaluatorHook",
    "call_logit_fn",
    "dnn_logit_fn_builder",
    "linear_logit_fn_builder",
    "build_raw_supervised_input_receiver_fn",
)
_HEAD_ESTIMATORS = ("DNNEstimator", "LinearEstimator", "DNNLinearCombinedEstimator")
_FROM_ESTIMATOR = ("add_metrics", *_HEAD_ESTIMATORS)

_HEADS = (
    "binary_classification_head",
    "multi_class_head",
    "regression_head",
    "poisson_regression_head",
    "logistic_regression_head",
)

__all__ = [
    *_FROM_EXPERIMENTAL,
    *_FROM_ESTIMATOR,
    *_HEADS,
    "forward_features",
    "clip_gradients_by_norm",
    "BACKING",
    "NOT_SERVED",
]

BACKING = {
    **{name: f"tf.compat.v1.estimator.experimental.{name}" for name in _FROM_EXPERIMENTAL},
    **{name: f"tf.compat.v1.estimator.{name}" for name in _FROM_ESTIMATOR},
    "forward_features": "tfest_kit.legacy.contrib.estimator.forward_features (a port of TF 1.15's)",
    "clip_gradients_by_norm": (
        "tf.clip_by_global_norm (tfest_kit.legacy.contrib.estimator, a port of TF 1.15's)"
    ),
    **dict.fromkeys(_HEADS, "tensorflow_estimator's canned/head.py (TF 1.15's v1 heads)"),
}
_MIRRORED = "tf.distribute.MirroredStrategy in tf.estimator.RunConfig(train_distribute=…)"
NOT_SERVED = {
    "multi_label_head": "tf.estimator.MultiLabelHead",
    "multi_head": "tf.estimator.MultiHead",
    "replicate_model_fn": _MIRRORED,
    "TowerOptimizer": _MIRRORED,
}

for _name in _FROM_EXPERIMENTAL:
    globals()[_name] = getattr(tf_estimator.experimental, _name)
for _name in _HEAD_ESTIMATORS:
    globals()[_name] = getattr(LEGACY_ESTIMATORS, _name)


def add_metrics(estimator: Any, metric_fn) -> Any:
    """``tf.contrib.estimator.add_metrics``: the official one, as the runner's Estimator.

    Args:
      estimator: a ``tf.estimator.Estimator``.
      metric_fn: returns a dict of metric ops from ``labels``, ``predictions`` (and
        ``features``, ``config``), as ``tf.compat.v1.estimator.add_metrics`` takes it.

    Returns:
      An Estimator evaluating ``estimator``'s metrics and ``metric_fn``'s, in the same model_dir,
      guarded as the runner's ``tf.estimator.Estimator``.

    Raises:
      ValueError: from the official function, for a ``metric_fn`` with other arguments.

    Example:

        estimator = tf.contrib.estimator.add_metrics(estimator, my_metric_fn)
    """
    # TF 1.15 built one Estimator here: it logged one "Using config" and one "Calling model_fn"
    # per call. Its public model_fn would log the call again inside the runner's.
    with quieted():
        official = tf_estimator.add_metrics(estimator, metric_fn)
    return LEGACY_ESTIMATORS.Estimator(
        model_fn=official._model_fn,
        model_dir=official.model_dir,
        config=official.config,
        warm_start_from=official._warm_start_settings,
    )


def forward_features(
    estimator: Any, keys: Union[None, str, Sequence[str]] = None, sparse_default_values=None
):
    """``tf.contrib.estimator.forward_features``: predictions that also carry input features.

    Args:
      estimator: a ``tf.estimator.Estimator``.
      keys: the feature keys to forward (a string or a list); None forwards every feature.
      sparse_default_values: feature key -> default value, to forward a ``SparseTensor``
        feature as a dense one.

    Returns:
      An Estimator whose PREDICT ``predictions`` (and ``PredictOutput`` export outputs) hold
      the forwarded features as well.

    Raises:
      TypeError: if ``estimator`` is not an Estimator or ``keys`` not strings.
      ValueError: at predict time, for a missing key, a key the predictions already have, a
        non-dict ``predictions`` or a sparse feature without a default value.

    Example:

        estimator = forward_features(estimator, keys=['id'])
    """
    if not isinstance(estimator, tf_estimator.Estimator):
        raise TypeError(
            f"`estimator` must be a tf.estimator.Estimator. Got: {type(estimator).__name__}"
        )
    if isinstance(keys, str):
        keys = [keys]
    if keys is not None and not all(isinstance(k, str) for k in keys):
        raise TypeError(f"`keys` must be a string or a list of strings. Got: {keys!r}")
    defaults = dict(sparse_default_values or {})

    def model_fn(features, labels, mode, config):
        spec = estimator.model_fn(features=features, labels=labels, mode=mode, config=config)
        if mode != tf_estimator.ModeKeys.PREDICT or spec.predictions is None:
            return spec
        predictions = spec.predictions
        if not isinstance(predictions, dict):
            raise ValueError(
                "forward_features needs the model's predictions to be a dict. "
                f"Got: {type(predictions).__name__}"
            )
        if not isinstance(features, dict):
            raise ValueError(f"forward_features needs dict features. Got: {type(features)}")
        predictions = dict(predictions)
        for key in list(features) if keys is None else keys:
            if key not in features:
                raise ValueError(
                    f"Key {key!r} is not in features: forward one of {sorted(features)}"
                )
            feature = features[key]
            if isinstance(feature, tf.SparseTensor):
                if key not in defaults:
                    raise ValueError(
                        f"Feature {key!r} is sparse: give its value for missing entries in "
                        "`sparse_default_values` to forward it"
                    )
                feature = tf.sparse.to_dense(feature, default_value=defaults[key])
            if key in predictions:
                raise ValueError(
                    f"Cannot forward feature key ({key}): the predictions already have it."
                )
            predictions[key] = feature
        outputs = spec.export_outputs
        if outputs:
            outputs = {
                name: tf_estimator.export.PredictOutput(predictions)
                if isinstance(value, tf_estimator.export.PredictOutput)
                else value
                for name, value in outputs.items()
            }
        return spec._replace(predictions=predictions, export_outputs=outputs)

    return LEGACY_ESTIMATORS.Estimator(
        model_fn=model_fn, model_dir=estimator.model_dir, config=estimator.config
    )


class _ClippedGradients(tf.train.Optimizer):
    # Gradients clipped by their global norm, then applied by the wrapped optimizer.

    def __init__(self, optimizer, clip_norm: float, name: str):
        super().__init__(use_locking=False, name=name)
        self._optimizer = optimizer
        self._clip_norm = clip_norm

    def compute_gradients(self, *args, **kwargs):
        grads_and_vars = self._optimizer.compute_gradients(*args, **kwargs)
        gradients, variables = zip(*grads_and_vars)
        clipped, _ = tf.clip_by_global_norm(list(gradients), self._clip_norm)
        return list(zip(clipped, variables))

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        return self._optimizer.apply_gradients(grads_and_vars, global_step, name)

    def get_slot(self, *args, **kwargs):
        return self._optimizer.get_slot(*args, **kwargs)

    def get_slot_names(self, *args, **kwargs):
        return self._optimizer.get_slot_names(*args, **kwargs)

    def variables(self):
        return self._optimizer.variables()


def clip_gradients_by_norm(optimizer, clip_norm: float):
    """``tf.contrib.estimator.clip_gradients_by_norm``: clip by global norm, then ``optimizer``.

    Args:
      optimizer: a ``tf.compat.v1.train.Optimizer``.
      clip_norm: the largest global norm of the gradients.

    Returns:
      An optimizer named ``ClipByNorm<optimizer's name>``; its slots are ``optimizer``'s.

    Raises:
      TypeError: if ``optimizer`` is not a ``tf.compat.v1.train.Optimizer``.

    Example:

        optimizer = clip_gradients_by_norm(tf.train.AdamOptimizer(1e-3), 1.0)
    """
    if not isinstance(optimizer, tf.train.Optimizer):
        raise TypeError(f"`optimizer` must be a tf.compat.v1.train.Optimizer. Got: {optimizer!r}")
    return _ClippedGradients(optimizer, clip_norm, "ClipByNorm" + optimizer.get_name())


# TF 1.15's contrib heads: the v1 canned heads, averaging the loss over the batch by default.
_MEAN = tf.losses.Reduction.SUM_OVER_BATCH_SIZE


def binary_classification_head(
    weight_column=None,
    thresholds=None,
    label_vocabulary=None,
    loss_reduction=_MEAN,
    loss_fn=None,
    name=None,
):
    """``tf.contrib.estimator.binary_classification_head``: a v1 ``_Head``, sigmoid loss.

    Example:

        head = binary_classification_head()
        spec = head.create_estimator_spec(features, mode, logits, labels,
                                          optimizer=tf.train.AdamOptimizer(1e-3))
    """
    return head_v1._binary_logistic_head_with_sigmoid_cross_entropy_loss(
        weight_column=weight_column,
        thresholds=thresholds,
        label_vocabulary=label_vocabulary,
        loss_reduction=loss_reduction,
        loss_fn=loss_fn,
        name=name,
    )


def multi_class_head(
    n_classes,
    weight_column=None,
    label_vocabulary=None,
    loss_reduction=_MEAN,
    loss_fn=None,
    name=None,
):
    """``tf.contrib.estimator.multi_class_head``: a v1 ``_Head``, softmax loss (n_classes > 2).

    Example:

        estimator = tf.contrib.estimator.DNNEstimator(multi_class_head(3), columns, [16])
    """
    return head_v1._multi_class_head_with_softmax_cross_entropy_loss(
        n_classes=n_classes,
        weight_column=weight_column,
        label_vocabulary=label_vocabulary,
        loss_reduction=loss_reduction,
        loss_fn=loss_fn,
        name=name,
    )


def regression_head(
    weight_column=None,
    label_dimension=1,
    loss_reduction=_MEAN,
    loss_fn=None,
    inverse_link_fn=None,
    name=None,
):
    """``tf.contrib.estimator.regression_head``: a v1 ``_Head``, mean squared error.

    Example:

        estimator = tf.contrib.estimator.DNNEstimator(regression_head(), columns, [16])
    """
    return head_v1._regression_head(
        weight_column=weight_column,
        label_dimension=label_dimension,
        loss_reduction=loss_reduction,
        loss_fn=loss_fn,
        inverse_link_fn=inverse_link_fn,
        name=name,
    )


def poisson_regression_head(
    weight_column=None, label_dimension=1, loss_reduction=_MEAN, compute_full_loss=True, name=None
):
    """``tf.contrib.estimator.poisson_regression_head``: ``tf.nn.log_poisson_loss``, exp link.

    Example:

        head = poisson_regression_head()  # predictions: exp(logits), counts
    """

    def poisson_loss(labels, logits):
        return tf.nn.log_poisson_loss(
            targets=labels, log_input=logits, compute_full_loss=compute_full_loss
        )

    return regression_head(
        weight_column, label_dimension, loss_reduction, poisson_loss, tf.exp, name
    )


def logistic_regression_head(weight_column=None, loss_reduction=_MEAN, name=None):
    """``tf.contrib.estimator.logistic_regression_head``: sigmoid loss on labels in [0, 1].

    Example:

        head = logistic_regression_head()  # predictions: sigmoid(logits), a probability
    """

    def logistic_loss(labels, logits):
        labels = head_v1._assert_range(
            labels, n_classes=2, message="Labels must be in range [0, 1]"
        )
        return tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits)

    return regression_head(weight_column, 1, loss_reduction, logistic_loss, tf.sigmoid, name)
