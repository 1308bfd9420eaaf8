"""BERT-style warm start (``init_from_checkpoint`` by name and shape, listed), and the check
that the checkpoint Estimator restores fits the model (tpu, keras_bridge)."""

import os
import re
from collections.abc import Mapping
from typing import Any, Optional

from tfest_kit._model_dir import complete_exports, usable_checkpoint
from tfest_kit._tf import tf

_LISTED: set = set()  # (checkpoint, (name, warm-started) per variable) listed
_RESUMING: set = set()  # model_dirs said to be resumed


def resolve_checkpoint(init_checkpoint: str, arg: str = "init_checkpoint") -> str:
    """The checkpoint prefix of ``init_checkpoint`` (a directory: its latest), or ValueError."""
    # A checkpoint's file (BERT's "bert_model.ckpt.index") names its prefix.
    path = prefix = re.sub(r"\.(index|meta|data-\d{5}-of-\d{5})$", "", os.fspath(init_checkpoint))
    if tf.io.gfile.isdir(path):
        exports = complete_exports(path)  # a base of exports (export/best): its newest's
        saved_model = os.path.join(exports[-1] if exports else path, "variables", "variables")
        has_saved_model = tf.io.gfile.exists(saved_model + ".index")
        prefix = tf.train.latest_checkpoint(path) or (saved_model if has_saved_model else None)
        if prefix is None:
            raise ValueError(
                f"`{arg}` is a directory without a checkpoint; pass a checkpoint prefix such "
                f"as .../model.ckpt-1000. Got: {path!r}"
            )
    elif not tf.io.gfile.exists(path + ".index") and not tf.io.gfile.exists(path):
        raise ValueError(
            f"`{arg}` does not exist: expected a checkpoint prefix with a `.index` file next "
            f"to it, or a directory holding checkpoints. Got: {path!r}"
        )
    try:
        tf.train.load_checkpoint(prefix)
    except Exception as error:  # noqa: BLE001 - re-raised with the user's context
        raise ValueError(
            f"`{arg}` could not be read as a TensorFlow checkpoint. Got: {path!r}"
        ) from error
    return prefix


def resuming(model_dir: Optional[str]) -> bool:
    """Whether Estimator restores ``model_dir``'s checkpoint (and skips the warm start); says so
    once per model_dir, not at each graph build."""
    prefix = tf.train.latest_checkpoint(model_dir) if model_dir else None  # not := (autograph)
    if prefix is None:
        return False
    if model_dir not in _RESUMING:
        _RESUMING.add(model_dir)
        tf.logging.info("Resuming from %s; init_checkpoint is not read.", prefix)
    return True


def _variable_name(var) -> str:
    return var.op.name if hasattr(var, "op") else var.name.split(":")[0]


def warm_start(prefix: str, variables=None) -> None:
    """``init_from_checkpoint`` of every variable (but the step) whose name, shape and dtype
    match, listed as BERT's ``run_classifier`` does."""
    reader = tf.train.load_checkpoint(prefix)
    shapes, dtypes = reader.get_variable_to_shape_map(), reader.get_variable_to_dtype_map()
    step = tf.train.get_global_step()
    named = [(_variable_name(v), v) for v in variables or tf.global_variables() if v is not step]
    shaped = [(n, v) for n, v in named if n in shapes and list(shapes[n]) == v.shape.as_list()]
    # Another dtype would fail at session start: "expected dtype float does not equal ...".
    assignment_map = {name: var for name, var in shaped if dtypes[name] == var.dtype.base_dtype}
    if named and not assignment_map:  # a model in another scope ("bert/"), or another model
        ours = sorted(name for name, _ in named)  # saved: without slots ("dense/kernel/Adam")
        saved = sorted(n for n in shapes if os.path.dirname(n) not in shapes and n != "global_step")
        raise ValueError(
            f"`init_checkpoint` {prefix!r} holds none of this model's variables (by name, shape "
            f"and dtype): the model has e.g. {ours[:3]}, the checkpoint {saved[:3]}. Pass a "
            "checkpoint of this model, or build the model under the checkpoint's variable names"
        )
    tf.train.init_from_checkpoint(prefix, assignment_map)
    # Estimator builds the graph for every evaluation and export: listed once.
    key = (prefix, tuple((name, name in assignment_map) for name, _ in named))
    if key in _LISTED:
        return
    _LISTED.add(key)
    differ = [name for name, _ in named if name in shapes and name not in assignment_map]
    if differ:  # an edited model: else only the listing below tells
        tf.logging.warning(f"Warm start: {differ} differ in shape or dtype in {prefix}: not read")
    tf.logging.info("**** Variables (warm start from %s) ****", prefix)
    for name, var in named:
        mark = ", *INIT_FROM_CKPT*" if name in assignment_map else ""
        tf.logging.info("  name = %s, shape = %s%s", name, var.shape, mark)


def _optimizer_state(name: str, trainable_names: set) -> bool:
    """Slots of a trainable variable, Adam's beta powers."""
    return (
        name.rsplit("/", 1)[0] in trainable_names
        or name.split("/")[-1] in ("beta1_power", "beta2_power")
        or ".OPTIMIZER_SLOT/" in name  # object-based checkpoints (keras_bridge)
        or name.startswith("optimizer/")
    )


class FitCheckingSaver(tf.train.Saver):
    """A Saver that checks the checkpoint fits before restoring it: ``evaluate``, ``predict`` and
    exports hand only the saver their ``checkpoint_path``."""

    def __init__(self, model_dir: str, variables: Mapping[str, Any], **kwargs):
        super().__init__(**kwargs)
        self._fit_model_dir, self._fit_variables = model_dir, dict(variables)

    def restore(self, sess, save_path):
        if save_path and self._fit_model_dir:
            _check_fits(self._fit_model_dir, save_path, self._fit_variables)
        return super().restore(sess, save_path)


def check_model_dir(
    model_dir: Optional[str],
    scaffold: Any = None,
    variables: Optional[Mapping[str, Any]] = None,
    mode: Optional[str] = None,
) -> Optional[FitCheckingSaver]:
    """Raises when the checkpoint Estimator restores does not fit; call it once variables exist.

    Unchecked, a missing variable fails with a long ``NotFoundError`` and a misshapen one may be
    restored silently. TRAIN checks model_dir's latest checkpoint now; EVAL / PREDICT put a
    :class:`FitCheckingSaver` into ``SAVERS`` and return it (exports need it in the Scaffold:
    :func:`with_saver`). Partitioned variables, strategies and a model's own Saver are skipped.
    ``variables``: checkpoint name -> variable for Keras object-based checkpoints."""
    if not model_dir or tf.distribute.has_strategy():
        return None
    if variables is None:
        if getattr(scaffold, "saver", None) is not None or tf.get_collection(tf.GraphKeys.SAVERS):
            return None
        # Checkpoint name -> variable, partitioned ones left out.
        whole = [v for v in tf.global_variables() if getattr(v, "_save_slice_info", None) is None]
        variables = {_variable_name(var): var for var in whole}
        if mode in (tf.estimator.ModeKeys.EVAL, tf.estimator.ModeKeys.PREDICT):
            # Estimator's default saver, checking; built now: exports never finalize the Scaffold.
            defer = mode == tf.estimator.ModeKeys.EVAL
            saver = FitCheckingSaver(
                model_dir, variables, sharded=True, allow_empty=True, defer_build=defer
            )
            tf.add_to_collection(tf.GraphKeys.SAVERS, saver)
            return saver
    elif mode in (tf.estimator.ModeKeys.EVAL, tf.estimator.ModeKeys.PREDICT):
        return None
    if (prefix := tf.train.latest_checkpoint(model_dir)) is not None:
        _check_fits(model_dir, prefix, variables)
    return None


def with_saver(scaffold: Any, saver: Any) -> Any:
    return tf.train.Scaffold(saver=saver, copy_from_scaffold=scaffold)


def _check_fits(model_dir: str, prefix: str, variables: Mapping[str, Any]) -> None:
    # A directory's latest, as an export takes it.
    if tf.io.gfile.isdir(prefix) and (prefix := tf.train.latest_checkpoint(prefix)) is None:
        return
    # Not model_dir's: a checkpoint_path given (model_dir may even hold another model).
    named = os.path.normpath(os.path.dirname(prefix)) != os.path.normpath(model_dir)
    usable_checkpoint(model_dir, "a restore", prefix)  # a damaged one: a ValueError naming it
    shapes = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
    missing, differ, optimizer = [], [], []
    trainable = {id(var) for var in tf.trainable_variables()}
    trainable_names = {name for name, var in variables.items() if id(var) in trainable}
    for name, var in variables.items():
        shape = getattr(var, "shape", None)
        shown = name.replace("/.ATTRIBUTES/VARIABLE_VALUE", "")  # object-based key
        if name not in shapes:
            if id(var) in trainable:
                missing.append(shown)
            elif _optimizer_state(name, trainable_names):
                optimizer.append(shown)
        elif (
            isinstance(shape, tf.TensorShape)
            and shape.is_fully_defined()
            and list(shapes[name]) != shape.as_list()
            # a slot differs with its variable, which is named
            and not _optimizer_state(name, trainable_names)
        ):
            differ.append(f"{shown} (checkpoint {list(shapes[name])}, model {shape.as_list()})")
    if missing or differ:
        pairs = (("shapes differ", differ), ("not in the checkpoint", missing))
        problems = [f"{what}: {', '.join(names[:10])}" for what, names in pairs if names]
        if named:
            raise ValueError(
                f"The checkpoint Estimator restores, {prefix!r} (the `checkpoint_path` given, "
                f"or warm_start_from's when model_dir has none), does not fit this model: "
                f"{'; '.join(problems)}. Pass a checkpoint of this model, or check that the "
                "features (input_fn or serving receiver) are those it was trained on."
            )
        raise ValueError(
            f"`model_dir` {model_dir!r} holds a checkpoint ({prefix}) that does not fit this "
            f"model: {'; '.join(problems)}. A changed model needs a new model_dir (init_checkpoint"
            " / warm_start_from start it from the old weights); otherwise the features differ "
            "from those trained on: check the input_fn or serving receiver. The checkpoint was "
            "not changed."
        )
    if optimizer:
        raise ValueError(
            f"`model_dir` {model_dir!r} holds a checkpoint ({prefix}) trained with another "
            f"optimizer: it lacks {', '.join(sorted(optimizer)[:6])}"
            f"{f' ({len(optimizer)} in all)' if len(optimizer) > 6 else ''}. Resume with the "
            "optimizer it was trained with, or use a new model_dir (init_checkpoint / "
            "warm_start_from starts from its weights). The checkpoint was not changed."
        )
