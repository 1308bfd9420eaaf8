"""Keras model -> Estimator: input-name adaptation, a warm start that keeps every weight, export.

:func:`to_estimator` wraps Keras 2's ``model_to_estimator``, which wants features keyed exactly
by ``model.input_names`` and warm-starts trainable variables only.
"""

import contextlib
import functools
import numbers
import os
import re
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, Optional, Union

from tfest_kit import _warm_start, logs
from tfest_kit._checks import BATCHED_TWICE
from tfest_kit._loop import fetch_errors, loop_length, training_loop, with_loss_line, with_run_hooks
from tfest_kit._model_dir import saved_step, usable_checkpoint
from tfest_kit._model_fn_call import call_with_args, label_errors
from tfest_kit._task_guard import EndlessPredictWarning, guarded_eval_hooks, guarded_train
from tfest_kit._tf import KERAS_PACKAGE, object_graph_key_mapping, tf, tf2
from tfest_kit.cluster import validate_tf_config
from tfest_kit.inputs import read_errors

__all__ = ["to_estimator"]

# The official model_fn reads Keras sample weights only from features that are exactly
# {"features": <features>, "sample_weights": <weights>}; any other dict is all features.
_FEATURES_KEY, _SAMPLE_WEIGHTS_KEY = "features", "sample_weights"
# Graph variable names of every model variable: not the global step, nor the Keras optimizer's
# slots and hyper-parameters (under "training/").
_MODEL_VARIABLES = r"(?!global_step:|training/)"


@contextlib.contextmanager
def _quiet_keras():
    # Keras 2 warns so from inside the official converter on every call; nothing to act on.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*(set_learning_phase|Model\.state_updates)")
        yield


def to_estimator(
    keras_model: Any,
    model_dir: Optional[str] = None,
    *,
    config: Optional[Any] = None,
    custom_objects: Optional[Mapping[str, Any]] = None,
    checkpoint_format: str = "checkpoint",
    warm_start_from: Optional[Union[str, Any]] = None,
) -> tf.estimator.Estimator:
    """Converts a compiled ``tf.keras`` model into a ``tf.estimator.Estimator``.

    It predicts what ``keras_model.predict`` does (every weight is warm-started) and takes
    features as a dict (keys matched without an ``_input`` suffix), a tuple in input order or a
    bare tensor; sample weights as a ``"sample_weights"`` key. Switches Keras to graph mode.

    Args:
      keras_model: a compiled ``tf.keras.Model`` (subclassed: ``checkpoint_format="saver"``).
      model_dir: where checkpoints go; None (and no ``config.model_dir``): a temporary one.
      config: a ``tf.estimator.RunConfig`` (this and the rest are keyword-only).
      custom_objects: ``{name: object}`` for custom layers, losses … of the model.
      checkpoint_format: ``"checkpoint"`` (object-based) or ``"saver"``.
      warm_start_from: a checkpoint, SavedModel or ``WarmStartSettings`` instead of the Keras
        weights; every model variable, matched by structure as ``load_weights`` does.

    Returns:
      A ``tf.estimator.Estimator``.

    Raises:
      TypeError: not a Keras 2 model: a Keras 3 model (TensorFlow >= 2.16's ``import keras``).
      ValueError: a malformed ``TF_CONFIG``; while running, features or labels the model
        cannot take. Keras' own errors for what the converter cannot take.

    Example:

        est = keras_bridge.to_estimator(model, model_dir="/tmp/keras_est")
        est.train(lambda: tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(32), steps=100)
    """
    validate_tf_config(workers_only_allowed=True)  # the converter's RunConfig() would not
    if not isinstance(keras_model, tf2.keras.Model):  # a Keras 3 model; a file's path
        keras_3 = type(keras_model).__module__.startswith("keras.")
        raise TypeError(
            f"`keras_model` is {'a Keras 3 model' if keras_3 else repr(keras_model)}; Estimator "
            f"converts Keras 2 models only: build it with tf.keras after `import tfest_kit` "
            f"({KERAS_PACKAGE}), not `import keras`, or load it with tf.keras.models.load_model"
        )
    _check_preprocessing_state(keras_model)
    from_path = isinstance(warm_start_from, (str, bytes, os.PathLike))
    if from_path:  # as settings covering non-trainable weights too (Estimator's ".*" does not)
        path = os.fsdecode(warm_start_from)
        if tf.io.gfile.exists(os.path.join(path, "variables", "variables.index")):
            path = os.path.join(path, "variables", "variables")  # a SavedModel, as Estimator reads
        warm_start_from = tf.estimator.WarmStartSettings(path, [_MODEL_VARIABLES])
    tf.logging.info("Converting Keras model %r to an Estimator", keras_model.name)
    with _quiet_keras():
        options = dict(model_dir=model_dir, config=config, checkpoint_format=checkpoint_format)
        options["custom_objects"] = dict(custom_objects) if custom_objects else None
        try:
            official = tf2.keras.estimator.model_to_estimator(keras_model=keras_model, **options)
        except ValueError as e:  # "Object-based checkpoints … not supported with subclassed models"
            if "subclassed" not in str(e):
                raise
            raise ValueError(
                f"{e} Build the model with tf.keras.Input (functional) or Sequential, or pass "
                "checkpoint_format='saver'."
            ) from None
        except AttributeError as e:  # Keras' rule, said in compile() only ("invalid state")
            if "_compile_time_distribution_strategy" not in str(e):
                raise
            raise ValueError(
                "`keras_model` was made before an earlier to_estimator call, which leaves the "
                "Keras models made before it unusable: build and compile it (again) after"
            ) from e
    keras_ckpt = tf.train.latest_checkpoint(os.path.join(official.model_dir, "keras"))
    resuming = tf.train.latest_checkpoint(official.model_dir) is not None  # no warm start then
    if from_path and keras_ckpt and not resuming:
        warm_start_from = _matched_by_structure(warm_start_from, keras_ckpt)
    elif warm_start_from is None and keras_ckpt:
        # A list (not the official ".*" string) also matches non-trainable variables.
        warm_start_from = tf.estimator.WarmStartSettings(keras_ckpt, vars_to_warm_start=[".*"])
    config, loop = official.config, None
    if loop_length(config):  # our loss line, counting steps (Estimator's counts runs)
        loop = dict(length=loop_length(config), every=config.log_step_count_steps, hooks=())
        config, loop["until"] = config.replace(log_step_count_steps=None), (None, None)
    # The raw Keras model_fn: the public `official.model_fn` would log "Calling model_fn" twice.
    model_fn = _adapting_model_fn(official._model_fn, keras_model, loop)
    with logs.quieted():  # the converter already logged this config
        est = tf.estimator.Estimator(model_fn, official.model_dir, config, None, warm_start_from)
    _guard(est, skip_done=checkpoint_format == "checkpoint", loop=loop)
    return est


def _check_preprocessing_state(keras_model) -> None:
    # The Estimator rebuilds layers from their config, which lacks what adapt() found: lookups
    # fail with "Table not initialized", and a Discretization silently puts every value in bin 0.
    layers = tf2.keras.layers
    lookups = (layers.StringLookup, layers.IntegerLookup, layers.TextVectorization)
    for layer in keras_model.submodules:
        if isinstance(layer, lookups) and layer.get_config().get("vocabulary") is None:
            adapted = layer.get_vocabulary(include_special_tokens=False)
            argument = "vocabulary=layer.get_vocabulary(include_special_tokens=False)"
        elif isinstance(layer, layers.Discretization) and not layer.get_config()["bin_boundaries"]:
            adapted, argument = layer.bin_boundaries, "bin_boundaries=layer.bin_boundaries"
        else:
            continue
        if adapted:
            kind = type(layer).__name__
            raise ValueError(
                f"`keras_model`'s {kind} layer {layer.name!r} got its {argument.split('=')[0]} "
                f"from adapt(), which the Estimator's rebuilt layer loses. Build it with "
                f"{kind}({argument}, …), or preprocess in the input_fn."
            )


def _guard(est, skip_done: bool, loop: Optional[dict]) -> None:
    """Guards ``est`` as TPUEstimator (train, evaluate, the checkpoint all restore); ``skip_done``:
    no step past a saved ``max_steps`` (Estimator read an object-based checkpoint's step as 0)."""
    official_train, official_evaluate, official_predict = est.train, est.evaluate, est.predict
    looped = lambda: loop and loop.get("looped") and loop["length"]  # noqa: E731
    one_step = "tfest_kit.run_config(iterations_per_loop=None)"

    @functools.wraps(official_train)
    def train(input_fn, hooks=None, steps=None, max_steps=None, saving_listeners=None):
        with fetch_errors(looped, one_step), guarded_train(est, hooks, max_steps, steps) as hooks:
            if loop:
                loop.update(until=(max_steps, steps), hooks=tuple(hooks), looped=False)
            step = saved_step(est.model_dir) if skip_done and steps is None else None
            if step and isinstance(max_steps, numbers.Integral) and 0 < max_steps <= step:
                tf.logging.info("Skipping training since max_steps has already saved.")
                return est
            return official_train(input_fn, hooks, steps, max_steps, saving_listeners)

    @functools.wraps(official_evaluate)
    def evaluate(input_fn, steps=None, hooks=None, checkpoint_path=None, name=None):
        hooks = guarded_eval_hooks(est.config, hooks, steps)
        checkpoint_path = usable_checkpoint(est.model_dir, "evaluate()", checkpoint_path)
        with label_errors(), read_errors():
            return official_evaluate(input_fn, steps, hooks, checkpoint_path, name)

    @functools.wraps(official_predict)
    def predict(input_fn, predict_keys=None, hooks=None, checkpoint_path=None, **kw):
        checkpoint_path = usable_checkpoint(est.model_dir, "predict()", checkpoint_path)
        hooks = [*(hooks or ()), EndlessPredictWarning()]
        return official_predict(input_fn, predict_keys, hooks, checkpoint_path, **kw)

    est.train, est.evaluate, est.predict = train, evaluate, predict
    est.latest_checkpoint = lambda: usable_checkpoint(est.model_dir, "an export")


def _adapting_model_fn(official_model_fn, keras_model, loop: Optional[dict]):
    input_names = list(getattr(keras_model, "input_names", None) or [])
    output_names = list(getattr(keras_model, "output_names", None) or [])
    input_keys = _dict_keys_to_names(getattr(keras_model, "_nested_inputs", None), input_names)
    output_keys = _dict_keys_to_names(getattr(keras_model, "_nested_outputs", None), output_names)

    def model_fn(features, labels, mode, config):
        if not loop or mode != tf.estimator.ModeKeys.TRAIN:
            return step(features, labels, mode, config)
        every = (loop["every"], config.save_checkpoints_steps)
        train_step = functools.partial(step, mode=mode, config=config)
        looped = training_loop(train_step, features, labels, loop["length"], loop["until"], every)
        loop["looped"] = looped is not None
        spec = looped[0] if looped else train_step(features, labels)
        spec = with_loss_line(spec, config, loop["every"], loop["until"])
        return with_run_hooks(spec, config, loop["hooks"], loop["length"] if looped else 1)

    def step(features, labels, mode, config):
        features, weights = _split_sample_weights(features, input_names)
        features = _keyed_by_names(features, input_keys)
        # PREDICT's uncompiled clone fails on them ("no attribute '_training_endpoints'").
        sample_weights = None if mode == tf.estimator.ModeKeys.PREDICT else weights
        if input_names:
            features = _adapt_features(features, input_names)
        if isinstance(labels, Mapping) and output_names:
            labels = _adapt_labels(dict(_keyed_by_names(labels, output_keys)), output_names)
        if labels is None and mode != tf.estimator.ModeKeys.PREDICT:  # a placeholder's error
            raise ValueError(f"`input_fn` gave features only: {mode} needs (features, labels)")
        _check_shapes(keras_model, features if input_names else {}, labels)
        if sample_weights is not None:
            # Re-wrapped after adapting: renaming the keys of the outer dict would make the
            # official model_fn take the weights for one more feature and drop them.
            features = {_FEATURES_KEY: features, _SAMPLE_WEIGHTS_KEY: sample_weights}
        with _quiet_keras():
            spec = call_with_args(
                official_model_fn, features=features, labels=labels, mode=mode, config=config
            )
        saver = spec.scaffold.saver
        if saver is not None and hasattr(saver, "_object_restore_saver"):
            # The object-based restore assigns a saved value of another shape without a
            # word (an edited model resumed the old layer sizes): checked by checkpoint key.
            keys = _checkpoint_keys(saver)
            _warm_start.check_model_dir(config.model_dir, variables=keys, mode=mode)
            saver = _saver_as_configured(saver, config, keys)
            spec = spec._replace(scaffold=tf.train.Scaffold(saver=saver))
        if saver is not None and saver not in tf.get_collection(tf.GraphKeys.SAVERS):
            # Hooks find the saver here (NanGuardHook); Estimator then adds none of its own.
            tf.add_to_collection(tf.GraphKeys.SAVERS, saver)
        if mode == tf.estimator.ModeKeys.TRAIN:
            # Keras' "loss" name scope made Estimator's loss summary "loss_1", apart from eval's
            # "loss" in TensorBoard; "loss/" re-enters it, so Estimator takes it as the user's.
            tf.summary.scalar("loss/", spec.loss)
        return spec

    return model_fn


def _check_shapes(keras_model, features: dict, labels) -> None:
    """Names a feature whose shape is not its Input's, and one-hot labels for a sparse loss
    (else reported as a checkpoint mismatch, and an op error while running)."""
    for name, tensor in zip(keras_model.input_names or (), keras_model.inputs or ()):
        if isinstance(features.get(name), Mapping):  # "Expected any non-tensor type"
            raise ValueError(f"Feature {name!r} is a dict: a Keras Input takes one tensor")
        got = tf.TensorShape(getattr(features.get(name), "shape", tensor.shape))
        extra = None not in (got.rank, tensor.shape.rank) and got.rank > tensor.shape.rank
        if extra or got.rank == tensor.shape.rank and not got.is_compatible_with(tensor.shape):
            twice = BATCHED_TWICE if extra else ""
            raise ValueError(
                f"The feature for the Keras model's Input {name!r} has shape {got}{twice}; the "
                f"Input takes {tensor.shape} (None: any size). Reshape it in the input_fn, or give "
                "the model an Input of that shape (and a new model_dir)."
            )
    if any(getattr(t, "dtype", None) == tf.string for t in tf2.nest.flatten(labels)):
        raise ValueError("`labels` are strings; Keras losses take numbers: map them to class ids")
    loss, outputs = keras_model.loss, keras_model.outputs or ()
    loss = loss if isinstance(loss, str) else getattr(loss, "name", getattr(loss, "__name__", ""))
    shape = tf.TensorShape(getattr(labels, "shape", None) if len(outputs) == 1 else None)
    rank = shape.rank if "sparse" in str(loss) and shape[-1:] not in ([1], [None]) else None
    if rank and rank == outputs[0].shape.rank:  # (batch, classes) where (batch,) ids belong
        raise ValueError(
            f"`labels` have shape {shape}, one-hot like the model's output {outputs[0].shape}, "
            f"but the loss {loss!r} takes class ids (one number per example). Pass "
            "tf.argmax(labels, -1) in the input_fn, or compile with 'categorical_crossentropy'."
        )


def _dict_keys_to_names(nested, names: list[str]) -> dict:
    # Keras' fit keys a dict model's data by the dict's keys, the official model_fn by the
    # layers' names; both in flattened (sorted-key) order.
    if not isinstance(nested, Mapping) or len(nested) != len(names):
        return {}
    keys = tf.nest.flatten({key: key for key in nested})
    return {key: name for key, name in zip(keys, names) if key != name}


def _keyed_by_names(values, keys_to_names: dict):
    if not keys_to_names or not isinstance(values, Mapping):
        return values
    names = set(keys_to_names.values())
    # A layer name that is not a dict key means keyed by layer names; otherwise the dict's
    # keys win, as in Keras' fit (keys {"a", "b"} naming layers "b", "a": "a" goes to "b").
    if any(key in names and key not in keys_to_names for key in values):
        return values
    return {keys_to_names.get(key, key): value for key, value in values.items()}


def _split_sample_weights(features, input_names: list[str]):
    """``(features, sample_weights or None)``, also from a ``"sample_weights"`` features key."""
    if not isinstance(features, Mapping) or _SAMPLE_WEIGHTS_KEY not in features:
        return features, None
    if set(features) == {_FEATURES_KEY, _SAMPLE_WEIGHTS_KEY}:
        return features[_FEATURES_KEY], features[_SAMPLE_WEIGHTS_KEY]
    if _SAMPLE_WEIGHTS_KEY in input_names:
        return features, None
    features = dict(features)
    return features, features.pop(_SAMPLE_WEIGHTS_KEY)


def _normalise(name: str) -> str:
    return name.lower().split(":")[0].removesuffix("_input")


def _adapt_features(features, input_names: list[str]) -> dict:
    if not isinstance(features, Mapping):
        sequence = isinstance(features, Sequence) and not isinstance(features, (str, bytes))
        features = list(features) if sequence else [features]
        if len(features) != len(input_names):
            raise ValueError(
                f"features must be one tensor per input of the Keras model {input_names}, in "
                f"that order, or a dict keyed by those names. Got: {len(features)} tensors"
            )
        return dict(zip(input_names, features))
    features = dict(features)
    if all(name in features for name in input_names):
        return features
    adapted = {}
    for name in input_names:
        matches = [k for k in features if _normalise(str(k)) == _normalise(name)]
        if name in features or len(matches) == 1:
            adapted[name] = features[name if name in features else matches[0]]
    if len(adapted) < len(input_names) and len(input_names) == 1 and len(features) == 1:
        return {input_names[0]: next(iter(features.values()))}
    if len(adapted) < len(input_names):
        raise ValueError(
            f"features keys must match the Keras model's inputs: expected {input_names}, "
            f"received {sorted(map(str, features))}. Rename the keys in the input_fn."
        )
    return adapted


def _adapt_labels(labels: dict, output_names: list[str]):
    if all(name in labels for name in output_names):
        return labels
    if len(output_names) == 1 and len(labels) == 1:
        return next(iter(labels.values()))
    raise ValueError(
        f"labels keys must match the Keras model's outputs: expected {output_names}, "
        f"received {sorted(map(str, labels))}. Rename the keys in the input_fn."
    )


def _checkpoint_keys(saver) -> dict:
    keys = {}
    for saveable in saver._var_list:  # TrackableSaveables, one spec per variable
        specs, variable = getattr(saveable, "specs", ()), getattr(saveable, "op", None)
        if len(specs) == 1 and isinstance(getattr(variable, "shape", None), tf.TensorShape):
            keys[specs[0].name] = variable
    return keys


def _saver_as_configured(saver, config, variables: dict):
    """The object-based saver with Estimator's settings (the official one ignored
    ``keep_checkpoint_max`` and wrote absolute paths), checking a checkpoint's fit."""
    hours = config.keep_checkpoint_every_n_hours
    keep = dict(max_to_keep=config.keep_checkpoint_max, keep_checkpoint_every_n_hours=hours)
    options = dict(var_list=saver._var_list, sharded=True, save_relative_paths=True, **keep)
    rebuilt = _warm_start.FitCheckingSaver(config.model_dir, variables, **options)
    rebuilt._object_restore_saver = saver._object_restore_saver
    return rebuilt


def _matched_by_structure(settings, keras_ckpt: str):
    """Matches by structure (as ``load_weights``): a model rebuilt in-process renames layers."""
    # A missing path is named now, not by TensorSliceReader once train() has built its graph.
    prefix = _warm_start.resolve_checkpoint(settings.ckpt_to_initialize_from, "warm_start_from")
    ours = object_graph_key_mapping(keras_ckpt)
    model = {name: key for name, key in ours.items() if re.match(_MODEL_VARIABLES, f"{name}:0")}
    try:
        saved_names = object_graph_key_mapping(prefix)
    except tf.errors.NotFoundError:  # a name-based checkpoint: warm-started by name (Estimator)
        if missing := sorted(set(model) - {name for name, _ in tf.train.list_variables(prefix)}):
            raise ValueError(  # else TensorFlow's "Tensor … is not found" once train() began
                f"warm_start_from {prefix} lacks this Keras model's variables {missing[:5]}: give"
                " this model's checkpoint, or map the names (var_name_to_prev_var_name)"
            ) from None
        return settings
    same = all(name in saved_names for name in model)
    return settings if same else settings._replace(var_name_to_prev_var_name=model)
