"""Where a converted Keras model's weights come from: ``model_dir/keras`` or ``warm_start_from``.

The official ``model_to_estimator`` warm-starts the Estimator from the Keras weights it writes
to ``model_dir/keras``, or from ``warm_start_from``. These helpers check that path before
anything is written, widen the warm start to every model variable, match an object-based
checkpoint by the model's structure when its variable names differ, and move a stale
``model_dir/keras`` aside. Only :mod:`tfest_kit.keras_bridge` uses them.
"""

from __future__ import annotations

import os
import re
import time
from typing import Any, Optional

from tfest_kit._tf import object_graph_key_mapping, tf

__all__ = ["all_model_variables", "matched_by_structure", "set_aside_stale_keras_checkpoint"]

# Matched against graph variable names ("dense/kernel:0"): every variable but the global step
# and the Keras optimizer's slots and hyper-parameters, which it creates under "training/".
MODEL_VARIABLES = r"(?!global_step:|training/)"


def set_aside_stale_keras_checkpoint(model_dir: Optional[str], config: Optional[Any]) -> None:
    """Moves ``model_dir/keras`` of an earlier conversion aside when no training has started.

    The official converter writes the Keras weights to ``model_dir/keras`` only if no checkpoint
    is there yet, so converting again (after more ``fit``, ``load_weights``, or a re-run of a
    script that stopped before the first Estimator checkpoint) would warm-start the old weights.
    Once ``model_dir`` holds an Estimator checkpoint, Estimator resumes from it and ignores any
    warm start, so ``keras/`` is left alone.  It is renamed, not deleted: those weights may be
    the only copy of the earlier model.  In a cluster only the chief moves it: its session
    initialises the variables, and the other tasks may be reading it while they build their
    graphs.
    """
    config_dir = getattr(config, "model_dir", None)
    if model_dir and config_dir and os.fspath(model_dir) != os.fspath(config_dir):
        return  # the converter refuses two different model_dirs; nothing may be removed first
    model_dir = os.fspath(model_dir or config_dir)
    keras_dir = os.path.join(model_dir, "keras")
    if tf.train.latest_checkpoint(keras_dir) is None or tf.train.latest_checkpoint(model_dir):
        return
    if not (config or tf.estimator.RunConfig()).is_chief:
        return
    stamped = f"{keras_dir}-replaced-{time.strftime('%Y%m%d-%H%M%S')}"
    aside, suffix = stamped, 1
    while tf.io.gfile.exists(aside):  # converted twice within a second
        aside, suffix = f"{stamped}-{suffix}", suffix + 1
    tf.logging.warning(
        "to_estimator: %s holds the Keras weights of an earlier conversion and %s no "
        "Estimator checkpoint yet; moved it to %s so that the Estimator starts from this "
        "model's weights.",
        keras_dir,
        model_dir,
        aside,
    )
    tf.io.gfile.rename(keras_dir, aside)


def all_model_variables(warm_start_from):
    """Turns a warm-start path into settings that also cover the non-trainable weights.

    Estimator reads a bare path as ``vars_to_warm_start=".*"``, which matches only trainable
    variables: BatchNormalization statistics and frozen layers would start from their
    initialisers.  The global step and the optimizer's variables (under ``training/``) stay
    fresh, as in an official warm start.  ``WarmStartSettings`` are the caller's choice and
    pass through unchanged.

    Raises:
      ValueError: if the path holds no checkpoint (Estimator would fail only in ``train``, with
        "Expected binary or unicode string, got None" for a directory).
    """
    if isinstance(warm_start_from, bytes):
        warm_start_from = warm_start_from.decode()
    if not isinstance(warm_start_from, (str, os.PathLike)):
        return warm_start_from
    path = os.fspath(warm_start_from)
    if tf.io.gfile.exists(os.path.join(path, "variables", "variables.index")):
        path = os.path.join(path, "variables", "variables")  # a SavedModel, as Estimator reads it
    _check_checkpoint(path)
    return tf.estimator.WarmStartSettings(
        ckpt_to_initialize_from=path, vars_to_warm_start=[MODEL_VARIABLES]
    )


def matched_by_structure(settings, keras_ckpt: str):
    """Warm-starts from an object-based checkpoint by the model's structure, if names differ.

    Estimator finds an object-based checkpoint's values by the variable names they were saved
    under (``dense/kernel``), but a model built again in one process gets other automatic
    layer names (``dense_4/kernel``), and the warm start failed at the first ``train`` /
    ``predict``. ``keras_model.load_weights`` matches by the model's structure
    (``layer_with_weights-0/kernel/…``) instead; so does this, reading the keys of this
    model's variables from the Keras checkpoint the converter wrote (``keras_ckpt``).

    Raises:
      ValueError: naming ``warm_start_from`` if the checkpoint lacks some of the model's
        weights or holds them with other shapes.
    """
    path = settings.ckpt_to_initialize_from
    prefix = tf.train.latest_checkpoint(path) if tf.io.gfile.isdir(path) else path
    try:
        saved_names = object_graph_key_mapping(prefix)
        ours = object_graph_key_mapping(keras_ckpt)
    except tf.errors.NotFoundError:
        return settings  # a name-based checkpoint: warm-started by name, as Estimator does
    model = {name: key for name, key in ours.items() if re.match(MODEL_VARIABLES, f"{name}:0")}
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
            "`warm_start_from` does not hold this model's weights, neither under their "
            "variable names nor by the model's structure (as keras_model.load_weights "
            f"matches them): {'; '.join(problems)}. Got: {path!r}. Pass a checkpoint of the "
            "same architecture (keras_model.save_weights or an Estimator model_dir of it)."
        )
    return settings._replace(var_name_to_prev_var_name=model)


def _check_checkpoint(path: str) -> None:
    """Raises a ValueError naming ``warm_start_from`` unless ``path`` reads as a checkpoint."""
    if path.lower().endswith((".h5", ".hdf5", ".keras")):
        raise ValueError(
            "`warm_start_from` must be a TensorFlow checkpoint or SavedModel; a Keras "
            f"{os.path.splitext(path)[1]} file is neither. Got: {path!r}. Load it into the model "
            "first (keras_model.load_weights(path)), then call to_estimator(keras_model) without "
            "warm_start_from: the Estimator starts from the model's weights."
        )
    if tf.io.gfile.isdir(path) and tf.train.latest_checkpoint(path) is None:
        raise ValueError(
            "`warm_start_from` is a directory without a checkpoint or a SavedModel. Got: "
            f"{path!r}, which contains {sorted(tf.io.gfile.listdir(path))[:10]}. Pass a model_dir "
            "with a `checkpoint` file, a checkpoint prefix (.../model.ckpt-100) or a SavedModel."
        )
    try:
        tf.train.load_checkpoint(path)
    except Exception as error:  # noqa: BLE001 - re-raised as the user's argument error
        first_line = (str(error).splitlines() or [""])[0]
        raise ValueError(
            "`warm_start_from` could not be read as a TensorFlow checkpoint. Got: "
            f"{path!r} ({type(error).__name__}: {first_line})"
        ) from error
