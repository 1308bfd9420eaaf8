"""How a recipe starts and ends: where it writes, Ctrl-C and expected errors, one line each.

Every recipe prints its ``--model_dir`` first (a default one is a new temporary directory, which
would otherwise appear nowhere when the run is stopped early), trains with a
``tfest_kit.hooks.PreemptionHook`` so that Ctrl-C (or SIGTERM) finishes the step, saves a
checkpoint there and says how to resume, and turns a Ctrl-C anywhere else, and the errors it
expects, into one line instead of a 40-80 line traceback.

The recipes train through :meth:`Run.train_and_evaluate` (``tfest_kit.train_and_evaluate``), so
the same command runs on one process and as every task of a ``TF_CONFIG`` cluster (see
``python -m tfest_kit.cluster``): every task needs the same ``--model_dir`` (on one machine
they derive the same default, :meth:`Run.choose_model_dir`), each writes its input files to a
directory of its own (:meth:`Run.data_dir`), only the chief holds the model_dir's writer lock
(:meth:`Run.hold`, before anything is written) and records the flags; chief and
workers train, the evaluator evaluates each new checkpoint; a ps task serves variables from
the start, without reading data or building a model, and never returns; the chief alone goes
on to the results, predictions and export, the others end with ``Task TYPE:INDEX done``
(:meth:`Run.task_done`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from typing import Callable, Optional

import tfest_kit
from recipes import _previous_run as previous_run
from tfest_kit import cluster, hooks, training
from tfest_kit._tf import tf

__all__ = ["Run", "StartLine", "UsageError", "checkpoint_step"]


class UsageError(Exception):
    """Flags that do not fit this run (a cluster task without ``--model_dir``): one line, exit 1."""


class _Interrupted(Exception):
    """Training stopped by Ctrl-C or SIGTERM, after the line that says how to resume."""


def checkpoint_step(directory: str) -> Optional[int]:
    """The global step of the newest checkpoint in ``directory``, or None without one."""
    # Estimator names its checkpoints model.ckpt-STEP, whatever the checkpoint format.
    checkpoint = previous_run.newest_checkpoint(directory)
    suffix = checkpoint.rsplit("-", 1)[-1] if checkpoint else ""
    return int(suffix) if suffix.isdigit() else None


def _say_training(step: int, max_steps: int, name: Optional[str]) -> None:
    of = f" {name}" if name else ""
    print(f"training{of} from step {step} to {max_steps}", flush=True)


def _say_trained(model_dir: str, step: int, name: Optional[str], more: str) -> None:
    who = f"{name} " if name else ""
    print(f"{who}already trained to step {step} in {model_dir}; {more}", flush=True)


class StartLine(tf.train.SessionRunHook):
    """Says ``training from step S to N`` with S the global step the session restored.

    Before training, the ``checkpoint`` state file may be garbled, empty or name damaged
    files; tfest_kit's estimators and ``train_and_evaluate`` then resume from the newest
    intact checkpoint, which only the restored session tells. When that step has reached
    ``max_steps``, Estimator trains nothing and creates no session:
    :meth:`end_of_training` then says so. Reading the step once costs one tiny session run.

    Args:
      model_dir: where the model's checkpoints are.
      max_steps: the step training goes to.
      name: the model's name, for a recipe that trains several.
      more: how to train further, e.g. ``raise --steps to train more``.

    Example:

        start = StartLine(model_dir, 100, None, "raise --steps to train more")
        estimator.train(input_fn, max_steps=100, hooks=[start])
        start.end_of_training()
    """

    def __init__(self, model_dir: str, max_steps: int, name: Optional[str], more: str) -> None:
        self._model_dir, self._max_steps, self._name, self._more = model_dir, max_steps, name, more
        self._said = False
        self._global_step = None

    def begin(self) -> None:
        self._global_step = tf.train.get_global_step()

    def after_create_session(self, session, coord) -> None:
        if self._said:  # a session recreated after an error: training goes on, said already
            return
        self._said = True
        if self._global_step is None:
            step = checkpoint_step(self._model_dir) or 0
        else:
            step = int(session.run(self._global_step))
        _say_training(step, self._max_steps, self._name)

    def end_of_training(self) -> None:
        """After training: says the model was trained already when no session was created."""
        if not self._said:
            step = checkpoint_step(self._model_dir) or 0
            _say_trained(self._model_dir, step, self._name, self._more)


class Run:
    """One run of a recipe: its name, its model_dir once chosen, and how it ends.

    Args:
      recipe: the recipe's module name, which starts its one-line messages.
      dir_flag: the flag that names the model directory (``output_dir`` for bert_classifier).

    Example:

        RUN = Run("tpu_digits")

        def main(argv):
            return RUN.main(_run)   # _run calls RUN.announce(model_dir), then RUN.train(...)
    """

    def __init__(self, recipe: str, dir_flag: str = "model_dir") -> None:
        self.recipe = recipe
        self.dir_flag = dir_flag
        self.model_dir: Optional[str] = None
        self._checkpoint_dirs: list[str] = []
        self._task: dict = {}  # {} on one process; in a cluster the task TF_CONFIG names
        self._cluster: dict = {}  # TF_CONFIG's "cluster"
        self._held = contextlib.ExitStack()  # the writer lock, until main() returns

    # -- where the run writes ---------------------------------------------------------------

    @property
    def in_cluster(self) -> bool:
        """True when ``TF_CONFIG`` names this process a task of a cluster."""
        return bool(self._task)

    @property
    def is_chief(self) -> bool:
        """True on one process and on a cluster's chief: the task that writes the results."""
        return self._task.get("type") in (None, "chief", "master")

    def choose_model_dir(self, given: Optional[str]) -> str:
        """Returns ``given``, or else a temporary directory; checks ``TF_CONFIG`` first.

        On one process the temporary directory is a new one. In a cluster whose every address
        is a loopback one (``python -m tfest_kit.cluster``: every task on this machine) it is
        the one every task derives from the cluster, ``TMPDIR/RECIPE_cluster_<hash>``. On a ps
        task it serves the variables and never returns (see :meth:`check_cluster`).

        Raises:
          UsageError: in a cluster of several machines without ``given``: each task would use
            a directory of its own, and the evaluator would wait for a checkpoint forever.
          ValueError: for a malformed ``TF_CONFIG`` (``tfest_kit.cluster.validate_tf_config``).
        """
        self.check_cluster(given)
        if given:
            return given
        if self._task:
            return self._shared_temporary_dir()
        return tempfile.mkdtemp(prefix=f"{self.recipe}_")

    def check_cluster(self, given: Optional[str]) -> None:
        """Reads ``TF_CONFIG``; in a cluster of several machines, requires ``given``.

        For a recipe that makes its temporary directory later (:meth:`choose_model_dir`
        makes it at once). On a ps task it serves the variables and never returns.

        Raises:
          UsageError, ValueError: as :meth:`choose_model_dir` does.
        """
        config = cluster.validate_tf_config()
        self._task = config.get("task") or {}
        self._cluster = config.get("cluster") or {}
        if self._task and not given and not self._on_this_machine():
            raise UsageError(
                f"TF_CONFIG names task {self._task['type']}:{self._task['index']} of a cluster "
                f"on several machines: every task needs the same --{self.dir_flag} (a shared "
                f"directory or gs:// bucket). Got: --{self.dir_flag} unset"
            )
        if self._task.get("type") == "ps":
            self._serve(given or self._shared_temporary_dir())

    def _on_this_machine(self) -> bool:
        hosts = [address.rsplit(":", 1)[0] for job in self._cluster.values() for address in job]
        return all(h in ("localhost", "[::1]") or h.startswith("127.") for h in hosts)

    def _shared_temporary_dir(self) -> str:
        # The same for every task of this cluster (the same addresses), another for the next
        # cluster (other free ports).
        spec = json.dumps(self._cluster, sort_keys=True).encode()
        digest = hashlib.sha1(spec).hexdigest()[:12]
        return os.path.join(tempfile.gettempdir(), f"{self.recipe}_cluster_{digest}")

    def _serve(self, model_dir: str) -> None:
        """A ps task's whole part: serves the variables; never returns.

        Through ``tfest_kit.train_and_evaluate``, as in the recipe's own call, but before the
        recipe reads its data or builds its model, which a ps task never uses.
        """
        print(
            f"Task ps:{self._task['index']} serves the variables of the models the cluster "
            "trains, until the cluster stops it",
            flush=True,
        )

        def never_called(features=None, labels=None, mode=None):  # model_fn and input_fn
            raise AssertionError("a ps task builds no model and reads no data")

        est = tf.estimator.Estimator(never_called, model_dir=model_dir)
        tfest_kit.train_and_evaluate(est, never_called, never_called, max_steps=1)

    def check_and_record(
        self,
        model_dir: str,
        recorded: Mapping[str, object],
        checkpoint_dirs: Optional[Iterable[str]] = None,
    ) -> None:
        """Refuses flags that differ from the checkpoint's, then records them (the chief only).

        See ``recipes._previous_run``; the other tasks of a cluster check, and create
        ``model_dir`` if needed, but leave the record to the chief.

        Raises:
          PreviousRunError: as ``_previous_run.check`` and ``record`` do; :meth:`main` says
            it in one line.
        """
        previous_run.check(model_dir, self.recipe, recorded, checkpoint_dirs, self.dir_flag)
        self.record(model_dir, recorded)

    def hold(self, model_dir: str) -> None:
        """Takes ``model_dir``'s writer lock until :meth:`main` returns (the chief only).

        Before anything is written into ``model_dir``: a second run into it is refused in one
        line before it writes a file (a rewritten data file killed the first run mid-read).

        Raises:
          ModelDirLockedError: another process holds it (``tfest_kit.training.writer_lock``).
        """
        self._held.enter_context(training.writer_lock(model_dir))

    def record(self, model_dir: str, recorded: Mapping[str, object]) -> None:
        """Creates ``model_dir`` if needed, takes its writer lock (:meth:`hold`), then records
        the flags (the chief only).

        Raises:
          PreviousRunError: when ``model_dir`` cannot be created or written to.
          ModelDirLockedError: another process holds ``model_dir``'s writer lock.
        """
        previous_run.make_dir(model_dir)  # a directory that cannot be made: one clear line
        self.hold(model_dir)
        if self.is_chief:
            previous_run.record(model_dir, self.recipe, recorded)

    def data_dir(self, model_dir: str) -> str:
        """``model_dir/data``; in a cluster ``model_dir/data/TYPE_INDEX`` for a task not the chief.

        Every task writes the recipe's input files: in a directory of its own none reads a
        file another task is still writing (the contents are the same).
        """
        data = os.path.join(model_dir, "data")
        if self.is_chief:
            return data
        return os.path.join(data, f"{self._task['type']}_{self._task['index']}")

    def announce(self, model_dir: str, checkpoint_dirs: Optional[Iterable[str]] = None) -> None:
        """Prints ``model_dir: DIR``, the first thing a user needs when a run is stopped.

        When the checkpoints go elsewhere (one sub-directory per model), a second line names
        those directories: ``python -m tfest_kit inspect`` / ``plot`` read a model's own.

        Args:
          model_dir: the directory this run writes to.
          checkpoint_dirs: where its checkpoints go (default: ``model_dir``).
        """
        self.model_dir = model_dir
        self._checkpoint_dirs = [model_dir] if checkpoint_dirs is None else list(checkpoint_dirs)
        print(f"{self.dir_flag}: {model_dir}", flush=True)
        if self._checkpoint_dirs != [model_dir]:
            dirs = ", ".join(self._checkpoint_dirs)
            print(f"checkpoints (each model's own, for inspect and plot): {dirs}", flush=True)

    def resume_hint(self) -> str:
        """``rerun with --model_dir=DIR (and the same flags)``."""
        return f"rerun with --{self.dir_flag}={self.model_dir} (and the same flags)"

    def train(
        self,
        estimator,
        input_fn,
        max_steps: int,
        train_hooks: Sequence = (),
        name: Optional[str] = None,
        more: str = "raise --steps to train more",
    ) -> bool:
        """``estimator.train`` that stops cleanly on Ctrl-C; True (after saying so) if it did.

        First says where training starts, or that there is nothing to train (see
        :meth:`start_hooks`); then trains nothing in the second case.

        Args:
          estimator: the Estimator to train.
          input_fn: its training input_fn.
          max_steps: the step to train to.
          train_hooks: other hooks for ``train``.
          name: the model's name in the message, for a recipe that trains several.
          more: how to train further once ``max_steps`` is reached (the recipe's flag).
        """
        starts = self.start_hooks(estimator.model_dir, max_steps, name, more)
        if not starts:
            return False
        interrupt = self.preemption_hook()
        estimator.train(input_fn, max_steps=max_steps, hooks=[*starts, *train_hooks, interrupt])
        starts[0].end_of_training()
        if interrupt.preempted:
            self.say_interrupted(checkpoint_step(estimator.model_dir), max_steps, name)
        return bool(interrupt.preempted)

    def train_and_evaluate(
        self,
        estimator,
        train_input_fn,
        eval_input_fn,
        max_steps: int,
        train_hooks: Sequence = (),
        *,
        name: Optional[str] = None,
        more: str = "raise --steps to train more",
        eval_name: Optional[str] = None,
        eval_steps: Optional[int] = None,
        exporters: Sequence = (),
    ) -> Optional[dict]:
        """Trains and evaluates through ``tfest_kit.train_and_evaluate``, as this process's task.

        On one process: says where training starts (:meth:`start_hooks`), trains to
        ``max_steps`` and evaluates the final checkpoint once, as ``train`` then ``evaluate``
        did. In a cluster the chief says it; chief and workers train, the evaluator evaluates
        each new checkpoint (and runs ``exporters``), a ps task serves variables and never
        returns.

        Args:
          estimator: the Estimator.
          train_input_fn: its training input_fn (repeating).
          eval_input_fn: its evaluation input_fn.
          max_steps: the step to train to.
          train_hooks: other training hooks (a PreemptionHook is added).
          name: the model's name in the messages, for a recipe that trains several.
          more: how to train further once ``max_steps`` is reached (the recipe's flag).
          eval_name: the evaluation's name (``model_dir/eval_NAME``).
          eval_steps: evaluation batches (None: the whole eval set).
          exporters: exporters the evaluation runs (on the evaluator, in a cluster).

        Returns:
          The metrics of the final checkpoint on one process and on the chief (in a cluster
          the chief evaluates it itself, into ``eval_chief`` or ``eval_NAME_chief``, unless
          the evaluator's newest metrics are of that step); None on the cluster's other
          tasks, whose work ends here (see :meth:`task_done`).

        Raises:
          _Interrupted: after Ctrl-C or SIGTERM stopped training and the line saying how to
            resume; :meth:`main` returns 130.
        """
        config = estimator.config
        in_cluster = bool(config.cluster_spec.jobs) or config.task_type == "evaluator"
        starts = []
        if config.is_chief:  # a cluster's other tasks would each say it
            starts = self.start_hooks(estimator.model_dir, max_steps, name, more)
        interrupt = self.preemption_hook()
        # The evaluator of a cluster evaluates each new checkpoint at once (at least a second
        # apart), and the final one in time for the launcher's grace period; on one process
        # the official defaults leave one evaluation, of the final checkpoint.
        waits = {"throttle_secs": 0, "start_delay_secs": 0} if in_cluster else {}
        metrics = tfest_kit.train_and_evaluate(
            estimator,
            train_input_fn,
            eval_input_fn,
            max_steps=max_steps,
            eval_steps=eval_steps,
            hooks=[*starts, *train_hooks, interrupt],
            exporters=list(exporters),
            eval_name=eval_name,
            **waits,
        )
        for start in starts:
            start.end_of_training()
        if interrupt.preempted:
            self.say_interrupted(
                checkpoint_step(estimator.model_dir), max_steps, name, saves=config.is_chief
            )
            raise _Interrupted()
        if not config.is_chief:
            return None
        final_step = checkpoint_step(estimator.model_dir)
        if not in_cluster or metrics.get("global_step") == final_step:
            return metrics
        # The evaluator lags behind the chief (or there is none): the chief's results are of
        # the final checkpoint, evaluated here.
        tf.logging.info(
            "The newest evaluator metrics are of step %s, the final checkpoint is step %s: "
            "evaluating it on the chief",
            metrics.get("global_step"),
            final_step,
        )
        chief_name = f"{eval_name}_chief" if eval_name else "chief"
        return estimator.evaluate(eval_input_fn, steps=eval_steps, name=chief_name)

    def task_done(self) -> int:
        """Says that a cluster task other than the chief is done; returns exit status 0."""
        print(
            f"Task {self._task['type']}:{self._task['index']} done; the chief writes the "
            "results, predictions and final export.",
            flush=True,
        )
        return 0

    @staticmethod
    def start_hooks(
        model_dir: str,
        max_steps: int,
        name: Optional[str] = None,
        more: str = "raise --steps to train more",
    ) -> list:
        """Says where training starts, or that there is nothing to train; hooks for the call.

        When the newest checkpoint in ``model_dir`` has reached ``max_steps``, prints
        ``[NAME ]already trained to step S in DIR; MORE`` and returns ``[]``: nothing to
        train. Otherwise returns a :class:`StartLine` hook to add to the training hooks: it
        says ``training [NAME] from step S to N`` with S the step the session restored, which
        is right also when tfest_kit's estimators and ``train_and_evaluate`` recover from a
        garbled, empty or damaged ``checkpoint`` state file (read beforehand, it says 0).
        Call its ``end_of_training()`` once training returns.

        Args:
          model_dir: where the model's checkpoints are.
          max_steps: the step training goes to.
          name: the model's name, for a recipe that trains several.
          more: how to train further, e.g. ``raise --steps to train more``.

        Example:

            starts = RUN.start_hooks(model_dir, 100)
            tfest_kit.train_and_evaluate(est, train_fn, eval_fn, 100, hooks=[*starts])
            for start in starts:
                start.end_of_training()
        """
        step = checkpoint_step(model_dir) or 0
        if step >= max_steps:
            _say_trained(model_dir, step, name, more)
            return []
        return [StartLine(model_dir, max_steps, name, more)]

    @staticmethod
    def progress_hook(max_steps: int, batch_size: int) -> hooks.ProgressHook:
        """About ten progress lines over the run: the recipes hide TensorFlow's INFO lines."""
        return hooks.ProgressHook(
            every_n_steps=max(1, max_steps // 10), total_steps=max_steps, batch_size=batch_size
        )

    @staticmethod
    def preemption_hook() -> hooks.PreemptionHook:
        """The hook for a recipe that calls ``train`` itself (through train_and_evaluate)."""
        # Ctrl-C (or SIGTERM) finishes the step, saves a checkpoint there and stops cleanly, so
        # a rerun with the same --model_dir resumes; without it everything since the last
        # checkpoint is lost, after a traceback.
        return hooks.PreemptionHook()

    def say_interrupted(
        self,
        step: Optional[int],
        max_steps: Optional[int],
        name: Optional[str] = None,
        saves: bool = True,
    ) -> None:
        """Prints the one line for training stopped by Ctrl-C: the step and how to resume.

        Args:
          step: the step of the newest checkpoint.
          max_steps: the step training was going to.
          name: the model's name, for a recipe that trains several.
          saves: whether this process saves checkpoints (False for a cluster's other tasks:
            the chief saves them, and the newest one is not this task's step).
        """
        if not saves:
            print(f"interrupted; to resume, {self.resume_hint()}", flush=True)
            return
        of = f" of {name}" if name else ""
        total = f"/{max_steps}" if max_steps else ""
        print(
            f"interrupted at step {step}{total}{of}; checkpoint saved. To resume, "
            f"{self.resume_hint()}",
            flush=True,
        )

    def main(self, body: Callable[[], Optional[int]], errors: tuple = ()) -> Optional[int]:
        """Runs ``body``; its expected errors and Ctrl-C end the program with one line.

        Args:
          body: the recipe's work; returns the exit status (None: 0).
          errors: exception types that are expected problems (a bad flag value, offline),
            printed as ``RECIPE: error: MESSAGE`` with exit status 1. ``PreviousRunError``,
            ``UsageError`` and ``ModelDirLockedError`` (a second run into the model_dir)
            always are.

        Returns:
          ``body``'s exit status, 1 after an expected error, 130 after Ctrl-C (also when it
          stopped :meth:`train_and_evaluate`, which said so).
        """
        try:
            with self._held:
                return body()
        except (
            previous_run.PreviousRunError,
            UsageError,
            training.ModelDirLockedError,
            *errors,
        ) as e:
            print(f"{self.recipe}: error: {e}", file=sys.stderr)
            return 1
        except _Interrupted:  # said where training stopped
            return 130
        except KeyboardInterrupt:  # outside training (the PreemptionHook handles it there)
            print(self._interrupted_line(), file=sys.stderr)
            return 130

    def _interrupted_line(self) -> str:
        if self.model_dir is None:  # before anything was written
            return f"{self.recipe}: interrupted"
        at = ""
        if len(self._checkpoint_dirs) == 1:
            step = checkpoint_step(self._checkpoint_dirs[0])
            at = f" (last checkpoint: step {step})" if step is not None else ""
        return f"{self.recipe}: interrupted{at}; to resume, {self.resume_hint()}"
