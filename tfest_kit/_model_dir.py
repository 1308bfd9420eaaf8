"""A model_dir: its checkpoints, one writer at a time, its eval events and its exports.

:func:`training` is what tfest_kit's estimators and ``train_and_evaluate`` wrap a training
call in. On the process that writes checkpoints (the chief, or the only process) it

* holds ``model_dir/.tfest_kit.lock`` (an advisory ``flock``) so that a second training into
  the same model_dir stops at once instead of overwriting the first one's checkpoints;
* makes the ``checkpoint`` state file name an intact checkpoint: TensorFlow ignores a
  garbled or empty state file, or one naming deleted files, and trains from step 0 over the
  existing ``model.ckpt-N`` files; a truncated or garbled newest checkpoint stops resume with
  a raw ``DataLossError``. The newest intact checkpoint is found from the files instead, one
  warning says which, and the state file is rewritten (atomically, by the official
  ``tf.train.update_checkpoint_state``). Where checkpoint files exist but none is intact,
  training does not start: deleting those files (or another model_dir) is the explicit
  choice to start afresh.

and on every process it turns Estimator's bare "NaN loss during training." and a full disk
during a checkpoint save into messages naming the step, the directory and the checkpoint to
resume from (and the model_fn builders' failed label check into a short ValueError).

The lock protects local and NFS-like file systems, where ``flock`` works; on object stores
(``gs://``, ``s3://`` …) there is no lock.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import json
import logging
import os
import re
import socket
from collections.abc import Iterator
from typing import Optional

import numpy as np

from tfest_kit._errors import TfestKitError
from tfest_kit._tf import tf

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no lock
    fcntl = None

__all__ = [
    "LOCK_FILE",
    "OBJECT_GLOBAL_STEP",
    "ExportNotFoundError",
    "ModelDirLockedError",
    "checkpoint_damage",
    "complete_exports",
    "eval_dirs",
    "latest_export",
    "metrics_by_step",
    "recover_checkpoint_state",
    "saved_step",
    "training",
    "writer_lock",
]

LOCK_FILE = ".tfest_kit.lock"
_STEP = re.compile(r"-(\d+)$")
_DATA = re.compile(r"^(.*)\.data-(\d{5})-of-(\d{5})$")
# NanGuardHook sets aside the checkpoints of diverged weights under this prefix.
_SET_ASIDE = "diverged-"
# Tensors whose bytes in the data file neither the index nor a cheap read tell.
_UNSIZED = {tf.variant, tf.resource}


class ModelDirLockedError(TfestKitError):
    """Another process is training into the same model_dir.

    Attributes:
      holder: what that process wrote into the lock file (``host``, ``pid``, ``since``).
    """

    def __init__(self, message: str, holder: dict) -> None:
        super().__init__(message)
        self.holder = holder


def _step(prefix: str) -> Optional[int]:
    match = _STEP.search(prefix)
    return int(match.group(1)) if match else None


def checkpoint_damage(prefix: str) -> Optional[str]:
    """Why the checkpoint ``prefix`` cannot be restored, or None when it looks intact.

    Cheap enough for every ``train()``: it reads the ``.index`` (the table of every tensor's
    dtype and shape), the string tensors (an object-based checkpoint's object graph, a few
    KB; TF1 checkpoints have none), and the sizes of the data shards, but not the numeric
    tensors. A garbled index, a missing shard and data files shorter than the tensors the
    index lists are found; a truncation by less than a string tensor's few bytes of length
    prefix and checksum is not.

    Args:
      prefix: a checkpoint path such as ``model_dir/model.ckpt-100``.

    Returns:
      None, or a short reason such as ``"its .index file is missing"``.

    Example:

        checkpoint_damage(tf.train.latest_checkpoint(model_dir))  # None
    """
    if not tf.io.gfile.exists(prefix + ".index"):
        return "its .index file is missing"
    try:
        reader = tf.train.load_checkpoint(prefix)
        shapes = reader.get_variable_to_shape_map()
        dtypes = reader.get_variable_to_dtype_map()
    except (tf.errors.OpError, ValueError) as e:
        first_line = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return f"its .index file is unreadable ({first_line})"
    directory, base = os.path.split(prefix)
    shards = {}
    for name in tf.io.gfile.listdir(directory or "."):
        match = _DATA.match(name)
        if match and match.group(1) == base:
            shards[int(match.group(2))] = (int(match.group(3)), os.path.join(directory, name))
    expected = 0  # the fewest bytes the data shards hold together
    for name, shape in shapes.items():
        dtype = dtypes[name]
        if dtype == tf.string:
            try:
                expected += sum(len(value) for value in np.asarray(reader.get_tensor(name)).flat)
            except (tf.errors.OpError, IndexError, ValueError) as e:  # "Read less bytes …"
                return f"its data is truncated or garbled ({name}: {e})"
        elif dtype not in _UNSIZED:
            expected += int(np.prod(shape, dtype=np.int64)) * dtype.size
    if not shards:
        return "its .data file is missing" if expected else None
    count = max(total for total, _ in shards.values())
    missing = [i for i in range(count) if i not in shards]
    if missing:
        return f"its data shard {missing[0]} of {count} is missing"
    try:
        size = sum(tf.io.gfile.stat(path).length for _, path in shards.values())
    except tf.errors.NotFoundError:  # deleted since the listing (keep_checkpoint_max)
        return "its data file is missing"
    if size < expected:
        return f"its data is truncated ({size} bytes, the index needs at least {expected})"
    return None


def _read_state(model_dir: str) -> tuple[Optional[str], list[str], Optional[str]]:
    """The ``checkpoint`` state file: the latest checkpoint, all listed, why there is none."""
    from tfest_kit import logs

    try:
        # TensorFlow logs a garbled file as two warnings and "Checkpoint ignored"; ours says it.
        with logs.quieted(logging.ERROR):
            state = tf.train.get_checkpoint_state(model_dir)
    except (ValueError, tf.errors.OpError) as e:  # an empty file: "Invalid checkpoint state"
        return None, [], f"the `checkpoint` state file is unreadable ({e})"
    if state is None:
        if tf.io.gfile.exists(os.path.join(model_dir, "checkpoint")):
            return None, [], "the `checkpoint` state file is unreadable (not a CheckpointState)"
        return None, [], "there is no `checkpoint` state file"
    # (get_checkpoint_state has joined relative entries onto model_dir.)
    listed = [os.path.normpath(p) for p in state.all_model_checkpoint_paths]
    return os.path.normpath(state.model_checkpoint_path), listed, None


def _checkpoints_on_disk(model_dir: str) -> list[str]:
    """The checkpoint prefixes with a step in ``model_dir``, newest first (one listing)."""
    try:
        names = tf.io.gfile.listdir(model_dir)
    except tf.errors.NotFoundError:
        return []
    prefixes = set()
    for name in names:
        match = _DATA.match(name)
        prefix = match.group(1) if match else name[: -len(".index")]
        listed = match or name.endswith(".index")
        if listed and not prefix.startswith(_SET_ASIDE) and _step(prefix) is not None:
            prefixes.add(os.path.join(model_dir, prefix))
    return sorted(prefixes, key=lambda p: (_step(p), p), reverse=True)


def recover_checkpoint_state(model_dir: str) -> Optional[str]:
    """Makes the ``checkpoint`` state file name an intact checkpoint; returns the one to resume.

    The fast path (a readable state file naming an intact checkpoint) reads the state file
    and that checkpoint's index. Otherwise the newest intact ``*-<step>`` checkpoint in
    ``model_dir`` is chosen, one warning names it and the damaged ones, and the state file is
    rewritten (atomically, by ``tf.train.update_checkpoint_state``) with it as the latest,
    listing besides it only the intact checkpoints the old state file listed: the saver's
    ``keep_checkpoint_max`` clean-up deletes listed ones. Damaged files stay where they are
    (training overwrites a checkpoint of the same step when it reaches it).

    Args:
      model_dir: the Estimator's model_dir.

    Returns:
      The checkpoint training resumes from, or None when there is none (a fresh start).

    Raises:
      TfestKitError: when ``model_dir`` holds checkpoint files but none is intact; the message
        lists them and says how to start afresh.

    Example:

        recover_checkpoint_state("/tmp/run")  # "/tmp/run/model.ckpt-60", after a warning
    """
    named, listed_before, state_problem = _read_state(model_dir)
    if named is not None:
        damage = checkpoint_damage(named)
        if damage is None:
            return named
        state_problem = (
            f"the `checkpoint` state file names {os.path.basename(named)}, which is damaged"
        )
    on_disk = _checkpoints_on_disk(model_dir)
    if not on_disk:
        if named is not None:
            # Nothing is left to resume or to overwrite; TensorFlow starts from step 0.
            tf.logging.warning(
                "model_dir %s: %s, and there are no other checkpoint files: training starts "
                "from step 0.",
                model_dir,
                state_problem,
            )
        return None
    damaged = {prefix: checkpoint_damage(prefix) for prefix in on_disk}
    intact = [prefix for prefix in on_disk if damaged[prefix] is None]
    damaged_text = "; ".join(
        f"{os.path.basename(p)}: {why}" for p, why in damaged.items() if why is not None
    )
    if not intact:
        files = sorted(
            name
            for name in tf.io.gfile.listdir(model_dir)
            if any(name.startswith(os.path.basename(p) + ".") for p in on_disk)
        )
        raise TfestKitError(
            f"model_dir {model_dir} holds checkpoint files but no intact checkpoint "
            f"({damaged_text}), so training cannot resume, and starting from step 0 would "
            "overwrite them. To start afresh, delete (or move away) these files, or train into "
            f"another model_dir: {', '.join(files)}. To resume, restore a checkpoint's files "
            "from a copy."
        )
    chosen = intact[0]
    # Only what the state file listed before stays listed: the saver deletes the oldest listed
    # checkpoints beyond keep_checkpoint_max, and must not take ones it never listed.
    kept = [p for p in reversed(intact[1:]) if os.path.normpath(p) in listed_before]
    tf.train.update_checkpoint_state(
        model_dir,
        os.path.basename(chosen),
        all_model_checkpoint_paths=[os.path.basename(p) for p in [*kept, chosen]],
    )
    tf.logging.warning(
        "model_dir %s: %s. Resuming from %s (step %d), the newest intact checkpoint, which "
        "the `checkpoint` state file now names%s.",
        model_dir,
        state_problem,
        os.path.basename(chosen),
        _step(chosen),
        # Left in place: training overwrites them when it reaches their step.
        f". Damaged: {damaged_text}" if damaged_text else "",
    )
    return chosen


# model_dir (real path) -> [open lock file descriptor, depth of nested holds in this process]
_held: dict[str, list] = {}


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _holder(fd: int) -> dict:
    try:
        text = os.pread(fd, 4096, 0).decode("utf-8", "replace")
        holder = json.loads(text) if text.strip() else {}
    except (OSError, ValueError):
        holder = {}
    return holder if isinstance(holder, dict) else {}


def _describe(holder: dict) -> str:
    if not holder:
        return "a process that has not written its name yet"
    return (
        f"pid {holder.get('pid', '?')} on host {holder.get('host', '?')} "
        f"(training since {holder.get('since', '?')})"
    )


@contextlib.contextmanager
def writer_lock(model_dir: str) -> Iterator[None]:
    """Holds ``model_dir``'s writer lock for the ``with`` block.

    The lock is an advisory ``flock`` on ``model_dir/.tfest_kit.lock``, which holds the
    holder's host, pid and start time; it is released (and the file emptied) at the end of
    the block, and by the operating system when the process dies. A non-empty file found
    unlocked was left by a process that died (SIGKILL, a crash): it is taken over with a
    warning. Nested holds in one process are allowed. Paths with a scheme (``gs://`` …) and
    file systems without ``flock`` get no lock (the latter with a warning).

    Args:
      model_dir: the directory training writes checkpoints to (created if missing).

    Raises:
      ModelDirLockedError: another process holds the lock; the message names it.
      TfestKitError: ``model_dir`` cannot be created or written (read-only, no permission).

    Example:

        with writer_lock(estimator.model_dir):
            estimator.train(input_fn, max_steps=1000)
    """
    if fcntl is None or "://" in model_dir:
        yield
        return
    key = os.path.realpath(model_dir)
    if key in _held:
        _held[key][1] += 1
        try:
            yield
        finally:
            _held[key][1] -= 1
        return
    path = os.path.join(model_dir, LOCK_FILE)
    try:
        os.makedirs(model_dir, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        # Training would fail there too, with a longer message, once the graph is built.
        raise TfestKitError(
            f"Cannot write into model_dir {model_dir}: {e.strerror} ({e.filename}). Training "
            "writes its checkpoints there: pick a writable directory."
        ) from e
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(fd)
        os.close(fd)
        raise ModelDirLockedError(
            f"Another process is training into model_dir {model_dir}: {_describe(holder)}. "
            "Two trainings in one model_dir overwrite each other's checkpoints. Wait for it to "
            "end, stop it, or train into another model_dir. (Its lock is "
            f"{path}; it is released when that process ends.)",
            holder,
        ) from None
    except OSError as e:
        os.close(fd)
        if e.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
            raise
        tf.logging.warning(
            "model_dir %s: its file system does not support locks (%s), so a second training "
            "into it would not be stopped.",
            model_dir,
            e.strerror,
        )
        yield
        return
    left = _holder(fd)
    if left and left.get("pid") != os.getpid():
        host, pid = left.get("host"), left.get("pid")
        gone = (
            "is no longer running"
            if host == socket.gethostname() and isinstance(pid, int) and not _pid_alive(pid)
            else "no longer holds it"
        )
        tf.logging.warning(
            "model_dir %s: taking over the lock left by %s, which %s.",
            model_dir,
            _describe(left),
            gone,
        )
    since = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    mine = json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "since": since})
    os.ftruncate(fd, 0)
    os.pwrite(fd, mine.encode("utf-8"), 0)
    _held[key] = [fd, 0]
    try:
        yield
    finally:
        del _held[key]
        try:
            os.ftruncate(fd, 0)  # an empty file: nobody left it behind
        finally:
            os.close(fd)  # releases the flock


class _StepCounter(tf.train.SessionRunHook):
    """Counts session runs from the restored global step: the step a failing run started at.

    It fetches nothing per step, so the training loop does no extra work.
    """

    def begin(self) -> None:
        self._global_step = tf.train.get_global_step()
        self.step: Optional[int] = None

    def after_create_session(self, session, coord) -> None:
        if self._global_step is not None:
            self.step = int(session.run(self._global_step)) - 1

    def before_run(self, run_context) -> None:
        if self.step is not None:
            self.step += 1


def _newest_finite_checkpoint(model_dir: str) -> tuple[Optional[str], Optional[str]]:
    """(the newest checkpoint whose float tensors are all finite, the latest one)."""
    latest = tf.train.latest_checkpoint(model_dir)
    for prefix in _checkpoints_on_disk(model_dir):
        if checkpoint_damage(prefix) is not None:
            continue
        reader = tf.train.load_checkpoint(prefix)
        dtypes = reader.get_variable_to_dtype_map()
        if all(
            np.all(np.isfinite(reader.get_tensor(name)))
            for name, dtype in dtypes.items()
            if dtype.is_floating
        ):
            return prefix, latest
    return None, latest


def _nan_message(model_dir: str, step: Optional[int]) -> str:
    finite, latest = _newest_finite_checkpoint(model_dir)
    where = f"at global step {step}" if step is not None else "during training"
    message = (
        f"NaN loss {where} (model_dir {model_dir}). Lower the learning rate, clip gradients or "
        "check the input for NaN/inf values; tfest_kit.hooks.NanGuardHook() also names the "
        "last finite loss."
    )
    if finite is None:
        return message + " No checkpoint with finite weights is left to resume from."
    message += f" The newest checkpoint with finite weights is {os.path.basename(finite)}"
    if latest is not None and os.path.basename(latest) != os.path.basename(finite):
        message += (
            f"; the latest, {os.path.basename(latest)}, holds NaN/inf weights, which a resumed "
            "run would start from: point the state file at the finite one with "
            f"tf.compat.v1.train.update_checkpoint_state({model_dir!r}, "
            f"{os.path.basename(finite)!r})"
        )
    return message + "."


def _is_disk_full(error: BaseException) -> bool:
    if isinstance(error, OSError):
        return error.errno == errno.ENOSPC
    return isinstance(error, tf.errors.OpError) and "No space left on device" in str(error)


def _disk_full_message(model_dir: str) -> str:
    latest = tf.train.latest_checkpoint(model_dir)
    if latest is None:
        kept = "There is no earlier checkpoint."
    else:
        damage = checkpoint_damage(latest)
        kept = (
            f"The previous checkpoint, {os.path.basename(latest)}, is intact: training "
            "resumes from it once there is space."
            if damage is None
            else f"The previous checkpoint, {os.path.basename(latest)}, is damaged: {damage}."
        )
    return (
        f"No space left on device while writing to model_dir {model_dir}; training stopped. "
        f"{kept} Free space there (or lower RunConfig(keep_checkpoint_max=…))."
    )


def _writes_checkpoints(config) -> bool:
    if config.task_type in ("evaluator", "ps"):
        return False
    jobs = config.cluster_spec.jobs if config.cluster_spec else []
    if not jobs:
        return True
    # Under MultiWorkerMirroredStrategy every worker's config says is_chief; only the chief
    # (or worker 0 of a cluster without one) writes into model_dir.
    if "chief" in jobs:
        return config.task_type == "chief"
    return config.task_type == "worker" and config.task_id == 0


@contextlib.contextmanager
def training(estimator) -> Iterator[tf.train.SessionRunHook]:
    """Wraps one training call of ``estimator``; yields a hook to add to its training hooks.

    On the process that writes checkpoints: the writer lock, then
    :func:`recover_checkpoint_state`. On every process: a NaN loss from Estimator's own
    ``NanTensorHook`` is raised as ``tfest_kit.hooks.NanLossError`` naming the step (counted
    by the yielded hook) and the newest checkpoint with finite weights; a full disk as a
    ``TfestKitError`` naming model_dir and the previous checkpoint. Nested calls (an
    estimator's ``train()`` inside ``train_and_evaluate``) check once more and add nothing.

    Args:
      estimator: a ``tf.estimator.Estimator``.

    Raises:
      ModelDirLockedError: another process trains into the same model_dir.
      TfestKitError: checkpoint files but no intact checkpoint; a full disk.
      NanLossError: the loss became NaN.

    Example:

        with training(est) as counter:
            est.train(input_fn, max_steps=100, hooks=[counter])
    """
    from tfest_kit._class_ids import label_errors
    from tfest_kit.hooks import NanLossError

    model_dir = estimator.model_dir
    counter = _StepCounter()
    with contextlib.ExitStack() as stack:
        if model_dir and _writes_checkpoints(estimator.config):
            stack.enter_context(writer_lock(model_dir))
            recover_checkpoint_state(model_dir)
        try:
            with label_errors():
                yield counter
        except tf.train.NanLossDuringTrainingError as e:
            if isinstance(e, NanLossError):
                raise
            message = _nan_message(model_dir, getattr(counter, "step", None))
            raise NanLossError(message, counter.step, None, None) from e
        except (OSError, tf.errors.OpError) as e:
            if not _is_disk_full(e) or not model_dir:
                raise
            raise TfestKitError(_disk_full_message(model_dir)) from e


# The global step of the newest checkpoint, under either name it is saved as: Estimator reads
# it back by its TF1 name, ``global_step``; an object-based checkpoint
# (``keras_bridge.to_estimator``'s default) keeps it as ``estimator_global_step/…``, where the
# official reader finds nothing and takes the step for 0.
OBJECT_GLOBAL_STEP = "estimator_global_step/.ATTRIBUTES/VARIABLE_VALUE"


def saved_step(model_dir: Optional[str]) -> Optional[int]:
    """Returns the global step of the newest checkpoint: 0 without one, None if unreadable.

    Args:
      model_dir: an Estimator model_dir, or None.

    Returns:
      The step, 0 when ``model_dir`` has no checkpoint, or None when the checkpoint holds no
      global step or was deleted while being read (by the chief's ``keep_checkpoint_max``
      clean-up).

    Example:

        saved_step(estimator.model_dir)  # 300
    """
    prefix = tf.train.latest_checkpoint(model_dir) if model_dir else None
    if prefix is None:
        return 0
    try:
        names = {name for name, _ in tf.train.list_variables(prefix)}
        for name in (tf.GraphKeys.GLOBAL_STEP, OBJECT_GLOBAL_STEP):
            if name in names:
                return int(tf.train.load_variable(prefix, name))
    except tf.errors.NotFoundError:
        pass
    return None


def eval_dirs(model_dir: str) -> list[str]:
    """Returns ``MODEL_DIR/eval`` and every ``MODEL_DIR/eval_<name>`` directory, sorted.

    ``EvalSpec(name=…)`` / ``evaluate(name=…)`` write to ``eval_<name>``; readers that look
    only at ``eval/`` miss them.

    Example:

        eval_dirs("/tmp/run")   # ['/tmp/run/eval', '/tmp/run/eval_holdout']
    """
    if not tf.gfile.IsDirectory(model_dir):
        return []
    names = sorted(entry.rstrip("/") for entry in tf.gfile.ListDirectory(model_dir))
    return [
        os.path.join(model_dir, name)
        for name in names
        if (name == "eval" or name.startswith("eval_"))
        and tf.gfile.IsDirectory(os.path.join(model_dir, name))
    ]


def _summary_number(value) -> Optional[float]:
    """A summary value's number: a TF1 ``simple_value`` or a TF2 ``tf.summary.scalar`` tensor.

    TF2's summaries (Keras' TensorBoard callback, ``tf.summary.scalar`` under a
    ``create_file_writer``) store a rank-0 tensor instead of a ``simple_value``; tensors of
    other plugins (text, histograms, images) are not scalars and are left out.
    """
    if value.HasField("simple_value"):
        return value.simple_value
    if not value.HasField("tensor"):
        return None
    if value.metadata.plugin_data.plugin_name not in ("", "scalars"):
        return None
    try:
        array = tf.make_ndarray(value.tensor)
    except (TypeError, ValueError):
        return None
    # The same test as the plot command's reader: one number of a numeric type.
    if array.size != 1 or array.dtype.kind not in "fiu":
        return None
    return float(array.reshape(()))


def metrics_by_step(eval_dir: str) -> dict[int, dict[str, float]]:
    """Returns ``{step: {tag: value}}`` for the scalar summaries in ``eval_dir``, by step.

    One reader for early stopping, the best exporter, ``train_and_evaluate``'s result on
    distributed tasks and the ``inspect`` / ``plot`` commands (the official
    ``read_eval_metrics`` is not exported and reads no TF2 summaries). Both TF1 summaries
    (``simple_value``, what ``Estimator.evaluate`` writes) and TF2 ones (``tf.summary.scalar``)
    are read. Files are read in name order and a later value for the same step and tag wins.
    A torn last record (the evaluator may be appending to the file right now) ends that
    file's reading.

    Args:
      eval_dir: e.g. ``estimator.eval_dir()``; a missing directory reads as empty.

    Returns:
      The metrics of each evaluated step, in step order; ``{}`` when there are none.

    Example:

        history = metrics_by_step(est.eval_dir())   # {100: {"loss": 0.7, ...}, 200: {...}}
    """
    by_step: dict[int, dict[str, float]] = {}
    # Listed, not globbed: a model_dir such as "lr[0.1]" is no pattern.
    names = tf.gfile.ListDirectory(eval_dir) if tf.gfile.IsDirectory(eval_dir) else []
    for path in sorted(os.path.join(eval_dir, n) for n in names if ".tfevents." in n):
        try:
            for event in tf.train.summary_iterator(path):
                for value in event.summary.value:
                    number = _summary_number(value)
                    if number is not None:
                        by_step.setdefault(int(event.step), {})[value.tag] = number
        except tf.errors.DataLossError as e:
            tf.logging.debug("Eval events: stopped reading %s at a torn record: %s", path, e)
    return dict(sorted(by_step.items()))


class ExportNotFoundError(TfestKitError, FileNotFoundError):
    """No complete SavedModel export was found where one was expected."""


EXPORT_METRICS_FILE = "tfest_kit_eval_metrics.json"


def read_export_metrics(export_dir: str) -> Optional[dict]:
    """The metrics an export was made for (``assets.extra``), or None if absent or unreadable."""
    path = os.path.join(export_dir, "assets.extra", EXPORT_METRICS_FILE)
    if not tf.gfile.Exists(path):
        return None
    try:
        with tf.gfile.GFile(path) as f:
            return json.load(f)
    except (ValueError, OSError) as e:
        tf.logging.warning("Ignoring unreadable export metrics %s: %s", path, e)
        return None


def _is_complete(path: str) -> bool:
    has_graph = tf.gfile.Exists(os.path.join(path, "saved_model.pb")) or tf.gfile.Exists(
        os.path.join(path, "saved_model.pbtxt")
    )
    return has_graph and tf.gfile.Exists(os.path.join(path, "variables", "variables.index"))


def complete_exports(export_dir_base: str) -> list[str]:
    """Returns the complete numbered exports under ``export_dir_base``, oldest first.

    ``temp-*`` directories (an export in progress or one that crashed) and numbered directories
    without ``saved_model.pb`` and ``variables/variables.index`` are left out.
    """
    if not tf.gfile.IsDirectory(export_dir_base):
        return []
    versions = []
    for entry in tf.gfile.ListDirectory(export_dir_base):
        entry = entry.rstrip("/")
        if entry.isdigit() and _is_complete(os.path.join(export_dir_base, entry)):
            versions.append(int(entry))
    return [os.path.join(export_dir_base, str(v)) for v in sorted(versions)]


def latest_export(export_dir_base: str) -> str:
    """Returns the newest complete export under ``export_dir_base``.

    Exports are the numbered (timestamp) directories ``Estimator.export_saved_model`` writes.
    One without ``saved_model.pb`` and ``variables/variables.index`` (a crash mid-export or a
    partial copy) and ``temp-*`` directories are never returned.

    Args:
      export_dir_base: the directory given to ``export_saved_model``, e.g.
        ``model_dir/export/best``.

    Returns:
      The path of the newest complete export.

    Raises:
      ExportNotFoundError: (a ``TfestKitError`` and ``FileNotFoundError``) if there is none;
        the message lists what the directory holds.

    Example:

        predictor = Predictor(latest_export(os.path.join(model_dir, "export", "best")))
    """
    exports = complete_exports(export_dir_base)
    if exports:
        return exports[-1]
    if not tf.gfile.IsDirectory(export_dir_base):
        raise ExportNotFoundError(
            f"No export found: {export_dir_base!r} is not a directory. Pass the directory given "
            "to export_saved_model (or an exporter's model_dir/export/NAME)."
        )
    entries = sorted(e.rstrip("/") for e in tf.gfile.ListDirectory(export_dir_base))
    raise ExportNotFoundError(
        f"No complete export in {export_dir_base!r}: expected numbered directories holding "
        f"saved_model.pb and variables/variables.index. It contains: {entries or 'nothing'}"
    )
