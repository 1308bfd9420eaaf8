"""Session-run hooks for Estimator and plain TF1 training loops.

Every hook is a ``tf.compat.v1.train.SessionRunHook``: pass it to ``Estimator.train(hooks=…)``,
a ``TrainSpec`` / ``EvalSpec``, or ``tf.compat.v1.train.MonitoredTrainingSession(hooks=…)``.
Each resets its state in ``begin()``, so one instance can serve several runs.

* :class:`ProgressHook` - step / total, loss, steps/sec, examples/sec, ETA.
* :func:`early_stopping` - stop when an eval metric stops improving.
* :class:`NanGuardHook` - stop (raise :class:`NanLossError`) when the loss is NaN / inf.
* :class:`PreemptionHook` - on SIGTERM / SIGINT save a checkpoint at the current step and stop.

Example:

    from tfest_kit import hooks

    estimator.train(input_fn, max_steps=1000, hooks=[
        hooks.ProgressHook(every_n_steps=50, total_steps=1000, batch_size=32),
        hooks.NanGuardHook(),
        hooks.PreemptionHook(),
    ])
"""

from __future__ import annotations

from tfest_kit._early_stopping import early_stopping
from tfest_kit._guards import NanGuardHook, NanLossError, PreemptionHook
from tfest_kit._progress import ProgressHook

__all__ = ["ProgressHook", "early_stopping", "NanGuardHook", "NanLossError", "PreemptionHook"]
