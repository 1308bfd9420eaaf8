"""A network function -> a complete Estimator ``model_fn``, on the official Head API.

The head (``MultiClassHead``, ``BinaryClassHead``, ``RegressionHead`` or any given to
:func:`build`) makes the loss, metrics and export signatures; this module adds an optimizer by
name with BERT's schedule, warm start from ``init_checkpoint``, ``[batch]`` class ids and top-k
predictions, multi-class metrics by name, and errors naming the feature, label or argument.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import re
from collections.abc import Mapping, Sequence
from typing import Any, Callable, Optional

from tfest_kit import _warm_start
from tfest_kit import metrics as _metrics
from tfest_kit._checks import check_int
from tfest_kit._class_ids import check_class_ids
from tfest_kit._model_fn_call import call_model_fn, keras_seeds, model_fn_args
from tfest_kit._schedules import (
    OPTIMIZERS,
    AdamWeightDecayOptimizer,
    OptimizerArg,
    check_optimizer,
    check_schedule,
    learning_rate_schedule,
    make_optimizer,
)
from tfest_kit._tf import estimator, tf, tf2

__all__ = [
    "CLASSIFIER_METRICS",
    "REGRESSOR_METRICS",
    "OPTIMIZERS",
    "AdamWeightDecayOptimizer",
    "build",
    "classifier",
    "learning_rate_schedule",
    "regressor",
    "seeded",
]

# Bare "precision" / "recall" / "f1" are macro: for single-label data micro equals accuracy.
_SCORES = {
    f"{score}{suffix}": (score, average)
    for score in ("precision", "recall", "f1")
    for suffix, average in (
        ("", "macro"),
        ("_macro", "macro"),
        ("_micro", "micro"),
        ("_weighted", "weighted"),
    )
}
CLASSIFIER_METRICS = ("accuracy", "auc", *_SCORES, "recall_at_<k>")
REGRESSOR_METRICS = ("mse", "mae", "rmse")
_RECALL_AT = re.compile(r"^recall_at_(\d+)$")
_REGRESSION_METRICS = {
    "mse": tf.metrics.mean_squared_error,
    "mae": tf.metrics.mean_absolute_error,
    "rmse": tf.metrics.root_mean_squared_error,
}

ModeKeys = estimator.ModeKeys
NetworkFn = Callable[..., tf.Tensor]


@dataclasses.dataclass(frozen=True)
class _Head:
    """An official head, and what our builders change of it."""

    official: Any
    metric_fn: Optional[Callable] = None
    predictions_fn: Optional[Callable] = None
    check_outputs: Optional[Callable] = None
    labels_fn: Optional[Callable] = None
    official_logits: Optional[Callable] = None  # our outputs -> the head's logits
    official_dropped: tuple = ()  # the head's metrics and signatures left out

    def logits(self, outputs):
        return outputs if self.official_logits is None else self.official_logits(outputs)


def _check_signature(fn: Callable, name: str, arguments: tuple) -> None:
    """TypeError now, not a bare "takes 2 positional arguments" deep in graph construction."""
    if not callable(fn):
        raise TypeError(f"`{name}` must be callable. Got: {fn!r}")
    try:
        inspect.signature(fn).bind(*arguments)
    except ValueError:  # no signature (a builtin): let the call decide
        pass
    except TypeError as error:
        raise TypeError(
            f"`{name}` must accept {len(arguments)} positional arguments ({', '.join(arguments)}); "
            f"add those it ignores (e.g. `{arguments[-1]}=None`) and give others defaults "
            f"({error}). "
            f"Got: {getattr(fn, '__name__', type(fn).__name__)}{inspect.signature(fn)}"
        ) from None


def _spec(tpu_spec: bool, **kwargs):
    spec = estimator.tpu.TPUEstimatorSpec(**kwargs)
    return spec if tpu_spec else spec.as_estimator_spec()


# Ops that may change a variable given as input (a read, ReadVariableOp, is none of them).
_WRITE_OP_TYPES = frozenset(
    {"AssignAddVariableOp", "AssignVariableOp", "AssignAdd", "Assign"}
    | {"If", "StatelessIf", "While", "StatelessWhile"}
)
# What a Keras layer's moving averages and similar state updates are made of.
_UPDATE_OP_TYPES = frozenset(
    {"AssignSubVariableOp", "AssignAddVariableOp", "AssignSub", "AssignAdd"}
)


def _train_op(loss, *, optimizer, learning_rate, warmup_steps, decay_steps, clip_norm, cross_shard):
    global_step = tf.train.get_or_create_global_step()
    lr = learning_rate_schedule(
        learning_rate, global_step, warmup_steps=warmup_steps, decay_steps=decay_steps
    )
    opt = make_optimizer(optimizer, lr)
    if cross_shard:
        opt = tf.tpu.CrossShardOptimizer(opt)
    elif not isinstance(optimizer, tf.train.Optimizer):
        # A TPU model_fn needs a host_call for summaries; an instance has its own rate.
        tf.summary.scalar("learning_rate", lr)
    grads_and_vars = [(g, v) for g, v in opt.compute_gradients(loss) if g is not None]
    if not grads_and_vars:
        raise ValueError(
            "`network_fn` created no trainable variable that the loss depends on. Got: "
            f"{len(tf.trainable_variables())} trainable variables"
        )
    if clip_norm:
        grads, variables = zip(*grads_and_vars)
        grads_and_vars = list(zip(tf.clip_by_global_norm(list(grads), clip_norm)[0], variables))
    graph = tf.get_default_graph()
    first_op = len(graph.get_operations())
    with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
        train_op = opt.apply_gradients(grads_and_vars, global_step=global_step)
    if any(
        op.type in _WRITE_OP_TYPES and any(t.op is global_step.op for t in op.inputs)
        for op in graph.get_operations()[first_op:]
    ):
        return train_op
    # BERT's AdamWeightDecayOptimizer leaves the step to create_optimizer: without an
    # increment, training never reaches max_steps.
    tf2.get_logger().info(
        "%s does not increment the global step; the train op does it once per step, as "
        "BERT's create_optimizer does.",
        type(opt).__name__,
    )
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
    updates = [
        op for op in network_ops if op.type in _UPDATE_OP_TYPES and op not in known and unused(op)
    ]
    for op in updates:
        tf.add_to_collection(tf.GraphKeys.UPDATE_OPS, op)
    if updates:
        tf.logging.info(
            "model_fn: %d state updates of Keras layers in network_fn (%s) run with each "
            "training step; Keras keeps them out of UPDATE_OPS",
            len(updates),
            ", ".join(sorted({op.name.split("/")[0] for op in updates})),
        )


class _UnknownFeature(KeyError, TypeError):
    """A lookup by name of a feature the input lacks: a KeyError on a dict, a TypeError on a tuple
    (whose own "tuple indices must be integers" names neither), as unwrapped."""


class _Features(dict):
    def __missing__(self, key):
        raise _UnknownFeature(key)


class _FeatureTuple(tuple):
    def __getitem__(self, key):
        if isinstance(key, str):
            raise _UnknownFeature(key)
        return super().__getitem__(key)


# The end of TensorFlow's error for ``tensor["x"]``: "... are valid indices, got 'x'".
_NAME_AS_INDEX = re.compile(r"valid indices, got ('[^']*'|\"[^\"]*\")$")


def _shape(tensor) -> str:
    return str(tensor.shape.as_list()) if tensor.shape.rank is not None else "unknown"


def _not_a_dict(key: str, got: str) -> TypeError:
    return TypeError(
        f"`network_fn` looked up feature {key}, but the input_fn yields {got}, not a dict of "
        f"features; yield ({{{key}: x, ...}}, y) (inputs.from_arrays does)"
    )


def _network_outputs(network_fn: Callable, features, mode, params, config):
    """Calls ``network_fn`` seeded from ``config``; a feature lookup the input lacks is named.

    Only lookups on the features are rewritten: a ``KeyError`` elsewhere (a missing ``params``
    key) is not the input's fault. A namedtuple is left alone: the network may read its fields.
    """
    graph = tf.get_default_graph()
    first_op = len(graph.get_operations())
    is_mapping = isinstance(features, Mapping)
    if is_mapping:
        features = _Features(features)
    elif type(features) is tuple:
        features = _FeatureTuple(features)
    try:
        with keras_seeds(getattr(config, "tf_random_seed", None)):
            outputs = network_fn(features, mode, params)
    except _UnknownFeature as error:
        if not is_mapping:
            raise _not_a_dict(
                repr(error.args[0]), f"a tuple of {len(features)} features"
            ) from error
        raise ValueError(
            f"`network_fn` looked up feature {error.args[0]!r}, which the input_fn (or serving "
            f"receiver) does not provide. Got features: {sorted(map(str, features))}"
        ) from error
    except TypeError as error:
        match = _NAME_AS_INDEX.search(str(error))
        if is_mapping or not tf.is_tensor(features) or match is None:
            raise
        got = f"a single tensor ({features.dtype.name}, shape {_shape(features)})"
        raise _not_a_dict(match.group(1), got) from error
    if mode == ModeKeys.TRAIN:
        _run_layer_updates(graph.get_operations()[first_op:])
    return outputs


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
    assignment_map: Optional[Mapping] = None,
    weight_key: Optional[str] = None,
    tpu_spec: bool = False,
) -> Callable:
    """Builds ``model_fn(features, labels, mode, params, config)`` from a network and a head.

    The official head makes the loss (a custom one: the head's ``loss_fn``), predictions,
    metrics and signatures; ``"serving_default"`` and ``"predict"`` carry all predictions.

    Args:
      network_fn: ``(features, mode, params) -> logits``, as the head takes them.
      head: a ``tf.estimator.Head``, e.g. ``MultiLabelHead(5)``; its ``weight_column`` should be
        ``weight_key``.
      metric_fn: ``(labels, logits, weights) -> {name: (value_op, update_op)}``, beside the
        head's; called positionally with tensors only, so it also serves as a TPU ``metric_fn``.
      optimizer, learning_rate, warmup_steps, decay_steps, clip_norm, init_checkpoint,
        assignment_map, weight_key, tpu_spec: as for :func:`classifier`.

    Returns:
      A model_fn for ``Estimator`` or ``TPUEstimator``; it checks that a checkpoint in
      ``config.model_dir`` fits the model.

    Raises:
      TypeError: at once, for a function of other arguments or no head.
      ValueError: at once for a bad optimizer or schedule; when the model_fn runs, for an
        unreadable ``init_checkpoint``, a missing feature, or a checkpoint in ``model_dir``
        from another model.

    Example:

        model_fn = build(network, tf.estimator.MultiLabelHead(5), learning_rate=0.01)
    """
    _check_signature(network_fn, "network_fn", ("features", "mode", "params"))
    if metric_fn is not None:
        _check_signature(metric_fn, "metric_fn", ("labels", "logits", "weights"))
    if not isinstance(head, estimator.Head):
        raise TypeError(
            "`head` must be a tf.estimator.Head (for a loss of your own, pass it as the head's "
            f"`loss_fn`). Got: {head!r}"
        )
    return _build(
        network_fn,
        _Head(head, metric_fn=metric_fn),
        optimizer=optimizer,
        learning_rate=learning_rate,
        warmup_steps=warmup_steps,
        decay_steps=decay_steps,
        clip_norm=clip_norm,
        init_checkpoint=init_checkpoint,
        assignment_map=assignment_map,
        weight_key=weight_key,
        tpu_spec=tpu_spec,
    )


def _build(
    network_fn,
    head: _Head,
    *,
    optimizer,
    learning_rate,
    warmup_steps,
    decay_steps,
    clip_norm,
    init_checkpoint,
    assignment_map,
    weight_key,
    tpu_spec,
) -> Callable:
    check_optimizer(optimizer, warmup_steps, decay_steps, learning_rate)
    learning_rate = 1e-3 if learning_rate is None else learning_rate
    check_schedule(learning_rate, warmup_steps, decay_steps)
    if clip_norm is not None and not clip_norm > 0:
        raise ValueError(f"`clip_norm` must be None or > 0. Got: {clip_norm!r}")
    if assignment_map is not None and init_checkpoint is None:
        raise ValueError(f"`assignment_map` needs `init_checkpoint`. Got: {assignment_map!r}")
    if assignment_map is not None and not isinstance(assignment_map, Mapping):
        raise TypeError(f"`assignment_map` must be a dict. Got: {assignment_map!r}")
    checkpoint = checkpoint_error = None
    if init_checkpoint:
        try:
            checkpoint = _warm_start.resolve_checkpoint(init_checkpoint)
        except ValueError as error:
            # Raised at the first graph build unless model_dir has a checkpoint: a restart
            # after the source was deleted must still resume.
            checkpoint_error = error
    train_op_fn = functools.partial(
        _train_op,
        optimizer=optimizer,
        learning_rate=learning_rate,
        warmup_steps=warmup_steps,
        decay_steps=decay_steps,
        clip_norm=clip_norm,
    )

    def model_fn(features, labels, mode, params=None, config=None):
        params = dict(params or {})
        model_dir = getattr(config, "model_dir", None)
        warm_start_from = checkpoint
        if init_checkpoint and _warm_start.resuming(model_dir):
            warm_start_from = None  # Estimator restores model_dir's checkpoint over it
        elif checkpoint_error is not None:
            raise checkpoint_error
        outputs = _network_outputs(network_fn, features, mode, params, config)
        if head.check_outputs is not None:
            outputs = head.check_outputs(outputs)
        if head.predictions_fn is not None:
            predictions = head.predictions_fn(outputs)
        else:
            predictions = head.official.predictions(head.logits(outputs))
        on_tpu = bool(tpu_spec and params.get("use_tpu"))
        common = {
            "mode": mode,
            "scaffold_fn": _warm_start_fn(warm_start_from, assignment_map, tpu_spec),
            "predictions": predictions,
        }
        check_dir = None if on_tpu else model_dir  # on a TPU the variables live in its program
        if mode == ModeKeys.PREDICT:
            return _predict_spec(head, outputs, common, check_dir, tpu_spec)
        labels = head.labels_fn(labels) if head.labels_fn is not None else labels
        weights = _weights(features, weight_key)
        regularization = tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)
        # The head's loss without its string predictions, which a TPU program cannot hold.
        loss = head.official.loss(
            labels=labels,
            logits=head.logits(outputs),
            features={} if weights is None else {weight_key: weights},
            mode=mode,
            regularization_losses=regularization or None,
        )
        if mode == ModeKeys.EVAL:
            _warm_start.check_model_dir(check_dir, mode=mode)
            metric_fn = _eval_metrics(head, weight_key, labels, outputs, weights, regularization)
            return _spec(tpu_spec, loss=loss, eval_metrics=metric_fn, **common)
        train_op = train_op_fn(loss, cross_shard=on_tpu)
        _warm_start.check_model_dir(check_dir, mode=mode)  # the optimizer's variables too
        return _spec(tpu_spec, loss=loss, train_op=train_op, **common)

    return model_fn


def _warm_start_fn(checkpoint, assignment_map, tpu_spec: bool) -> Optional[Callable]:
    """Warm-starts now, or returns the TPU ``scaffold_fn`` that does."""
    if checkpoint is None:
        return None
    if not tpu_spec:
        _warm_start.warm_start(checkpoint, assignment_map)
        return None
    # TPUEstimator calls scaffold_fn after the train op exists: leave out the optimizer slots.
    network_variables = tf.global_variables()

    def scaffold_fn():
        _warm_start.warm_start(checkpoint, assignment_map, network_variables)
        return tf.train.Scaffold()

    return scaffold_fn


def _predict_spec(head: _Head, outputs, common: dict, check_dir, tpu_spec: bool):
    # Export outputs in PREDICT only: the class names' string ops cannot run on a TPU.
    predictions = common["predictions"]
    export_outputs = dict.fromkeys(
        ("serving_default", "predict"), estimator.export.PredictOutput(predictions)
    )
    spec = head.official.create_estimator_spec(
        features={}, mode=ModeKeys.PREDICT, logits=head.logits(outputs)
    )
    for key, output in spec.export_outputs.items():
        if key not in export_outputs and key not in head.official_dropped:
            export_outputs[key] = output
    saver = _warm_start.check_model_dir(check_dir, mode=ModeKeys.PREDICT)
    if saver is not None:
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
        ops = head.official.update_metrics(
            head.official.metrics(losses),
            {} if weights is None else {weight_key: weights},
            head.logits(outputs),
            labels,
            losses,
        )
        ops = {k: v for k, v in ops.items() if k not in head.official_dropped}
        if head.metric_fn is not None:
            ops.update(head.metric_fn(labels, outputs, weights))
        return ops

    return metric_fn, tensors


def _weights(features, weight_key: Optional[str]):
    """The ``[batch]`` float32 weights of ``features[weight_key]``, or an error naming it."""
    if weight_key is None:
        return None
    if not isinstance(features, Mapping) or weight_key not in features:
        available = sorted(features) if isinstance(features, Mapping) else "not a dict"
        raise ValueError(f"`weight_key` {weight_key!r} is not a feature. Got features: {available}")
    weights = features[weight_key]
    if not isinstance(weights, tf.Tensor):
        got = type(weights).__name__
    elif weights.dtype == tf.string:
        got = f"dtype {weights.dtype.name}"
    elif weights.shape.rank is not None and (
        weights.shape.rank > 2 or (weights.shape.rank == 2 and weights.shape[1] not in (1, None))
    ):
        got = f"shape {weights.shape}"
    else:
        return tf.reshape(tf.cast(weights, tf.float32), [-1])
    raise ValueError(
        f"`weight_key` {weight_key!r} must be a dense numeric tensor of shape [batch] or "
        f"[batch, 1], one weight per example; make it one in the input_fn. Got: {got}"
    )


def _check_metric_names(metrics: Sequence[str], accepted: Sequence[str], num_classes=None):
    if isinstance(metrics, str) or not isinstance(metrics, (list, tuple)):
        raise TypeError(f"`metrics` must be a list or tuple of names. Got: {metrics!r}")
    for name in metrics:
        match = _RECALL_AT.match(name) if isinstance(name, str) else None
        if name == "recall_at_<k>" and name in accepted:
            raise ValueError(
                "`metrics` entry 'recall_at_<k>' is a pattern: put the number k in it, use "
                f"e.g. 'recall_at_{min(5, num_classes - 1)}'. Got: {name!r}"
            )
        if match and "recall_at_<k>" in accepted:
            if not 1 <= int(match.group(1)) <= num_classes:
                raise ValueError(
                    f"`metrics` entry {name!r} needs 1 <= k <= num_classes ({num_classes}). "
                    f"Got: k={match.group(1)}"
                )
        elif name == "auc" and "auc" in accepted and num_classes != 2:
            raise ValueError(
                f"`metrics` entry 'auc' needs num_classes == 2. Got: num_classes={num_classes}"
            )
        elif name not in accepted:
            raise ValueError(f"`metrics` entries must be among {list(accepted)}. Got: {name!r}")
    return tuple(metrics)


def _flat_labels(labels, num_columns: int):
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


def _checked_outputs(outputs, columns: int, what: str):
    """``outputs`` as float32 ``[batch, columns]`` (``[batch]`` too for one regression column)."""
    if not isinstance(outputs, (tf.Tensor, tf.Variable)):
        raise TypeError(
            f"`network_fn` must return a {what} tensor [batch, {columns}]. Got: {outputs!r}"
        )
    flat_ok = what == "predictions" and columns == 1
    if outputs.shape.rank == 1 and flat_ok:
        outputs = outputs[:, None]
    elif outputs.shape.rank != 2 or outputs.shape[1] not in (None, columns):
        raise ValueError(
            f"`network_fn` must return {what} of shape [batch, "
            f"{'num_classes' if what == 'logits' else 'label_dimension'}={columns}]"
            f"{' (or [batch])' if flat_ok else ''}. Got: shape {_shape(outputs)}"
        )
    return tf.ensure_shape(tf.cast(outputs, tf.float32), [None, columns])


def _classifier_head(num_classes: int, metrics: tuple, top_k, weight_key) -> _Head:
    def labels_fn(labels):
        labels = _flat_labels(labels, 1)
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
        return check_class_ids(labels, num_classes)

    def predictions_fn(logits):
        # The head's class_ids are [batch, 1], with string classes beside: these keys are ours.
        probabilities = tf.nn.softmax(logits, name="probabilities")
        predictions = {
            "logits": logits,
            "probabilities": probabilities,
            "class_ids": tf.argmax(logits, axis=-1, name="class_ids"),
        }
        if top_k:
            values, indices = tf.math.top_k(probabilities, k=top_k)
            predictions["top_k_probabilities"] = values
            predictions["top_k_class_ids"] = tf.cast(indices, tf.int64)
        return predictions

    def metric_fn(labels, logits, weights):
        class_ids = tf.argmax(logits, axis=-1)
        ops = {}  # "accuracy" and, for 2 classes, "auc" are the head's
        for name in metrics:
            recall_at = _RECALL_AT.match(name)
            if name in _SCORES:
                score, average = _SCORES[name]
                ops[name] = getattr(_metrics, score)(
                    labels, class_ids, num_classes, average=average, weights=weights, name=name
                )
            elif recall_at:
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
    return _Head(
        official,
        metric_fn=metric_fn,
        predictions_fn=predictions_fn,
        check_outputs=lambda logits: _checked_outputs(logits, num_classes, "logits"),
        labels_fn=labels_fn,
        official_logits=official_logits,
        # Our "precision" / "recall" are macro (the binary head's, class 1's).
        official_dropped=("precision", "recall", "regression"),
    )


def _regressor_head(label_dimension: int, metrics: tuple, weight_key) -> _Head:
    def labels_fn(labels):
        labels = _flat_labels(labels, label_dimension)
        # Unchecked, a string label fails only at the first step, as an UnimplementedError.
        if not (labels.dtype.is_integer or labels.dtype.is_floating or labels.dtype == tf.bool):
            raise ValueError(
                "`labels` must be numeric for a regressor; parse them into numbers in the "
                f"input_fn. Got: dtype {labels.dtype.name}"
            )
        return tf.reshape(tf.cast(labels, tf.float32), [-1, label_dimension])

    def metric_fn(labels, outputs, weights):
        weights = None if weights is None else tf.reshape(weights, [-1, 1])
        return {name: _REGRESSION_METRICS[name](labels, outputs, weights) for name in metrics}

    return _Head(
        estimator.RegressionHead(label_dimension, weight_column=weight_key),
        metric_fn=metric_fn,
        check_outputs=lambda outputs: _checked_outputs(outputs, label_dimension, "predictions"),
        labels_fn=labels_fn,
    )


def classifier(
    network_fn: NetworkFn,
    num_classes: int,
    *,
    optimizer: OptimizerArg = "adam",
    learning_rate: Optional[float] = None,
    warmup_steps: int = 0,
    decay_steps: Optional[int] = None,
    init_checkpoint: Optional[str] = None,
    assignment_map: Optional[Mapping] = None,
    metrics: Sequence[str] = ("accuracy", "f1"),
    top_k: Optional[int] = None,
    tpu_spec: bool = False,
    clip_norm: Optional[float] = None,
    weight_key: Optional[str] = None,
) -> Callable:
    """A softmax classifier ``model_fn`` on ``MultiClassHead`` (``BinaryClassHead`` for 2).

    PREDICT gives ``"logits"``, ``"probabilities"``, ``"class_ids"`` (int64 ``[batch]``) and,
    with ``top_k``, ``"top_k_probabilities"`` / ``"top_k_class_ids"``; the signatures
    ``"serving_default"`` and ``"predict"`` carry them all, beside the head's.

    Args:
      network_fn: ``(features, mode, params) -> logits [batch, num_classes]``.
      num_classes: number of classes (>= 2); labels are int ids ``[batch]`` or ``[batch, 1]``.
      optimizer: a name in :data:`OPTIMIZERS` (``"adamw"`` is BERT's AdamWeightDecay), a
        ``tf.compat.v1.train.Optimizer``, or a callable ``learning_rate -> Optimizer``.
      learning_rate: peak learning rate; None: 1e-3. Not with an Optimizer instance.
      warmup_steps: steps of linear warm-up from 0 (BERT's ``num_warmup_steps``).
      decay_steps: step where the rate reaches 0, linearly (``num_train_steps``); None: no decay.
      init_checkpoint: checkpoint or model directory to warm-start from, BERT style (by name and
        shape, logged ``*INIT_FROM_CKPT*``); read only while model_dir has no checkpoint.
      assignment_map: explicit ``tf.compat.v1.train.init_from_checkpoint`` map.
      metrics: from :data:`CLASSIFIER_METRICS`; bare ``"precision"``, ``"recall"``, ``"f1"`` are
        macro averages; ``"recall_at_5"`` etc.; ``"auc"`` for 2 classes.
      top_k: also predict the ``top_k`` most likely classes and their probabilities.
      tpu_spec: return ``TPUEstimatorSpec`` for ``TPUEstimator``.
      clip_norm: clip gradients to this global norm; None for no clipping.
      weight_key: feature holding per-example weights for loss and metrics.

    Returns:
      ``model_fn(features, labels, mode, params, config)``, as from :func:`build`.

    Raises:
      TypeError: at once, for a ``network_fn`` of other arguments or a bad optimizer type.
      ValueError: at once, for a bad number, name or schedule; when the model_fn runs, for
        logits or labels that do not fit, or an unreadable ``init_checkpoint``.

    Example:

        model_fn = classifier(network, num_classes=10, optimizer="adamw", learning_rate=2e-5,
                              warmup_steps=100, decay_steps=1000, metrics=("accuracy", "f1"))
    """
    _check_signature(network_fn, "network_fn", ("features", "mode", "params"))
    num_classes = check_int("num_classes", num_classes, 2)
    top_k = check_int("top_k", top_k, allow_none=True)
    if top_k is not None and top_k > num_classes:
        raise ValueError(f"`top_k` must be at most num_classes ({num_classes}). Got: {top_k}")
    metrics = _check_metric_names(metrics, CLASSIFIER_METRICS, num_classes)
    return _build(
        network_fn,
        _classifier_head(num_classes, metrics, top_k, weight_key),
        optimizer=optimizer,
        learning_rate=learning_rate,
        warmup_steps=warmup_steps,
        decay_steps=decay_steps,
        clip_norm=clip_norm,
        init_checkpoint=init_checkpoint,
        assignment_map=assignment_map,
        weight_key=weight_key,
        tpu_spec=tpu_spec,
    )


def regressor(
    network_fn: NetworkFn,
    *,
    optimizer: OptimizerArg = "adam",
    learning_rate: Optional[float] = None,
    warmup_steps: int = 0,
    decay_steps: Optional[int] = None,
    init_checkpoint: Optional[str] = None,
    assignment_map: Optional[Mapping] = None,
    metrics: Sequence[str] = ("mse", "mae"),
    tpu_spec: bool = False,
    label_dimension: int = 1,
    clip_norm: Optional[float] = None,
    weight_key: Optional[str] = None,
) -> Callable:
    """A mean-squared-error regressor ``model_fn`` on ``RegressionHead``: ``"predictions"``.

    Args:
      network_fn: ``(features, mode, params) -> [batch, label_dimension]`` (or ``[batch]``).
      optimizer, learning_rate, warmup_steps, decay_steps, init_checkpoint, assignment_map,
        tpu_spec, clip_norm, weight_key: as for :func:`classifier`.
      metrics: from :data:`REGRESSOR_METRICS`, beside the head's ``average_loss``.
      label_dimension: number of regression targets per example.

    Returns:
      ``model_fn(features, labels, mode, params, config)``, as from :func:`build`.

    Raises:
      TypeError, ValueError: as for :func:`classifier`; labels must be numeric.

    Example:

        model_fn = regressor(network, learning_rate=1e-2, metrics=("mse", "rmse"))
    """
    _check_signature(network_fn, "network_fn", ("features", "mode", "params"))
    label_dimension = check_int("label_dimension", label_dimension)
    metrics = _check_metric_names(metrics, REGRESSOR_METRICS)
    return _build(
        network_fn,
        _regressor_head(label_dimension, metrics, weight_key),
        optimizer=optimizer,
        learning_rate=learning_rate,
        warmup_steps=warmup_steps,
        decay_steps=decay_steps,
        clip_norm=clip_norm,
        init_checkpoint=init_checkpoint,
        assignment_map=assignment_map,
        weight_key=weight_key,
        tpu_spec=tpu_spec,
    )


def seeded(model_fn: Callable) -> Callable:
    """Makes the Keras layers a hand-written ``model_fn`` builds start from ``tf_random_seed``.

    In TF 2.15 a layer with its default initializer (``tf.keras.layers``, and
    ``tf.compat.v1.layers.dense``) seeds from Python's ``random``, so ``RunConfig(
    tf_random_seed=…)`` no longer fixes the first weights; inside ``seeded`` it does again, and
    no other generator is touched. The builders here and ``tfest_kit.tpu`` do this themselves.

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
            raise ValueError(
                f"model_fn does not take params, but params are passed to Estimator: {params}"
            )
        return call_model_fn(
            model_fn, features=features, labels=labels, mode=mode, params=params, config=config
        )

    return seeded_model_fn
