"""The names a converted Keras model's eval metrics are reported under.

``model.evaluate`` and the Estimator's graph-mode Keras name some metrics differently
(``"AUC"`` / ``auc``, a multi-output model's prefixes); ``early_stopping`` and
``best_exporter`` watch the names users know from Keras. Only :mod:`tfest_kit.keras_bridge`
uses these helpers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Callable, Optional

from tfest_kit._tf import tf, tf2

__all__ = [
    "compile_args",
    "keras_metric_names",
    "metric_names_keeper",
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


def metric_names_keeper(keras_model) -> Callable[[], None]:
    """Returns a function that gives each clone of ``keras_model`` the compiled metrics' names.

    Keras clones the model on every model_fn call and compiles the clone with copies of the
    metrics it finds in ``keras_model._get_compile_args()``; the first clone freezes that
    method to return one dict, and writes its own copies (already renamed
    ``<output>_<name>`` for a multi-output model) into it. So each evaluation of a
    multi-output model prefixed a metric object's name once more (``cls_cls_auc``, then
    ``cls_cls_cls_auc`` …), and ``early_stopping`` / ``best_exporter`` lost the key they
    watch. Calling the returned function before each clone hands Keras a fresh dict of the
    metrics as compiled.
    """
    as_compiled = compile_args(keras_model)
    if as_compiled is None:
        return lambda: None

    def fresh_compile_args(user_metrics: bool = True) -> dict:
        del user_metrics  # the clone asks for the user's metrics, as compiled
        return dict(as_compiled)

    def keep() -> None:
        keras_model._get_compile_args = fresh_compile_args

    return keep


def keras_metric_names(keras_model) -> dict:
    """``{compiled string: Keras' name}`` for the string metrics Keras reports under another name.

    Keras names a metric given as a class name by the object it makes (``"AUC"`` ->
    ``"auc"``, ``"MeanSquaredError"`` -> ``"mean_squared_error"``), while the Estimator's
    graph-mode Keras keeps the string: ``early_stopping`` / ``best_exporter`` watching the
    name ``model.evaluate`` reports did not find it.
    """
    compiled = compile_args(keras_model)
    if compiled is None:
        return {}
    names = {}
    for metrics in (compiled.get("metrics"), compiled.get("weighted_metrics")):
        for metric in tf.nest.flatten(metrics):
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
            rest = key[len(output) + 1 :] if key.startswith(f"{output}_") else None
            if rest in metric_names:
                new = f"{output}_{metric_names[rest]}"
                break
        renamed[key if new is None or new in metric_ops else new] = value
    return renamed
