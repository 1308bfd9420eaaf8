"""Serving: input receivers, exporters, and a fast ``Predictor`` over an exported SavedModel.

Receivers say what an exported model accepts (:func:`raw_receiver`, :func:`parsing_receiver`,
:func:`bert_receiver`, :func:`image_bytes_receiver`); :func:`best_exporter` keeps the best
models during ``train_and_evaluate``; :func:`latest_export` finds the newest complete export;
:class:`Predictor` loads one once and answers many calls; :func:`export_and_check` exports and
verifies the export against ``estimator.predict``.

Example:

    from tfest_kit import serving

    receiver = serving.raw_receiver({"x": (tf.float32, [4])})
    export_dir = serving.export_and_check(est, receiver, {"x": x_test[:8]}, "/tmp/exports")
    predictor = serving.Predictor("/tmp/exports")
    predictor({"x": x_test})["probabilities"]
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Callable

import numpy as np

from tfest_kit._errors import TfestKitError
from tfest_kit._exporters import (
    METRICS_FILE as EXPORT_METRICS_FILE,
)
from tfest_kit._exporters import (
    ExportNotFoundError,
    best_exporter,
    latest_export,
)
from tfest_kit._predictor import ExportLoadError, Predictor, PredictorInputError, read_signatures
from tfest_kit._receivers import (
    bert_receiver,
    image_bytes_receiver,
    parsing_receiver,
    raw_receiver,
)
from tfest_kit._tf import estimator as tf_estimator
from tfest_kit._tf import tf

__all__ = [
    "raw_receiver",
    "parsing_receiver",
    "bert_receiver",
    "image_bytes_receiver",
    "best_exporter",
    "latest_export",
    "Predictor",
    "read_signatures",
    "export_and_check",
    "ExportMismatchError",
    "ExportNotFoundError",
    "ExportLoadError",
    "PredictorInputError",
    "EXPORT_METRICS_FILE",
]


class ExportMismatchError(TfestKitError):
    """An exported model answers differently from ``estimator.predict``."""


class _FeedHook(tf_estimator.SessionRunHook):
    """Feeds the receiver's placeholders, so estimator.predict sees what a client sends."""

    def __init__(self):
        self.feed_dict = {}

    def before_run(self, run_context):
        return tf.train.SessionRunArgs(fetches=None, feed_dict=self.feed_dict)


class _DropMessage(logging.Filter):
    def __init__(self, text: str):
        super().__init__()
        self._text = text

    def filter(self, record: logging.LogRecord) -> bool:
        return self._text not in record.getMessage()


_PREDICT_METHOD = tf.saved_model.PREDICT_METHOD_NAME


def _signature_to_check(signatures: Mapping[str, Mapping]) -> str:
    """The signature whose outputs mirror ``estimator.predict``: a predict-method one.

    Canned estimators make ``serving_default`` a classification / regression signature (outputs
    ``classes`` / ``scores`` / ``outputs``), or export only ``predict`` when the receiver has
    several inputs; their ``predict`` signature holds the prediction dict.
    """
    methods = {name: sig["method"] for name, sig in signatures.items()}
    for name in ("serving_default", "predict"):
        if methods.get(name) == _PREDICT_METHOD:
            return name
    predict_like = sorted(n for n, m in methods.items() if m == _PREDICT_METHOD)
    if predict_like:
        return predict_like[0]
    return "serving_default" if "serving_default" in methods else sorted(methods)[0]


def _receiver_feed_dict(receiver, feeds: Mapping[str, Any]) -> dict:
    tensors = receiver.receiver_tensors
    if set(feeds) <= set(tensors):
        return {tensors[k]: v for k, v in feeds.items()}
    # A classification / regression signature names its one input "inputs", whatever the
    # receiver called it.
    if len(tensors) == 1 and len(feeds) == 1:
        return {next(iter(tensors.values())): next(iter(feeds.values()))}
    raise ExportMismatchError(
        f"The signature's inputs {sorted(feeds)} do not match the receiver's "
        f"{sorted(tensors)}; is `serving_input_receiver_fn` the one the export was made with?"
    )


def _estimator_predictions(estimator, serving_input_receiver_fn, feeds: dict) -> dict:
    hook = _FeedHook()

    def input_fn():
        receiver = serving_input_receiver_fn()
        hook.feed_dict = _receiver_feed_dict(receiver, feeds)
        return receiver.features

    # The placeholders never run out, so take exactly one batch and close the generator; the
    # Estimator's warning that such an input "yields forever" does not apply here.
    generator = estimator.predict(input_fn, hooks=[hook], yield_single_examples=False)
    log_filter = _DropMessage("predict yields forever")
    logger = logging.getLogger("tensorflow")
    logger.addFilter(log_filter)
    try:
        predictions = next(generator)
    finally:
        generator.close()
        logger.removeFilter(log_filter)
    if not isinstance(predictions, Mapping):
        predictions = {"output": predictions}
    return dict(predictions)


def export_and_check(
    estimator: tf_estimator.Estimator,
    serving_input_receiver_fn: Callable,
    sample_features: Mapping[str, Any],
    export_dir_base: str,
    rtol: float = 1e-5,
    atol: float = 1e-5,
) -> str:
    """Exports ``estimator``, reloads the export and checks it against ``estimator.predict``.

    The same ``sample_features`` go through the exported signature (via :class:`Predictor`)
    and through ``estimator.predict`` with the receiver's graph in front of the model, so
    any receiver works (e.g. image bytes are decoded in both paths). Outputs present in both
    (by name) are compared with ``np.allclose(rtol, atol)``. The signature checked is
    ``serving_default`` when it is a predict signature, else ``predict`` (canned estimators
    make ``serving_default`` a classification / regression signature).

    Args:
      estimator: a trained ``tf.estimator.Estimator``.
      serving_input_receiver_fn: builds the serving inputs to export with, e.g.
        :func:`raw_receiver`'s result.
      sample_features: what a client would send, as accepted by :class:`Predictor` (for a
        parsing receiver, plain feature dicts are fine).
      export_dir_base: where to write the numbered export.
      rtol: relative tolerance.
      atol: absolute tolerance.

    Returns:
      The path of the new export.

    Raises:
      TypeError: if ``estimator`` is not a ``tf.estimator.Estimator`` or
        ``serving_input_receiver_fn`` is not callable.
      PredictorInputError: (a ``ValueError``) if ``sample_features`` does not fit the
        signature's inputs (names, shapes, dtypes).
      ExportMismatchError: (a ``TfestKitError``) if the outputs differ beyond the tolerance or
        share no output name, or the signature's inputs are not the receiver's; the export is
        left in place for inspection.

    Example:

        path = export_and_check(est, raw_receiver({"x": (tf.float32, [4])}),
                                {"x": x_test[:8]}, os.path.join(model_dir, "export", "checked"))
    """
    if not isinstance(estimator, tf_estimator.Estimator):
        raise TypeError(f"`estimator` must be a tf.estimator.Estimator. Got: {estimator!r}")
    if not callable(serving_input_receiver_fn):
        raise TypeError(
            f"`serving_input_receiver_fn` must be callable. Got: {serving_input_receiver_fn!r}"
        )
    export_dir = estimator.export_saved_model(export_dir_base, serving_input_receiver_fn)
    export_dir = export_dir.decode() if isinstance(export_dir, bytes) else str(export_dir)
    _, signatures = read_signatures(export_dir)
    with Predictor(export_dir, _signature_to_check(signatures)) as predictor:
        feeds = predictor.prepare(sample_features)
        served = predictor(sample_features)
    expected = _estimator_predictions(estimator, serving_input_receiver_fn, feeds)
    common = sorted(set(served) & set(expected))
    if not common:
        raise ExportMismatchError(
            f"The export {export_dir} and estimator.predict share no output name: "
            f"export has {sorted(served)}, estimator.predict has {sorted(expected)}"
        )
    problems = []
    for name in common:
        got, want = np.asarray(served[name]), np.asarray(expected[name])
        if got.shape != want.shape:
            problems.append(f"{name}: shape {got.shape} vs {want.shape}")
        elif got.dtype.kind in "fc" and not np.allclose(got, want, rtol=rtol, atol=atol):
            problems.append(f"{name}: max abs difference {np.max(np.abs(got - want)):.3g}")
        elif got.dtype.kind not in "fc" and not np.array_equal(got, want):
            problems.append(f"{name}: values differ")
    if problems:
        raise ExportMismatchError(
            f"The export {export_dir} answers differently from estimator.predict "
            f"(rtol={rtol}, atol={atol}): {'; '.join(problems)}"
        )
    tf.logging.info("Export %s matches estimator.predict on %s", export_dir, common)
    return export_dir
