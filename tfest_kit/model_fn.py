"""Builders that turn a network function into a complete Estimator ``model_fn``.

``network_fn(features, mode, params)`` returns the network's output; :func:`classifier` and
:func:`regressor` hand it to the official Head API (``tf.estimator.MultiClassHead``,
``BinaryClassHead`` for 2 classes, ``RegressionHead``), whose ``loss``, ``metrics`` and export
signatures they use; :func:`build` takes any official head, or loss and prediction functions.
What this module adds to the head:

* TRAIN: an optimizer by name, BERT's linear warm-up and decay (:func:`learning_rate_schedule`),
  gradient clipping, a global-step increment for optimizers that leave it alone (BERT's
  ``AdamWeightDecayOptimizer``), ``REGULARIZATION_LOSSES`` in the loss, and the state updates
  Keras layers keep out of ``UPDATE_OPS`` (``BatchNormalization``'s moving averages).
* PREDICT: classifier keys ``"logits"``, ``"probabilities"``, ``"class_ids"`` (int64
  ``[batch]``), with ``top_k`` also ``"top_k_probabilities"`` / ``"top_k_class_ids"``;
  regressor ``"predictions"``. Signatures ``"serving_default"`` and ``"predict"`` carry all
  keys; the head adds ``"classification"`` (or ``"regression"``), which needs a receiver of
  serialized ``tf.train.Example``.
* EVAL: the head's metrics (``average_loss``, ``accuracy``; for 2 classes ``auc`` and more)
  and the ``metrics`` named (:data:`CLASSIFIER_METRICS`, :data:`REGRESSOR_METRICS`).
* ``init_checkpoint``: BERT-style warm start; errors naming the feature, label or argument at
  fault; ``tpu_spec=True`` for ``TPUEstimatorSpec``; Keras layers seeded from
  ``RunConfig.tf_random_seed`` (:func:`seeded` does that for a hand-written model_fn).

Example:

    from tfest_kit import model_fn

    def network(features, mode, params):
        hidden = tf.compat.v1.layers.dense(features["x"], 32, activation=tf.nn.relu)
        return tf.compat.v1.layers.dense(hidden, 3)

    est = tf.estimator.Estimator(
        model_fn.classifier(network, num_classes=3, metrics=("accuracy", "f1")),
        model_dir="/tmp/model")
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
from tfest_kit._model_fn_call import call_model_fn, model_fn_args
from tfest_kit._network_call import network_outputs, shape
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

# Bare "precision" / "recall" / "f1" are macro averages: for single-label data the micro
# average equals accuracy and would add nothing.
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

ModeKeys = estimator.ModeKeys
NetworkFn = Callable[..., tf.Tensor]


@dataclasses.dataclass(frozen=True)
class _Head:
    """What a model_fn adds to the network: an official ``tf.estimator.Head`` and/or functions.

    ``official_logits`` turns the checked output into the head's logits; the head's metrics
    and signatures named in ``official_dropped`` are left out.
    """

    predictions_fn: Optional[Callable] = None
    loss_fn: Optional[Callable] = None
    metric_fn: Optional[Callable] = None
    check_outputs: Optional[Callable] = None
    labels_fn: Optional[Callable] = None
    export_outputs_fn: Optional[Callable] = None
    official: Any = None
    official_logits: Optional[Callable] = None
    official_dropped: tuple = ()

    def logits(self, outputs):
        return outputs if self.official_logits is None else self.official_logits(outputs)


def _check_signature(fn: Callable, name: str, arguments: tuple) -> None:
    """Raises TypeError unless ``fn`` can be called with ``len(arguments)`` positional arguments.

    These functions are called positionally deep inside graph construction, where a mismatch
    would surface as a bare "takes 2 positional arguments but 3 were given".
    """
    if not callable(fn):
        raise TypeError(f"`{name}` must be callable. Got: {fn!r}")
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # builtins without a signature: let the call decide
        return
    try:
        signature.bind(*arguments)
        return
    except TypeError:
        pass
    kinds = [p.kind for p in signature.parameters.values()]
    positional = sum(
        kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        for kind in kinds
    )
    if positional < len(arguments) and inspect.Parameter.VAR_POSITIONAL not in kinds:
        fix = f"add the ones it ignores, e.g. `{arguments[positional]}=None`"
    else:
        fix = "give its other parameters defaults"
    label = getattr(fn, "__name__", type(fn).__name__)
    raise TypeError(
        f"`{name}` must accept {len(arguments)} positional argument"
        f"{'s' if len(arguments) > 1 else ''} ({', '.join(arguments)}); {fix}. "
        f"Got: {label}{signature}"
    )


def _spec(tpu_spec: bool, **kwargs):
    if tpu_spec:
        return estimator.tpu.TPUEstimatorSpec(**kwargs)
    scaffold_fn = kwargs.pop("scaffold_fn", None)
    metric_fn, tensors = kwargs.pop("eval_metrics", None) or (None, None)
    if metric_fn is not None:
        kwargs["eval_metric_ops"] = metric_fn(**tensors)
    if scaffold_fn is not None:
        kwargs["scaffold"] = scaffold_fn()
    return estimator.EstimatorSpec(**kwargs)


# Ops that may change a variable given as an input: assignments, and the control flow
# (tf.cond / tf.while_loop) an increment may sit in. A read (ReadVariableOp) is none of them.
_WRITE_OP_TYPES = frozenset(
    {"AssignAddVariableOp", "AssignVariableOp", "AssignAdd", "Assign"}
    | {"If", "StatelessIf", "While", "StatelessWhile"}
)


def _train_op(loss, *, optimizer, learning_rate, warmup_steps, decay_steps, clip_norm, cross_shard):
    """The schedule, the optimizer, clipping, and one increment of the global step per step."""
    global_step = tf.train.get_or_create_global_step()
    lr = learning_rate_schedule(
        learning_rate, global_step, warmup_steps=warmup_steps, decay_steps=decay_steps
    )
    opt = make_optimizer(optimizer, lr)
    if cross_shard:
        opt = tf.tpu.CrossShardOptimizer(opt)
    elif not isinstance(optimizer, tf.train.Optimizer):
        # Summaries inside a TPU model_fn need a host_call. An instance has its own rate.
        tf.summary.scalar("learning_rate", lr)
    grads_and_vars = [(g, v) for g, v in opt.compute_gradients(loss) if g is not None]
    if not grads_and_vars:
        raise ValueError(
            "`network_fn` created no trainable variable that the loss depends on. Got: "
            f"{len(tf.trainable_variables())} trainable variables"
        )
    if clip_norm:
        grads, variables = zip(*grads_and_vars)
        grads, _ = tf.clip_by_global_norm(list(grads), clip_norm)
        grads_and_vars = list(zip(grads, variables))
    graph = tf.get_default_graph()
    first_op = len(graph.get_operations())
    with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
        train_op = opt.apply_gradients(grads_and_vars, global_step=global_step)
    if any(
        op.type in _WRITE_OP_TYPES and any(t.op is global_step.op for t in op.inputs)
        for op in graph.get_operations()[first_op:]
    ):
        return train_op
    # BERT's AdamWeightDecayOptimizer takes `global_step` and leaves it alone (its
    # create_optimizer adds the increment): without one, training never reaches max_steps.
    tf2.get_logger().info(
        "%s does not increment the global step; the train op does it once per step, as "
        "BERT's create_optimizer does.",
        type(opt).__name__,
    )
    with tf.control_dependencies([train_op]):
        return tf.group(train_op, global_step.assign_add(1), name="train_op")


def build(
    network_fn: NetworkFn,
    *,
    loss_fn: Optional[Callable] = None,
    predictions_fn: Optional[Callable] = None,
    metric_fn: Optional[Callable] = None,
    check_outputs: Optional[Callable] = None,
    labels_fn: Optional[Callable] = None,
    export_outputs_fn: Optional[Callable] = None,
    head: Optional[Any] = None,
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

    The head is an official ``tf.estimator.Head`` (``head=``, whose ``weight_column`` should be
    ``weight_key``) or the functions ``loss_fn`` and ``predictions_fn``. Each function is
    called positionally with the arguments named here and checked for them at once.

    Args:
      network_fn: ``(features, mode, params) -> outputs``.
      loss_fn: ``(labels, outputs, weights) -> scalar loss``; ``weights`` is the ``[batch]``
        tensor of ``weight_key``, or None.
      predictions_fn: ``(outputs) -> {key: [batch, ...] tensor}``; default: the head's.
      metric_fn: ``(labels, outputs, weights) -> {name: (value_op, update_op)}``, added to the
        head's metrics; it gets tensors only, so it also serves as the TPU ``metric_fn``.
      check_outputs: ``(outputs) -> outputs``, validating / normalising the network's output.
      labels_fn: ``(labels) -> labels``, validating / normalising the labels.
      export_outputs_fn: ``(predictions) -> {key: ExportOutput}``, added to the
        ``"serving_default"`` and ``"predict"`` PredictOutputs and the head's signatures.
      head: an official head, e.g. ``tf.estimator.MultiLabelHead(5)``.
      optimizer, learning_rate, warmup_steps, decay_steps, clip_norm, init_checkpoint,
        assignment_map, weight_key, tpu_spec: as for :func:`classifier`.

    Returns:
      ``model_fn(features, labels, mode, params, config)`` for ``Estimator`` or
      ``TPUEstimator``; it checks that a checkpoint in ``config.model_dir`` fits the model.

    Raises:
      TypeError: at once, for a function that cannot be called as above, or neither ``head``
        nor ``loss_fn`` and ``predictions_fn``.
      ValueError: at once for a bad optimizer or schedule; when the model_fn runs, for an
        unreadable ``init_checkpoint`` (unless resuming), outputs or labels of the wrong shape,
        a feature the input lacks, or a checkpoint in ``model_dir`` from another model.

    Example:

        model_fn = build(network, loss_fn=my_loss, predictions_fn=lambda y: {"y": y})
        model_fn = build(network, head=tf.estimator.MultiLabelHead(5))
    """
    for value, name, arguments in (
        (network_fn, "network_fn", ("features", "mode", "params")),
        (loss_fn, "loss_fn", ("labels", "outputs", "weights")),
        (predictions_fn, "predictions_fn", ("outputs",)),
        (metric_fn, "metric_fn", ("labels", "outputs", "weights")),
        (check_outputs, "check_outputs", ("outputs",)),
        (labels_fn, "labels_fn", ("labels",)),
        (export_outputs_fn, "export_outputs_fn", ("predictions",)),
    ):
        if value is not None or name == "network_fn":
            _check_signature(value, name, arguments)
    if head is not None and not isinstance(head, estimator.Head):
        raise TypeError(f"`head` must be a tf.estimator.Head. Got: {head!r}")
    if (head is None) == (loss_fn is None) or (head is None and predictions_fn is None):
        raise TypeError(
            "`build` needs either `head` (a tf.estimator.Head) or both `loss_fn` and "
            f"`predictions_fn`. Got: head={head!r}, loss_fn={loss_fn!r}, "
            f"predictions_fn={predictions_fn!r}"
        )
    parts = _Head(predictions_fn, loss_fn, metric_fn, check_outputs, labels_fn, export_outputs_fn)
    return _build(
        network_fn,
        dataclasses.replace(parts, official=head),
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
    init_checkpoint,
    assignment_map,
    weight_key,
    tpu_spec,
    **schedule,
) -> Callable:
    """Checks the options and returns the model_fn; :func:`build`'s body."""
    check_optimizer(optimizer, schedule["warmup_steps"], schedule["decay_steps"], learning_rate)
    learning_rate = 1e-3 if learning_rate is None else learning_rate
    check_schedule(learning_rate, schedule["warmup_steps"], schedule["decay_steps"])
    clip_norm = schedule["clip_norm"]
    if clip_norm is not None and not clip_norm > 0:
        raise ValueError(f"`clip_norm` must be None or > 0. Got: {clip_norm!r}")
    checkpoint, checkpoint_error = _init_checkpoint(init_checkpoint, assignment_map)
    train_op_fn = functools.partial(
        _train_op, optimizer=optimizer, learning_rate=learning_rate, **schedule
    )

    def model_fn(features, labels, mode, params=None, config=None):
        params = dict(params or {})
        model_dir = getattr(config, "model_dir", None)
        warm_start_from = checkpoint
        if init_checkpoint and _warm_start.resuming(model_dir):
            # Estimator restores model_dir's checkpoint over any initialiser: the source is
            # not read, and need not exist any more.
            warm_start_from = None
        elif checkpoint_error is not None:
            raise checkpoint_error
        outputs = network_outputs(network_fn, features, mode, params, config)
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
        # On a TPU the variables live in the TPU computation; check only off it.
        check_dir = None if on_tpu else model_dir
        if mode == ModeKeys.PREDICT:
            return _predict_spec(head, outputs, common, check_dir, tpu_spec)
        labels = head.labels_fn(labels) if head.labels_fn is not None else labels
        weights = _weights(features, weight_key)
        regularization = tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)
        if head.official is None:
            loss = head.loss_fn(labels, outputs, weights)
            if regularization:
                loss += tf.add_n(regularization, name="regularization_loss")
        else:
            # The head's loss, as its create_estimator_spec(train_op_fn=…) makes it; called
            # directly, it leaves out the head's string predictions, which a TPU computation
            # cannot hold.
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


def _init_checkpoint(init_checkpoint, assignment_map) -> tuple:
    """``(prefix, None)``, or ``(None, error)`` to raise unless model_dir has a checkpoint."""
    if assignment_map is not None and init_checkpoint is None:
        raise ValueError(f"`assignment_map` needs `init_checkpoint`. Got: {assignment_map!r}")
    if assignment_map is not None and not isinstance(assignment_map, Mapping):
        raise TypeError(f"`assignment_map` must be a dict. Got: {assignment_map!r}")
    if init_checkpoint:
        try:
            return _warm_start.resolve_checkpoint(init_checkpoint), None
        except ValueError as error:
            # Raised at the first graph build unless model_dir has a checkpoint of its own: a
            # restart after the source was rotated away or deleted must still resume.
            return None, error
    return None, None


def _warm_start_fn(checkpoint, assignment_map, tpu_spec: bool) -> Optional[Callable]:
    """Warm-starts the network's variables now, or returns the TPU ``scaffold_fn`` that does."""
    if checkpoint is None:
        return None
    if not tpu_spec:
        _warm_start.warm_start(checkpoint, assignment_map)
        return None
    # TPUEstimator calls scaffold_fn after the train op exists; warm-start only the network's
    # variables, not the optimizer slots (as BERT and the Estimator path do).
    network_variables = tf.global_variables()

    def scaffold_fn():
        _warm_start.warm_start(checkpoint, assignment_map, network_variables)
        return tf.train.Scaffold()

    return scaffold_fn


def _predict_spec(head: _Head, outputs, common: dict, check_dir, tpu_spec: bool):
    # Only PREDICT builds export outputs: in TRAIN / EVAL the class names' string ops would
    # land in a TPU computation, which has no string kernels.
    predictions = common["predictions"]
    export_outputs = {
        "serving_default": estimator.export.PredictOutput(predictions),
        "predict": estimator.export.PredictOutput(predictions),
    }
    if head.official is not None:
        spec = head.official.create_estimator_spec(
            features={}, mode=ModeKeys.PREDICT, logits=head.logits(outputs)
        )
        for key, output in spec.export_outputs.items():
            if key not in export_outputs and key not in head.official_dropped:
                export_outputs[key] = output
    if head.export_outputs_fn is not None:
        export_outputs.update(head.export_outputs_fn(predictions))
    saver = _warm_start.check_model_dir(check_dir, mode=ModeKeys.PREDICT)
    if saver is not None:
        # An export restores with the Scaffold's saver only, not the SAVERS collection.
        inner = common["scaffold_fn"]
        common["scaffold_fn"] = lambda: _warm_start.with_saver(inner() if inner else None, saver)
    return _spec(tpu_spec, export_outputs=export_outputs, **common)


def _eval_metrics(head: _Head, weight_key, labels, outputs, weights, regularization):
    """``(metric_fn, tensors)``: the head's metrics and ``metric_fn``'s, from tensors only."""
    if head.official is None and head.metric_fn is None:
        return None
    tensors = {"labels": labels, "outputs": outputs}
    if weights is not None:
        tensors["weights"] = weights
    if regularization and head.official is not None:
        tensors["regularization_loss"] = tf.add_n(regularization)

    def metric_fn(labels, outputs, weights=None, regularization_loss=None):
        ops = {}
        if head.official is not None:
            losses = None if regularization_loss is None else [regularization_loss]
            official = head.official.update_metrics(
                head.official.metrics(losses),
                {} if weights is None else {weight_key: weights},
                head.logits(outputs),
                labels,
                losses,
            )
            ops.update((k, v) for k, v in official.items() if k not in head.official_dropped)
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
        raise ValueError(
            f"`weight_key` {weight_key!r} must be a dense tensor, one weight per example; "
            f"make it one in the input_fn. Got: {type(weights).__name__}"
        )
    if weights.dtype == tf.string:
        raise ValueError(
            f"`weight_key` {weight_key!r} must be a numeric feature (one weight per example); "
            f"cast or parse it in the input_fn. Got: dtype {weights.dtype.name}"
        )
    rank = weights.shape.rank
    if rank is not None and (rank > 2 or (rank == 2 and weights.shape[1] not in (1, None))):
        raise ValueError(
            f"`weight_key` {weight_key!r} must have shape [batch] or [batch, 1], one weight per "
            f"example. Got: shape {weights.shape}"
        )
    return tf.reshape(tf.cast(weights, tf.float32), [-1])


def _check_metric_names(metrics: Sequence[str], accepted: Sequence[str], num_classes=None):
    """Returns the metric names as a tuple; ValueError naming the accepted ones otherwise."""
    if isinstance(metrics, str) or not isinstance(metrics, (list, tuple)):
        raise TypeError(f"`metrics` must be a list or tuple of names. Got: {metrics!r}")
    for name in metrics:
        match = _RECALL_AT.match(name) if isinstance(name, str) else None
        if name == "recall_at_<k>" and name in accepted:
            # Listed among the accepted names to show the pattern; it is no metric by itself.
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
        raise ValueError(f"`labels` must have shape {expected}. Got: shape {shape(labels)}")
    return labels


def _checked_outputs(outputs, columns: int, what: str):
    """``outputs`` as float32 ``[batch, columns]`` (``[batch]`` too for one regression column)."""
    if not isinstance(outputs, (tf.Tensor, tf.Variable)):
        raise TypeError(
            f"`network_fn` must return a {what} tensor [batch, {columns}]. Got: {outputs!r}"
        )
    if outputs.shape.rank == 1 and what == "predictions" and columns == 1:
        outputs = outputs[:, None]
    elif outputs.shape.rank != 2 or outputs.shape[1] not in (None, columns):
        raise ValueError(
            f"`network_fn` must return {what} of shape [batch, "
            f"{'num_classes' if what == 'logits' else 'label_dimension'}={columns}]"
            f"{' (or [batch])' if what == 'predictions' and columns == 1 else ''}. "
            f"Got: shape {shape(outputs)}"
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
        # The head's class_ids are [batch, 1] and it adds string classes; these keys are ours.
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
        ops = {}
        for name in metrics:
            if name in _SCORES:
                score, average = _SCORES[name]
                ops[name] = getattr(_metrics, score)(
                    labels, class_ids, num_classes, average=average, weights=weights, name=name
                )
            elif _RECALL_AT.match(name):
                k = int(_RECALL_AT.match(name).group(1))
                ops[name] = _metrics.recall_at_k(labels, logits, k, weights=weights, name=name)
        return ops  # "accuracy" and, for 2 classes, "auc" are the head's

    if num_classes == 2:
        # BinaryClassHead takes one logit: the difference of the two gives the same softmax.
        official = estimator.BinaryClassHead(weight_column=weight_key)
        official_logits = lambda logits: logits[:, 1:] - logits[:, :1]  # noqa: E731
    else:
        official = estimator.MultiClassHead(num_classes, weight_column=weight_key)
        official_logits = None
    return _Head(
        predictions_fn=predictions_fn,
        metric_fn=metric_fn,
        check_outputs=lambda logits: _checked_outputs(logits, num_classes, "logits"),
        labels_fn=labels_fn,
        official=official,
        official_logits=official_logits,
        # Ours: "precision" / "recall" are macro averages (the binary head's are class 1's),
        # and a classifier has no regression signature.
        official_dropped=("precision", "recall", "regression"),
    )


def _regressor_head(label_dimension: int, metrics: tuple, weight_key) -> _Head:
    def labels_fn(labels):
        labels = _flat_labels(labels, label_dimension)
        # Unchecked, a string label fails only when the first step runs, as an
        # UnimplementedError about a cast.
        if not (labels.dtype.is_integer or labels.dtype.is_floating or labels.dtype == tf.bool):
            raise ValueError(
                "`labels` must be numeric for a regressor; parse them into numbers in the "
                f"input_fn. Got: dtype {labels.dtype.name}"
            )
        return tf.reshape(tf.cast(labels, tf.float32), [-1, label_dimension])

    def metric_fn(labels, outputs, weights):
        weights = None if weights is None else tf.reshape(weights, [-1, 1])
        functions = {
            "mse": tf.metrics.mean_squared_error,
            "mae": tf.metrics.mean_absolute_error,
            "rmse": tf.metrics.root_mean_squared_error,
        }
        return {name: functions[name](labels, outputs, weights=weights) for name in metrics}

    return _Head(
        predictions_fn=lambda outputs: {"predictions": outputs},
        metric_fn=metric_fn,
        check_outputs=lambda outputs: _checked_outputs(outputs, label_dimension, "predictions"),
        labels_fn=labels_fn,
        official=estimator.RegressionHead(label_dimension, weight_column=weight_key),
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
    """A softmax classifier ``model_fn`` over ``network_fn``'s logits, on the official head.

    Args:
      network_fn: ``(features, mode, params) -> logits [batch, num_classes]``.
      num_classes: number of classes (>= 2); labels are int ids ``[batch]`` or ``[batch, 1]``.
      optimizer: a name in :data:`OPTIMIZERS` (``"adam"``, ``"adamw"`` — BERT's
        AdamWeightDecay —, ``"sgd"``, ``"momentum"``, ``"adagrad"``, ``"rmsprop"``), a
        ``tf.compat.v1.train.Optimizer``, or a callable ``learning_rate -> Optimizer``.
      learning_rate: peak learning rate; None: 1e-3. Not with an Optimizer instance.
      warmup_steps: steps of linear warm-up from 0 (BERT's ``num_warmup_steps``).
      decay_steps: step at which the rate has decayed linearly to 0 (BERT's
        ``num_train_steps``); None for no decay.
      init_checkpoint: checkpoint prefix or model directory to warm-start from; each variable
        whose name and shape match is initialised from it and logged with ``*INIT_FROM_CKPT*``;
        checked at once, read only while model_dir has no checkpoint of its own.
      assignment_map: explicit ``tf.compat.v1.train.init_from_checkpoint`` map.
      metrics: names from :data:`CLASSIFIER_METRICS`: ``"accuracy"``, ``"precision"``,
        ``"recall"``, ``"f1"`` (macro averages), their ``_micro`` / ``_macro`` / ``_weighted``
        variants, ``"recall_at_<k>"`` (e.g. ``"recall_at_5"``), for 2 classes ``"auc"``.
      top_k: also predict the ``top_k`` most likely classes and their probabilities.
      tpu_spec: return ``TPUEstimatorSpec`` for ``TPUEstimator``.
      clip_norm: clip gradients to this global norm; None for no clipping.
      weight_key: feature holding per-example weights for loss and metrics.

    Returns:
      ``model_fn(features, labels, mode, params, config)``, as from :func:`build`.

    Raises:
      TypeError: at once, for a ``network_fn`` that does not take ``(features, mode,
        params)``, an optimizer of an unsupported type, or ``metrics`` not a list or tuple.
      ValueError: at once, for ``num_classes`` < 2, an unknown optimizer or metric, a bad
        ``top_k`` or schedule; when the model_fn runs, for logits not ``[batch, num_classes]``,
        labels that are not integer class ids, or an unreadable ``init_checkpoint``.

    Example:

        model_fn = classifier(network, num_classes=10, optimizer="adamw", learning_rate=2e-5,
                              warmup_steps=100, decay_steps=1000, top_k=3,
                              metrics=("accuracy", "f1_macro", "recall_at_3"))
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
    """A mean-squared-error regressor ``model_fn``, on the official ``RegressionHead``.

    Args:
      network_fn: ``(features, mode, params) -> [batch, label_dimension]`` (or ``[batch]``).
      optimizer, learning_rate, warmup_steps, decay_steps, init_checkpoint, assignment_map,
        tpu_spec, clip_norm, weight_key: as for :func:`classifier`.
      metrics: names from :data:`REGRESSOR_METRICS` (``"mse"``, ``"mae"``, ``"rmse"``), beside
        the head's ``average_loss``, ``prediction/mean`` and ``label/mean``.
      label_dimension: number of regression targets per example.

    Returns:
      ``model_fn(features, labels, mode, params, config)``, as from :func:`build`; PREDICT
      gives ``"predictions"``.

    Raises:
      TypeError: as for :func:`classifier`.
      ValueError: at once, for an unknown optimizer or metric, a bad schedule or
        ``label_dimension``; when the model_fn runs, for labels that are not numeric or an
        unreadable ``init_checkpoint``.

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
    """Makes the Keras layers a ``model_fn`` builds start from ``RunConfig.tf_random_seed``.

    Under TensorFlow 1.x, ``RunConfig(tf_random_seed=…)`` made each run of an Estimator start
    from the same weights. In TensorFlow 2.15 a layer left with its default initializer (any
    ``tf.keras.layers`` layer, and ``tf.compat.v1.layers.dense``, a Keras layer too) takes its
    seed from Python's ``random`` (Keras 2.10+), so each run starts from other weights. In the
    wrapped model_fn those seeds come from ``tf_random_seed`` again, and only there: Python's,
    NumPy's and TensorFlow's own generators are left alone. With no ``tf_random_seed`` nothing
    changes. The builders of this module and the fallback ``tfest_kit.tpu.TPUEstimator`` do
    this by themselves.

    Args:
      model_fn: ``model_fn(features, labels, mode, params, config)``, or any of the subsets
        of these arguments that Estimator accepts.

    Returns:
      A model_fn for ``tf.estimator.Estimator`` that calls ``model_fn`` with the arguments it
      takes and returns what it returns.

    Raises:
      ValueError: if ``model_fn`` is not callable or takes no ``features`` argument; when it
        runs, if the input_fn returns labels and ``model_fn`` takes none, or ``params`` are
        given and it takes none (the checks Estimator makes on an unwrapped model_fn).

    Example:

        est = tf.estimator.Estimator(
            model_fn.seeded(my_model_fn),
            config=tf.estimator.RunConfig(model_dir="/tmp/model", tf_random_seed=42))
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
