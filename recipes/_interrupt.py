"""How a recipe starts and ends: where it writes, Ctrl-C and expected errors, one line each.

Every recipe prints its ``--model_dir`` first (a default one is a new temporary directory, which
would otherwise appear nowhere when the run is stopped early), trains with a
``tfest_kit.hooks.PreemptionHook`` so that Ctrl-C (or SIGTERM) finishes the step, saves a
checkpoint there and says how to resume, and turns a Ctrl-C anywhere else, and the errors it
expects, into one line instead of a 40-80 line traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from typing import Callable, Optional

from recipes import _previous_run as previous_run
from tfest_kit import hooks
from tfest_kit._tf import tf

__all__ = ["Run", "checkpoint_step"]


def checkpoint_step(directory: str) -> Optional[int]:
    """The global step of the newest checkpoint in ``directory``, or None without one."""
    # Estimator names its checkpoints model.ckpt-STEP, whatever the checkpoint format.
    checkpoint = tf.train.latest_checkpoint(directory)
    suffix = checkpoint.rsplit("-", 1)[-1] if checkpoint else ""
    return int(suffix) if suffix.isdigit() else None


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

    def announce(self, model_dir: str, checkpoint_dirs: Optional[Iterable[str]] = None) -> None:
        """Prints ``model_dir: DIR``, the first thing a user needs when a run is stopped.

        Args:
          model_dir: the directory this run writes to.
          checkpoint_dirs: where its checkpoints go (default: ``model_dir``).
        """
        self.model_dir = model_dir
        self._checkpoint_dirs = [model_dir] if checkpoint_dirs is None else list(checkpoint_dirs)
        print(f"{self.dir_flag}: {model_dir}", flush=True)

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
        :meth:`say_start`); then trains nothing in the second case.

        Args:
          estimator: the Estimator to train.
          input_fn: its training input_fn.
          max_steps: the step to train to.
          train_hooks: other hooks for ``train``.
          name: the model's name in the message, for a recipe that trains several.
          more: how to train further once ``max_steps`` is reached (the recipe's flag).
        """
        if not self.say_start(estimator.model_dir, max_steps, name, more):
            return False
        interrupt = self.preemption_hook()
        estimator.train(input_fn, max_steps=max_steps, hooks=[*train_hooks, interrupt])
        if interrupt.preempted:
            self.say_interrupted(checkpoint_step(estimator.model_dir), max_steps, name)
        return bool(interrupt.preempted)

    @staticmethod
    def say_start(
        model_dir: str,
        max_steps: int,
        name: Optional[str] = None,
        more: str = "raise --steps to train more",
    ) -> bool:
        """Says whether a run starts, resumes or has nothing to train; True if it trains.

        Prints ``training [NAME] from step S to N`` (S is the step of the newest checkpoint
        in ``model_dir``, 0 without one), or ``[NAME ]already trained to step S in DIR; MORE``
        when S has reached ``max_steps``: a rerun with the same ``--model_dir`` otherwise
        resumed, or trained nothing, without a word.

        Args:
          model_dir: where the model's checkpoints are.
          max_steps: the step training goes to.
          name: the model's name, for a recipe that trains several.
          more: how to train further, e.g. ``raise --steps to train more``.
        """
        step = checkpoint_step(model_dir) or 0
        if step >= max_steps:
            who = f"{name} " if name else ""
            print(f"{who}already trained to step {step} in {model_dir}; {more}", flush=True)
            return False
        of = f" {name}" if name else ""
        print(f"training{of} from step {step} to {max_steps}", flush=True)
        return True

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
            printed as ``RECIPE: error: MESSAGE`` with exit status 1. ``PreviousRunError``
            always is.

        Returns:
          ``body``'s exit status, 1 after an expected error, 130 after Ctrl-C.
        """
        try:
            return body()
        except (previous_run.PreviousRunError, *errors) as e:
            print(f"{self.recipe}: error: {e}", file=sys.stderr)
            return 1
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
