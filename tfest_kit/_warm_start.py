"""Warm start from a checkpoint, BERT style, for :mod:`tfest_kit.model_fn`."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Optional

from tfest_kit._tf import tf

__all__ = ["resolve_checkpoint", "assignment_map_for", "warm_start", "check_model_dir"]

# (checkpoint, variable names, matches) already listed in full by this process.
_LISTED: set = set()


def resolve_checkpoint(init_checkpoint: str) -> str:
    """Returns the checkpoint prefix for a prefix or a directory; fails clearly if unreadable.

    Args:
      init_checkpoint: a checkpoint prefix (``.../model.ckpt-100``) or a directory holding a
        ``checkpoint`` file.

    Returns:
      The checkpoint prefix.

    Raises:
      ValueError: if the path does not exist, holds no checkpoint, or cannot be read.
    """
    if not isinstance(init_checkpoint, (str, os.PathLike)):
        raise TypeError(
            f"`init_checkpoint` must be a checkpoint path or directory. Got: {init_checkpoint!r}"
        )
    path = os.fspath(init_checkpoint)
    if tf.io.gfile.isdir(path):
        prefix = tf.train.latest_checkpoint(path)
        if prefix is None:
            listing = sorted(tf.io.gfile.listdir(path))[:10]
            raise ValueError(
                f"`init_checkpoint` is a directory without a checkpoint (no usable `checkpoint` "
                f"file). Got: {path!r}, which contains {listing}. Pass a checkpoint prefix such "
                "as .../model.ckpt-1000 or the model_dir of a trained model."
            )
    else:
        prefix = path
        if not tf.io.gfile.glob(prefix + ".index") and not tf.io.gfile.exists(prefix):
            raise ValueError(
                "`init_checkpoint` does not exist: expected a checkpoint prefix with a "
                f"`.index` file next to it, or a directory holding checkpoints. Got: {path!r}"
            )
    try:
        tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
    except Exception as error:  # noqa: BLE001 - re-raised with the user's context
        raise ValueError(
            f"`init_checkpoint` could not be read as a TensorFlow checkpoint. Got: {path!r} "
            f"({type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''})"
        ) from error
    return prefix


def _variable_name(var) -> str:
    return var.op.name if hasattr(var, "op") else var.name.split(":")[0]


def assignment_map_for(prefix: str, variables) -> tuple[dict, list[str]]:
    """Maps every variable whose name and shape match the checkpoint (BERT's assignment map).

    Returns:
      ``(assignment_map, skipped)``: ``{checkpoint_name: variable}`` and descriptions of
      variables whose name matched with a different shape.
    """
    shapes = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
    assignment_map, skipped = {}, []
    for var in variables:
        name = _variable_name(var)
        if name not in shapes:
            continue
        if list(shapes[name]) != var.shape.as_list():
            skipped.append(f"{name} (model {var.shape.as_list()}, checkpoint {shapes[name]})")
            continue
        assignment_map[name] = var
    return assignment_map, skipped


def _expand(prefix: str, assignment_map: Mapping, variables) -> dict:
    """Turns a user map of names and ``'scope/': 'scope/'`` entries into ``{ckpt_name: var}``.

    ``tf.train.init_from_checkpoint`` resolves names only among ``tf.get_variable`` variables;
    Keras layers create theirs differently, so names are resolved here against the graph.
    """
    shapes = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
    by_name = {_variable_name(var): var for var in variables}
    expanded = {}
    for ckpt_name, target in assignment_map.items():
        if not isinstance(target, str):
            expanded[ckpt_name] = target
        elif target in by_name:
            expanded[ckpt_name] = by_name[target]
        elif (ckpt_name.endswith("/") or not ckpt_name) and (target.endswith("/") or not target):
            matched = {
                ckpt_name + name[len(target) :]: var
                for name, var in by_name.items()
                if name.startswith(target) and ckpt_name + name[len(target) :] in shapes
            }
            if not matched:
                raise ValueError(
                    f"`assignment_map` entry {ckpt_name!r}: {target!r} matches no variable of "
                    f"the model that is also in {prefix}. Got model variables: "
                    f"{sorted(by_name)[:20]}"
                )
            expanded.update(matched)
        else:
            raise ValueError(
                f"`assignment_map` entry {ckpt_name!r}: {target!r} names no variable of the "
                f"model (use 'scope/': 'scope/' for scopes). Got model variables: "
                f"{sorted(by_name)[:20]}"
            )
    return expanded


def warm_start(prefix: str, assignment_map: Optional[Mapping] = None) -> None:
    """Sets initialisers of the graph's model variables from ``prefix`` and logs the listing.

    Without ``assignment_map`` every global variable (except the global step) whose name and
    shape match the checkpoint is initialised from it.  Logs one line per variable, marking the
    initialised ones with ``*INIT_FROM_CKPT*`` as BERT's ``run_classifier.py`` does.
    """
    global_step = tf.train.get_global_step()
    variables = [var for var in tf.global_variables() if var is not global_step]
    if assignment_map is None:
        assignment_map, skipped = assignment_map_for(prefix, variables)
        for description in skipped:
            tf.logging.warning("Not warm-started, shape differs: %s", description)
    else:
        assignment_map = _expand(prefix, assignment_map, variables)
    if not assignment_map:
        tf.logging.warning(
            "init_checkpoint %s: no variable of the model matches the checkpoint by name and "
            "shape; nothing was warm-started. Pass `assignment_map` to map names.",
            prefix,
        )
    else:
        tf.train.init_from_checkpoint(prefix, assignment_map)
    initialised = {id(var) for var in assignment_map.values()}
    # Estimator builds the model again for every evaluation, export and predict call; the
    # same listing each time would bury the log, so later builds get one summary line.
    key = (prefix, tuple(_variable_name(var) for var in variables), len(assignment_map))
    if key in _LISTED:
        tf.logging.info(
            "Warm start from %s: %d of %d variables (listed above).",
            prefix,
            len(initialised),
            len(variables),
        )
        return
    _LISTED.add(key)
    tf.logging.info("**** Variables (warm start from %s) ****", prefix)
    for var in variables:
        mark = ", *INIT_FROM_CKPT*" if id(var) in initialised else ""
        tf.logging.info("  name = %s, shape = %s%s", _variable_name(var), var.shape, mark)


def check_model_dir(model_dir: Optional[str]) -> None:
    """Raises when ``model_dir``'s latest checkpoint was written by a different model.

    Call it from a model_fn once the graph's variables exist.  Estimator would restore that
    checkpoint: a missing variable fails with a long ``NotFoundError`` and a variable of
    another shape may even be restored silently, failing steps later far from the cause.
    Only trainable variables count as missing (optimizer slots are reported by Estimator
    itself); partitioned variables and replicated (distribution strategy) graphs are skipped.

    Raises:
      ValueError: naming the variables that differ and the checkpoint.
    """
    if not model_dir or tf.distribute.has_strategy():
        return
    prefix = tf.train.latest_checkpoint(model_dir)
    if prefix is None:
        return
    try:
        shapes = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
    except Exception:  # noqa: BLE001 - an unreadable checkpoint is Estimator's to report
        return
    missing, differ = [], []
    trainable = {id(var) for var in tf.trainable_variables()}
    for var in tf.global_variables():
        if getattr(var, "_save_slice_info", None) is not None:
            continue
        name = _variable_name(var)
        if name not in shapes:
            if id(var) in trainable:
                missing.append(name)
        elif var.shape.is_fully_defined() and list(shapes[name]) != var.shape.as_list():
            differ.append(f"{name} (checkpoint {list(shapes[name])}, model {var.shape.as_list()})")
    if missing or differ:
        problems = []
        if differ:
            problems.append(f"shapes differ: {', '.join(differ[:10])}")
        if missing:
            problems.append(f"not in the checkpoint: {', '.join(missing[:10])}")
        raise ValueError(
            f"`model_dir` {model_dir!r} holds a checkpoint of another model ({prefix}): "
            f"{'; '.join(problems)}. Use a new model_dir for a changed model (to start from "
            "the old weights, pass the old checkpoint as init_checkpoint / warm_start_from)."
        )
