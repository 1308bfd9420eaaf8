"""Refuses to resume a recipe's checkpoint with flags that change its data or its model.

A re-run with the same ``--model_dir`` resumes from the checkpoint there. With another
``--seed`` the train/test split changes, so the resumed model has trained on rows it is now
tested on and reports an accuracy it did not earn; with another model shape the restore fails
deep inside TensorFlow. Each recipe records the flags that matter in
``MODEL_DIR/<recipe>_flags.json`` and is stopped, before any work, when they differ.

A flag the record lacks (the record of an older version of the recipe, from before the flag
was recorded) is not compared: nothing says what that run used, and refusing the directory
would leave no flags to resume it with.

The records also say which recipe a directory belongs to. A ``--model_dir`` that holds a
checkpoint and the record of another recipe, but none of this one, is refused: resuming it
fails deep inside TensorFlow (missing variables, other shapes), or, worse, trains on as if it
were this recipe's. A directory that holds a checkpoint, or (outside a cluster) any file, but no
record at all is refused too: it is no recipe's run (another program's checkpoints, the user's
own data), and the run would write its data files, checkpoints and exports among them.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Mapping
from typing import Optional

from tfest_kit._model_dir import choose_checkpoint, path_problem

__all__ = ["PreviousRunError", "check", "make_dir", "record", "check_and_record_or_exit"]


class PreviousRunError(ValueError):
    """``--model_dir`` holds a checkpoint trained with other values of the recorded flags."""


def _flags_file(model_dir: str, recipe: str) -> str:
    return os.path.join(model_dir, f"{recipe}_flags.json")


def _recipes_recorded(model_dir: str) -> list[str]:
    """The recipes whose record is in ``model_dir``, sorted."""
    suffix = "_flags.json"
    try:
        names = os.listdir(model_dir)
    except OSError:  # not there yet, or not readable: nothing recorded that can be read
        return []
    return sorted(name[: -len(suffix)] for name in names if name.endswith(suffix))


def newest_checkpoint(directory: str) -> Optional[str]:
    """The checkpoint training would resume from, as tfest_kit chooses it: a garbled state file
    or a damaged newest checkpoint is passed over (``tf.train.latest_checkpoint`` raised)."""
    return choose_checkpoint(directory)[0]


def _holds_checkpoint(model_dir: str, dirs: list[str]) -> bool:
    """True if ``dirs``, ``model_dir`` or one of its sub-directories holds a checkpoint.

    Sub-directories count because a recipe may keep its checkpoints there (premade_estimators
    has one per model), where another recipe's ``checkpoint_dirs`` would not look.
    """
    subdirs = [entry.path for entry in os.scandir(model_dir) if entry.is_dir()]
    return any(newest_checkpoint(d) for d in [*dirs, model_dir, *subdirs])


def _as_read(flags: Mapping[str, object]) -> dict:
    return json.loads(json.dumps(dict(flags)))  # tuples become lists, as the record reads back


def _spell(flags: Mapping[str, object]) -> str:
    def value(v):
        return ",".join(map(str, v)) if isinstance(v, list) else str(v)

    return " ".join(f"--{k}={value(v)}" for k, v in flags.items())


def check(
    model_dir: str,
    recipe: str,
    flags: Mapping[str, object],
    checkpoint_dirs: Iterable[str] | None = None,
    flag_name: str = "model_dir",
) -> None:
    """Refuses ``flags`` that differ from those of the checkpoint the run would resume.

    Also refuses a ``model_dir`` that holds another recipe's run (see the module docstring).
    Writes nothing, so a run refused here leaves ``model_dir`` as it was.

    Args:
      model_dir: the recipe's ``--model_dir``.
      recipe: the recipe's module name, which names the record.
      flags: flag name -> value (JSON-serialisable) for the flags that must not change.
      checkpoint_dirs: where the recipe's checkpoints are (default: ``model_dir``); the
        record is compared only when one of them holds a checkpoint.
      flag_name: the recipe's flag for ``model_dir``, as the message names it.

    Raises:
      PreviousRunError: if ``model_dir`` is a file, holds another recipe's run or files of
        no recipe's, or its checkpoint was trained with other values; the message says what
        to pass instead.

    Example:
      >>> check("/tmp/iris", "iris_custom_estimator", {"seed": 0})
    """
    if os.path.exists(model_dir) and not os.path.isdir(model_dir):
        raise PreviousRunError(f"--{flag_name} must be a directory. Got: a file, {model_dir}")
    if path_problem(model_dir):  # before anything is written there: nothing could resume it
        raise PreviousRunError(f"--{flag_name}: {path_problem(model_dir)}")
    if not os.path.isdir(model_dir):
        return  # a new directory: nothing to resume
    path = _flags_file(model_dir, recipe)
    dirs = [model_dir] if checkpoint_dirs is None else list(checkpoint_dirs)
    others = [name for name in _recipes_recorded(model_dir) if name != recipe]
    if others and not os.path.isfile(path) and _holds_checkpoint(model_dir, dirs):
        raise PreviousRunError(
            f"--{flag_name} {model_dir} holds a run of recipe {others[-1]} (its checkpoint and "
            f"{os.path.basename(_flags_file(model_dir, others[-1]))}), not of {recipe}; give "
            f"another --{flag_name}"
        )
    entries = sorted(name for name in os.listdir(model_dir) if not name.startswith("."))
    # In a cluster the other tasks may have written their data files before this check.
    alone = "TF_CONFIG" not in os.environ
    unrecorded = not others and not os.path.isfile(path)
    if unrecorded and ((entries and alone) or _holds_checkpoint(model_dir, dirs)):
        listed = ", ".join(entries[:3]) + (" …" if len(entries) > 3 else "")
        raise PreviousRunError(
            f"--{flag_name} {model_dir} holds files that are not a run of {recipe} ({listed}); "
            f"give a new or empty --{flag_name}, or the one of an earlier run of {recipe}"
        )
    if not (os.path.isfile(path) and any(newest_checkpoint(d) for d in dirs)):
        return
    with open(path) as f:
        previous = json.load(f)
    current = _as_read(flags)
    # See the module docstring: flags added to the record since that run are not compared.
    if previous != {k: v for k, v in current.items() if k in previous}:
        raise PreviousRunError(
            f"--{flag_name} {model_dir} holds a checkpoint trained with {_spell(previous)}; "
            f"this run has {_spell(flags)}. Pass those flags to resume it, or give a new "
            f"--{flag_name}"
        )


def make_dir(model_dir: str) -> None:
    """Creates ``model_dir`` if needed.

    Raises:
      PreviousRunError: if it cannot be created (a parent that is a file, no permission, a
        read-only file system); the message gives the reason.

    Example:
      >>> make_dir("/tmp/iris")
    """
    # The first write into --model_dir: a directory that cannot be used is reported here in
    # one line, before TensorFlow would fail on it with a traceback.
    try:
        os.makedirs(model_dir, exist_ok=True)
    except OSError as e:
        raise PreviousRunError(
            f"cannot create --model_dir {model_dir}: {e.strerror or e}. Give a directory that "
            "can be created and written to"
        ) from e


def record(model_dir: str, recipe: str, flags: Mapping[str, object]) -> None:
    """Writes ``flags`` as the ones ``model_dir``'s checkpoints are trained with.

    Creates ``model_dir`` if needed.

    Raises:
      PreviousRunError: if ``model_dir`` cannot be created or written to (a parent that is a
        file, no permission, a read-only file system); the message gives the reason.

    Example:
      >>> record("/tmp/iris", "iris_custom_estimator", {"seed": 0})
    """
    make_dir(model_dir)
    path = _flags_file(model_dir, recipe)
    # Written under another name and renamed into place: the other tasks of a cluster check
    # the record while the chief writes it, and must never read half a file.
    temporary = f"{path}.tmp-{os.getpid()}"
    try:
        with open(temporary, "w") as f:
            json.dump(_as_read(flags), f)
        os.replace(temporary, path)
    except OSError as e:
        raise PreviousRunError(
            f"cannot write to --model_dir {model_dir}: {e.strerror or e}. Give a directory "
            "that can be written to"
        ) from e


def check_and_record_or_exit(
    model_dir: str,
    recipe: str,
    flags: Mapping[str, object],
    checkpoint_dirs: Iterable[str] | None = None,
) -> None:
    """:func:`check` then :func:`record`; either's error ends the program with exit status 1.

    Example:
      >>> check_and_record_or_exit("/tmp/digits", "tpu_digits", {"seed": 0})
    """
    try:
        check(model_dir, recipe, flags, checkpoint_dirs)
        record(model_dir, recipe, flags)
    except PreviousRunError as e:
        sys.exit(f"{recipe}: error: {e}")
