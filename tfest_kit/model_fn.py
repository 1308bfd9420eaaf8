"""Builders that turn a network function into a complete Estimator ``model_fn``.

``network_fn(features, mode, params)`` builds the network and returns its output tensor
(logits for :func:`classifier`); the builder adds the loss, the optimizer with an optional
BERT-style schedule, eval metrics, predictions, export signatures and warm start.

* PREDICT — classifier: ``"logits"``, ``"probabilities"``, ``"class_ids"`` (int64 ``[batch]``)
  and, with ``top_k``, ``"top_k_probabilities"`` / ``"top_k_class_ids"`` (``[batch, top_k]``);
  regressor: ``"predictions"`` (``[batch, label_dimension]``).
* EVAL — the loss plus the named metrics (see :data:`CLASSIFIER_METRICS`).
* TRAIN — ``optimizer`` by name or instance; ``warmup_steps`` / ``decay_steps`` give BERT's
  linear warm-up then linear decay to 0 (:func:`learning_rate_schedule`). An optimizer that
  leaves the global step alone (BERT's own ``AdamWeightDecayOptimizer``) gets the increment
  from the train op, as BERT's ``create_optimizer`` adds it. The loss, in TRAIN and EVAL,
  includes ``REGULARIZATION_LOSSES``, as the official heads do: ``tf.compat.v1.layers`` put
  their regularizers' losses there; for ``tf.keras`` layers, whose ``losses`` stay on the
  layer, the network_fn adds them (``tf.compat.v1.add_to_collection(
  tf.compat.v1.GraphKeys.REGULARIZATION_LOSSES, loss)`` for each). Each step also runs
  ``UPDATE_OPS`` and the updates Keras layers keep out of it (``BatchNormalization``'s moving
  averages), which a hand-written model_fn must add itself.
* PREDICT carries ``export_outputs``: ``"serving_default"`` and ``"predict"`` (all prediction
  keys) plus ``"classification"`` (or, for one regression output, ``"regression"``).
  Classification/regression signatures need a receiver with a single string input (serialized
  ``tf.train.Example``); with other receivers Estimator leaves them out and keeps the predict
  signatures.
* ``tpu_spec=True`` returns ``TPUEstimatorSpec`` with ``eval_metrics=(metric_fn, tensors)`` and
  the warm start inside ``scaffold_fn``, for ``TPUEstimator`` (or ``tfest_kit.tpu``).
* Keras layers the network builds take their initial weights from ``RunConfig.tf_random_seed``;
  :func:`seeded` gives a hand-written model_fn the same.

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

import inspect
import re
from collections.abc import Mapping, Sequence
from typing import Callable, Optional

from tfest_kit import _heads, _warm_start
from tfest_kit._checks import check_int
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

CLASSIFIER_METRICS = _heads.CLASSIFIER_METRICS
REGRESSOR_METRICS = _heads.REGRESSOR_METRICS

ModeKeys = estimator.ModeKeys
NetworkFn = Callable[..., tf.Tensor]


def _check_callable(value, name: str) -> None:
    if not callable(value):
        raise TypeError(f"`{name}` must be callable. Got: {value!r}")


def _check_signature(fn: Callable, name: str, arguments: tuple) -> None:
    """Raises TypeError unless ``fn`` can be called with ``len(arguments)`` positional arguments.

    build calls these functions positionally, deep inside graph construction, where a
    mismatch would surface as a bare "takes 2 positional arguments but 3 were given".
    """
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # builtins without a signature: let the call decide
        return
    try:
        signature.bind(*arguments)
    except TypeError:
        pass
    else:
        return
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


def _train_op(loss, optimizer, learning_rate, warmup_steps, decay_steps, clip_norm, cross_shard):
    global_step = tf.train.get_or_create_global_step()
    lr = learning_rate_schedule(
        learning_rate, global_step, warmup_steps=warmup_steps, decay_steps=decay_steps
    )
    opt = make_optimizer(optimizer, lr)
    if cross_shard:
        opt = tf.tpu.CrossShardOptimizer(opt)
    elif not isinstance(optimizer, tf.train.Optimizer):
        # Summaries inside a TPU model_fn need a host_call; off the TPU they are free. An
        # Optimizer instance has a rate of its own, which `lr` is not.
        tf.summary.scalar("learning_rate", lr)
    grads_and_vars = opt.compute_gradients(loss)
    grads_and_vars = [(g, v) for g, v in grads_and_vars if g is not None]
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
    # Batch-norm moving averages and similar live in UPDATE_OPS.
    with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
        train_op = opt.apply_gradients(grads_and_vars, global_step=global_step)
    if any(_writes(op, global_step) for op in graph.get_operations()[first_op:]):
        return train_op
    # BERT's AdamWeightDecayOptimizer (optimization.py) takes `global_step` and leaves it alone:
    # its create_optimizer adds the increment. Without one, training never reaches max_steps.
    tf2.get_logger().info(
        "%s does not increment the global step; the train op does it once per step, as BERT's "
        "create_optimizer does.",
        type(opt).__name__,
    )
    with tf.control_dependencies([train_op]):
        return tf.group(train_op, global_step.assign_add(1), name="train_op")


def build(
    network_fn: NetworkFn,
    *,
    loss_fn: Callable,
    predictions_fn: Callable,
    metric_fn: Optional[Callable] = None,
    check_outputs: Optional[Callable] = None,
    labels_fn: Optional[Callable] = None,
    export_outputs_fn: Optional[Callable] = None,
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
    """Builds ``model_fn(features, labels, mode, params)`` from a network and head functions.

    :func:`classifier` and :func:`regressor` are this function with their heads bound.

    Args:
      network_fn: ``network_fn(features, mode, params) -> outputs``.
      loss_fn: ``loss_fn(labels, outputs, weights) -> scalar loss``, called positionally;
        ``weights`` is the ``[batch]`` tensor of ``weight_key``, or None without one. A
        ``tf.compat.v1.losses.*`` function fails on None (its default is 1.0): wrap it, e.g.
        ``lambda labels, outputs, w: tf.compat.v1.losses.mean_squared_error(labels, outputs,
        weights=1.0 if w is None else w)``.
      predictions_fn: ``predictions_fn(outputs) -> dict`` of ``[batch, ...]`` tensors.
      metric_fn: ``metric_fn(labels, outputs, weights) -> {name: (value_op, update_op)}``,
        called positionally; ``weights`` is None without ``weight_key`` (the default of
        ``tf.compat.v1.metrics.*``). It only receives tensors, so it also serves as the TPU
        ``metric_fn``.
      check_outputs: ``check_outputs(outputs) -> outputs``: validates / normalises the network's
        output (raise ValueError on a wrong shape).
      labels_fn: ``labels_fn(labels) -> labels``: validates / normalises the labels.
      export_outputs_fn: ``export_outputs_fn(predictions) -> {key: ExportOutput}`` added to the
        ``"serving_default"`` and ``"predict"`` PredictOutputs.
      optimizer: a name in :data:`OPTIMIZERS`, a ``tf.compat.v1.train.Optimizer`` or a callable
        ``learning_rate_tensor -> Optimizer``.
      learning_rate: peak learning rate; None: 1e-3. Not with an Optimizer instance, which
        has its own.
      warmup_steps: steps of linear warm-up from 0.
      decay_steps: step at which the rate has decayed linearly to 0 (None: no decay).
      clip_norm: clip gradients to this global norm (BERT uses 1.0); None for no clipping.
      init_checkpoint: checkpoint prefix or directory to warm-start matching variables from;
        checked when this function is called, read only while the Estimator's model_dir has
        no checkpoint of its own (as ``warm_start_from``: a resumed run restores model_dir).
      assignment_map: ``tf.compat.v1.train.init_from_checkpoint`` map; default: every model
        variable whose name and shape match the checkpoint (with a warning naming the map to
        pass when the checkpoint holds most of the others under another scope).
      weight_key: name of a feature holding per-example weights for loss and metrics. The
        classifier and regressor heads report ``average_loss``, the (weighted) mean loss per
        example over the eval set, as the canned heads do (``loss`` is Estimator's mean of
        per-batch losses, which counts a short last batch as a full one and grows with the
        weights' scale): monitor it when the weights are not 0 / 1.
      tpu_spec: return ``TPUEstimatorSpec`` (``eval_metrics``, ``scaffold_fn``) instead of
        ``EstimatorSpec``.

    Returns:
      ``model_fn(features, labels, mode, params, config)`` for ``tf.estimator.Estimator`` or
      ``TPUEstimator``; with ``config`` it checks that a checkpoint already in
      ``config.model_dir`` belongs to this model, and Keras layers ``network_fn`` builds take
      their initial weights from ``config.tf_random_seed`` (Keras 2.10+ seeds them from
      Python's ``random`` otherwise).

    Raises:
      TypeError: at once, for a function argument that is not callable or cannot be called
        with the arguments listed above (e.g. a ``loss_fn`` without ``weights``).
      ValueError / TypeError: for an unknown optimizer or a bad schedule, at once; when the
        model_fn runs, for a missing or unreadable ``init_checkpoint`` (unless model_dir has
        a checkpoint to resume from), a network output or labels of the wrong shape, a
        feature ``network_fn`` looks up that the input lacks (TypeError when the input_fn
        yields one tensor instead of a dict of features), or a checkpoint in ``model_dir``
        from another model.

    Example:

        model_fn = build(network, loss_fn=my_loss, predictions_fn=lambda y: {"y": y})
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
        if value is None and name not in ("network_fn", "loss_fn", "predictions_fn"):
            continue
        _check_callable(value, name)
        _check_signature(value, name, arguments)
    check_optimizer(optimizer, warmup_steps, decay_steps, learning_rate)
    learning_rate = 1e-3 if learning_rate is None else learning_rate
    check_schedule(learning_rate, warmup_steps, decay_steps)
    if clip_norm is not None and not clip_norm > 0:
        raise ValueError(f"`clip_norm` must be None or > 0. Got: {clip_norm!r}")
    if assignment_map is not None and init_checkpoint is None:
        raise ValueError(f"`assignment_map` needs `init_checkpoint`. Got: {assignment_map!r}")
    if assignment_map is not None and not isinstance(assignment_map, Mapping):
        raise TypeError(f"`assignment_map` must be a dict. Got: {assignment_map!r}")
    checkpoint, checkpoint_error = None, None
    if init_checkpoint:
        try:
            checkpoint = _warm_start.resolve_checkpoint(init_checkpoint)
        except ValueError as error:
            # Raised at the first graph build unless model_dir has a checkpoint of its own: a
            # restart after the source was rotated away or deleted must still resume.
            checkpoint_error = error

    def model_fn(features, labels, mode, params=None, config=None):
        params = dict(params or {})
        warm_start_from = checkpoint
        if init_checkpoint and _warm_start.resuming(getattr(config, "model_dir", None)):
            # Estimator restores model_dir's checkpoint over any initialiser (as it skips
            # warm_start_from): the source is not read, and need not exist any more.
            warm_start_from = None
        elif checkpoint_error is not None:
            raise checkpoint_error
        graph = tf.get_default_graph()
        first_op = len(graph.get_operations())
        with keras_seeds(getattr(config, "tf_random_seed", None)):
            outputs = _call_network(network_fn, features, mode, params)
        if mode == ModeKeys.TRAIN:
            _run_layer_updates(graph.get_operations()[first_op:])
        if check_outputs is not None:
            outputs = check_outputs(outputs)
        predictions = predictions_fn(outputs)

        scaffold_fn = None
        if warm_start_from is not None:
            # TPUEstimator calls scaffold_fn after the train op exists; warm-start only the
            # network's variables, not the optimizer slots (as BERT and the Estimator path do).
            model_variables = tf.global_variables()

            def scaffold_fn():
                _warm_start.warm_start(warm_start_from, assignment_map, model_variables)
                return tf.train.Scaffold()

            if not tpu_spec:
                # Estimator accepts the initialisers directly; no Scaffold needed.
                _warm_start.warm_start(warm_start_from, assignment_map)
                scaffold_fn = None

        # Only an export (PREDICT) reads them. Built in TRAIN / EVAL they would put the
        # classification output's string ops (class names) into a TPU computation, which has
        # no string kernels.
        export_outputs = None
        if mode == ModeKeys.PREDICT:
            export_outputs = {
                "serving_default": estimator.export.PredictOutput(predictions),
                "predict": estimator.export.PredictOutput(predictions),
            }
            if export_outputs_fn is not None:
                export_outputs.update(export_outputs_fn(predictions))
        common = {"mode": mode, "scaffold_fn": scaffold_fn, "export_outputs": export_outputs}
        # On a TPU the variables live in the TPU computation; check only off it.
        check_dir = config is not None and not (tpu_spec and params.get("use_tpu"))

        if mode == ModeKeys.PREDICT:
            saver = _warm_start.check_model_dir(config.model_dir, mode=mode) if check_dir else None
            if saver is not None:
                # An export restores with the Scaffold's saver only, not the SAVERS collection.
                inner = common["scaffold_fn"]
                common["scaffold_fn"] = lambda: _warm_start.with_saver(
                    inner() if inner else None, saver
                )
            return _spec(tpu_spec, predictions=predictions, **common)

        labels = labels_fn(labels) if labels_fn is not None else labels
        weights = None
        if weight_key is not None:
            if not isinstance(features, Mapping) or weight_key not in features:
                available = sorted(features) if isinstance(features, Mapping) else "not a dict"
                raise ValueError(
                    f"`weight_key` {weight_key!r} is not a feature. Got features: {available}"
                )
            weights = _weights(features[weight_key], weight_key)
        loss = loss_fn(labels, outputs, weights)
        # tf.compat.v1.layers' regularizers; the official heads add them in TRAIN and EVAL.
        regularization = tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)
        if regularization:
            loss = loss + tf.add_n(regularization, name="regularization_loss")

        if mode == ModeKeys.EVAL:
            if check_dir:
                _warm_start.check_model_dir(config.model_dir, mode=mode)
            eval_metrics = None
            if metric_fn is not None:
                tensors = {"labels": labels, "outputs": outputs}
                if weights is not None:
                    tensors["weights"] = weights
                eval_metrics = (_tensors_metric_fn(metric_fn), tensors)
            return _spec(
                tpu_spec, loss=loss, eval_metrics=eval_metrics, predictions=predictions, **common
            )

        cross_shard = bool(tpu_spec and params.get("use_tpu"))
        train_op = _train_op(
            loss, optimizer, learning_rate, warmup_steps, decay_steps, clip_norm, cross_shard
        )
        if check_dir:
            _warm_start.check_model_dir(config.model_dir, mode=mode)
        return _spec(tpu_spec, loss=loss, train_op=train_op, **common)

    return model_fn


# What a layer's moving averages and similar state updates are made of.
_UPDATE_OP_TYPES = frozenset(
    {"AssignSubVariableOp", "AssignAddVariableOp", "AssignSub", "AssignAdd"}
)


# Ops that may change a variable given as an input: assignments, and the control flow
# (tf.cond / tf.while_loop) an increment may sit in. A read (ReadVariableOp) is none of them.
_WRITE_OP_TYPES = frozenset(
    {"AssignAddVariableOp", "AssignVariableOp", "AssignAdd", "Assign"}
    | {"If", "StatelessIf", "While", "StatelessWhile"}
)


def _writes(op, variable) -> bool:
    return op.type in _WRITE_OP_TYPES and any(t.op is variable.op for t in op.inputs)


def _weights(weights, weight_key: str):
    """The ``[batch]`` float32 weights of ``features[weight_key]``, or an error naming it."""
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


def _run_layer_updates(network_ops: list) -> None:
    """Puts the state updates nothing would run into ``UPDATE_OPS``, which the train op waits for.

    ``tf.keras.layers.BatchNormalization`` (what ``tf.layers.batch_normalization``'s
    deprecation notice recommends) keeps its moving-average updates on the layer, out of
    ``UPDATE_OPS``: in a model_fn nothing runs them, and evaluation and prediction then
    normalise with the initial mean 0 and variance 1. An update is taken when no op reads
    it or waits for it; ``tf.layers`` updates, already in ``UPDATE_OPS``, are left alone.
    """
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


class _MissingFeature(KeyError):
    """A lookup on the features mapping found no such feature."""


class _Features(dict):
    """The features as the network sees them: a missing key is told apart from other lookups.

    It is still a ``KeyError``, so a network that catches one for an optional feature works.
    """

    def __missing__(self, key):
        raise _MissingFeature(key)


class _NameOnSequence(TypeError):
    """A lookup by name on features that are a tuple or list (``features["x"]``)."""


class _FeatureTuple(tuple):
    """Tuple features as the network sees them: a lookup by name is told apart.

    Python's own error ("tuple indices must be integers or slices, not str") names neither the
    tuple nor the key; raised here, the lookup is known to be on the features. Still a
    ``TypeError``, and indexing by position, slicing and iterating are a tuple's.
    """

    def __getitem__(self, key):
        if isinstance(key, str):
            raise _NameOnSequence(key)
        return super().__getitem__(key)


class _FeatureList(list):
    """List features as the network sees them; see :class:`_FeatureTuple`."""

    def __getitem__(self, key):
        if isinstance(key, str):
            raise _NameOnSequence(key)
        return super().__getitem__(key)


# The end of TensorFlow's error for ``tensor["x"]``: "... are valid indices, got 'x'".
_NAME_AS_INDEX = re.compile(r"valid indices, got ('[^']*'|\"[^\"]*\")$")


def _call_network(network_fn: Callable, features, mode, params):
    """Calls ``network_fn``; a lookup of a feature the input does not provide gets named.

    Only lookups on the features themselves are rewritten: a ``KeyError`` from anywhere else
    (a ``params`` key the network expects, say) is not the input pipeline's fault. A lookup by
    name on features that are one tensor (an input_fn yielding ``(x, y)``), which TensorFlow
    reports as a bad slice index, or a tuple of tensors (``((x1, x2), y)``) is named too; a
    network that takes a bare tensor or indexes the tuple by position is unaffected.
    """
    is_mapping = isinstance(features, Mapping)
    if is_mapping:
        features = _Features(features)
    elif type(features) is tuple:  # not a namedtuple, whose fields the network may read
        features = _FeatureTuple(features)
    elif type(features) is list:
        features = _FeatureList(features)
    try:
        return network_fn(features, mode, params)
    except _MissingFeature as error:
        raise ValueError(
            f"`network_fn` looked up feature {error.args[0]!r}, which the input_fn (or serving "
            f"receiver) does not provide. Got features: {sorted(map(str, features))}"
        ) from error
    except _NameOnSequence as error:
        key = error.args[0]
        kind = "tuple" if isinstance(features, tuple) else "list"
        raise TypeError(
            f"`network_fn` looked up feature {key!r}, but the input_fn yields a "
            f"{kind} of {len(features)} features, not a dict of features; "
            f"yield ({{{key!r}: x, ...}}, y) (inputs.from_arrays does)"
        ) from error
    except TypeError as error:
        match = _NAME_AS_INDEX.search(str(error))
        if is_mapping or not tf.is_tensor(features) or match is None:
            raise
        key = match.group(1)
        raise TypeError(
            f"`network_fn` looked up feature {key}, but the input_fn yields a single tensor, "
            f"not a dict of features; yield ({{{key}: x}}, y) (inputs.from_arrays does). "
            f"Got: a {features.dtype.name} tensor of shape {_heads._shape(features)}"
        ) from error


def _tensors_metric_fn(metric_fn: Callable) -> Callable:
    """Adapts ``metric_fn(labels, outputs, weights)`` to TPU's ``metric_fn(**tensors)``."""

    def tensors_metric_fn(labels, outputs, weights=None):
        return metric_fn(labels, outputs, weights)

    return tensors_metric_fn


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
    """A softmax classifier ``model_fn`` over ``network_fn``'s logits.

    Args:
      network_fn: ``network_fn(features, mode, params) -> logits [batch, num_classes]``.
      num_classes: number of classes (>= 2); labels are int ids ``[batch]`` or ``[batch, 1]``.
      optimizer: a name in :data:`OPTIMIZERS` (``"adam"``, ``"adamw"`` — BERT's
        AdamWeightDecay —, ``"sgd"``, ``"momentum"``, ``"adagrad"``, ``"rmsprop"``), a
        ``tf.compat.v1.train.Optimizer``, or a callable ``learning_rate -> Optimizer``.
      learning_rate: peak learning rate; None: 1e-3. Not with an Optimizer instance, which
        has its own.
      warmup_steps: steps of linear warm-up from 0 (BERT's ``num_warmup_steps``).
      decay_steps: step at which the rate has decayed linearly to 0 (BERT's
        ``num_train_steps``); None for no decay.
      init_checkpoint: checkpoint prefix or model directory to warm-start from; every variable
        whose name and shape match is initialised from it and listed in the log with
        ``*INIT_FROM_CKPT*``.  Read only while model_dir has no checkpoint of its own.
      assignment_map: explicit ``tf.compat.v1.train.init_from_checkpoint`` map.
      metrics: names from :data:`CLASSIFIER_METRICS`: ``"accuracy"``, ``"precision"``,
        ``"recall"``, ``"f1"`` (macro averages), their ``_micro`` / ``_macro`` / ``_weighted``
        variants, ``"recall_at_<k>"`` (e.g. ``"recall_at_5"``) and, for 2 classes, ``"auc"``.
      top_k: also predict the ``top_k`` most likely classes and their probabilities.
      tpu_spec: return ``TPUEstimatorSpec`` for ``TPUEstimator``.
      clip_norm: clip gradients to this global norm; None for no clipping.
      weight_key: feature holding per-example weights for loss and metrics; evaluation's
        ``average_loss`` is then the weighted mean loss (see :func:`build`).

    Returns:
      ``model_fn(features, labels, mode, params, config)``, as from :func:`build`.

    Raises:
      TypeError: at once, for a ``network_fn`` that is not callable or does not take
        ``(features, mode, params)``, an optimizer of an unsupported type, or ``metrics``
        that is not a list or tuple.
      ValueError: for ``num_classes`` < 2, an unknown optimizer or metric name, a bad
        ``top_k`` or schedule; when the model_fn runs, for logits that are not
        ``[batch, num_classes]`` or a missing / unreadable ``init_checkpoint`` (unless
        model_dir has a checkpoint to resume from).

    Example:

        model_fn = classifier(network, num_classes=10, optimizer="adamw", learning_rate=2e-5,
                              warmup_steps=100, decay_steps=1000, top_k=3,
                              metrics=("accuracy", "f1_macro", "recall_at_3"))
    """
    num_classes = check_int("num_classes", num_classes, 2)
    top_k = check_int("top_k", top_k, allow_none=True)
    if top_k is not None and top_k > num_classes:
        raise ValueError(f"`top_k` must be at most num_classes ({num_classes}). Got: {top_k}")
    metrics = _heads.check_metric_names(metrics, CLASSIFIER_METRICS, num_classes)
    return build(
        network_fn,
        **_heads.classifier_parts(num_classes, metrics, top_k),
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
    """A mean-squared-error regressor ``model_fn``.

    Args:
      network_fn: ``network_fn(features, mode, params) -> [batch, label_dimension]`` (or
        ``[batch]`` when ``label_dimension`` is 1).
      optimizer: as for :func:`classifier`.
      learning_rate: peak learning rate; None: 1e-3. Not with an Optimizer instance, which
        has its own.
      warmup_steps: steps of linear warm-up from 0.
      decay_steps: step at which the rate has decayed linearly to 0; None for no decay.
      init_checkpoint: checkpoint prefix or directory to warm-start from, read only while
        model_dir has no checkpoint of its own.
      assignment_map: explicit ``tf.compat.v1.train.init_from_checkpoint`` map.
      metrics: names from :data:`REGRESSOR_METRICS` (``"mse"``, ``"mae"``, ``"rmse"``).
      tpu_spec: return ``TPUEstimatorSpec`` for ``TPUEstimator``.
      label_dimension: number of regression targets per example.
      clip_norm: clip gradients to this global norm; None for no clipping.
      weight_key: feature holding per-example weights for loss and metrics; evaluation's
        ``average_loss`` is then the weighted mean loss (see :func:`build`).

    Returns:
      ``model_fn(features, labels, mode, params, config)``, as from :func:`build`; PREDICT
      gives ``"predictions"``.

    Raises:
      TypeError: at once, for a ``network_fn`` that is not callable or does not take
        ``(features, mode, params)``, an optimizer of an unsupported type, or ``metrics``
        that is not a list or tuple.
      ValueError: for an unknown optimizer or metric name, a bad schedule or
        ``label_dimension``; when the model_fn runs, for labels that are not numeric (strings
        left unparsed) or a missing / unreadable ``init_checkpoint`` (unless model_dir has a
        checkpoint to resume from).

    Example:

        model_fn = regressor(network, learning_rate=1e-2, metrics=("mse", "rmse"))
    """
    label_dimension = check_int("label_dimension", label_dimension)
    metrics = _heads.check_metric_names(metrics, REGRESSOR_METRICS)
    return build(
        network_fn,
        **_heads.regressor_parts(label_dimension, metrics),
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
