"""A model_dir: its checkpoints, one writer at a time, its eval events and its exports.

:func:`training` wraps every training call of tfest_kit's estimators: the writer lock, resume
from the newest intact checkpoint (TensorFlow ignores a garbled state file and restarts from
step 0 over existing files), and NaN / full-disk errors that name the step and the checkpoint.
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
    "checkpoint_step",
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
# The global step as an object-based checkpoint (to_estimator's default) names it, where the
# official reader finds nothing and takes the step for 0.
OBJECT_GLOBAL_STEP = "estimator_global_step/.ATTRIBUTES/VARIABLE_VALUE"
EXPORT_METRICS_FILE = "tfest_kit_eval_metrics.json"
_STEP = re.compile(r"-(\d+)$")
_DATA = re.compile(r"^(.*)\.data-(\d{5})-of-(\d{5})$")
_UNSIZED = {tf.variant, tf.resource}  # their bytes in the data file are not cheap to tell


class ModelDirLockedError(TfestKitError):
    """Another process trains into the same model_dir; ``holder`` is its lock file's dict."""

    def __init__(self, message: str, holder: dict) -> None:
        super().__init__(message)
        self.holder = holder


class ExportNotFoundError(TfestKitError, FileNotFoundError):
    """No complete SavedModel export was found where one was expected."""


def checkpoint_step(prefix: str) -> Optional[int]:
    """The step a checkpoint prefix ends in (``model.ckpt-200`` -> 200), None without one."""
    match = _STEP.search(prefix)
    return int(match.group(1)) if match else None


def checkpoint_damage(prefix: str) -> Optional[str]:
    """Why checkpoint ``prefix`` cannot be restored (``"its .index file is missing"``), or None.

    Reads the index, the string tensors and the shard sizes, not the numeric tensors: cheap
    enough for every ``train()``; a truncation by a few bytes may go unseen.
    """
    if not tf.io.gfile.exists(prefix + ".index"):
        return "its .index file is missing"
    try:
        reader = tf.train.load_checkpoint(prefix)
        shapes = reader.get_variable_to_shape_map()
        dtypes = reader.get_variable_to_dtype_map()
    except (tf.errors.OpError, ValueError) as e:
        return f"its .index file is unreadable ({type(e).__name__})"
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
    listed = [os.path.normpath(p) for p in state.all_model_checkpoint_paths]
    return os.path.normpath(state.model_checkpoint_path), listed, None


def _checkpoints_on_disk(model_dir: str) -> list[str]:
    """The checkpoint prefixes with a step in ``model_dir``, newest first."""
    try:
        names = tf.io.gfile.listdir(model_dir)
    except tf.errors.NotFoundError:
        return []
    prefixes = set()
    for name in names:
        match = _DATA.match(name)
        prefix = match.group(1) if match else name[: -len(".index")]
        listed = match or name.endswith(".index")
        if listed and checkpoint_step(prefix) is not None:
            prefixes.add(os.path.join(model_dir, prefix))
    return sorted(prefixes, key=lambda p: (checkpoint_step(p), p), reverse=True)


def recover_checkpoint_state(model_dir: str) -> Optional[str]:
    """Makes the ``checkpoint`` state file name an intact checkpoint; returns it (None: none).

    A damaged or missing one is replaced by the newest intact checkpoint, with one warning;
    checkpoint files without an intact one raise a ``TfestKitError`` naming them and the fix.
    """
    named, listed_before, state_problem = _read_state(model_dir)
    if named is not None:
        if checkpoint_damage(named) is None:
            return named
        state_problem = (
            f"the `checkpoint` state file names {os.path.basename(named)}, which is damaged"
        )
    on_disk = _checkpoints_on_disk(model_dir)
    if not on_disk:
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
            f"model_dir {model_dir} has no intact checkpoint ({damaged_text}): training would "
            f"start from step 0 over them. To start afresh, delete {', '.join(files)} or train "
            "into another model_dir."
        )
    chosen = intact[0]
    # The saver deletes listed checkpoints beyond keep_checkpoint_max: list no new ones.
    kept = [p for p in reversed(intact[1:]) if os.path.normpath(p) in listed_before]
    tf.train.update_checkpoint_state(
        model_dir,
        os.path.basename(chosen),
        all_model_checkpoint_paths=[os.path.basename(p) for p in [*kept, chosen]],
    )
    tf.logging.warning(
        "model_dir %s: %s. Resuming from %s, the newest intact checkpoint%s.",
        model_dir,
        state_problem,
        os.path.basename(chosen),
        f" (damaged: {damaged_text})" if damaged_text else "",
    )
    return chosen


_held: set[str] = set()  # the real paths of the model_dirs this process holds


def _holder(fd: int) -> dict:
    try:
        holder = json.loads(os.pread(fd, 4096, 0).decode("utf-8", "replace") or "{}")
    except (OSError, ValueError):
        holder = {}
    return holder if isinstance(holder, dict) else {}


def _describe(holder: dict) -> str:
    return f"pid {holder.get('pid')} on host {holder.get('host')} (since {holder.get('since')})"


@contextlib.contextmanager
def writer_lock(model_dir: str) -> Iterator[None]:
    """Holds ``model_dir``'s writer lock (a ``flock`` on ``.tfest_kit.lock``) for the block.

    The file names the holder (host, pid, start time); one left by a dead process is taken
    over with a warning. Nested holds are allowed; ``gs://``-like paths and file systems
    without ``flock`` get no lock. Raises ``ModelDirLockedError`` naming the holder.
    """
    key = os.path.realpath(model_dir)
    if fcntl is None or "://" in model_dir or key in _held:  # no lock, or held by this process
        yield
        return
    path = os.path.join(model_dir, LOCK_FILE)
    os.makedirs(model_dir, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(fd)
        os.close(fd)
        raise ModelDirLockedError(
            f"Another process is training into model_dir {model_dir}: {_describe(holder)}. "
            "Wait for it to end, stop it, or train into another model_dir.",
            holder,
        ) from None
    except OSError as e:
        os.close(fd)
        if e.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
            raise
        yield  # a file system without locks
        return
    left = _holder(fd)
    if left and left.get("pid") != os.getpid():
        tf.logging.warning(
            "model_dir %s: taking over the lock left by %s.", model_dir, _describe(left)
        )
    since = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    mine = json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "since": since})
    os.ftruncate(fd, 0)
    os.pwrite(fd, mine.encode("utf-8"), 0)
    _held.add(key)
    try:
        yield
    finally:
        _held.discard(key)
        try:
            os.ftruncate(fd, 0)  # an empty file: nobody left it behind
        finally:
            os.close(fd)  # releases the flock


class _StepCounter(tf.train.SessionRunHook):
    """Counts runs from the restored global step, fetching nothing per step."""

    ran: Optional[bool] = None  # whether a step ran; None: no session (no step was due)

    def begin(self) -> None:
        self._global_step = tf.train.get_global_step()
        self.step: Optional[int] = None

    def after_create_session(self, session, coord) -> None:
        self.ran = False
        if self._global_step is not None:
            self.step = int(session.run(self._global_step)) - 1

    def before_run(self, run_context) -> None:
        if self.step is not None:
            self.step += 1

    def after_run(self, run_context, run_values) -> None:
        self.ran = True


def _nan_message(model_dir: str, step: Optional[int]) -> str:
    finite = None
    for prefix in _checkpoints_on_disk(model_dir):
        if checkpoint_damage(prefix) is None:
            reader = tf.train.load_checkpoint(prefix)
            floats = [n for n, d in reader.get_variable_to_dtype_map().items() if d.is_floating]
            if all(np.all(np.isfinite(reader.get_tensor(name))) for name in floats):
                finite = prefix
                break
    where = f"at global step {step}" if step is not None else "during training"
    finite_name = os.path.basename(finite) if finite else "none"
    return (
        f"NaN loss {where} (model_dir {model_dir}); the newest checkpoint with finite weights: "
        f"{finite_name}. Lower the learning rate, clip gradients or check the input for NaN."
    )


def _disk_full_message(model_dir: str) -> str:
    latest = tf.train.latest_checkpoint(model_dir)
    message = f"No space left on device while writing to model_dir {model_dir}."
    if latest:
        damage = checkpoint_damage(latest)
        state = f"damaged: {damage}" if damage else "intact"
        message += f" The previous checkpoint, {os.path.basename(latest)}, is {state}."
    return message + " Free space there (or lower RunConfig(keep_checkpoint_max=…))."


def _writes_checkpoints(config) -> bool:
    if config.task_type in ("evaluator", "ps"):
        return False
    jobs = config.cluster_spec.jobs if config.cluster_spec else []
    if not jobs:
        return True
    # Under MultiWorkerMirroredStrategy every worker says is_chief; only one writes.
    if "chief" in jobs:
        return config.task_type == "chief"
    return config.task_type == "worker" and config.task_id == 0


@contextlib.contextmanager
def training(estimator) -> Iterator[tf.train.SessionRunHook]:
    """Wraps one training call of ``estimator``; yields a hook to add to its training hooks.

    On the checkpoint writer: :func:`writer_lock`, then :func:`recover_checkpoint_state`.
    Everywhere: a NaN loss becomes ``NanLossError`` naming the step (counted by the hook) and
    the newest finite checkpoint; a full disk a ``TfestKitError`` naming the last checkpoint.
    """
    from tfest_kit._class_ids import label_errors
    from tfest_kit.hooks import NanLossError
    from tfest_kit.inputs import read_errors

    model_dir = estimator.model_dir
    counter = _StepCounter()
    with contextlib.ExitStack() as stack:
        if model_dir and _writes_checkpoints(estimator.config):
            stack.enter_context(writer_lock(model_dir))
            recover_checkpoint_state(model_dir)
        try:
            with label_errors(), read_errors():
                yield counter
        except tf.train.NanLossDuringTrainingError as e:
            if isinstance(e, NanLossError):
                raise
            step = getattr(counter, "step", None)
            raise NanLossError(_nan_message(model_dir, step), step, None, None) from e
        except (OSError, tf.errors.OpError) as e:
            full = (
                e.errno == errno.ENOSPC
                if isinstance(e, OSError)
                else "No space left on device" in str(e)
            )
            if not full or not model_dir:
                raise
            raise TfestKitError(_disk_full_message(model_dir)) from e


def saved_step(model_dir: Optional[str]) -> Optional[int]:
    """The global step of the newest checkpoint (either name): 0 without one, None if unreadable."""
    prefix = tf.train.latest_checkpoint(model_dir) if model_dir else None
    if prefix is None:
        return 0
    try:
        names = {name for name, _ in tf.train.list_variables(prefix)}
        for name in (tf.GraphKeys.GLOBAL_STEP, OBJECT_GLOBAL_STEP):
            if name in names:
                return int(tf.train.load_variable(prefix, name))
    except tf.errors.NotFoundError:  # deleted by the chief's keep_checkpoint_max clean-up
        pass
    return None


def eval_dirs(model_dir: str) -> list[str]:
    """``MODEL_DIR/eval`` and every ``MODEL_DIR/eval_<name>`` (``EvalSpec(name=…)``), sorted."""
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
    """A TF1 ``simple_value``, or a TF2 scalar summary's rank-0 numeric tensor, else None."""
    if value.HasField("simple_value"):
        return value.simple_value
    plugin = value.metadata.plugin_data.plugin_name
    if not value.HasField("tensor") or plugin not in ("", "scalars"):  # text, histograms …
        return None
    try:
        array = tf.make_ndarray(value.tensor)
    except (TypeError, ValueError):
        return None
    if array.size != 1 or array.dtype.kind not in "fiu":
        return None
    return float(array.reshape(()))


def metrics_by_step(eval_dir: str) -> dict[int, dict[str, float]]:
    """``{step: {tag: value}}`` of the scalar summaries in ``eval_dir`` (missing: ``{}``).

    The one reader for early stopping, the best exporter and the CLI: the official
    ``read_eval_metrics`` is private and skips TF2 summaries. A torn last record (the
    evaluator is appending) ends that file's reading; a later value for a step wins.
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
    graph = any(
        tf.gfile.Exists(os.path.join(path, n)) for n in ("saved_model.pb", "saved_model.pbtxt")
    )
    return graph and tf.gfile.Exists(os.path.join(path, "variables", "variables.index"))


def complete_exports(export_dir_base: str) -> list[str]:
    """The complete numbered exports under ``export_dir_base``, oldest first (no ``temp-*``)."""
    if not tf.gfile.IsDirectory(export_dir_base):
        return []
    entries = [e.rstrip("/") for e in tf.gfile.ListDirectory(export_dir_base)]
    versions = sorted(int(e) for e in entries if e.isdigit())
    paths = [os.path.join(export_dir_base, str(v)) for v in versions]
    return [path for path in paths if _is_complete(path)]


def latest_export(export_dir_base: str) -> str:
    """Returns the newest complete export under ``export_dir_base``.

    A numbered directory without ``saved_model.pb`` and ``variables/variables.index`` (a crash
    mid-export) and ``temp-*`` directories are never returned.

    Args:
      export_dir_base: the directory given to ``export_saved_model``, e.g.
        ``model_dir/export/best``.

    Returns:
      The path of the newest complete export.

    Raises:
      ExportNotFoundError: if there is none; the message lists what the directory holds.

    Example:

        predictor = Predictor(latest_export(os.path.join(model_dir, "export", "best")))
    """
    exports = complete_exports(export_dir_base)
    if not exports:
        found = "not a directory"
        if tf.gfile.IsDirectory(export_dir_base):
            found = sorted(e.rstrip("/") for e in tf.gfile.ListDirectory(export_dir_base))
        raise ExportNotFoundError(
            f"No complete export in {export_dir_base!r} ({found}): pass the directory given to "
            "export_saved_model (or an exporter's model_dir/export/NAME)."
        )
    return exports[-1]
