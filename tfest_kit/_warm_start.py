"""BERT-style warm start (``init_from_checkpoint`` mapped by name and shape, listed, mismatches
named), and the check that the checkpoint Estimator restores fits the model (tpu, keras_bridge).
"""

from __future__ import annotations

import os
import re
from collections import Counter, defaultdict
from collections.abc import Mapping
from typing import Any, Optional

from tfest_kit._tf import tf

__all__ = ["FitCheckingSaver", "check_model_dir", "resolve_checkpoint", "resuming"]
__all__ += ["warm_start", "with_saver"]

_LISTED: set = set()  # (checkpoint, (name, shape, warm-started) per variable) listed in full
_RESUMING: set = set()  # model_dirs said to be resumed


def resolve_checkpoint(init_checkpoint: str) -> str:
    """The prefix of a checkpoint, one of its files, a model_dir, a directory of one checkpoint
    (a downloaded BERT model) or a SavedModel; ValueError naming it if unreadable."""
    if not isinstance(init_checkpoint, (str, os.PathLike)):
        raise TypeError(
            f"`init_checkpoint` must be a checkpoint path or directory. Got: {init_checkpoint!r}"
        )
    path = os.fspath(init_checkpoint)
    if tf.io.gfile.isdir(path):
        prefix = tf.train.latest_checkpoint(path) or _only_checkpoint_in(path)
        if prefix is None:
            listing = sorted(tf.io.gfile.listdir(path))[:10]
            found = _checkpoints_in(path)
            example = os.path.join(path, found[0]) if found else ".../model.ckpt-1000"
            raise ValueError(
                f"`init_checkpoint` is a directory without a checkpoint (no usable `checkpoint` "
                f"file). Got: {path!r}, which contains {listing}. Pass a checkpoint prefix such "
                f"as {example}, the model_dir of a trained model or a SavedModel directory."
            )
    else:
        prefix = _strip_file_suffix(path)
        if not tf.io.gfile.glob(prefix + ".index") and not tf.io.gfile.exists(prefix):
            found = _checkpoints_in(os.path.dirname(prefix) or ".")
            raise ValueError(
                "`init_checkpoint` does not exist: expected a checkpoint prefix with a "
                f"`.index` file next to it, or a directory holding checkpoints. Got: {path!r}"
                + (f"; checkpoints in that directory: {found}" if found else "")
            )
    try:
        tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
    except Exception as error:  # noqa: BLE001 - re-raised with the user's context
        raise ValueError(
            f"`init_checkpoint` could not be read as a TensorFlow checkpoint. Got: {path!r} "
            f"({type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''})"
        ) from error
    return prefix


_FILE_SUFFIX = re.compile(r"\.(index|meta|data-\d{5}-of-\d{5})$")


def _only_checkpoint_in(directory: str) -> Optional[str]:
    saved_model_variables = os.path.join(directory, "variables", "variables")
    if tf.io.gfile.exists(saved_model_variables + ".index"):
        return saved_model_variables
    found = _checkpoints_in(directory)
    return os.path.join(directory, found[0]) if len(found) == 1 else None


def resuming(model_dir: Optional[str]) -> bool:
    """Whether Estimator restores ``model_dir``'s checkpoint (and skips the warm start); says so
    once per model_dir, not at each graph build."""
    prefix = tf.train.latest_checkpoint(model_dir) if model_dir else None
    if prefix is None:
        return False
    if model_dir not in _RESUMING:
        _RESUMING.add(model_dir)
        tf.logging.info("Resuming from %s; init_checkpoint is not read.", prefix)
    return True


def _strip_file_suffix(path: str) -> str:
    """``model.ckpt-100.index`` / ``.meta`` / ``.data-…`` -> ``model.ckpt-100`` (TensorFlow
    fails on them with "not an sstable")."""
    prefix = _FILE_SUFFIX.sub("", path)
    if prefix != path and tf.io.gfile.exists(prefix + ".index"):
        return prefix
    if os.path.basename(path) == "checkpoint" and not tf.io.gfile.isdir(path):
        return tf.train.latest_checkpoint(os.path.dirname(path)) or path
    return path


def _checkpoints_in(directory: str) -> list[str]:
    """The prefixes of the checkpoints in ``directory``, at most 10."""
    try:
        indexes = tf.io.gfile.glob(os.path.join(directory, "*.index"))
    except Exception:  # noqa: BLE001 - unlistable: no checkpoint to offer or suggest
        return []
    return sorted(os.path.basename(index)[: -len(".index")] for index in indexes)[:10]


def _variable_name(var) -> str:
    return var.op.name if hasattr(var, "op") else var.name.split(":")[0]


def _assignment_map_for(prefix: str, variables) -> tuple[dict, list[str]]:
    """BERT's map of the variables whose name and shape match, and those of another shape/dtype."""
    reader = tf.train.load_checkpoint(prefix)
    shapes, dtypes = reader.get_variable_to_shape_map(), reader.get_variable_to_dtype_map()
    assignment_map, skipped = {}, []
    for var in variables:
        name = _variable_name(var)
        if name not in shapes:
            continue
        # Another dtype would fail at session start: "expected dtype float does not equal ...".
        differ = [
            f"{what} differs: {name} (model {model}, checkpoint {ckpt})"
            for what, model, ckpt in (
                ("shape", var.shape.as_list(), list(shapes[name])),
                ("dtype", var.dtype.base_dtype.name, dtypes[name].name),
            )
            if model != ckpt
        ]
        if differ:
            skipped.append(differ[0])
        else:
            assignment_map[name] = var
    return assignment_map, skipped


def _scope_hint(prefix: str, variables) -> Optional[tuple[str, str, int, str]]:
    """``(checkpoint_scope, model_scope, count, example)`` when the checkpoint keeps most unmatched
    variables under another scope (``bert/encoder/`` for ``encoder/``), or None.

    Each unmatched variable votes for the scope pair that makes its name (two components or
    more) and shape match; a pair explaining over half of them, at least 2, is named.
    """
    shapes = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
    by_tail = defaultdict(list)  # (last name component, shape) -> checkpoint names
    for name, shape in shapes.items():
        by_tail[(name.rsplit("/", 1)[-1], tuple(shape))].append(name)
    votes: Counter = Counter()
    examples: dict = {}
    missing = 0
    for var in variables:
        name = _variable_name(var)
        if name in shapes or not var.shape.is_fully_defined():
            continue
        missing += 1
        parts = name.split("/")
        for ckpt_name in by_tail[(parts[-1], tuple(var.shape.as_list()))]:
            ckpt_parts = ckpt_name.split("/")
            common = len(os.path.commonprefix([parts[::-1], ckpt_parts[::-1]]))
            if common < 2:  # "kernel" alone says nothing about where a layer went
                continue
            pair = ("/".join(ckpt_parts[:-common] + [""]), "/".join(parts[:-common] + [""]))
            votes[pair] += 1
            examples.setdefault(pair, f"model {name} = checkpoint {ckpt_name}")
    if not votes:
        return None
    (ckpt_scope, model_scope), count = votes.most_common(1)[0]
    # A new head's "dense/kernel" may look like the checkpoint's "bert/pooler/dense/kernel";
    # a moved scope moves most of what is missing.
    if count < 2 or 2 * count <= missing:
        return None
    # The root scope '' is '/' to init_from_checkpoint.
    return ckpt_scope or "/", model_scope or "/", count, examples[(ckpt_scope, model_scope)]


def _check_entry(entry: str, ckpt_name: str, var, shapes: Mapping, prefix: str) -> None:
    """Names the entry; ``init_from_checkpoint`` prints the whole checkpoint map instead."""
    if ckpt_name not in shapes:
        names = sorted(name for name in shapes if not re.search(r"/(Adam|adam_[mv])", name))
        raise ValueError(
            f"`assignment_map` entry {entry}: {ckpt_name!r} is not a variable of the checkpoint "
            f"{prefix}. Got checkpoint variables: {names[:20]}"
            f"{f' ... ({len(names)} in all)' if len(names) > 20 else ''}"
        )
    shape = getattr(var, "shape", None)
    if shape is None or isinstance(var, (list, tuple)) or not shape.is_fully_defined():
        return
    if list(shapes[ckpt_name]) != shape.as_list():
        raise ValueError(
            f"`assignment_map` entry {entry}: shapes differ for {_variable_name(var)} "
            f"(model {shape.as_list()}, checkpoint {ckpt_name} {list(shapes[ckpt_name])}). Map "
            "only variables of the same shape (leave out e.g. a new output layer)."
        )


def _expand(prefix: str, assignment_map: Mapping, variables) -> dict:
    """A user map -> ``{ckpt_name: var}``: ``init_from_checkpoint`` finds ``tf.get_variable``
    variables only, not those of Keras layers."""
    shapes = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
    by_name = {_variable_name(var): var for var in variables}
    expanded = {}
    for ckpt_name, target in assignment_map.items():
        entry = f"{ckpt_name!r}: {target!r}" if isinstance(target, str) else repr(ckpt_name)
        if not isinstance(target, str):
            _check_entry(entry, ckpt_name, target, shapes, prefix)
            expanded[ckpt_name] = target
        elif target in by_name:
            _check_entry(entry, ckpt_name, by_name[target], shapes, prefix)
            expanded[ckpt_name] = by_name[target]
        elif (ckpt_name.endswith("/") or not ckpt_name) and (target.endswith("/") or not target):
            # '/' stands for the root scope, as in init_from_checkpoint.
            ckpt_scope, target_scope = ckpt_name.lstrip("/"), target.lstrip("/")
            matched = {
                ckpt_scope + name[len(target_scope) :]: var
                for name, var in by_name.items()
                if name.startswith(target_scope)
                and ckpt_scope + name[len(target_scope) :] in shapes
            }
            if not matched:
                raise ValueError(
                    f"`assignment_map` entry {entry} matches no variable of "
                    f"the model that is also in {prefix}. Got model variables: "
                    f"{sorted(by_name)[:20]}"
                )
            for name, var in matched.items():
                _check_entry(entry, name, var, shapes, prefix)
            expanded.update(matched)
        else:
            raise ValueError(
                f"`assignment_map` entry {entry} names no variable of the "
                f"model (use 'scope/': 'scope/' for scopes). Got model variables: "
                f"{sorted(by_name)[:20]}"
            )
    return expanded


def warm_start(prefix: str, assignment_map: Optional[Mapping] = None, variables=None) -> None:
    """``init_from_checkpoint`` listed as BERT's ``run_classifier`` does; by default every
    global variable (but the step) whose name and shape match."""
    global_step = tf.train.get_global_step()
    if variables is None:
        variables = tf.global_variables()
    variables = [var for var in variables if var is not global_step]
    skipped = []
    by_user = assignment_map is not None
    if assignment_map is None:
        assignment_map, skipped = _assignment_map_for(prefix, variables)
    else:
        assignment_map = _expand(prefix, assignment_map, variables)
    if assignment_map:
        tf.train.init_from_checkpoint(prefix, assignment_map)
    initialised = {id(var) for var in assignment_map.values()}
    # Estimator builds the graph for every evaluation and export: listed once, then one line.
    key = (
        prefix,
        tuple((_variable_name(var), str(var.shape), id(var) in initialised) for var in variables),
    )
    if key in _LISTED:
        tf.logging.info(
            "Warm start from %s: %d of %d variables (listed above).",
            prefix,
            len(initialised),
            len(variables),
        )
        return
    _LISTED.add(key)
    for description in skipped:
        tf.logging.warning("Not warm-started, %s", description)
    hint = None if by_user else _scope_hint(prefix, variables)
    if hint:
        ckpt_scope, model_scope, count, example = hint
        # A map replaces matching by name: the variables matched that way need entries too.
        tf.logging.warning(
            "init_checkpoint %s: %d variables of the model are in the checkpoint under another "
            "scope (%s) and were not warm-started; %d were, by name. Pass "
            "assignment_map={%r: %r}%s.",
            prefix,
            count,
            example,
            len(assignment_map),
            ckpt_scope,
            model_scope,
            ", plus entries for those matched by name" if assignment_map else "",
        )
    elif not assignment_map:
        tf.logging.warning(
            "init_checkpoint %s: no variable of the model matches the checkpoint by name and "
            "shape; nothing was warm-started. Pass `assignment_map` to map names.",
            prefix,
        )
    tf.logging.info("**** Variables (warm start from %s) ****", prefix)
    for var in variables:
        mark = ", *INIT_FROM_CKPT*" if id(var) in initialised else ""
        tf.logging.info("  name = %s, shape = %s%s", _variable_name(var), var.shape, mark)


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
        self._fit_model_dir = model_dir
        self._fit_variables = dict(variables)

    def restore(self, sess, save_path):
        if save_path and self._fit_model_dir:
            _check_fits(self._fit_model_dir, save_path, self._fit_variables)
        return super().restore(sess, save_path)


def _graph_variables() -> dict:
    """Checkpoint name -> variable, partitioned variables left out."""
    return {
        _variable_name(var): var
        for var in tf.global_variables()
        if getattr(var, "_save_slice_info", None) is None
    }


def check_model_dir(
    model_dir: Optional[str],
    scaffold: Any = None,
    variables: Optional[Mapping[str, Any]] = None,
    mode: Optional[str] = None,
) -> Optional[FitCheckingSaver]:
    """Raises when the checkpoint Estimator restores does not fit; call it once variables exist.

    Unchecked, a missing variable fails with a long ``NotFoundError`` and one of another shape
    may be restored silently. TRAIN checks model_dir's latest checkpoint now; EVAL / PREDICT put
    a :class:`FitCheckingSaver` into ``SAVERS`` and return it (exports need it in the Scaffold:
    :func:`with_saver`). Partitioned variables, strategies and a model's own Saver are skipped.
    ``variables``: checkpoint name -> variable for Keras object-based checkpoints.
    """
    if not model_dir or tf.distribute.has_strategy():
        return None
    if variables is None:
        if getattr(scaffold, "saver", None) is not None or tf.get_collection(tf.GraphKeys.SAVERS):
            return None
        variables = _graph_variables()
        if mode in (tf.estimator.ModeKeys.EVAL, tf.estimator.ModeKeys.PREDICT):
            # Estimator's default saver, checking; built now for PREDICT, where an export does
            # not finalize the Scaffold.
            saver = FitCheckingSaver(
                model_dir,
                variables,
                sharded=True,
                allow_empty=True,
                defer_build=mode == tf.estimator.ModeKeys.EVAL,
            )
            tf.add_to_collection(tf.GraphKeys.SAVERS, saver)
            return saver
    elif mode in (tf.estimator.ModeKeys.EVAL, tf.estimator.ModeKeys.PREDICT):
        return None
    prefix = tf.train.latest_checkpoint(model_dir)
    if prefix is not None:
        _check_fits(model_dir, prefix, variables)
    return None


def with_saver(scaffold: Any, saver: Any) -> Any:
    return tf.train.Scaffold(saver=saver, copy_from_scaffold=scaffold)


def _check_fits(model_dir: str, prefix: str, variables: Mapping[str, Any]) -> None:
    if tf.io.gfile.isdir(prefix):  # a directory's latest, as an export takes it
        prefix = tf.train.latest_checkpoint(prefix)
        if prefix is None:
            return
    # Not model_dir's latest: a checkpoint_path given (model_dir may even hold another model).
    named = prefix != tf.train.latest_checkpoint(model_dir)
    try:
        shapes = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
    except Exception:  # noqa: BLE001 - an unreadable checkpoint is Estimator's to report
        return
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
        problems = [
            f"{what}: {', '.join(names[:10])}"
            for what, names in (("shapes differ", differ), ("not in the checkpoint", missing))
            if names
        ]
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
