"""The global step of a model_dir's newest checkpoint, under either name it is saved as.

Estimator reads the step back by its TF1 name, ``global_step``; an object-based checkpoint
(``keras_bridge.to_estimator``'s default) keeps it as ``estimator_global_step/…``, where the
official reader finds nothing and takes the step for 0.
"""

from __future__ import annotations

from typing import Optional

from tfest_kit._tf import tf

__all__ = ["OBJECT_GLOBAL_STEP", "saved_step"]

# Where an object-based checkpoint keeps the step.
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
