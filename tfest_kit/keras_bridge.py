"""Keras model -> Estimator, with input-name adaptation and a warm start that keeps every weight.

:func:`to_estimator` wraps ``tf.keras.estimator.model_to_estimator`` (Keras 2.15) and fixes the
three things that make the official converter hard to use:

* Input names.  The official ``model_fn`` wants ``features`` to be a dict keyed exactly by
  ``model.input_names`` (``"dense_input"``, ``"input_1"`` …) and otherwise fails with a
  ``KeyError`` whose message shows escaped newlines.  The returned Estimator also accepts a bare
  tensor (single-input model), a tuple / list in input order, or a dict whose keys match after
  dropping an ``_input`` suffix, or whose only key feeds a single-input model; anything else
  raises one readable ``ValueError`` listing the expected and received keys.
* Non-trainable weights.  The official Estimator warm-starts from the Keras weights with
  ``vars_to_warm_start=".*"``, which only covers *trainable* variables: frozen layers and
  BatchNormalization moving statistics start from their initialisers, so the Estimator's
  predictions differ from ``model.predict``.  Here every variable is warm-started.
* Errors.  An uncompiled model, a subclassed model with object-based checkpoints, labels keyed
  differently from the outputs, a missing custom object or Keras 3 each get one message that
  says what to do.

Example:

    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])
    model.compile("adam", tf.keras.losses.BinaryCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    est = to_estimator(model, model_dir="/tmp/keras_est")
    est.train(lambda: tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(32),
              steps=100)
    est.evaluate(eval_input_fn)          # {"accuracy": ..., "loss": ..., "global_step": 100}
"""

from __future__ import annotations

import functools
import inspect
import numbers
import os
import re
import tempfile
import warnings
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, Optional, Union

from tfest_kit import _keras_metrics, _keras_warm_start, _model_dir, _warm_start, logs
from tfest_kit._errors import TfestKitError
from tfest_kit._eval_guard import EvalGuard
from tfest_kit._model_dir import saved_step
from tfest_kit._task_guard import check_direct_call
from tfest_kit._tf import tf, tf2
from tfest_kit._tf_config import check_tf_config_json

__all__ = ["to_estimator", "check_keras_version"]

_INSTALL = "pip install tensorflow==2.15.1 tensorflow-estimator==2.15.0 keras==2.15.0"
# The official model_fn reads Keras sample weights only from features that are exactly
# {"features": <features>, "sample_weights": <weights>}; any other dict is all features.
_FEATURES_KEY = "features"
_SAMPLE_WEIGHTS_KEY = "sample_weights"
_CHECKPOINT_FORMATS = ("checkpoint", "saver")
# Keras 2 prints these from inside the official model_fn on every call; they say nothing the
# user can act on (the estimator path has to set the learning phase).
_NOISY_WARNINGS = (r".*set_learning_phase.*", r".*Model\.state_updates.*")


def check_keras_version(version: str) -> None:
    """Raises TfestKitError unless ``version`` is a Keras 2 that can build Estimators.

    Args:
      version: a Keras version string, e.g. ``keras.__version__``.

    Raises:
      TfestKitError: for Keras 3 or later (it has no ``model_to_estimator``); the message names
        the versions to install.

    Example:

        import keras
        check_keras_version(keras.__version__)
    """
    match = re.match(r"(\d+)", version or "")
    if match is None or int(match.group(1)) >= 3:
        raise TfestKitError(
            f"to_estimator needs Keras 2 (tf.keras 2.15); found Keras {version}, which has no "
            f"model_to_estimator (Keras 3 / TensorFlow >= 2.16 removed it). Install: {_INSTALL}"
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

    Right after conversion the Estimator predicts what ``keras_model.predict`` does (all weights,
    frozen ones and BatchNormalization statistics included, are warm-started), and
    ``evaluate`` reports the compiled Keras metrics under their Keras names (``"accuracy"``,
    ``"binary_accuracy"`` …) plus ``"loss"``.  PREDICT returns a dict keyed by
    ``keras_model.output_names``; export with any ``tfest_kit.serving`` receiver.

    Call ``keras_model.predict`` before converting if you need it: the conversion switches
    Keras into graph mode, after which models built earlier cannot be used eagerly.

    Caveat: converting again into a ``model_dir`` that has no Estimator checkpoint yet moves
    the ``model_dir/keras`` of the earlier conversion aside (to ``keras-replaced-<time>``, with
    a warning) and writes this model's weights (the official converter would keep the old
    ones).  Once it has one, the Estimator resumes from that checkpoint and the Keras weights
    are not used: pass a new ``model_dir`` to start from this model's weights.

    Caveat: ``weighted_metrics`` are reported unweighted by ``evaluate`` (the loss is
    weighted), or not at all without ``metrics=``; ``to_estimator`` warns when the model has
    any.

    Args:
      keras_model: a compiled ``tf.keras.Model``: Sequential, functional, or subclassed (only
        with ``checkpoint_format="saver"``; its weights are not carried over, the Estimator
        starts from freshly initialised ones).
      model_dir: where checkpoints go; a new temporary directory when it and
        ``config.model_dir`` are both unset.
      config: a ``tf.estimator.RunConfig``. It and the arguments after it are keyword-only:
        the official ``model_to_estimator`` takes ``keras_model_path`` and ``custom_objects``
        in these places, so a call ported from it would pass them as something else.
      custom_objects: ``{name: object}`` for custom activations, layers, losses … used by the
        model, as for ``tf.keras.models.load_model``.
      checkpoint_format: ``"checkpoint"`` (object-based, the default) or ``"saver"``.
      warm_start_from: a checkpoint path, SavedModel directory or
        ``tf.estimator.WarmStartSettings`` used instead of the Keras weights.  From a path,
        every model variable is warm-started (BatchNormalization statistics and frozen layers
        too), the global step and the optimizer's variables are not; an object-based
        checkpoint (``save_weights``) whose variable names differ (layers named
        automatically) is matched by the model's structure, as ``load_weights`` does.
        Estimator exports from a checkpoint in ``model_dir`` or else restores the whole graph
        from this path, which fails ("Could not load all requested variables") for a
        ``save_weights`` checkpoint: train before ``export_saved_model``, or
        ``keras_model.load_weights(path)`` before converting instead of passing the path here.

    Returns:
      A ``tf.estimator.Estimator`` whose ``input_fn``s may yield features as a dict, a tuple /
      list in input order, or a bare tensor (single-input models).  Estimator reads a bare
      2-tuple from an ``input_fn`` as ``(features, labels)``, so tuple features always travel
      as ``((a, b), labels)``, also for ``predict`` (which ignores the labels).  Keras sample
      weights travel as in the official converter, ``{"features": <any of those>,
      "sample_weights": w}``, or as one more key ``"sample_weights"`` of a features dict
      (``predict`` ignores them).  A model built with a dict of inputs / outputs takes features
      and labels keyed by that dict's keys or by the Input / output layers' names; a tuple
      follows the sorted keys, and ``predict`` keys its results by the output layers' names.

    Raises:
      TypeError: if ``keras_model`` is not a ``tf.keras.Model``.
      ValueError: if the model is not compiled, ``checkpoint_format`` is unknown (or
        ``"checkpoint"`` for a subclassed model), ``warm_start_from`` is a path without a
        checkpoint (or an object-based checkpoint without this model's weights), a custom
        object the model uses is missing from ``custom_objects``, the optimizer has no
        ``tf.keras.optimizers.legacy`` version (``AdamW``), a loss or metrics dict is keyed by
        a dict output's keys that are not its layers' names, or a preprocessing layer's
        vocabulary / bin boundaries came from ``adapt()`` (the Estimator rebuilds layers from
        their config, which does not hold them).
        While the Estimator runs: if the features or the labels cannot be matched to the
        model's inputs / outputs, or ``train`` / ``evaluate`` get features without labels.
      TfestKitError: on Keras 3 (no ``model_to_estimator``), for a model built before
        another model was converted in this process (build or load it after that one), or
        for a model converted before (save_weights, rebuild, load_weights, convert that).

    Example:

        model = tf.keras.Sequential([tf.keras.layers.Dense(1, input_shape=(4,))])
        model.compile("adam", tf.keras.losses.BinaryCrossentropy(from_logits=True),
                      metrics=["accuracy"])
        est = keras_bridge.to_estimator(model, model_dir="/tmp/keras_est")
        # features may be a bare tensor, a tuple in input order or a dict with any one key
        est.train(lambda: tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(32),
                  steps=100)
    """
    # tf.keras has no __version__; in TensorFlow 2.15 it is the installed `keras` package.
    import keras

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
    if subclassed and checkpoint_format == "checkpoint":
        # The official message says only "not supported"; name the way out and its cost.
        raise ValueError(
            f"`keras_model` {keras_model.name!r} is a subclassed Model, which the Keras converter "
            'supports only with checkpoint_format="saver"; the Estimator then starts from '
            "freshly initialised weights (Keras cannot carry a subclassed model's weights "
            'over). Got: checkpoint_format="checkpoint". Pass checkpoint_format="saver", or '
            "build the model with keras.Input and the functional API to keep its weights."
        )
    check_tf_config_json()  # the converter's RunConfig() would raise a bare JSONDecodeError
    if model_dir is None and (config is None or config.model_dir is None):
        model_dir = tempfile.mkdtemp(prefix="tfest_kit_keras_")
        tf.logging.info("to_estimator: using temporary model_dir %s", model_dir)

    _check_optimizer(keras_model.optimizer)
    _check_preprocessing_state(keras_model)
    _keras_metrics.warn_unweighted_metrics(keras_model)
    _check_loss_keys(keras_model)
    from_path = isinstance(warm_start_from, (str, bytes, os.PathLike))
    if warm_start_from is not None:
        warm_start_from = _keras_warm_start.all_model_variables(
            warm_start_from
        )  # checked before writing anything
    _keras_warm_start.set_aside_stale_keras_checkpoint(model_dir, config)
    metric_names = _keras_metrics.keras_metric_names(keras_model)  # before Keras clones it
    official = _convert(keras_model, model_dir, config, custom_objects, checkpoint_format)
    _CONVERTED.add(keras_model)
    keras_ckpt = tf.train.latest_checkpoint(os.path.join(official.model_dir, "keras"))
    resuming = tf.train.latest_checkpoint(official.model_dir) is not None  # no warm start then
    if from_path and keras_ckpt and not resuming:
        warm_start_from = _keras_warm_start.matched_by_structure(warm_start_from, keras_ckpt)
    elif warm_start_from is None and keras_ckpt:
        # A list (not the official ".*" string) also matches non-trainable variables.
        warm_start_from = tf.estimator.WarmStartSettings(
            ckpt_to_initialize_from=keras_ckpt, vars_to_warm_start=[".*"]
        )
    # The raw Keras model_fn, not the public `official.model_fn` wrapper: that one goes through
    # the official Estimator's _call_model_fn, which would log "Calling model_fn" a second time.
    raw_model_fn = getattr(official, "_model_fn", None)
    if raw_model_fn is None:
        raw_model_fn = official.model_fn
    with logs.quieted():  # the converter already logged this config
        est = tf.estimator.Estimator(
            model_fn=_adapting_model_fn(raw_model_fn, keras_model, metric_names),
            model_dir=official.model_dir,
            config=official.config,
            warm_start_from=warm_start_from,
        )
    _refuse_direct_calls_on_cluster_tasks(est)
    if checkpoint_format == "checkpoint":
        _skip_training_already_done(est)
    _guard(est)
    return est


def _guard(est) -> None:
    """``est.train`` in ``_model_dir.training`` (one writer, an intact checkpoint); an EvalGuard.

    ``est.evaluate`` gets the ``EvalGuard`` TPUEstimator.evaluate adds: no endless read of a
    ``repeat()``ed input, and a line now and then while an input of unknown length goes on.
    """
    official_train = est.train

    @functools.wraps(official_train)
    def train(input_fn, hooks=None, steps=None, max_steps=None, saving_listeners=None):
        with _model_dir.training(est) as counter:
            return official_train(
                input_fn,
                hooks=[*(hooks or ()), counter],
                steps=steps,
                max_steps=max_steps,
                saving_listeners=saving_listeners,
            )

    est.train = train
    official_evaluate = est.evaluate

    @functools.wraps(official_evaluate)
    def evaluate(input_fn, steps=None, hooks=None, checkpoint_path=None, name=None):
        hooks = list(hooks or ())
        if not any(isinstance(hook, EvalGuard) for hook in hooks):  # train_and_evaluate's
            hooks.append(EvalGuard(steps, "steps", "input_fn"))
        return official_evaluate(
            input_fn, steps=steps, hooks=hooks, checkpoint_path=checkpoint_path, name=name
        )

    est.evaluate = evaluate


def _refuse_direct_calls_on_cluster_tasks(est) -> None:
    """``est.train`` / ``est.evaluate`` name the cluster task that cannot run them by itself.

    See ``tfest_kit._task_guard``: TensorFlow's error showed a ``RunConfig`` repr, or a chief
    whose server nothing started waited forever.
    """
    official_train, official_evaluate = est.train, est.evaluate

    @functools.wraps(official_train)
    def train(*args, **kwargs):
        check_direct_call(est.config, "train")
        return official_train(*args, **kwargs)

    @functools.wraps(official_evaluate)
    def evaluate(*args, **kwargs):
        check_direct_call(est.config, "evaluate")
        return official_evaluate(*args, **kwargs)

    est.train, est.evaluate = train, evaluate


def _skip_training_already_done(est) -> None:
    """Makes ``est.train(max_steps=N)`` a no-op on a model_dir already at step N.

    That is what it is for every other Estimator. Estimator reads the step back by its TF1
    name and finds none in an object-based checkpoint, so it took the step for 0, started,
    and trained one step past ``max_steps`` before its stop hook saw the restored step. The
    official ``train`` still does the work.
    """
    official_train = est.train

    @functools.wraps(official_train)
    def train(input_fn, hooks=None, steps=None, max_steps=None, saving_listeners=None):
        # The official train checks its arguments and the task type first; leave those to it.
        if (
            steps is None
            and isinstance(max_steps, numbers.Integral)  # np.int64 too
            and max_steps > 0
            and est.config.task_type not in ("evaluator", "ps")
        ):
            step = saved_step(est.model_dir)
            if step and max_steps <= step:
                tf.logging.info("Skipping training since max_steps has already saved.")
                return est
        return official_train(
            input_fn,
            hooks=hooks,
            steps=steps,
            max_steps=max_steps,
            saving_listeners=saving_listeners,
        )

    est.train = train


def _check_optimizer(optimizer) -> None:
    """Refuses an optimizer the converter cannot rebuild.

    The Estimator path runs Keras's legacy (v1) optimizers: the converter replaces a new one
    by its legacy namesake, and fails with "type object 'str' has no attribute 'from_config'"
    for one that has none (AdamW, Lion, Adafactor …).
    """
    optimizers = tf2.keras.optimizers
    if isinstance(optimizer, optimizers.legacy.Optimizer) or not isinstance(
        optimizer, optimizers.Optimizer
    ):
        return
    name = type(optimizer).__name__
    if not hasattr(optimizers.legacy, name):
        raise ValueError(
            f"`keras_model` is compiled with the optimizer {name}, which has no "
            "tf.keras.optimizers.legacy version; Keras converts models to Estimators with the "
            "legacy optimizers only. Compile with one of them, e.g. "
            "tf.keras.optimizers.legacy.Adam (for AdamW's decoupled weight decay, add an L2 "
            "penalty to the loss or use a model_fn builder with your own optimizer)."
        )


def _check_preprocessing_state(keras_model) -> None:
    """Refuses preprocessing layers whose adapted state the Estimator would not have.

    The converter rebuilds every layer from its config. A vocabulary or bin boundaries found
    by ``adapt()`` are not in the config (nor in the weights the Estimator starts from), so
    the rebuilt lookup layers fail with "Table not initialized", an adapted
    ``TextVectorization`` fails to convert, and a ``Discretization`` silently puts every value
    in bin 0. Given at construction, the same state is in the config and carried over.

    Raises:
      ValueError: naming the layer and the constructor argument that carries its state.
    """
    layers = tf2.keras.layers
    lookups = (layers.StringLookup, layers.IntegerLookup, layers.TextVectorization)
    for layer in keras_model.submodules:
        try:
            config = layer.get_config()
        except Exception:  # noqa: BLE001 - not ours to judge; the conversion will say
            continue
        kind = type(layer).__name__
        if isinstance(layer, lookups) and config.get("vocabulary") is None:
            if not layer.get_vocabulary(include_special_tokens=False):
                continue
            state, consequence = "vocabulary", "its lookups would fail (or the conversion would)"
            argument = "vocabulary=layer.get_vocabulary(include_special_tokens=False)"
        elif isinstance(layer, layers.Discretization) and config.get("bin_boundaries") is None:
            if not layer.bin_boundaries:
                continue
            state, consequence = "bin boundaries", "every value would fall in bin 0"
            argument = "bin_boundaries=layer.bin_boundaries"
        else:
            continue
        raise ValueError(
            f"`keras_model`'s {kind} layer {layer.name!r} got its {state} from adapt(). "
            f"The Estimator rebuilds layers from their config, which does not hold it: "
            f"{consequence}. Build the layer with {kind}({argument}, …) before the model, or "
            "move this preprocessing into the input_fn."
        )


# The attributes an eager-built model lacks once an earlier conversion went to graph mode.
_BUILT_BEFORE_A_CONVERSION = ("_compile_time_distribution_strategy", "_v1_compile_was_called")
# Models converted in this process: converting one again fails like a model built before a
# conversion, but rebuilding it (what that message advises) would lose its weights.
_CONVERTED: weakref.WeakSet = weakref.WeakSet()


def _convert(keras_model, model_dir, config, custom_objects, checkpoint_format):
    """Calls the official converter, naming a missing custom object if that is what fails."""
    try:
        with warnings.catch_warnings():
            for message in _NOISY_WARNINGS:
                warnings.filterwarnings("ignore", message=message)
            return tf2.keras.estimator.model_to_estimator(
                keras_model=keras_model,
                model_dir=model_dir,
                config=config,
                custom_objects=dict(custom_objects) if custom_objects else None,
                checkpoint_format=checkpoint_format,
            )
    except AttributeError as e:
        # Which private attribute is missing depends on where the conversion starts (inside a
        # user's tf.Graph().as_default() it is "_v1_compile_was_called").
        if not any(name in str(e) for name in _BUILT_BEFORE_A_CONVERSION):
            raise
        if keras_model in _CONVERTED:
            raise TfestKitError(
                f"`keras_model` {keras_model.name!r} was already converted by an earlier "
                "to_estimator call in this process, which switched Keras to graph mode: Keras "
                "can no longer read this model's weights to convert it again. Keep using the "
                "first Estimator (it trains, evaluates and predicts any number of times), or, "
                "for a new model_dir, keras_model.save_weights(path), then build and compile "
                "the model again, call new_model.load_weights(path) and "
                f"to_estimator(new_model, ...). Got: {type(e).__name__}: {e}"
            ) from e
        # Keras cannot read the weights of a model built in eager mode once an earlier
        # conversion in this process has switched it to graph mode.
        raise TfestKitError(
            "`keras_model` was built before another model was converted in this process: the "
            "earlier conversion switched Keras to graph mode, and Keras can no longer read the "
            "weights of models built before it. Build (or load) this model after the earlier "
            "to_estimator call, or convert it in a new process. "
            f"Got: {type(e).__name__}: {e}"
        ) from e
    except (TypeError, ValueError) as e:
        if "vocabulary size cannot be changed" in str(e):
            raise ValueError(
                "`keras_model` has a lookup layer (StringLookup / IntegerLookup) with a "
                "vocabulary and an output_mode other than 'int', which Keras cannot rebuild "
                "in graph mode for the Estimator. Use output_mode='int' and tf.one_hot (or a "
                f"CategoryEncoding layer) after it. Got: {type(e).__name__}: "
                f"{str(e).splitlines()[0]}"
            ) from e
        name = _missing_object_name(str(e))
        if name is None:
            raise
        raise ValueError(
            f"`keras_model` uses a custom object {name!r} that Keras cannot rebuild from its "
            f"config. Pass it to to_estimator: custom_objects={{{name!r}: {name}}}"
        ) from e


def _missing_object_name(message: str) -> Optional[str]:
    """The name Keras could not deserialize, parsed from its error message, or None."""
    if "unknown" not in message.lower():
        return None
    patterns = (
        # Keras 2.15 functions: "Unknown activation function '{... 'config': 'swishy' ...}'"
        r"Unknown [\w ]+?'\{[^}]*'config': '([\w.]+)'",
        # Layers, losses, older messages: "Unknown layer: 'Scale'" / "Unknown loss function: foo"
        r"Unknown [\w ]+?:\s*'?([\w.]+)'?",
        r"Unknown [\w ]+? '([\w.]+)'",
    )
    for pattern in patterns:
        match = re.search(pattern, message)
        if match:
            return match.group(1)
    return None


def _adapting_model_fn(official_model_fn, keras_model, metric_names):
    """Wraps the official model_fn so features / labels reach it keyed the way Keras wants."""
    input_names = list(getattr(keras_model, "input_names", None) or [])
    output_names = list(getattr(keras_model, "output_names", None) or [])
    input_keys = _dict_keys_to_names(getattr(keras_model, "_nested_inputs", None), input_names)
    output_keys = _dict_keys_to_names(getattr(keras_model, "_nested_outputs", None), output_names)

    def model_fn(features, labels, mode, config):
        features, sample_weights = _split_sample_weights(features, input_names)
        features = _keyed_by_names(features, input_keys)
        if mode == tf.estimator.ModeKeys.PREDICT:
            # The official model_fn compiles the weights into the loss, which PREDICT's
            # uncompiled clone lacks ("no attribute '_training_endpoints'"); predictions
            # do not depend on them.
            sample_weights = None
        elif labels is None:
            # Otherwise Keras feeds its label placeholder nothing: a 4,000-character graph
            # error at node 'y_target'.
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
        with warnings.catch_warnings():
            for message in _NOISY_WARNINGS:
                warnings.filterwarnings("ignore", message=message)
            if "config" in _arg_names(official_model_fn):
                spec = official_model_fn(features, labels, mode, config)
            else:
                spec = official_model_fn(features, labels, mode)
        saver = spec.scaffold.saver
        if saver is not None and hasattr(saver, "_object_restore_saver"):
            # The object-based restore assigns a saved value of another shape without a
            # word: an edited model resumed in the old model_dir trained and exported the
            # old layer sizes. Checked under the names the checkpoint uses.
            keys = _checkpoint_keys(saver)
            _warm_start.check_model_dir(config.model_dir, variables=keys, mode=mode)
            saver = _saver_as_configured(saver, config, keys)
            spec = spec._replace(scaffold=tf.train.Scaffold(saver=saver))
        if saver is not None and saver not in tf.get_collection(tf.GraphKeys.SAVERS):
            # The object-based checkpoint's saver lives in the Scaffold only; hooks find the
            # session's saver in this collection (NanGuardHook sets aside what it saved after
            # a NaN step), and Estimator adds none of its own when the Scaffold has one.
            tf.add_to_collection(tf.GraphKeys.SAVERS, saver)
        if spec.eval_metric_ops and metric_names:
            spec = spec._replace(
                eval_metric_ops=_keras_metrics.renamed_metric_ops(
                    spec.eval_metric_ops, metric_names, output_names
                )
            )
        return spec

    return model_fn


def _dict_keys_to_names(nested, names: list[str]) -> dict:
    """``{dict key: input / output name}`` for a model built with a dict of inputs / outputs.

    Keras' own ``fit`` / ``predict`` take such a model's data keyed by the dict's keys, the
    official model_fn only by the names of the Input / output layers; both orders are the
    flattened (sorted-key) order.
    """
    if not isinstance(nested, Mapping) or len(nested) != len(names):
        return {}
    keys = tf.nest.flatten({key: key for key in nested})
    return {key: name for key, name in zip(keys, names) if key != name}


def _keyed_by_names(values, keys_to_names: dict):
    """``values`` with the model's dict keys replaced by the layer names they stand for."""
    if not keys_to_names or not isinstance(values, Mapping):
        return values
    names = set(keys_to_names.values())
    # A key that is the layer name of another input, and not a dict key, means the values are
    # keyed by the layer names. Otherwise the dict's keys win, as in Keras' own fit / predict:
    # with keys {"a", "b"} naming layers "b", "a", {"a": …} goes to the layer named "b".
    if any(key in names and key not in keys_to_names for key in values):
        return values
    return {keys_to_names.get(key, key): value for key, value in values.items()}


def _check_loss_keys(keras_model) -> None:
    """Refuses a loss / metrics dict keyed by a dict output's keys, not its layers' names.

    Raises:
      ValueError: naming the keys and the output layers' names ("Unknown entries in loss
        dictionary" from inside the converter otherwise).
    """
    output_names = list(getattr(keras_model, "output_names", None) or [])
    keys = _dict_keys_to_names(getattr(keras_model, "_nested_outputs", None), output_names)
    compiled = _keras_metrics.compile_args(keras_model)
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
    """Checkpoint key -> variable for the variables of an object-based checkpoint's saver."""
    keys = {}
    for saveable in saver._var_list:  # TrackableSaveables, one spec per variable
        specs, variable = getattr(saveable, "specs", ()), getattr(saveable, "op", None)
        if len(specs) == 1 and isinstance(getattr(variable, "shape", None), tf.TensorShape):
            keys[specs[0].name] = variable
    return keys


def _saver_as_configured(saver, config, variables: dict):
    """The object-based checkpoint's saver, keeping checkpoints as ``config`` says.

    The official model_fn builds it with ``Saver``'s defaults and puts it in the Scaffold, so
    Estimator builds none of its own: ``keep_checkpoint_max`` was ignored (5 were kept
    whatever it said, and ``None`` deleted all but 5) and the ``checkpoint`` file held
    absolute paths, which break when the model_dir is moved. Rebuilt here with the settings
    of Estimator's own saver, over the same variables and the same object-graph restore.
    """
    # Checks the checkpoint it restores: evaluate / predict / export may be given another
    # than model_dir's latest, which check_model_dir checks for training.
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
    """Returns ``(features, sample_weights)``; ``sample_weights`` is None when there are none.

    Takes the official form ``{"features": <features>, "sample_weights": w}`` and also a
    features dict with one more key ``"sample_weights"`` (unless the model has an input of that
    name), which the official model_fn would treat as an unused feature.
    """
    if not isinstance(features, Mapping) or _SAMPLE_WEIGHTS_KEY not in features:
        return features, None
    if set(features) == {_FEATURES_KEY, _SAMPLE_WEIGHTS_KEY}:
        return features[_FEATURES_KEY], features[_SAMPLE_WEIGHTS_KEY]
    if _SAMPLE_WEIGHTS_KEY in input_names:
        return features, None
    features = dict(features)
    return features, features.pop(_SAMPLE_WEIGHTS_KEY)


def _unbuilt_sequential_features(features: dict):
    """The one input of a Sequential model built without an input shape (it has no input name).

    Raises:
      ValueError: if ``features`` has more than one key.
    """
    if len(features) != 1:
        # The official clone would fail with "Unexpectedly found an instance of type dict".
        raise ValueError(
            f"features is a dict with keys {sorted(map(str, features))} but the Keras "
            "Sequential model has one input and, built without an input shape, no input name: "
            "yield one tensor (or a dict with one key), or give the first layer input_shape=..."
        )
    return next(iter(features.values()))


def _adapt_labels(labels: dict, output_names: list[str]):
    """Returns ``labels`` as the official model_fn wants them, or raises a readable error.

    Raises:
      ValueError: if the keys do not cover ``output_names``.
    """
    if all(name in labels for name in output_names):
        return labels
    if len(output_names) == 1 and len(labels) == 1:
        return next(iter(labels.values()))
    # Otherwise the official model_fn raises a KeyError whose message shows escaped newlines.
    missing = [n for n in output_names if n not in labels]
    raise ValueError(
        "labels keys do not match the Keras model's outputs: expected "
        f"{output_names} (model.output_names, in output order), received "
        f"{sorted(map(str, labels))}, missing {missing}. Key the labels by the output layers' "
        "names, or yield a tuple in output order."
    )


def _arg_names(fn) -> tuple:
    return tuple(inspect.signature(fn).parameters)


def _normalise(name: str) -> str:
    name = name.lower().split(":")[0]
    return name[: -len("_input")] if name.endswith("_input") else name


def _adapt_features(features, input_names: list[str]):
    """Returns ``features`` as a dict keyed by ``input_names``.

    Raises:
      ValueError: if the structure or the keys cannot be matched to the model's inputs.
    """
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
        adapted = features
    else:
        adapted = {}
        for name in input_names:
            if name in features:
                adapted[name] = features[name]
                continue
            matches = [k for k in features if _normalise(str(k)) == _normalise(name)]
            if len(matches) == 1:
                adapted[name] = features[matches[0]]
        if len(adapted) < len(input_names) and len(input_names) == 1 and len(features) == 1:
            adapted = {input_names[0]: next(iter(features.values()))}
        if len(adapted) < len(input_names):
            missing = [n for n in input_names if n not in adapted]
            raise ValueError(
                "features keys do not match the Keras model's inputs: expected "
                f"{input_names} (model.input_names, in input order), received "
                f"{sorted(map(str, features))}, missing {missing}. Rename the keys in the "
                "input_fn, name the keras.Input layers to match, or yield a tuple in input order."
            )
    return adapted
