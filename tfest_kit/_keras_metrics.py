"""The names a converted Keras model's eval metrics are reported under.

``model.evaluate`` and the Estimator's graph-mode Keras name some metrics differently
(``"AUC"`` / ``auc``, a multi-output model's prefixes); ``early_stopping`` and
``best_exporter`` watch the names users know from Keras. Only :mod:`tfest_kit.keras_bridge`
uses these helpers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Optional

from tfest_kit._tf import tf, tf2

__all__ = [
    "compile_args",
    "keras_metric_names",
    "renamed_metric_ops",
    "warn_unweighted_metrics",
]


def compile_args(keras_model) -> Optional[dict]:
    """The arguments ``keras_model`` was compiled with (Keras' private record), or None.

    None for a model that is not Keras 2.15's, or one built before an earlier conversion
    switched Keras to graph mode (the conversion then fails with its own message).
    """
    try:
        return keras_model._get_compile_args()
    except AttributeError:
        return None


def warn_unweighted_metrics(keras_model) -> None:
    """Warns that the Estimator reports ``weighted_metrics`` without the sample weights.

    Graph-mode Keras builds each weighted metric twice, first with a default weight of 1 and
    then with the ``sample_weights`` of the features, and Estimator runs the first update of
    a metric only: the loss is weighted, those metrics are not (and without ``metrics=`` the
    official model_fn reports none of them). Rebuilding them is not this wrapper's to do
    (Estimator and Keras own both halves), so it says so once, here.
    """
    compiled = compile_args(keras_model)
    weighted = compiled.get("weighted_metrics") if compiled else None
    names = [
        getattr(m, "name", None) or getattr(m, "__name__", m)
        for m in tf.nest.flatten(weighted)
        if m is not None  # flatten(None) is [None]: a model compiled without any
    ]
    if names:
        tf.logging.warning(
            "to_estimator: `keras_model` was compiled with weighted_metrics %s; the "
            "Estimator's evaluate reports them unweighted even when the features carry "
            "sample_weights (only the loss is weighted), and not at all for a model compiled "
            "without metrics=. Compile them as metrics= to make that explicit, or evaluate "
            "weighted metrics with keras_model.evaluate(..., sample_weight=...) before "
            "converting.",
            [str(name) for name in names],
        )


def keras_metric_names(keras_model) -> dict:
    """``{compiled name: Keras' name}`` for the metrics ``keras_model`` was compiled with.

    Keras names a metric given as a class name by the object it makes (``"AUC"`` ->
    ``"auc"``, ``"MeanSquaredError"`` -> ``"mean_squared_error"``), while the Estimator's
    graph-mode Keras keeps the string: ``early_stopping`` / ``best_exporter`` watching the
    name ``model.evaluate`` reports did not find it. A metric object maps to its own name:
    Keras clones the model on every model_fn call, and each clone of a multi-output model
    prefixes the object's name once more (``cls_cls_auc``, then ``cls_cls_cls_auc``), which
    :func:`renamed_metric_ops` undoes. Call it before the conversion clones the model.
    """
    compiled = compile_args(keras_model)
    if compiled is None:
        return {}
    names = {}
    for metrics in (compiled.get("metrics"), compiled.get("weighted_metrics")):
        for metric in tf.nest.flatten(metrics):
            if isinstance(metric, tf2.keras.metrics.Metric):
                names.setdefault(metric.name, metric.name)
                continue
            # Keras turns these into functions named by the string, as graph mode does.
            if not isinstance(metric, str) or metric.lower() in (
                "accuracy",
                "acc",
                "crossentropy",
                "ce",
            ):
                continue
            try:
                made = tf2.keras.metrics.get(metric)
            except (ValueError, TypeError):
                continue
            if isinstance(made, tf2.keras.metrics.Metric) and made.name != metric:
                names[metric] = made.name
    return names


def renamed_metric_ops(metric_ops: Mapping, metric_names: dict, output_names: list[str]) -> dict:
    """``metric_ops`` keyed as Keras reports them (also ``<output>_<name>`` for many outputs)."""
    renamed = {}
    for key, value in metric_ops.items():
        new = metric_names.get(key)
        for output in output_names if new is None and len(output_names) > 1 else ():
            # One prefix per clone of the model ("cls_cls_auc" is "cls_auc"); the longest
            # known name wins, as a metric's own name may start like its output's.
            rest = key
            while new is None and rest.startswith(f"{output}_"):
                rest = rest[len(output) + 1 :]
                if rest in metric_names:
                    new = f"{output}_{metric_names[rest]}"
            if new is not None:
                break
        renamed[key if new is None or new in metric_ops else new] = value
    return renamed
