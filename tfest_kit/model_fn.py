"""A network function -> a complete Estimator ``model_fn``, on the official Head API.

The head makes loss, metrics and export signatures; this adds an optimizer by name with BERT's
schedule, ``init_checkpoint`` warm start, ``[batch]`` class ids and multi-class metrics.
"""

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any, Callable, Optional, Union

from tfest_kit import _warm_start
from tfest_kit import metrics as _metrics
from tfest_kit._checks import BATCHED_TWICE, check_int, check_number
from tfest_kit._model_fn_call import call_model_fn, check_class_ids, keras_seeds, model_fn_args
from tfest_kit._tf import estimator, tf

__all__ = ["CLASSIFIER_METRICS", "REGRESSOR_METRICS", "OPTIMIZERS", "AdamWeightDecayOptimizer"]
__all__ += ["build", "classifier", "regressor", "seeded"]

CLASSIFIER_METRICS = ("accuracy", "auc", "precision", "recall", "f1", "recall_at_<k>")
REGRESSOR_METRICS = ("mse", "mae", "rmse")
_RECALL_AT = re.compile(r"^recall_at_([1-9]\d*)$")  # k >= 1
_REGRESSION_METRICS = {
    "mse": tf.metrics.mean_squared_error,
    "mae": tf.metrics.mean_absolute_error,
    "rmse": tf.metrics.root_mean_squared_error,
}
# What a Keras layer's moving averages and similar state updates are made of.
_UPDATE_OP_TYPES = ("AssignSubVariableOp", "AssignAddVariableOp", "AssignSub", "AssignAdd")

ModeKeys = estimator.ModeKeys
NetworkFn = Callable[..., tf.Tensor]
OptimizerArg = Union[str, tf.train.Optimizer, Callable[..., tf.train.Optimizer]]


class AdamWeightDecayOptimizer(tf.train.Optimizer):
    """BERT's Adam with decoupled weight decay ("AdamW"), for ``tf.compat.v1`` graphs.

    As BERT's: no bias correction; no decay for names matching ``exclude_from_weight_decay``.

    Example:

        optimizer = AdamWeightDecayOptimizer(learning_rate=2e-5, weight_decay_rate=0.01)
    """

    def __init__(
        self,
        learning_rate,
        weight_decay_rate: float = 0.01,
        beta_1: float = 0.9,
        beta_2: float = 0.999,
        epsilon: float = 1e-6,
        exclude_from_weight_decay: Optional[Sequence[str]] = ("LayerNorm", "layer_norm", "bias"),
        name: str = "AdamWeightDecay",
    ):
        super().__init__(use_locking=False, name=name)
        self._lr, self._weight_decay_rate = learning_rate, weight_decay_rate
        self._beta_1, self._beta_2, self._epsilon = beta_1, beta_2, epsilon
        self._exclude = list(exclude_from_weight_decay or ())

    def _create_slots(self, var_list):
        for var in var_list:
            self._zeros_slot(var, "m", self._name)
            self._zeros_slot(var, "v", self._name)

    def _apply_dense(self, grad, var):
        return self._apply(grad, var)

    _resource_apply_dense = _apply_dense

    def _apply_sparse(self, grad, var):  # sparse gradients are densified
        return self._apply(tf.convert_to_tensor(grad), var)

    def _resource_apply_sparse(self, grad, var, indices):
        return self._apply(tf.math.unsorted_segment_sum(grad, indices, tf.shape(var)[0]), var)

    def _apply(self, grad, var):
        m, v = self.get_slot(var, "m"), self.get_slot(var, "v")
        grad, lr = tf.cast(grad, var.dtype.base_dtype), tf.cast(self._lr, var.dtype.base_dtype)
        next_m = self._beta_1 * m + (1.0 - self._beta_1) * grad
        next_v = self._beta_2 * v + (1.0 - self._beta_2) * tf.square(grad)
        update = next_m / (tf.sqrt(next_v) + self._epsilon)
        if self._weight_decay_rate and not any(re.search(p, var.op.name) for p in self._exclude):
            # Decoupled: added to the update, not the loss, so Adam's moments never see it.
            update += self._weight_decay_rate * var
        return tf.group(var.assign(var - lr * update), m.assign(next_m), v.assign(next_v))


OPTIMIZERS: dict[str, Callable[..., tf.train.Optimizer]] = {
    "adam": lambda lr: tf.train.AdamOptimizer(lr),
    "adamw": lambda lr: AdamWeightDecayOptimizer(lr),
    "sgd": lambda lr: tf.train.GradientDescentOptimizer(lr),
    "momentum": lambda lr: tf.train.MomentumOptimizer(lr, momentum=0.9),
    "adagrad": lambda lr: tf.train.AdagradOptimizer(lr),
    "rmsprop": lambda lr: tf.train.RMSPropOptimizer(lr),
}


def _check_optimizer(optimizer, learning_rate, warmup_steps, decay_steps, clip_norm) -> None:
    """Refuses an unknown name, a bad schedule, and an instance with a schedule it would ignore."""
    if isinstance(optimizer, str) and optimizer.lower() not in OPTIMIZERS:
        raise ValueError(f"`optimizer` must be one of {sorted(OPTIMIZERS)}. Got: {optimizer!r}")
    if isinstance(optimizer, tf.train.Optimizer) and (
        learning_rate is not None or warmup_steps or decay_steps is not None
    ):
        raise ValueError(
            "`learning_rate`, `warmup_steps` and `decay_steps` need `optimizer` as a name or "
            f"a callable: an Optimizer instance trains with its own rate. Got: {optimizer!r}"
        )
    if check_number("learning_rate", 1e-3 if learning_rate is None else learning_rate) == 0:
        raise ValueError("`learning_rate` must be > 0: a rate of 0 trains nothing. Got: 0")
    if clip_norm is not None and not check_number("clip_norm", clip_norm, hint="None: no clipping"):
        raise ValueError("`clip_norm` must be > 0 (None: no clipping). Got: 0")
    warmup_steps = check_int("warmup_steps", warmup_steps, 0)
    decay_steps = check_int("decay_steps", decay_steps, allow_none=True)
    if decay_steps is not None and decay_steps < warmup_steps:  # 0 from the warm-up's end
        raise ValueError(
            f"`decay_steps` ({decay_steps}), where the rate reaches 0, must not come before "
            f"`warmup_steps` ({warmup_steps}): both count from step 0"
        )


def _learning_rate_schedule(learning_rate: float, global_step, warmup_steps: int, decay_steps):
    """BERT's: linear warm-up from 0, then linear decay to 0 at ``decay_steps`` (from step 0)."""
    lr = tf.constant(float(learning_rate), tf.float32)
    if decay_steps is not None:
        lr = tf.train.polynomial_decay(lr, global_step, decay_steps, end_learning_rate=0.0)
    if warmup_steps:
        step = tf.cast(global_step, tf.float32)
        lr = tf.where(step < warmup_steps, float(learning_rate) * step / warmup_steps, lr)
    return tf.identity(lr, name="scheduled_learning_rate")  # the summary is "learning_rate"


@dataclasses.dataclass(frozen=True)
class _Head:
    """An official head, and what our builders change of it."""

    official: Any
    metric_fn: Optional[Callable] = None
    predictions_fn: Optional[Callable] = None
    labels_fn: Optional[Callable] = None
    official_logits: Optional[Callable] = None  # our outputs -> the head's logits
    official_dropped: tuple = ()  # the head's metrics and signatures left out

    def logits(self, outputs):
        return outputs if self.official_logits is None else self.official_logits(outputs)


def _spec(tpu_spec: bool, **kwargs):
    spec = estimator.tpu.TPUEstimatorSpec(**kwargs)
    return spec if tpu_spec else spec.as_estimator_spec()


def _train_op(loss, schedule: tuple, cross_shard):
    optimizer, learning_rate, warmup_steps, decay_steps, clip_norm = schedule
    learning_rate = 1e-3 if learning_rate is None else learning_rate
    global_step = tf.train.get_or_create_global_step()
    lr = _learning_rate_schedule(learning_rate, global_step, warmup_steps, decay_steps)
    opt = OPTIMIZERS[optimizer.lower()](lr) if isinstance(optimizer, str) else optimizer
    if not isinstance(opt, tf.train.Optimizer):
        opt = opt(lr)
    if cross_shard:
        opt = tf.tpu.CrossShardOptimizer(opt)
    elif not isinstance(optimizer, tf.train.Optimizer):
        # A TPU model_fn needs a host_call for summaries; an instance has its own rate.
        tf.summary.scalar("learning_rate", lr)
    grads_and_vars = opt.compute_gradients(loss)
    if clip_norm:
        grads, variables = zip(*grads_and_vars)
        grads_and_vars = list(zip(tf.clip_by_global_norm(list(grads), clip_norm)[0], variables))
    with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
        # The step is counted here, as BERT's create_optimizer does: its AdamWeightDecay
        # optimizer leaves `global_step` alone, and training never reached max_steps.
        train_op = opt.apply_gradients(grads_and_vars)
    with tf.control_dependencies([train_op]):
        return tf.group(train_op, global_step.assign_add(1), name="train_op")


def _run_layer_updates(network_ops: list) -> None:
    """Puts the state updates no op uses into ``UPDATE_OPS``, which the train op waits for:
    Keras' ``BatchNormalization`` keeps its moving averages out, unrun (mean 0, variance 1)."""
    waiting = {}
    for op in network_ops:
        for dependency in op.control_inputs:
            waiting.setdefault(dependency, []).append(op)

    def unused(op) -> bool:
        if any(output.consumers() for output in op.outputs):
            return False
        return all(unused(later) for later in waiting.get(op, ()))

    known = set(tf.get_collection(tf.GraphKeys.UPDATE_OPS))
    for op in network_ops:
        if op.type in _UPDATE_OP_TYPES and op not in known and unused(op):
            tf.add_to_collection(tf.GraphKeys.UPDATE_OPS, op)


class _MissingFeature(KeyError):
    pass


class _Features(dict):
    def __missing__(self, key):
        raise _MissingFeature(key)


def _network_outputs(network_fn: Callable, features, mode, params, config):
    """Calls ``network_fn`` seeded from ``config``; a feature the input lacks is named."""
    graph = tf.get_default_graph()
    first_op = len(graph.get_operations())
    if isinstance(features, Mapping):
        features = _Features(features)
    try:
        with keras_seeds(getattr(config, "tf_random_seed", None)):
            outputs = network_fn(features, mode, params)
    except _MissingFeature as error:
        raise ValueError(
            f"`network_fn` looked up feature {error.args[0]!r}, which the input_fn (or serving "
            f"receiver) does not provide. Got features: {sorted(map(str, features))}"
        ) from error
    except TypeError as error:  # "Only integers, slices … are valid indices, got 'x'"
        if not isinstance(features, tf.Tensor) or "valid indices" not in str(error):
            raise
        raise ValueError(
            "`network_fn` looked features up by name; the input_fn gave one tensor, not a dict: "
            f"return ({{'x': x}}, labels). Got: {features}"
        ) from error
    if isinstance(outputs, (Mapping, list, tuple)):  # "Expected any non-tensor type" from cast
        raise TypeError(f"`network_fn` must return one tensor. Got: {type(outputs).__name__}")
    if mode == ModeKeys.TRAIN:
        _run_layer_updates(graph.get_operations()[first_op:])
    return tf.cast(outputs, tf.float32)


def build(
    network_fn: NetworkFn,
    head: Any,
    *,
    metric_fn: Optional[Callable] = None,
    optimizer: OptimizerArg = "adam",
    learning_rate: Optional[float] = None,
    warmup_steps: int = 0,
    decay_steps: Optional[int] = None,
    clip_norm: Optional[float] = None,
    init_checkpoint: Optional[str] = None,
    weight_key: Optional[str] = None,
    tpu_spec: bool = False,
) -> Callable:
    """Builds ``model_fn(features, labels, mode, params, config)`` from a network and a head.

    The official head makes the loss (a custom one: its ``loss_fn``), predictions, metrics and
    signatures; ``"serving_default"`` and ``"predict"`` carry all predictions.

    Args:
      network_fn: ``(features, mode, params) -> logits``, as the head takes them.
      head: a ``tf.estimator.Head``, e.g. ``MultiLabelHead(5)``, ``weight_column=weight_key``.
      metric_fn: ``(labels, logits, weights) -> {name: (value_op, update_op)}``, beside the
        head's; called positionally with tensors only, so it also serves as a TPU ``metric_fn``.
      optimizer, learning_rate, warmup_steps, decay_steps, clip_norm, init_checkpoint,
        weight_key, tpu_spec: as for :func:`classifier`.

    Returns:
      A model_fn for ``Estimator`` or ``TPUEstimator``, checking that a checkpoint in
      ``config.model_dir`` fits the model.

    Raises:
      TypeError: at once, for no head.
      ValueError: at once for a bad optimizer or schedule; when the model_fn runs, for an
        unreadable ``init_checkpoint``, a missing feature, or another model's checkpoint.

    Example:

        model_fn = build(network, tf.estimator.MultiLabelHead(5), learning_rate=0.01)
    """
    if not isinstance(head, estimator.Head):
        raise TypeError(f"`head` must be a tf.estimator.Head. Got: {head!r}")
    head = _Head(head, metric_fn=metric_fn)
    schedule = (optimizer, learning_rate, warmup_steps, decay_steps, clip_norm)
    return _build(network_fn, head, schedule, init_checkpoint, weight_key, tpu_spec)


def _build(network_fn, head: _Head, schedule, init_checkpoint, weight_key, tpu_spec) -> Callable:
    _check_optimizer(*schedule)
    checkpoint = checkpoint_error = None
    if init_checkpoint:
        try:
            checkpoint = _warm_start.resolve_checkpoint(init_checkpoint)
        except ValueError as error:
            # Raised at the first graph build unless model_dir has a checkpoint: a restart
            # after the source was deleted must still resume.
            checkpoint_error = error

    def model_fn(features, labels, mode, params=None, config=None):
        params = dict(params or {})
        model_dir = getattr(config, "model_dir", None)
        warm_start_from = checkpoint
        if init_checkpoint and _warm_start.resuming(model_dir):
            warm_start_from = None  # Estimator restores model_dir's checkpoint over it
        elif checkpoint_error is not None:
            raise checkpoint_error
        outputs = _network_outputs(network_fn, features, mode, params, config)
        custom = head.predictions_fn
        predictions = custom(outputs) if custom else head.official.predictions(head.logits(outputs))
        on_tpu = bool(tpu_spec and params.get("use_tpu"))
        scaffold_fn = _warm_start_fn(warm_start_from, tpu_spec)
        common = {"mode": mode, "scaffold_fn": scaffold_fn, "predictions": predictions}
        check_dir = None if on_tpu else model_dir  # on a TPU the variables live in its program
        if mode == ModeKeys.PREDICT:
            return _predict_spec(head, outputs, common, check_dir, tpu_spec)
        if labels is None:  # the head's error: "None values not supported"
            raise ValueError(f"{mode} needs labels: the input_fn must return (features, labels)")
        labels = head.labels_fn(labels) if head.labels_fn is not None else labels
        if weight_key is not None and weight_key not in features:
            raise ValueError(f"`weight_key` {weight_key!r} is not a feature: {sorted(features)}")
        weights = None
        if weight_key is not None:
            weights = tf.convert_to_tensor(features[weight_key])
            if weights.dtype == tf.string or weights.shape[1:].num_elements() not in (1, None):
                raise ValueError(
                    f"`weight_key` {weight_key!r} must be one number per example. Got: "
                    f"{weights.dtype.name} {weights.shape}"
                )
            weights = tf.reshape(tf.cast(weights, tf.float32), [-1])
        regularization = tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES) or None
        weighted = {} if weights is None else {weight_key: weights}  # the features the head reads
        # The head's loss without its string predictions, which a TPU program cannot hold.
        loss = head.official.loss(labels, head.logits(outputs), weighted, mode, regularization)
        if mode == ModeKeys.EVAL:
            _warm_start.check_model_dir(check_dir, mode=mode)
            metric_fn = _eval_metrics(head, weight_key, labels, outputs, weights, regularization)
            return _spec(tpu_spec, loss=loss, eval_metrics=metric_fn, **common)
        train_op = _train_op(loss, schedule, on_tpu)
        _warm_start.check_model_dir(check_dir, mode=mode)  # the optimizer's variables too
        return _spec(tpu_spec, loss=loss, train_op=train_op, **common)

    return model_fn


def _warm_start_fn(checkpoint, tpu_spec: bool) -> Optional[Callable]:
    """Warm-starts now, or returns the TPU ``scaffold_fn`` that does."""
    if checkpoint is None:
        return None
    if not tpu_spec:
        _warm_start.warm_start(checkpoint)
        return None
    # TPUEstimator calls scaffold_fn after the train op exists: leave out the optimizer slots.
    network_variables = tf.global_variables()

    def scaffold_fn():
        _warm_start.warm_start(checkpoint, network_variables)
        return tf.train.Scaffold()

    return scaffold_fn


def _predict_spec(head: _Head, outputs, common: dict, check_dir, tpu_spec: bool):
    # Export outputs in PREDICT only: the class names' string ops cannot run on a TPU.
    output = estimator.export.PredictOutput(common["predictions"])
    export_outputs = {"serving_default": output, "predict": output}
    logits = head.logits(outputs)
    spec = head.official.create_estimator_spec(features={}, mode=ModeKeys.PREDICT, logits=logits)
    for key, output in spec.export_outputs.items():
        if key not in export_outputs and key not in head.official_dropped:
            export_outputs[key] = output
    if (saver := _warm_start.check_model_dir(check_dir, mode=ModeKeys.PREDICT)) is not None:
        # An export restores with the Scaffold's saver only, not the SAVERS collection.
        inner = common["scaffold_fn"]
        common["scaffold_fn"] = lambda: _warm_start.with_saver(inner() if inner else None, saver)
    return _spec(tpu_spec, export_outputs=export_outputs, **common)


def _eval_metrics(head: _Head, weight_key, labels, outputs, weights, regularization):
    """``(metric_fn, tensors)``: the head's metrics and ``metric_fn``'s, from tensors only."""
    tensors = {"labels": labels, "outputs": outputs}
    if weights is not None:
        tensors["weights"] = weights
    if regularization:
        tensors["regularization_loss"] = tf.add_n(regularization)

    def metric_fn(labels, outputs, weights=None, regularization_loss=None):
        losses = None if regularization_loss is None else [regularization_loss]
        features = {} if weights is None else {weight_key: weights}
        ops = head.official.update_metrics(
            head.official.metrics(losses), features, head.logits(outputs), labels, losses
        )
        ops = {k: v for k, v in ops.items() if k not in head.official_dropped}
        if head.metric_fn is not None:
            ops.update(head.metric_fn(labels, outputs, weights))
        return ops

    return metric_fn, tensors


def _check_metric_names(metrics: Sequence[str], accepted: Sequence[str]) -> tuple:
    for name in metrics:
        if name not in accepted and not ("recall_at_<k>" in accepted and _RECALL_AT.match(name)):
            auc = " (auc: 2 classes only)" if name == "auc" else ""
            raise ValueError(f"`metrics` must be among {list(accepted)}{auc}. Got: {name!r}")
    return tuple(metrics)


def _classifier_head(num_classes: int, metrics: tuple, weight_key) -> _Head:
    def labels_fn(labels):
        if isinstance(labels, tf.SparseTensor):  # 46 lines of "Failed to convert elements"
            raise ValueError(
                "`labels` must be one class id per example, not sparse (a VarLenFeature): read "
                "it as tf.io.FixedLenFeature([], tf.int64)"
            )
        labels = tf.convert_to_tensor(labels)
        if labels.shape.rank == 2 and labels.shape[1] not in (1, None):  # the head: "n_classes"
            raise ValueError(
                "`labels` must be one class id per example, [batch] or [batch, 1], not one-hot: "
                f"pass tf.argmax(labels, -1) in the input_fn. Got: shape {labels.shape}"
            )
        if not labels.dtype.is_integer:
            raise ValueError(
                "`labels` must be integer class ids in [0, num_classes); cast or map them in the "
                f"input_fn. Got: dtype {labels.dtype.name}"
            )
        return check_class_ids(labels, num_classes)

    def predictions_fn(logits):
        if logits.shape.rank is not None and logits.shape[1:] not in ([num_classes], [None]):
            twice = BATCHED_TWICE if logits.shape.rank == 3 else ""
            raise ValueError(  # the head's error named its own (sliced) shape
                f"network_fn must return logits [batch, {num_classes}] for num_classes="
                f"{num_classes}. Got: shape {logits.shape}{twice}"
            )
        # The head's class_ids are [batch, 1], with string classes beside: these keys are ours.
        probabilities = tf.nn.softmax(logits, name="probabilities")
        class_ids = tf.argmax(logits, axis=-1, name="class_ids")
        return {"logits": logits, "probabilities": probabilities, "class_ids": class_ids}

    def metric_fn(labels, logits, weights):
        class_ids = tf.argmax(logits, axis=-1)
        ops = {}  # "accuracy" and, for 2 classes, "auc" are the head's
        for name in metrics:
            if name in ("precision", "recall", "f1"):
                score = getattr(_metrics, name)
                ops[name] = score(labels, class_ids, num_classes, weights=weights, name=name)
            elif recall_at := _RECALL_AT.match(name):
                k = int(recall_at.group(1))
                ops[name] = _metrics.recall_at_k(labels, logits, k, weights=weights, name=name)
        return ops

    if num_classes == 2:
        # BinaryClassHead takes one logit: the difference of the two gives the same softmax.
        official = estimator.BinaryClassHead(weight_column=weight_key)
        official_logits = lambda logits: logits[:, 1:] - logits[:, :1]  # noqa: E731
    else:
        official = estimator.MultiClassHead(num_classes, weight_column=weight_key)
        official_logits = None
    # Our "precision" / "recall" are macro (the binary head's, class 1's).
    dropped = ("precision", "recall", "regression")
    return _Head(official, metric_fn, predictions_fn, labels_fn, official_logits, dropped)


def _regressor_head(metrics: tuple, weight_key) -> _Head:
    def labels_fn(labels):
        labels = tf.convert_to_tensor(labels)
        if not (labels.dtype.is_floating or labels.dtype.is_integer):  # "Cast string to float"
            raise ValueError(f"`labels` must be numbers. Got: dtype {labels.dtype.name}")
        labels = tf.cast(labels, tf.float32)
        return labels[:, None] if labels.shape.rank == 1 else labels

    def checked(outputs):  # the head: "Tensor Squeeze:0 must have rank at least 2"
        if outputs.shape.rank is not None and outputs.shape[1:] not in ([1], [None]):
            raise ValueError(f"network_fn must return [batch, 1]. Got: shape {outputs.shape}")
        return outputs

    def metric_fn(labels, outputs, weights):
        weights = None if weights is None else tf.reshape(weights, [-1, 1])
        return {name: _REGRESSION_METRICS[name](labels, outputs, weights) for name in metrics}

    official = estimator.RegressionHead(weight_column=weight_key)
    return _Head(official, metric_fn=metric_fn, labels_fn=labels_fn, official_logits=checked)


def classifier(
    network_fn: NetworkFn,
    num_classes: int,
    *,
    optimizer: OptimizerArg = "adam",
    learning_rate: Optional[float] = None,
    warmup_steps: int = 0,
    decay_steps: Optional[int] = None,
    init_checkpoint: Optional[str] = None,
    metrics: Sequence[str] = ("accuracy", "f1"),
    tpu_spec: bool = False,
    clip_norm: Optional[float] = None,
    weight_key: Optional[str] = None,
) -> Callable:
    """A softmax classifier ``model_fn`` on ``MultiClassHead`` (``BinaryClassHead`` for 2).

    PREDICT gives ``"logits"``, ``"probabilities"`` and ``"class_ids"`` (int64 ``[batch]``), all
    in the ``"serving_default"`` and ``"predict"`` signatures beside the head's.

    Args:
      network_fn: ``(features, mode, params) -> logits [batch, num_classes]``.
      num_classes: number of classes (>= 2); labels are int ids ``[batch]`` or ``[batch, 1]``.
      optimizer: a name in :data:`OPTIMIZERS` (``"adamw"`` is BERT's AdamWeightDecay), a
        ``tf.compat.v1.train.Optimizer``, or a callable ``learning_rate -> Optimizer``.
      learning_rate: peak learning rate; None: 1e-3. Not with an Optimizer instance.
      warmup_steps: steps of linear warm-up from 0 (BERT's ``num_warmup_steps``).
      decay_steps: step where the rate reaches 0, linearly (``num_train_steps``); None: no decay.
      init_checkpoint: checkpoint prefix, directory (its latest), SavedModel or exporter's base
        (its newest) to warm-start from, BERT style (by name and shape, logged
        ``*INIT_FROM_CKPT*``; none matching is an error); read only while model_dir has none.
      metrics: from :data:`CLASSIFIER_METRICS`; ``"precision"``, ``"recall"``, ``"f1"`` are
        macro averages; ``"recall_at_5"`` etc.; ``"auc"`` for 2 classes.
      tpu_spec: return ``TPUEstimatorSpec`` for ``TPUEstimator``.
      clip_norm: clip gradients to this global norm; None for no clipping.
      weight_key: feature holding per-example weights for loss and metrics.

    Returns:
      ``model_fn(features, labels, mode, params, config)``, as from :func:`build`.

    Raises:
      ValueError: at once, for a bad number, name or schedule; when the model_fn runs, for
        labels that are not class ids, or an unreadable ``init_checkpoint``.

    Example:

        model_fn = classifier(network, num_classes=10, optimizer="adamw", learning_rate=2e-5,
                              warmup_steps=100, decay_steps=1000, metrics=("accuracy", "f1"))
    """
    num_classes = check_int("num_classes", num_classes, 2)
    accepted = [name for name in CLASSIFIER_METRICS if name != "auc" or num_classes == 2]
    metrics = _check_metric_names(metrics, accepted)
    too_big = [m for m in metrics if _RECALL_AT.match(m) and int(m.split("_")[-1]) > num_classes]
    if too_big:  # else TopKV2's error, after training
        raise ValueError(f"`metrics` {too_big} needs k <= num_classes={num_classes}")
    head = _classifier_head(num_classes, metrics, weight_key)
    schedule = (optimizer, learning_rate, warmup_steps, decay_steps, clip_norm)
    return _build(network_fn, head, schedule, init_checkpoint, weight_key, tpu_spec)


def regressor(
    network_fn: NetworkFn,
    *,
    optimizer: OptimizerArg = "adam",
    learning_rate: Optional[float] = None,
    warmup_steps: int = 0,
    decay_steps: Optional[int] = None,
    init_checkpoint: Optional[str] = None,
    metrics: Sequence[str] = ("mse", "mae"),
    tpu_spec: bool = False,
    clip_norm: Optional[float] = None,
    weight_key: Optional[str] = None,
) -> Callable:
    """A mean-squared-error regressor ``model_fn`` on ``RegressionHead``: ``"predictions"``.

    Args:
      network_fn: ``(features, mode, params) -> [batch, 1]``.
      optimizer, learning_rate, warmup_steps, decay_steps, init_checkpoint, tpu_spec,
        clip_norm, weight_key: as for :func:`classifier`.
      metrics: from :data:`REGRESSOR_METRICS`, beside the head's ``average_loss``.

    Returns:
      ``model_fn(features, labels, mode, params, config)``, as from :func:`build`.

    Raises:
      ValueError: as for :func:`classifier`.

    Example:

        model_fn = regressor(network, learning_rate=1e-2, metrics=("mse", "rmse"))
    """
    head = _regressor_head(_check_metric_names(metrics, REGRESSOR_METRICS), weight_key)
    schedule = (optimizer, learning_rate, warmup_steps, decay_steps, clip_norm)
    return _build(network_fn, head, schedule, init_checkpoint, weight_key, tpu_spec)


def seeded(model_fn: Callable) -> Callable:
    """Makes the Keras layers a hand-written ``model_fn`` builds start from ``tf_random_seed``.

    In TF 2.15 a default-initialized layer (``tf.keras.layers``, ``tf.compat.v1.layers.dense``)
    seeds from Python's ``random``, ignoring ``RunConfig(tf_random_seed=…)``; inside ``seeded`` it
    does not, and no other generator is touched. This module's builders and ``tpu`` do it already.

    Args:
      model_fn: a model_fn taking any of the arguments Estimator accepts.

    Returns:
      A model_fn for ``tf.estimator.Estimator`` calling ``model_fn`` with the arguments it takes.

    Raises:
      ValueError: as Estimator would: ``model_fn`` not callable or without ``features``; when
        it runs, labels or params given that ``model_fn`` does not take.

    Example:

        est = tf.estimator.Estimator(model_fn.seeded(my_model_fn), config=tf.estimator.RunConfig(
            model_dir="/tmp/model", tf_random_seed=42))
    """
    takes = model_fn_args(model_fn)

    def seeded_model_fn(features, labels, mode, params, config):
        if params and "params" not in takes:
            raise ValueError(f"model_fn does not take params, but Estimator got params: {params}")
        return call_model_fn(
            model_fn, features=features, labels=labels, mode=mode, params=params, config=config
        )

    return seeded_model_fn
