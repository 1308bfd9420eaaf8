"""``tf.estimator.Estimator`` and the canned Estimators as the runner hands them to a script.

Each is the ``tf.compat.v1.estimator`` class with tfest_kit's protections of a model_dir, the
ones ``tfest_kit.tpu.TPUEstimator`` has: ``train`` holds model_dir's writer lock (a second
process training into it is refused, naming the first) and, when the ``checkpoint`` state file
is damaged, resumes from the newest intact checkpoint with one warning; ``evaluate``,
``predict`` and exports restore that checkpoint too (TensorFlow would use untrained weights or
find no model), and a damaged ``checkpoint_path`` given to them is a ValueError naming it;
``evaluate`` fails an evaluation that would never end or that saw no batch.  What the model
computes is unchanged.

Example:

    est = LEGACY_ESTIMATORS.Estimator(model_fn, model_dir="/tmp/run")
    est.train(input_fn, max_steps=100)   # refused if another process trains into /tmp/run
"""

from __future__ import annotations

import inspect
import types

from tfest_kit._model_dir import usable_checkpoint
from tfest_kit._task_guard import EndlessPredictWarning, guarded_eval_hooks, guarded_train
from tfest_kit._tf import estimator as tf_estimator

__all__ = ["Estimator", "LEGACY_ESTIMATORS", "guarded"]


class _Guards:
    """``train`` / ``evaluate`` of an official Estimator class, guarded as tfest_kit's own."""

    def _assert_members_are_not_overridden(self) -> None:
        # TF's check that a subclass keeps Estimator's members, for a script's own subclass;
        # the classes here override train / evaluate to guard them.
        if type(self).__module__ != __name__:
            super()._assert_members_are_not_overridden()

    def train(self, input_fn, hooks=None, steps=None, max_steps=None, saving_listeners=None):
        """As ``Estimator.train``, guarding model_dir (one writer, an intact checkpoint)."""
        with guarded_train(self, hooks) as hooks:
            return super().train(input_fn, hooks, steps, max_steps, saving_listeners)

    def evaluate(self, input_fn, steps=None, hooks=None, checkpoint_path=None, name=None):
        """As ``Estimator.evaluate``; a ValueError for an input that never ends or is empty."""
        hooks = guarded_eval_hooks(self.config, hooks, steps)
        checkpoint_path = usable_checkpoint(self.model_dir, "evaluate()", checkpoint_path)
        return super().evaluate(input_fn, steps, hooks, checkpoint_path, name)

    def predict(self, input_fn, predict_keys=None, hooks=None, checkpoint_path=None, **kw):
        """As ``Estimator.predict``; a warning for an input that never ends."""
        checkpoint_path = usable_checkpoint(self.model_dir, "predict()", checkpoint_path)
        hooks = [*(hooks or ()), EndlessPredictWarning()]
        return super().predict(input_fn, predict_keys, hooks, checkpoint_path, **kw)

    def latest_checkpoint(self):
        """The state file's checkpoint if intact, else the newest intact one (with a warning)."""
        return usable_checkpoint(self.model_dir, "an export")

    def _export(self, export, args, kwargs):
        """``export`` (either method below) with its ``checkpoint_path`` checked."""
        bound = inspect.signature(export).bind(*args, **kwargs)
        given = bound.arguments.get("checkpoint_path")
        bound.arguments["checkpoint_path"] = usable_checkpoint(self.model_dir, "an export", given)
        return export(*bound.args, **bound.kwargs)

    def export_saved_model(self, *args, **kwargs):
        """As ``Estimator.export_saved_model``; a damaged ``checkpoint_path`` is a ValueError."""
        return self._export(super().export_saved_model, args, kwargs)

    def export_savedmodel(self, *args, **kwargs):
        """As TF 1.x's ``Estimator.export_savedmodel``; a damaged ``checkpoint_path`` is a
        ValueError."""
        return self._export(super().export_savedmodel, args, kwargs)


class _EstimatorType(type):
    # As in TF 1.x, isinstance(x, tf.estimator.Estimator) holds for every Estimator (canned,
    # TPUEstimator, one a library built), not only for those built from this class.
    def __instancecheck__(cls, instance) -> bool:
        base = tf_estimator.Estimator if cls is Estimator else cls
        return type.__instancecheck__(base, instance)

    def __subclasscheck__(cls, subclass) -> bool:
        base = tf_estimator.Estimator if cls is Estimator else cls
        return type.__subclasscheck__(base, subclass)


class Estimator(_Guards, tf_estimator.Estimator, metaclass=_EstimatorType):
    __doc__ = tf_estimator.Estimator.__doc__


def guarded(official: type) -> type:
    """``official`` (an Estimator class) with the protections above, under its own name."""
    name, doc = official.__name__, official.__doc__
    return type(name, (_Guards, official), {"__module__": __name__, "__doc__": doc})


# The names a script reaches in tf.estimator; every other name there is the official one.
LEGACY_ESTIMATORS = types.SimpleNamespace(
    Estimator=Estimator,
    **{
        name: guarded(getattr(tf_estimator, name))
        for name in dir(tf_estimator)
        if name != "Estimator"
        and isinstance(getattr(tf_estimator, name), type)
        and issubclass(getattr(tf_estimator, name), tf_estimator.Estimator)
    },
)
