"""Hooks that send this process SIGUSR1 during a run, as Ctrl-C or a preemption would."""

from __future__ import annotations

import os
import signal

from tfest_kit._tf import tf


class SignalAtStep(tf.train.SessionRunHook):
    """Sends SIGUSR1 after the ``step``-th run of the session (counting from 1)."""

    def __init__(self, step: int) -> None:
        self._step, self._runs = step, 0

    def after_run(self, run_context, run_values) -> None:
        self._runs += 1
        if self._runs == self._step:
            os.kill(os.getpid(), signal.SIGUSR1)
