"""``tf.contrib.learn``: what TF1 programs read from it beside learn's Estimators.

TF 1.15's ``tf.contrib.learn`` was deprecated whole.  Its Estimators (``Estimator``,
``Experiment``, ``RunConfig``, ``learn_runner``, ``DNNClassifier`` …) live on in
``tf.estimator`` with other arguments, a rewrite the legacy runner does not make: they stay
refused, and their first use says what replaces them.  Programs that never built a learn
Estimator still read its constants (a seq2seq NMT codebase compares ``mode`` with
``tf.contrib.learn.ModeKeys.INFER``); those are served with TF 1.15's values:

- ``ModeKeys``: ``TRAIN`` ``'train'``, ``EVAL`` ``'eval'``, ``INFER`` ``'infer'`` (learn's
  name for ``tf.estimator.ModeKeys.PREDICT``, the same string);
- ``PredictionKey``, ``ProblemType``, ``TaskType``: the keys of learn's prediction dicts, its
  export problem types and its cluster task types;
- ``preprocessing``: ``VocabularyProcessor`` & co., a port
  (:mod:`tfest_kit.legacy.contrib._learn_preprocessing`);
- ``datasets``: ``mnist`` (``read_data_sets``, ``DataSet`` …) and ``base``, a port
  (:mod:`tfest_kit.legacy.contrib._learn_datasets`), also as
  ``tensorflow.contrib.learn.python.learn.datasets``.

Example:

    if mode == tf.contrib.learn.ModeKeys.INFER:
        return sample_ids
"""

from __future__ import annotations

from typing import Any

__all__ = ["ModeKeys", "PredictionKey", "ProblemType", "TaskType", "BACKING", "NOT_SERVED"]

_PORT = "tfest_kit.legacy.contrib.learn (TF 1.15's constants)"
BACKING = dict.fromkeys(__all__[:4], _PORT)
OTHERS = (
    "tf.estimator (out of scope for the legacy runner): tf.contrib.learn.Estimator -> "
    "tf.estimator.Estimator, learn.RunConfig -> tf.estimator.RunConfig, learn.Experiment / "
    "learn_runner.run -> tf.estimator.train_and_evaluate"
)
NOT_SERVED: dict[str, str] = {}


class ModeKeys:
    """TF 1.15's ``tf.contrib.learn.ModeKeys``: standard names for model modes.

    Example:

        if mode == tf.contrib.learn.ModeKeys.INFER:   # 'infer', as tf.estimator's PREDICT
            return predictions
    """

    TRAIN = "train"
    EVAL = "eval"
    INFER = "infer"

    @classmethod
    def validate(cls, key: Any) -> None:
        """Raises ``ValueError`` unless ``key`` is one of the three modes."""
        if key not in (cls.TRAIN, cls.EVAL, cls.INFER):
            raise ValueError(f"Invalid mode {key}.")


class PredictionKey:
    """TF 1.15's ``tf.contrib.learn.PredictionKey``: keys of learn's prediction dicts.

    Example:

        probabilities = predictions[tf.contrib.learn.PredictionKey.PROBABILITIES]
    """

    CLASSES = "classes"
    PROBABILITIES = "probabilities"
    LOGITS = "logits"
    LOGISTIC = "logistic"
    SCORES = "scores"
    TOP_K = "top_k"
    GENERIC = "output"


class ProblemType:
    """TF 1.15's ``tf.contrib.learn.ProblemType``: the problem a model solves, for export.

    Example:

        problem = tf.contrib.learn.ProblemType.CLASSIFICATION   # 1
    """

    UNSPECIFIED = 0
    CLASSIFICATION = 1
    LINEAR_REGRESSION = 2
    LOGISTIC_REGRESSION = 3


class TaskType:
    """TF 1.15's ``tf.contrib.learn.TaskType``: the task types of a learn cluster.

    Example:

        is_ps = task_type == tf.contrib.learn.TaskType.PS   # 'ps'
    """

    MASTER = "master"
    PS = "ps"
    WORKER = "worker"
