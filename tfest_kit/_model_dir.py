"""A model_dir: its checkpoints, one writer at a time, its eval events and its exports.

TensorFlow silently restarts from step 0 on a garbled state file: :func:`usable_checkpoint` picks
the checkpoint to restore; :func:`training` wraps every training call.
"""

import contextlib
import datetime
import errno
import json
import logging
import os
import re
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any, Callable, Optional
from urllib.parse import urlsplit

import numpy as np

from tfest_kit import logs
from tfest_kit._checks import TfestKitError
from tfest_kit._tf import tf

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no lock
    fcntl = None

LOCK_FILE = ".tfest_kit.lock"
# The global step as an object-based checkpoint (to_estimator's default) names it, where the
# official reader finds nothing and takes the step for 0.
OBJECT_GLOBAL_STEP = "estimator_global_step/.ATTRIBUTES/VARIABLE_VALUE"
EXPORT_METRICS_FILE = "tfest_kit_eval_metrics.json"
_STEP = re.compile(r"-(\d+)$")
_FILE = re.compile(r"^(.*)\.(index|data-\d{5}-of-\d{5})$")  # a checkpoint's files
GLOB_CHARS = re.compile(r"[*?[]")  # what TensorFlow globs in a checkpoint path
_NOT_NUMPY = {tf.variant, tf.resource}
_DAMAGED_EVENTS = set()
LOOP_STEP = "tfest_kit_loop_step"  # graph collection: a training loop's end step, for _StepCounter
_NO_SPACE = "No space left on device"  # ENOSPC's text, also in TensorFlow's errors
MWMS = ("CollectiveAllReduceStrategy", "MultiWorkerMirroredStrategy")  # its class names (v1, TF2)
_verdicts: dict = {}  # (prefix, finite, its files' names, inodes, sizes, mtimes, ctimes): verdict
_held: set[str] = set()  # the real paths of the model_dirs this process holds
_training_now: set = set()  # the model_dirs training() is in


class ModelDirLockedError(TfestKitError):
    """Another process trains into the same model_dir; ``holder`` is its lock file's dict."""

    def __init__(self, message: str, holder: dict) -> None:
        super().__init__(message)
        self.holder = holder


class ExportNotFoundError(TfestKitError, FileNotFoundError):
    """No complete SavedModel export was found where one was expected."""


def checkpoint_step(prefix: str) -> Optional[int]:
    """The step a checkpoint prefix ends in (``model.ckpt-200`` -> 200), None without one."""
    match = _STEP.search(prefix)  # not :=, which autograph loses
    return int(match.group(1)) if match else None


def checkpoint_damage(prefix: str, finite: bool = False) -> Optional[str]:
    """Why checkpoint ``prefix`` cannot be restored (``"its .index file is missing"``), or None.

    Reads every tensor as a restore does, so TensorFlow checks each one's size and checksum
    (a truncated, zeroed or bit-flipped data file); ``finite``: NaN / inf weights count too.
    """
    folder, name = os.path.split(prefix)
    try:  # stat calls, not a read of every tensor on each evaluate, predict and export
        names = sorted(f for f in os.listdir(folder or ".") if f.startswith(name + "."))
        stats = [(f, os.stat(os.path.join(folder, f))) for f in names]
        stamp = tuple((f, s.st_ino, s.st_size, s.st_mtime_ns, s.st_ctime_ns) for f, s in stats)
    except OSError:  # not a local path, or a file removed meanwhile: read it
        stamp = None
    if stamp is None or (prefix, finite, stamp) not in _verdicts:
        _verdicts[prefix, finite, stamp] = _read_damage(prefix, finite)
    return _verdicts[prefix, finite, stamp]


def _read_damage(prefix: str, finite: bool) -> Optional[str]:
    if not tf.io.gfile.exists(prefix + ".index"):
        return "its .index file is missing"
    try:
        reader = tf.train.load_checkpoint(prefix)
        dtypes = reader.get_variable_to_dtype_map()
    except (tf.errors.OpError, ValueError) as e:
        return f"its .index file is unreadable ({type(e).__name__})"
    for name, dtype in dtypes.items():
        try:
            value = reader.get_tensor(name) if dtype not in _NOT_NUMPY else None
        except (tf.errors.OpError, IndexError, ValueError) as e:  # "Checksum does not match"
            message = getattr(e, "message", str(e)).split(": ", 1)[-1]
            return f"its data is truncated, garbled or missing ({name}: {message})"
        if finite and dtype.is_floating and not np.all(np.isfinite(value)):
            return f"its weights are not finite ({name})"
    return None


def _read_state(model_dir: str) -> tuple[Optional[str], list[str], Optional[str]]:
    """The ``checkpoint`` state file: the latest checkpoint, all listed, why there is none."""
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
    return state.model_checkpoint_path, list(state.all_model_checkpoint_paths), None


def _in_dir(path: str, model_dir: str) -> bool:
    return os.path.realpath(os.path.dirname(path)) == os.path.realpath(model_dir)


def _checkpoints_on_disk(model_dir: str) -> list[str]:
    """The checkpoint prefixes with a step in ``model_dir``, newest first."""
    try:
        names = tf.io.gfile.listdir(model_dir)
    except tf.errors.NotFoundError:
        return []
    prefixes = {os.path.join(model_dir, m.group(1)) for m in map(_FILE.match, names) if m}
    stepped = [p for p in prefixes if checkpoint_step(p) is not None]
    return sorted(stepped, key=lambda p: (checkpoint_step(p), p), reverse=True)


def path_problem(model_dir: str) -> Optional[str]:
    """Why TensorFlow can use no checkpoint in ``model_dir`` (a file; it globs paths), or None."""
    if os.path.isfile(model_dir):
        return f"`model_dir` must be a directory (made if missing). Got: a file, {model_dir!r}"
    if os.path.isdir(os.path.join(model_dir, "checkpoint")):  # TensorFlow's state file's name
        return f"model_dir {model_dir}: `checkpoint` is a directory (TensorFlow's file): rename it"
    if os.path.isfile(os.path.join(model_dir, "saved_model.pb")):  # else trained from scratch
        return f"model_dir {model_dir} is an export (saved_model.pb), not a model_dir"
    if model_dir.startswith("~"):  # else a directory named "~" here
        return f"model_dir {model_dir} starts with '~', which only a shell expands: expand it"
    if GLOB_CHARS.search(model_dir):
        return (
            f"`model_dir` must not hold the characters * ? [ : TensorFlow's Saver and checkpoint "
            'reader take its path for a pattern, so a checkpoint in it is never restored ("not a '
            f'valid checkpoint") nor deleted. Rename the directory without them. Got: {model_dir!r}'
        )
    return None


def choose_checkpoint(
    model_dir: str, writer: bool = False
) -> tuple[Optional[str], Optional[str], dict[str, str]]:
    """``(the state file's checkpoint if intact and no newer one is, else the newest intact one,
    or None; why not the state file's; {damaged: why})``, reading up to the one chosen."""
    named, _, problem = _read_state(model_dir)
    on_disk = _checkpoints_on_disk(model_dir)
    if named is not None:
        step, name = checkpoint_step(named), os.path.basename(named)
        # Saved after the state file was written (a crash between): training would overwrite it.
        # Not diverged ones: a state file set back to the checkpoint NanLossError names.
        newer = [p for p in on_disk if step is not None and checkpoint_step(p) > step]
        newer = next((p for p in newer if not checkpoint_damage(p, True)), None)
        # Another directory's, in a model_dir with its own (a copy's): the Saver would delete them.
        here = _in_dir(named, model_dir)
        away = not here and bool(on_disk)
        if newer is None and checkpoint_damage(named) is None and not away:
            return named, None, {}
        later = f"{os.path.basename(newer or '')} is newer (to use {name}, delete newer ones)"
        why = f": {later}" if newer else ", which is damaged" if named in on_disk else ", not there"
        why = ", in another directory" if away else why
        problem = f"the `checkpoint` state file names {name if here else named}{why}"
    damaged = {}
    for prefix in on_disk:
        if writer or tf.io.gfile.exists(prefix + ".index"):  # a reader's writer may be saving it
            damaged[prefix] = checkpoint_damage(prefix)
            if damaged[prefix] is None:
                return prefix, problem, {p: why for p, why in damaged.items() if why}
    return None, problem, damaged


def usable_checkpoint(model_dir: str, method: str, given: Optional[str] = None) -> Optional[str]:
    """The checkpoint ``method`` restores from ``model_dir`` (:func:`choose_checkpoint`; not the
    state file's: one warning), or ``given`` if intact; None without checkpoint files. Raises a
    ``TfestKitError`` naming the files and the fix if none is intact."""
    if given:  # else ~100 lines of "Read less bytes than requested"
        if why := checkpoint_damage(given):  # ValueError: an evaluator skips a vanished one
            raise ValueError(
                f"Checkpoint {given} cannot be restored: {why}. Pass an intact checkpoint_path "
                "(`python -m tfest_kit inspect` lists them) or None for the newest; to train on, "
                "use tfest_kit.train_and_evaluate or tpu.TPUEstimator (they resume from the newest"
                " intact one: Estimator.train takes the state file's), or delete its files"
            )
        return given
    if path_problem(model_dir):
        raise ValueError(path_problem(model_dir))
    chosen, problem, damaged = choose_checkpoint(model_dir, writer=method == "training")
    damaged_text = "; ".join(f"{os.path.basename(p)}: {why}" for p, why in damaged.items())
    if chosen is None and damaged:
        prefixes = tuple(os.path.basename(p) + "." for p in damaged)
        files = sorted(name for name in tf.io.gfile.listdir(model_dir) if name.startswith(prefixes))
        raise TfestKitError(
            f"model_dir {model_dir} has no intact checkpoint ({damaged_text}): {method} would "
            f"use untrained weights. To start afresh, delete {', '.join(files)} or train into "
            "another model_dir."
        )
    if chosen is None and tf.io.gfile.exists(os.path.join(model_dir, "checkpoint")):  # foreign?
        raise TfestKitError(
            f"model_dir {model_dir}: {problem}, and no checkpoint is there: {method} would use "
            "untrained weights (training would overwrite that file). Restore the checkpoint "
            "files, or move the `checkpoint` file away (another tool's?) to start afresh."
        )
    if chosen is None and method in ("evaluate()", "predict()"):  # TensorFlow: an INFO line
        tf.logging.warning(f"No checkpoint in model_dir {model_dir}: {method} uses initial weights")
    if chosen is not None and problem is not None:
        use = "resuming from" if method == "training" else f"{method} uses"
        damaged_text = f" (damaged: {damaged_text})" if damaged_text else ""
        tf.logging.warning(
            "model_dir %s: %s; %s %s, the newest intact checkpoint%s.",
            *(model_dir, problem, use, os.path.basename(chosen), damaged_text),
        )
    return chosen


def recover_checkpoint_state(model_dir: str) -> Optional[str]:
    """Makes the ``checkpoint`` state file name :func:`usable_checkpoint`'s; returns it."""
    named, listed_before, _ = _read_state(model_dir)
    chosen = usable_checkpoint(model_dir, "training")
    if chosen is None or chosen == named:
        return chosen
    for newer in _checkpoints_on_disk(model_dir):  # damaged: training would save over them
        if checkpoint_step(newer) > checkpoint_step(chosen):  # (no glob characters: path_problem)
            for file in tf.io.gfile.glob(newer + ".*"):
                tf.io.gfile.rename(file, newer + ".damaged" + file[len(newer) :])
            tf.logging.warning(f"{newer}: its files kept as {os.path.basename(newer)}.damaged.*")
    # The saver deletes listed checkpoints beyond keep_checkpoint_max: list no new ones.
    kept = [p for p in listed_before if checkpoint_step(p) in range(checkpoint_step(chosen))]
    kept = [p for p in kept if _in_dir(p, model_dir)]  # never another directory's
    # Written as TensorFlow writes them, relative to model_dir (from a relative one's parent).
    as_given = os.path.basename if os.path.isabs(model_dir) else str
    listed = [*map(as_given, kept), as_given(chosen)]
    tf.train.update_checkpoint_state(model_dir, as_given(chosen), listed)
    return chosen


def _holder(fd: int) -> dict:
    with contextlib.suppress(OSError, ValueError):
        holder = json.loads(os.pread(fd, 4096, 0).decode("utf-8", "replace") or "{}")
        return holder if isinstance(holder, dict) else {}
    return {}


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
    try:  # the lock file's PermissionError read as a stale lock's
        os.makedirs(model_dir, exist_ok=True)
        fd = os.open(os.path.join(model_dir, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
    except PermissionError as e:
        raise PermissionError(
            f"model_dir {model_dir} is not writable ({e}): train elsewhere"
        ) from None
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
        tf.logging.warning("model_dir %s: taking over the lock of %s.", model_dir, _describe(left))
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


def grpc_reachable(address: str, timeout: float = 2.0) -> Optional[bool]:
    """Whether something accepts TCP connections at ``grpc://host:port``; None: no address."""
    host = port = None
    with contextlib.suppress(ValueError):  # a port that is no number, or out of range
        parts = urlsplit(address)
        host, port = parts.hostname, parts.port
    if not host or not port:
        return None
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


class _StepCounter(tf.train.SessionRunHook):
    """Counts runs from the restored global step, fetching nothing per step. The outermost
    (``started``: graph build began) reports progress every 10 s until the first step and writes
    the last step's summaries to ``summary_dir`` unless ``SummarySaverHook`` does."""

    say_every = 10.0  # seconds
    ran: Optional[bool] = None  # whether a step ran; None: no session (no step was due)

    def __init__(self, started=None, max_steps=None, steps=None, summary_dir=None, every=None):
        self._started, self._until = started, (max_steps, steps)
        self._summary_dir, self._every = summary_dir, every
        self.first_step_done, self._saying = threading.Event(), threading.Lock()
        self._phase, self._awaited = "building the graph", []  # awaited: "ps host:port" …
        if started is not None:
            threading.Thread(target=self._say_phase, daemon=True).start()

    def _say_phase(self) -> None:
        while not self.first_step_done.wait(self.say_every):
            with self._saying:  # not once the first step ended: its hooks may log meanwhile
                elapsed = time.monotonic() - self._started
                if not self.first_step_done.is_set():
                    tf.logging.info("Training: still %s (%.0f s so far)", self._phase, elapsed)
            late = self._awaited if elapsed >= self.say_every * 6 else []  # probed only then
            if absent := [a for a in late if grpc_reachable(f"grpc://{a.split()[1]}") is False]:
                self._awaited = []  # a WARNING once (the phase is said at INFO)
                tf.logging.warning(
                    f"Training: waiting {elapsed:.0f} s for {', '.join(absent)}, where nothing "
                    "listens: start that task (TF_CONFIG's address), or stop this one"
                )

    def begin(self) -> None:
        self._global_step = tf.train.get_global_step()
        self._loop_step = tf.get_collection(LOOP_STEP)
        self.step: Optional[int] = None
        self._summary = None
        if self._started is not None:
            self._phase = "creating the session (restoring or initialising the variables)"
            cluster = json.loads(os.environ.get("TF_CONFIG") or "{}").get("cluster") or {}
            writer = writes_checkpoints()  # a chief waits for the ps, the others for both
            kinds = [k for k in ("chief", "ps") if k in cluster and not (writer and k == "chief")]
            if cluster and (kinds or not writer):  # TensorFlow waits for them for 2 hours
                tasks = [f"{k} {', '.join(cluster[k])}" for k in kinds]
                self._awaited = [f"{k} {a}" for k in kinds for a in cluster[k]]
                self._phase += f": waiting for {' and '.join(tasks) or 'worker 0'} (TF_CONFIG)"
            elapsed = time.monotonic() - self._started
            tf.logging.info("Training graph built in %.0f s; %s", elapsed, self._phase)
            if self._summary_dir and self._every and any(self._until):
                self._summary = tf.summary.merge_all()

    def after_create_session(self, session, coord) -> None:
        strategy = type(tf.distribute.get_strategy()).__name__  # a new one: TF's recovery
        if self.ran is not None and strategy.startswith(MWMS):
            raise TfestKitError(
                "This task's session failed (logged above); under MultiWorkerMirroredStrategy a "
                "new one would leave the other workers waiting forever. Restart every task of the "
                "cluster: training resumes from the newest checkpoint."
            )
        self._phase, self.ran, self._awaited = "running the first step", False, []  # all there
        if self._global_step is not None:
            self._next_step = int(session.run(self._global_step))
            self.step = self._next_step - 1
        if self._summary is not None and self.step is not None:
            max_steps, steps = self._until
            self._last = max_steps or self.step + 1 + steps
            if (self._last - self.step - 2) % self._every == 0:
                self._summary = None  # SummarySaverHook writes the last step

    def before_run(self, run_context):
        fetches = {}
        if self.step is not None:
            # A training loop's run makes several steps: its end step is fetched with it.
            self.step = self._next_step if self._loop_step else self.step + 1
            fetches = {"step": self._loop_step[0]} if self._loop_step else {}
            if self._summary is not None and self.step + 1 == self._last:
                fetches["summary"] = self._summary
        return tf.train.SessionRunArgs(fetches) if fetches else None

    def after_run(self, run_context, run_values) -> None:
        with self._saying:
            self.first_step_done.set()
        self.ran, self._next_step = True, (run_values.results or {}).get("step")
        if "summary" in (run_values.results or {}):
            writer = tf.summary.FileWriterCache.get(self._summary_dir)
            writer.add_summary(run_values.results["summary"], self._last)

    def check_ran(self, input_arg: str) -> None:
        """Names an input that ended before the first step: Estimator returns silently."""
        if self.ran is False:
            raise ValueError(
                f"`{input_arg}` yielded no batch: check that the training data is not empty. "
                f"Got: 0 steps from global step {self.step}"
            )


def newest_finite_checkpoint(model_dir: str, up_to_step: Optional[int] = None) -> Optional[str]:
    """The newest intact checkpoint in ``model_dir`` (up to a step) with finite weights (read)."""
    on_disk = _checkpoints_on_disk(model_dir)
    candidates = [p for p in on_disk if up_to_step is None or checkpoint_step(p) <= up_to_step]
    return next((p for p in candidates if checkpoint_damage(p, finite=True) is None), None)


def writes_checkpoints() -> bool:
    """Whether this task writes the checkpoints (and holds the writer lock): ``RunConfig``'s
    chief (no cluster, ``chief``, TF1's ``master``), or worker 0 of a cluster of workers only (a
    strategy's; read from ``TF_CONFIG``, as its ``RunConfig`` calls every task worker 0)."""
    tf_config = json.loads(os.environ.get("TF_CONFIG") or "{}")
    cluster, task = tf_config.get("cluster") or {}, tf_config.get("task") or {}
    if set(cluster) == {"worker"}:
        return task.get("type") == "worker" and int(task.get("index", 0)) == 0
    return tf.estimator.RunConfig().is_chief


@contextlib.contextmanager
def training(estimator, max_steps=None, steps=None) -> Iterator[tf.train.SessionRunHook]:
    """Wraps one training call of ``estimator``; yields a hook to add to its training hooks.

    On the checkpoint writer: :func:`writer_lock`, then :func:`recover_checkpoint_state`.
    Everywhere: a NaN loss becomes ``NanLossError`` naming the step (counted by the hook) and
    the newest finite checkpoint; a full disk a ``TfestKitError`` naming the last checkpoint.
    """
    from tfest_kit._model_fn_call import label_errors
    from tfest_kit.hooks import NanLossError
    from tfest_kit.inputs import read_errors

    model_dir = estimator.model_dir
    if model_dir and path_problem(model_dir):  # before the lock file is written
        raise ValueError(path_problem(model_dir))
    outermost = model_dir not in _training_now  # train_and_evaluate calls train
    trains = outermost and estimator.config.task_type not in ("ps", "evaluator")
    if trains:
        tf.logging.info("Training into %s: building the graph", model_dir)
    summary_dir = model_dir if outermost and writes_checkpoints() else None
    started = time.monotonic() if trains else None  # phase lines
    every = estimator.config.save_summary_steps
    counter = _StepCounter(started, max_steps, steps, summary_dir, every)
    with contextlib.ExitStack() as stack:
        stack.callback(counter.first_step_done.set)  # ends its phase lines
        if outermost:
            _training_now.add(model_dir)
            stack.callback(_training_now.discard, model_dir)
        if model_dir and writes_checkpoints():
            stack.enter_context(writer_lock(model_dir))
            recover_checkpoint_state(model_dir)
        try:
            with label_errors(), read_errors():
                yield counter
        except tf.train.NanLossDuringTrainingError as e:
            if isinstance(e, NanLossError):
                raise
            finite = newest_finite_checkpoint(model_dir, step := getattr(counter, "step", None))
            where = f"at global step {step}" if step is not None else "during training"
            raise NanLossError(
                f"NaN loss {where} (model_dir {model_dir}); the newest checkpoint with finite "
                f"weights: {os.path.basename(finite) if finite else 'none'}. Lower the learning "
                "rate, clip gradients or check the input for NaN.",
                step,
            ) from e
        except (OSError, tf.errors.OpError) as e:
            full = e.errno == errno.ENOSPC if isinstance(e, OSError) else _NO_SPACE in str(e)
            if not full or not model_dir:
                raise
            message = f"{_NO_SPACE} while writing to model_dir {model_dir}."
            if latest := tf.train.latest_checkpoint(model_dir):
                state = f"damaged: {damage}" if (damage := checkpoint_damage(latest)) else "intact"
                message += f" The previous checkpoint, {os.path.basename(latest)}, is {state}."
            fix = " Free space there (or lower RunConfig(keep_checkpoint_max=…))."
            raise TfestKitError(message + fix) from e


def saved_step(model_dir: Optional[str]) -> Optional[int]:
    """The global step of the newest checkpoint (either name): 0 without one, None if unreadable."""
    prefix = tf.train.latest_checkpoint(model_dir) if model_dir else None
    if prefix is None:
        return 0
    with contextlib.suppress(tf.errors.NotFoundError):  # deleted by keep_checkpoint_max's clean-up
        names = {name for name, _ in tf.train.list_variables(prefix)}
        for name in (tf.GraphKeys.GLOBAL_STEP, OBJECT_GLOBAL_STEP):
            if name in names:
                return int(tf.train.load_variable(prefix, name))
    return None


def dir_entries(path: str) -> list[str]:
    """The sorted names in directory ``path`` (none if it is no directory), without gfile's "/"."""
    names = tf.gfile.ListDirectory(path) if tf.gfile.IsDirectory(path) else []
    return sorted(name.rstrip("/") for name in names)


def eval_dirs(model_dir: str) -> list[str]:
    """``MODEL_DIR/eval`` and every ``MODEL_DIR/eval_<name>`` (``EvalSpec(name=…)``), sorted."""
    names = [n for n in dir_entries(model_dir) if n.partition("_")[0] == "eval"]
    paths = [os.path.join(model_dir, n) for n in names]
    return [path for path in paths if tf.gfile.IsDirectory(path)]


def _summary_number(value) -> Optional[float]:
    """A TF1 ``simple_value``, or a TF2 scalar summary's rank-0 numeric tensor, else None."""
    if value.HasField("simple_value"):
        return value.simple_value
    plugin = value.metadata.plugin_data.plugin_name
    if not value.HasField("tensor") or plugin not in ("", "scalars"):  # text, histograms …
        return None
    with contextlib.suppress(TypeError, ValueError):
        array = tf.make_ndarray(value.tensor)
        return float(array.reshape(())) if array.size == 1 and array.dtype.kind in "fiu" else None
    return None


def metrics_by_step(eval_dir: str) -> dict[int, dict[str, float]]:
    """``{step: {tag: value}}`` of the scalar summaries in ``eval_dir`` (missing: ``{}``).

    The one reader for early stopping, the best exporter and the CLI: the official
    ``read_eval_metrics`` is private and skips TF2 summaries. A torn or damaged (said) record
    ends that file's reading; a later value for a step wins.
    """
    by_step: dict[int, dict[str, float]] = {}
    # Listed, not globbed: a model_dir such as "lr[0.1]" is no pattern.
    for path in [os.path.join(eval_dir, n) for n in dir_entries(eval_dir) if ".tfevents." in n]:
        try:
            for event in tf.train.summary_iterator(path):
                for value in event.summary.value:
                    if (number := _summary_number(value)) is not None:
                        by_step.setdefault(int(event.step), {})[value.tag] = number
        except tf.errors.DataLossError as e:  # "truncated": a record being appended
            if "corrupted" in e.message and path not in _DAMAGED_EVENTS:  # said once a process
                _DAMAGED_EVENTS.add(path)
                tf.logging.warning(f"{path}: {e.message}; the values after it are not read")
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


def complete_exports(export_dir_base: str) -> list[str]:
    """The complete numbered exports under ``export_dir_base``, oldest first (no ``temp-*``)."""
    versions = sorted(int(e) for e in dir_entries(export_dir_base) if e.isdigit())
    paths = [os.path.join(export_dir_base, str(v)) for v in versions]
    indexed = [p for p in paths if tf.gfile.Exists(os.path.join(p, "variables", "variables.index"))]
    return [p for p in indexed if tf.saved_model.contains_saved_model(p)]


def latest_export(export_dir_base: str) -> str:
    """Returns the newest complete export under ``export_dir_base``.

    Never a numbered directory lacking ``saved_model.pb`` or ``variables/variables.index`` (a
    crash mid-export), nor ``temp-*``.

    Args:
      export_dir_base: the ``export_saved_model`` directory, e.g. ``model_dir/export/best``.

    Returns:
      The path of the newest complete export.

    Raises:
      ExportNotFoundError: if there is none; the message lists what the directory holds.

    Example:

        predictor = Predictor(latest_export(os.path.join(model_dir, "export", "best")))
    """
    if not (exports := complete_exports(export_dir_base)):
        found = "not a directory"
        if tf.gfile.IsDirectory(export_dir_base):  # a model_dir: name its exporters' bases
            inner = dir_entries(os.path.join(export_dir_base, "export"))
            found = f"its export/ holds {inner}" if inner else dir_entries(export_dir_base)
        raise ExportNotFoundError(
            f"No complete export in {export_dir_base!r} ({found}): pass the directory given to "
            "export_saved_model (or an exporter's model_dir/export/NAME)."
        )
    return exports[-1]


# A checkpoint the chief deleted while the evaluator evaluated or exported it: found, skipped.
KEEP_MORE = (
    "The chief keeps only the newest RunConfig(keep_checkpoint_max=…) checkpoints (default 5): "
    "raise it (or save less often) so that checkpoints outlive their evaluation and export."
)


def vanished_checkpoint(
    error: BaseException, model_dir: str, checkpoint_path: Optional[str] = None
) -> Optional[str]:
    """The checkpoint ``error`` names (``checkpoint_path`` or any in model_dir) if it is gone."""
    if not isinstance(error, (tf.errors.NotFoundError, ValueError)):
        return None
    message = str(error)
    if checkpoint_path:
        named = [checkpoint_path] if checkpoint_path in message else []
    else:
        named = re.findall(re.escape(os.path.join(model_dir, "")) + r"[^\s'\"/]+?-\d+", message)
    for path in named:
        if not (tf.gfile.Exists(path + ".index") and tf.gfile.Glob(path + ".data-*")):
            return path
    return None


def _temp_dirs(export_path: str) -> set[str]:
    return {os.path.join(export_path, e) for e in dir_entries(export_path) if e.startswith("temp-")}


def export_unless_vanished(
    export: Callable[[], Any], name: str, export_path: str, checkpoint_path: Optional[str]
) -> Any:
    """``export()``, or None with a warning if ``checkpoint_path`` vanished meanwhile; a failed
    export's half-written ``export_path/temp-*`` is deleted."""
    before = _temp_dirs(export_path)
    try:
        return export()
    except Exception as e:
        for path in sorted(_temp_dirs(export_path) - before):
            with contextlib.suppress(tf.errors.NotFoundError):
                tf.gfile.DeleteRecursively(path)  # gs:// too, where shutil sees nothing
        model_dir = os.path.dirname(checkpoint_path or "")
        if not checkpoint_path or not vanished_checkpoint(e, model_dir, checkpoint_path):
            raise
        tf.logging.warning(
            f"Exporter {name!r}: checkpoint {checkpoint_path} was deleted while it was being "
            f"exported; this export is skipped ({type(e).__name__}). {KEEP_MORE}"
        )
        return None


# higher_is_better's words, so early_stopping and best_exporter agree on an improvement. Whole
# words, never substrings: "map" is inside "mape" and "heatmap_mse", "r2" in "layer2_mse".
_MAX_WORDS = frozenset(
    "acc accuracy auc auroc auprc prauc precision recall f1 f2 fscore f1score fbeta specificity "
    "sensitivity tpr tnr mcc kappa map ndcg mrr hits iou miou dice jaccard r2 rsquared pearson "
    "spearman correlation bleu rouge rougel meteor psnr ssim".split()
)
# A word naming an error wins: "accuracy_loss" is lower-is-better.
_ERROR_WORDS = frozenset(
    "loss error err mse mae mape smape wmape rmse msle rmsle logloss crossentropy xent nll "
    "perplexity hinge distance cost".split()
)


def higher_is_better(monitor: str, mode: str, who: str) -> bool:
    """Whether higher values of ``monitor`` are better; ``mode="auto"`` reads its words.

    Adjacent words are also joined and trailing digits stripped (``f_1``, ``top_5``, ``acc5``);
    a name it does not know is taken as lower-is-better, with a warning naming ``who``.
    """
    if mode not in ("min", "max", "auto"):
        raise ValueError(f'`mode` must be "min", "max" or "auto". Got: {mode!r}')
    if mode != "auto":
        return mode == "max"
    words = [word for word in re.split(r"[^0-9a-z]+", monitor.lower()) if word]
    words = set(words) | {a + b for a, b in zip(words, words[1:])}
    words |= {word.rstrip("0123456789") for word in words} - {""}
    top_k = any(re.fullmatch(r"top(\d+|k)", word) for word in words)  # top-5 accuracy
    higher = bool(words & _MAX_WORDS or top_k) and not words & _ERROR_WORDS
    if not higher and not words & _ERROR_WORDS:  # a higher-is-better one would keep the worst
        tf.logging.warning(
            f'{who}: mode="auto" does not know the metric "{monitor}" and takes lower values as '
            'better; pass mode="max" if higher is better (or mode="min" to say so).'
        )
    return higher
