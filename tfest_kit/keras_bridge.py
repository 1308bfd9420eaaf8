"""Keras model -> Estimator: input-name adaptation, a warm start that keeps every weight, export.

:func:`to_estimator` wraps ``tf.keras.estimator.model_to_estimator`` (Keras 2.15), which wants
features keyed exactly by ``model.input_names``, warm-starts trainable variables only, names
metrics unlike ``model.evaluate``, and fails deep inside Keras on many models it cannot take.
"""

from __future__ import annotations

import contextlib
import functools
import numbers
import os
import re
import tempfile
import time
import warnings
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, Optional, Union

from tfest_kit import _warm_start, logs
from tfest_kit._errors import TfestKitError
from tfest_kit._model_dir import saved_step
from tfest_kit._model_fn_call import call_with_args
from tfest_kit._task_guard import guarded_eval_hooks, guarded_train
from tfest_kit._tf import object_graph_key_mapping, tf, tf2
from tfest_kit.cluster import check_tf_config_json

__all__ = ["to_estimator", "check_keras_version"]

# The official model_fn reads Keras sample weights only from features that are exactly
# {"features": <features>, "sample_weights": <weights>}; any other dict is all features.
_FEATURES_KEY = "features"
_SAMPLE_WEIGHTS_KEY = "sample_weights"
_CHECKPOINT_FORMATS = ("checkpoint", "saver")
# Graph variable names of every model variable: not the global step, nor the Keras optimizer's
# slots and hyper-parameters (under "training/").
_MODEL_VARIABLES = r"(?!global_step:|training/)"


@contextlib.contextmanager
def _quiet_keras():
    # Keras 2 warns so from inside the official model_fn on every call; nothing to act on.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*(set_learning_phase|Model\.state_updates)")
        yield


def check_keras_version(version: str) -> None:
    """Raises TfestKitError (naming what to install) unless ``version`` is a Keras 2.

    Example:

        check_keras_version(keras.__version__)
    """
    match = re.match(r"(\d+)", version or "")
    if match is None or int(match.group(1)) >= 3:
        raise TfestKitError(
            f"to_estimator needs Keras 2 (tf.keras 2.15); found Keras {version}, which has no "
            f"model_to_estimator (Keras 3 / TensorFlow >= 2.16 removed it). Install: pip install "
            "tensorflow==2.15.1 tensorflow-estimator==2.15.0 keras==2.15.0"
        )


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

    It predicts what ``keras_model.predict`` does (every weight is warm-started), reports
    metrics under their Keras names, and takes features as a dict (keys matched without an
    ``_input`` suffix), a tuple in input order or a bare tensor; sample weights as a
    ``"sample_weights"`` key. The conversion switches Keras to graph mode.

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
      TypeError: if ``keras_model`` is not a ``tf.keras.Model``.
      ValueError: an uncompiled model, a bad argument, a missing custom object, what the
        converter cannot rebuild; while running, features or labels the model cannot take.
      TfestKitError: on Keras 3; a model built before another conversion, or converted before.

    Example:

        est = keras_bridge.to_estimator(model, model_dir="/tmp/keras_est")
        est.train(lambda: tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(32),
                  steps=100)
    """
    _check_model(keras_model, checkpoint_format)
    check_tf_config_json()  # the converter's RunConfig() would raise a bare JSONDecodeError
    if model_dir is None and (config is None or config.model_dir is None):
        model_dir = tempfile.mkdtemp(prefix="tfest_kit_keras_")
        tf.logging.info("to_estimator: using temporary model_dir %s", model_dir)

    from_path = isinstance(warm_start_from, (str, bytes, os.PathLike))
    if warm_start_from is not None:  # checked before anything is written
        warm_start_from = _all_model_variables(warm_start_from)
    _set_aside_stale_keras_checkpoint(model_dir, config)
    metric_names = _keras_metric_names(keras_model)  # before Keras clones it
    official = _convert(keras_model, model_dir, config, custom_objects, checkpoint_format)
    _CONVERTED.add(keras_model)
    keras_ckpt = tf.train.latest_checkpoint(os.path.join(official.model_dir, "keras"))
    resuming = tf.train.latest_checkpoint(official.model_dir) is not None  # no warm start then
    if from_path and keras_ckpt and not resuming:
        warm_start_from = _matched_by_structure(warm_start_from, keras_ckpt)
    elif warm_start_from is None and keras_ckpt:
        # A list (not the official ".*" string) also matches non-trainable variables.
        warm_start_from = tf.estimator.WarmStartSettings(
            ckpt_to_initialize_from=keras_ckpt, vars_to_warm_start=[".*"]
        )
    # The raw Keras model_fn: the public `official.model_fn` would log "Calling model_fn" twice.
    raw_model_fn = official._model_fn
    with logs.quieted():  # the converter already logged this config
        est = tf.estimator.Estimator(
            model_fn=_adapting_model_fn(raw_model_fn, keras_model, metric_names),
            model_dir=official.model_dir,
            config=official.config,
            warm_start_from=warm_start_from,
        )
    _guard(est, skip_done=checkpoint_format == "checkpoint")
    return est


def _check_model(keras_model, checkpoint_format: str) -> None:
    import keras  # tf.keras has no __version__; in TensorFlow 2.15 it is `keras`

    check_keras_version(getattr(keras, "__version__", ""))
    if not isinstance(keras_model, tf2.keras.Model):
        raise TypeError(
            "`keras_model` must be a tf.keras.Model (Keras 2.15). "
            f"Got: {type(keras_model).__module__}.{type(keras_model).__name__}"
        )
    if not getattr(keras_model, "optimizer", None):
        raise ValueError(
            f"`keras_model` {keras_model.name!r} has not been compiled: call "
            "model.compile(optimizer=..., loss=..., metrics=[...]) first, then to_estimator(model)."
        )
    if checkpoint_format not in _CHECKPOINT_FORMATS:
        raise ValueError(
            f"`checkpoint_format` must be one of {list(_CHECKPOINT_FORMATS)}. "
            f"Got: {checkpoint_format!r}"
        )
    subclassed = not (
        getattr(keras_model, "_is_graph_network", False)
        or isinstance(keras_model, tf2.keras.Sequential)
    )
    if subclassed and checkpoint_format == "checkpoint":  # the official error: "not supported"
        raise ValueError(
            f"`keras_model` {keras_model.name!r} is a subclassed Model, which the converter "
            'takes only with checkpoint_format="saver" (from fresh weights), or build it with '
            'the functional API. Got: checkpoint_format="checkpoint"'
        )
    _check_optimizer(keras_model.optimizer)
    _check_preprocessing_state(keras_model)
    _warn_unweighted_metrics(keras_model)
    _check_loss_keys(keras_model)


def _guard(est, skip_done: bool) -> None:
    """Guards ``est.train`` / ``evaluate`` as TPUEstimator's; ``skip_done``: no step past a
    saved ``max_steps`` (Estimator read an object-based checkpoint's step as 0)."""
    official_train, official_evaluate = est.train, est.evaluate

    @functools.wraps(official_train)
    def train(input_fn, hooks=None, steps=None, max_steps=None, saving_listeners=None):
        with guarded_train(est, hooks) as hooks:
            step = saved_step(est.model_dir) if skip_done and steps is None else None
            if step and isinstance(max_steps, numbers.Integral) and 0 < max_steps <= step:
                tf.logging.info("Skipping training since max_steps has already saved.")
                return est
            return official_train(input_fn, hooks, steps, max_steps, saving_listeners)

    @functools.wraps(official_evaluate)
    def evaluate(input_fn, steps=None, hooks=None, checkpoint_path=None, name=None):
        hooks = guarded_eval_hooks(est.config, hooks, steps)
        return official_evaluate(input_fn, steps, hooks, checkpoint_path, name)

    est.train, est.evaluate = train, evaluate


def _check_optimizer(optimizer) -> None:
    # The converter needs a legacy namesake: AdamW failed with "'str' has no 'from_config'".
    optimizers = tf2.keras.optimizers
    if isinstance(optimizer, optimizers.legacy.Optimizer) or not isinstance(
        optimizer, optimizers.Optimizer
    ):
        return
    name = type(optimizer).__name__
    if not hasattr(optimizers.legacy, name):
        raise ValueError(
            f"`keras_model` is compiled with the optimizer {name}, which has no "
            "tf.keras.optimizers.legacy version, the only ones Keras converts. Compile with one, "
            "e.g. tf.keras.optimizers.legacy.Adam (for AdamW: an L2 penalty in the loss)."
        )


def _check_preprocessing_state(keras_model) -> None:
    # Layers rebuilt from config lack an adapt()ed state: lookups failed with "Table not
    # initialized", a Discretization put every value in bin 0.
    layers = tf2.keras.layers
    lookups = (layers.StringLookup, layers.IntegerLookup, layers.TextVectorization)
    for layer in keras_model.submodules:
        try:
            config = layer.get_config()
        except Exception:  # noqa: BLE001 - not ours to judge; the conversion will say
            continue
        if isinstance(layer, lookups) and config.get("vocabulary") is None:
            adapted = layer.get_vocabulary(include_special_tokens=False)
            argument = "vocabulary=layer.get_vocabulary(include_special_tokens=False)"
        elif isinstance(layer, layers.Discretization) and config.get("bin_boundaries") is None:
            adapted, argument = layer.bin_boundaries, "bin_boundaries=layer.bin_boundaries"
        else:
            continue
        if adapted:
            kind = type(layer).__name__
            raise ValueError(
                f"`keras_model`'s {kind} layer {layer.name!r} got its {argument.split('=')[0]} "
                "from adapt(); the Estimator rebuilds layers from their config, which does not "
                f"hold it. Build the layer with {kind}({argument}, …) before the model, or "
                "move this preprocessing into the input_fn."
            )


# What an eager-built model lacks once an earlier conversion went to graph mode.
_BUILT_BEFORE_A_CONVERSION = ("_compile_time_distribution_strategy", "_v1_compile_was_called")
# Converted models fail the same way again, but rebuilding one would lose its weights.
_CONVERTED: weakref.WeakSet = weakref.WeakSet()


def _convert(keras_model, model_dir, config, custom_objects, checkpoint_format):
    try:
        with _quiet_keras():
            return tf2.keras.estimator.model_to_estimator(
                keras_model=keras_model,
                model_dir=model_dir,
                config=config,
                custom_objects=dict(custom_objects) if custom_objects else None,
                checkpoint_format=checkpoint_format,
            )
    except AttributeError as e:
        if not any(name in str(e) for name in _BUILT_BEFORE_A_CONVERSION):
            raise
        if keras_model in _CONVERTED:
            raise TfestKitError(
                f"`keras_model` {keras_model.name!r} was already converted in this process, "
                "which switched Keras to graph mode: keep using the first Estimator, or "
                "keras_model.save_weights(path), build and compile the model again, "
                f"new_model.load_weights(path), to_estimator(new_model). Got: {e}"
            ) from e
        raise TfestKitError(
            "`keras_model` was built before another model was converted in this process, "
            "which switched Keras to graph mode: build (or load) this model after that "
            f"to_estimator call, or convert it in a new process. Got: {e}"
        ) from e
    except (TypeError, ValueError) as e:
        if "vocabulary size cannot be changed" in str(e):
            raise ValueError(
                "`keras_model` has a lookup layer with a vocabulary and an output_mode other "
                "than 'int', which Keras cannot rebuild in graph mode. Use output_mode='int' "
                f"and tf.one_hot after it. Got: {str(e).splitlines()[0]}"
            ) from e
        name = _missing_object_name(str(e))
        if name is None:
            raise
        raise ValueError(
            f"`keras_model` uses a custom object {name!r} that Keras cannot rebuild from its "
            f"config. Pass it to to_estimator: custom_objects={{{name!r}: {name}}}"
        ) from e


def _missing_object_name(message: str) -> Optional[str]:
    # "Unknown activation function '{…'config': 'swishy'…", "Unknown layer: 'Scale'".
    patterns = (
        r"Unknown [\w ]+?'\{[^}]*'config': '([\w.]+)'",
        r"Unknown [\w ]+?:\s*'?([\w.]+)'?",
        r"Unknown [\w ]+? '([\w.]+)'",
    )
    matches = (re.search(pattern, message) for pattern in patterns)
    return next((match.group(1) for match in matches if match), None)


def _adapting_model_fn(official_model_fn, keras_model, metric_names):
    input_names = list(getattr(keras_model, "input_names", None) or [])
    output_names = list(getattr(keras_model, "output_names", None) or [])
    input_keys = _dict_keys_to_names(getattr(keras_model, "_nested_inputs", None), input_names)
    output_keys = _dict_keys_to_names(getattr(keras_model, "_nested_outputs", None), output_names)

    def model_fn(features, labels, mode, config):
        features, sample_weights = _split_sample_weights(features, input_names)
        features = _keyed_by_names(features, input_keys)
        if mode == tf.estimator.ModeKeys.PREDICT:
            # PREDICT's uncompiled clone fails on them ("no attribute '_training_endpoints'").
            sample_weights = None
        elif labels is None:  # else a 4,000-character graph error at node 'y_target'
            method = "train" if mode == tf.estimator.ModeKeys.TRAIN else "evaluate"
            raise ValueError(
                f"The input_fn passed to {method} yields no labels: it must yield (features, "
                "labels), e.g. tf.data.Dataset.from_tensor_slices((x, y)), with the labels of "
                f"the Keras model's outputs {output_names}. Got: features only."
            )
        if input_names:
            features = _adapt_features(features, input_names)
        elif isinstance(keras_model, tf2.keras.Sequential) and isinstance(features, Mapping):
            features = _unbuilt_sequential_features(dict(features))
        if sample_weights is not None:
            # Re-wrapped after adapting: renaming the keys of the outer dict would make the
            # official model_fn take the weights for one more feature and drop them.
            features = {_FEATURES_KEY: features, _SAMPLE_WEIGHTS_KEY: sample_weights}
        if isinstance(labels, Mapping) and output_names:
            labels = _adapt_labels(dict(_keyed_by_names(labels, output_keys)), output_names)
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
            # Hooks find the session's saver here (NanGuardHook); Estimator adds none of its
            # own when the Scaffold has one.
            tf.add_to_collection(tf.GraphKeys.SAVERS, saver)
        if spec.eval_metric_ops and metric_names:
            spec = spec._replace(
                eval_metric_ops=_renamed_metric_ops(
                    spec.eval_metric_ops, metric_names, output_names
                )
            )
        return spec

    return model_fn


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


def _check_loss_keys(keras_model) -> None:
    # The converter failed with "Unknown entries in loss dictionary".
    output_names = list(getattr(keras_model, "output_names", None) or [])
    keys = _dict_keys_to_names(getattr(keras_model, "_nested_outputs", None), output_names)
    compiled = _compile_args(keras_model)
    if compiled is None:
        return
    for argument in ("loss", "metrics", "weighted_metrics", "loss_weights"):
        value = compiled.get(argument)
        if isinstance(value, Mapping) and any(key in keys for key in value):
            raise ValueError(
                f"`keras_model` was compiled with {argument} keyed by its output dict's keys "
                f"{sorted(map(str, value))}, but the Estimator's graph-mode Keras knows the "
                f"outputs only by their layers' names {output_names}. Name each output layer "
                'like its key (e.g. Dense(1, name="score")) and convert that model.'
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
    rebuilt = _warm_start.FitCheckingSaver(
        config.model_dir,
        variables,
        var_list=saver._var_list,
        sharded=True,
        max_to_keep=config.keep_checkpoint_max,
        keep_checkpoint_every_n_hours=config.keep_checkpoint_every_n_hours,
        save_relative_paths=True,
    )
    rebuilt._object_restore_saver = saver._object_restore_saver
    return rebuilt


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


def _unbuilt_sequential_features(features: dict):
    if len(features) != 1:  # else "Unexpectedly found an instance of type dict"
        raise ValueError(
            f"features is a dict with keys {sorted(map(str, features))} but the Keras "
            "Sequential model has one input and, built without an input shape, no input name: "
            "yield one tensor (or a dict with one key), or give the first layer input_shape=..."
        )
    return next(iter(features.values()))


def _adapt_labels(labels: dict, output_names: list[str]):
    if all(name in labels for name in output_names):
        return labels
    if len(output_names) == 1 and len(labels) == 1:
        return next(iter(labels.values()))
    missing = [n for n in output_names if n not in labels]
    raise ValueError(
        "labels keys do not match the Keras model's outputs: expected "
        f"{output_names} (model.output_names, in output order), received "
        f"{sorted(map(str, labels))}, missing {missing}. Key the labels by the output layers' "
        "names, or yield a tuple in output order."
    )


def _normalise(name: str) -> str:
    name = name.lower().split(":")[0]
    return name[: -len("_input")] if name.endswith("_input") else name


def _adapt_features(features, input_names: list[str]):
    if isinstance(features, Mapping):
        return _adapt_dict(dict(features), input_names)
    if isinstance(features, Sequence) and not isinstance(features, (str, bytes)):
        if len(features) != len(input_names):
            raise ValueError(
                f"features is a {type(features).__name__} of {len(features)} tensors but the "
                f"Keras model has {len(input_names)} inputs {input_names}: yield one tensor per "
                "input, in that order, or a dict keyed by those names."
            )
        return dict(zip(input_names, features))
    if len(input_names) != 1:
        raise ValueError(
            f"features is a single tensor but the Keras model has {len(input_names)} inputs "
            f"{input_names}: yield a dict keyed by those names or a tuple in that order."
        )
    return {input_names[0]: features}


def _adapt_dict(features: dict, input_names: list[str]) -> dict:
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
        missing = [n for n in input_names if n not in adapted]
        raise ValueError(
            "features keys do not match the Keras model's inputs: expected "
            f"{input_names} (model.input_names, in input order), received "
            f"{sorted(map(str, features))}, missing {missing}. Rename the keys in the "
            "input_fn, name the keras.Input layers to match, or yield a tuple in input order."
        )
    return adapted


def _compile_args(keras_model) -> Optional[dict]:
    try:
        return keras_model._get_compile_args()
    except AttributeError:
        return None


def _warn_unweighted_metrics(keras_model) -> None:
    # Graph-mode Keras builds each weighted metric twice (weight 1, then sample_weights)
    # and Estimator runs the first update only.
    compiled = _compile_args(keras_model)
    weighted = compiled.get("weighted_metrics") if compiled else None
    names = [
        str(getattr(m, "name", None) or getattr(m, "__name__", m))
        for m in tf.nest.flatten(weighted)
        if m is not None  # flatten(None) is [None]
    ]
    if names:
        tf.logging.warning(
            "to_estimator: `keras_model` was compiled with weighted_metrics %s; the "
            "Estimator's evaluate reports them unweighted (only the loss is weighted), and not "
            "at all without metrics=. Compile them as metrics=, or evaluate them with "
            "keras_model.evaluate(..., sample_weight=...) before converting.",
            names,
        )


_FUNCTION_METRICS = ("accuracy", "acc", "crossentropy", "ce")


def _keras_metric_names(keras_model) -> dict:
    """``{compiled name: Keras' name}``; ``model.evaluate`` reports ``"AUC"`` as ``auc``,
    graph-mode Keras as ``AUC``. Call before Keras clones the model."""
    compiled = _compile_args(keras_model) or {}
    names = {}
    for metrics in (compiled.get("metrics"), compiled.get("weighted_metrics")):
        for metric in tf.nest.flatten(metrics):
            if isinstance(metric, tf2.keras.metrics.Metric):
                names.setdefault(metric.name, metric.name)
                continue
            # Keras makes these functions named by the string, as graph mode does.
            if not isinstance(metric, str) or metric.lower() in _FUNCTION_METRICS:
                continue
            try:
                made = tf2.keras.metrics.get(metric)
            except (ValueError, TypeError):
                continue
            if isinstance(made, tf2.keras.metrics.Metric) and made.name != metric:
                names[metric] = made.name
    return names


def _renamed_metric_ops(metric_ops: Mapping, metric_names: dict, output_names: list[str]) -> dict:
    renamed = {}
    for key, value in metric_ops.items():
        new = metric_names.get(key)
        for output in output_names if new is None and len(output_names) > 1 else ():
            # One prefix per clone ("cls_cls_auc" is "cls_auc"); the longest known name wins.
            rest = key
            while new is None and rest.startswith(f"{output}_"):
                rest = rest[len(output) + 1 :]
                if rest in metric_names:
                    new = f"{output}_{metric_names[rest]}"
            if new is not None:
                break
        renamed[key if new is None or new in metric_ops else new] = value
    return renamed


def _set_aside_stale_keras_checkpoint(model_dir: Optional[str], config: Optional[Any]) -> None:
    """Moves an earlier conversion's ``model_dir/keras`` aside (the converter kept its weights)
    before any training; renamed, as it may be the only copy, and by the chief only."""
    config_dir = getattr(config, "model_dir", None)
    if model_dir and config_dir and os.fspath(model_dir) != os.fspath(config_dir):
        return  # the converter refuses two different model_dirs
    model_dir = os.fspath(model_dir or config_dir)
    keras_dir = os.path.join(model_dir, "keras")
    if tf.train.latest_checkpoint(keras_dir) is None or tf.train.latest_checkpoint(model_dir):
        return
    if not (config or tf.estimator.RunConfig()).is_chief:
        return
    aside = stamped = f"{keras_dir}-replaced-{time.strftime('%Y%m%d-%H%M%S')}"
    suffix = 1
    while tf.io.gfile.exists(aside):  # converted twice within a second
        aside, suffix = f"{stamped}-{suffix}", suffix + 1
    tf.logging.warning(
        "to_estimator: moved %s, an earlier conversion's Keras weights, to %s (%s has no "
        "Estimator checkpoint yet) so that the Estimator starts from this model's weights.",
        keras_dir,
        aside,
        model_dir,
    )
    tf.io.gfile.rename(keras_dir, aside)


def _all_model_variables(warm_start_from):
    """A path as settings covering non-trainable weights too (Estimator's ``".*"`` does not)."""
    if isinstance(warm_start_from, bytes):
        warm_start_from = warm_start_from.decode()
    if not isinstance(warm_start_from, (str, os.PathLike)):
        return warm_start_from
    path = os.fspath(warm_start_from)
    if tf.io.gfile.exists(os.path.join(path, "variables", "variables.index")):
        path = os.path.join(path, "variables", "variables")  # a SavedModel, as Estimator reads it
    _check_checkpoint(path)
    return tf.estimator.WarmStartSettings(
        ckpt_to_initialize_from=path, vars_to_warm_start=[_MODEL_VARIABLES]
    )


def _matched_by_structure(settings, keras_ckpt: str):
    """Matches by structure, as ``load_weights`` does, when names differ (a model built
    again in one process has other layer names); a ValueError names missing weights."""
    path = settings.ckpt_to_initialize_from
    prefix = tf.train.latest_checkpoint(path) if tf.io.gfile.isdir(path) else path
    try:
        saved_names = object_graph_key_mapping(prefix)
        ours = object_graph_key_mapping(keras_ckpt)
    except tf.errors.NotFoundError:
        return settings  # a name-based checkpoint: warm-started by name, as Estimator does
    model = {name: key for name, key in ours.items() if re.match(_MODEL_VARIABLES, f"{name}:0")}
    if all(name in saved_names for name in model):
        return settings
    saved_shapes = dict(tf.train.list_variables(prefix))
    our_shapes = dict(tf.train.list_variables(keras_ckpt))
    missing = sorted(key for key in model.values() if key not in saved_shapes)
    other_shape = sorted(
        f"{key} (checkpoint {saved_shapes[key]}, model {our_shapes[key]})"
        for key in model.values()
        if key in saved_shapes and list(saved_shapes[key]) != list(our_shapes[key])
    )
    if missing or other_shape:
        problems = [f"missing {missing[:5]}"] if missing else []
        problems += [f"of another shape {other_shape[:5]}"] if other_shape else []
        raise ValueError(
            "`warm_start_from` does not hold this model's weights, by name or by structure: "
            f"{'; '.join(problems)}. Pass a checkpoint of the same architecture. Got: {path!r}"
        )
    return settings._replace(var_name_to_prev_var_name=model)


def _check_checkpoint(path: str) -> None:
    if path.lower().endswith((".h5", ".hdf5", ".keras")):
        raise ValueError(
            f"`warm_start_from` must be a TensorFlow checkpoint or SavedModel, not a Keras "
            f"{os.path.splitext(path)[1]} file: call keras_model.load_weights(path) before "
            f"to_estimator instead. Got: {path!r}"
        )
    if tf.io.gfile.isdir(path) and tf.train.latest_checkpoint(path) is None:
        raise ValueError(
            "`warm_start_from` is a directory without a checkpoint or a SavedModel (pass a "
            f"model_dir, a prefix like .../model.ckpt-100 or a SavedModel). Got: {path!r}, "
            f"which contains {sorted(tf.io.gfile.listdir(path))[:10]}"
        )
    try:
        tf.train.load_checkpoint(path)
    except Exception as error:  # noqa: BLE001 - re-raised as the user's argument error
        first_line = (str(error).splitlines() or [""])[0]
        raise ValueError(
            "`warm_start_from` could not be read as a TensorFlow checkpoint. Got: "
            f"{path!r} ({type(error).__name__}: {first_line})"
        ) from error
