"""Serving: receivers, ``best_exporter``, ``latest_export``, ``Predictor``, ``export_and_check``.

receiver = serving.raw_receiver({"x": (tf.float32, [4])})
serving.Predictor(serving.export_and_check(est, receiver, {"x": x[:8]}, "/tmp/e"))({"x": x})
"""

import functools
import inspect
import json
import math
import os
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any, Callable, Optional, Union

import numpy as np

from tfest_kit import logs
from tfest_kit._checks import TfestKitError, check_int
from tfest_kit._model_dir import (
    EXPORT_METRICS_FILE,
    ExportNotFoundError,
    complete_exports,
    eval_dirs,
    export_unless_vanished,
    higher_is_better,
    latest_export,
    metrics_by_step,
    read_export_metrics,
)
from tfest_kit._predictor import ExportLoadError, Predictor, PredictorInputError, read_signatures
from tfest_kit._tf import tf, tf2

__all__ = ["raw_receiver", "parsing_receiver", "bert_receiver", "image_bytes_receiver"]
__all__ += ["best_exporter", "latest_export", "Predictor", "read_signatures", "export_and_check"]
__all__ += ["ExportMismatchError", "ExportNotFoundError", "ExportLoadError", "PredictorInputError"]
__all__ += ["EXPORT_METRICS_FILE"]

ReceiverFn = Callable[[], Any]


def _placeholder_receiver(features_spec: Mapping[str, tuple]) -> ReceiverFn:
    """What ``build_raw_serving_input_receiver_fn`` builds, handing the model_fn a copy."""

    def serving_input_receiver_fn():
        tensors = {n: tf.placeholder(d, [None, *s], name=n) for n, (d, s) in features_spec.items()}
        return tf.estimator.export.ServingInputReceiver(dict(tensors), tensors)

    return serving_input_receiver_fn


def raw_receiver(spec: Mapping[str, tuple]) -> ReceiverFn:
    """Builds a receiver that feeds named tensors straight into the model's ``features``.

    Unlike the official raw receiver, a model_fn popping a feature does not drop the input.

    Args:
      spec: a dict ``name -> (dtype, shape)``, ``shape`` without the batch dimension (an int
        ``n`` means ``[n]``, ``[]`` or ``None`` a scalar).

    Returns:
      A ``serving_input_receiver_fn``; the signature inputs are named like the features.

    Raises:
      TypeError: if ``spec`` is not a non-empty dict of ``(dtype, shape)`` pairs.

    Example:

        receiver = raw_receiver({"x": (tf.float32, [4]), "id": (tf.string, [])})
    """
    if not isinstance(spec, Mapping) or not spec:
        raise TypeError(f"`spec` must be a non-empty dict of name -> (dtype, shape). Got: {spec!r}")
    features = {}
    for name, value in spec.items():
        try:
            dtype, shape = value
            features[name] = (tf.as_dtype(dtype), tf2.TensorShape(shape or []).as_list())
        except (TypeError, ValueError) as e:
            raise TypeError(
                f"`spec[{name!r}]` must be (dtype, shape), e.g. (tf.float32, [4]). Got: {value!r}"
            ) from e
        dtype, dims = features[name]
        if len(dims) > 1 and dims[0] is None:  # [None, 128]: the batch dimension twice?
            tf.logging.warning(
                f"raw_receiver: spec[{name!r}]'s shape {dims} starts with None, and the batch "
                f"dimension comes on top: {[None, *dims]}. Without: (tf.{dtype.name}, {dims[1:]})"
            )
    return _placeholder_receiver(features)


def parsing_receiver(feature_spec_or_columns: Union[Mapping, Sequence]) -> ReceiverFn:
    """Builds the official receiver of serialized ``tf.train.Example``s (input ``"examples"``).

    :class:`Predictor` also takes plain feature dicts for such a model and serializes them.

    Args:
      feature_spec_or_columns: a parse spec (``name -> tf.io.FixedLenFeature`` / ...) or
        feature columns (made a spec with ``make_parse_example_spec``).

    Returns:
      A ``serving_input_receiver_fn``.

    Example:

        receiver = parsing_receiver({"x": tf.io.FixedLenFeature([4], tf.float32)})
    """
    spec = feature_spec_or_columns
    if not isinstance(spec, Mapping):
        spec = tf.feature_column.make_parse_example_spec(spec)
    return tf.estimator.export.build_parsing_serving_input_receiver_fn(spec)


def bert_receiver(max_seq_length: int, with_label_ids: bool = False) -> ReceiverFn:
    """Builds the receiver BERT classifiers export with: token ids, mask and segment ids.

    Args:
      max_seq_length: ``L``: ``input_ids``, ``input_mask``, ``segment_ids`` are int32 ``[None, L]``.
      with_label_ids: also take ``label_ids`` (int32 ``[None]``), as BERT's ``run_classifier``.

    Returns:
      A ``serving_input_receiver_fn``.

    Raises:
      ValueError: if ``max_seq_length`` is not a positive int.

    Example:

        estimator.export_saved_model(export_dir, bert_receiver(128))
    """
    length = check_int("max_seq_length", max_seq_length)
    spec = {name: (tf.int32, [length]) for name in ("input_ids", "input_mask", "segment_ids")}
    if with_label_ids:
        spec["label_ids"] = (tf.int32, [])
    return _placeholder_receiver(spec)


def image_bytes_receiver(image_size: Union[int, Sequence[int]]) -> ReceiverFn:
    """Builds a receiver of encoded JPEG / PNG / BMP / GIF bytes, one string per image.

    The exported graph decodes to RGB, resizes and scales to ``[-1, 1]``: signature input
    ``"image_bytes"`` (``[None]`` strings) -> feature ``"image"`` (float32 ``[None, H, W, 3]``).

    Args:
      image_size: ``H`` (square) or ``(H, W)``.

    Returns:
      A ``serving_input_receiver_fn``.

    Raises:
      ValueError: for a bad ``image_size``.

    Example:

        Predictor(export_dir)({"image_bytes": [open("cat.jpg", "rb").read()]})
    """
    sizes = [image_size] * 2 if isinstance(image_size, int) else list(image_size)
    if len(sizes) != 2:
        raise ValueError(f"`image_size` must be an int or (height, width). Got: {image_size!r}")
    size = [check_int("image_size", s) for s in sizes]

    def decode(encoded):
        image = tf.io.decode_image(encoded, channels=3, expand_animations=False)
        image.set_shape([None, None, 3])
        return tf.image.resize(tf.cast(image, tf.float32), size)

    def serving_input_receiver_fn():
        image_bytes = tf.placeholder(tf.string, [None], name="image_bytes")
        spec = tf2.TensorSpec([*size, 3], tf.float32)
        images = tf.map_fn(decode, image_bytes, fn_output_signature=spec)
        return tf.estimator.export.ServingInputReceiver(
            {"image": images / 127.5 - 1.0}, {"image_bytes": image_bytes}
        )

    return serving_input_receiver_fn


def _scalar(value: Any) -> Optional[float]:
    """``value`` as a finite float, else None (nothing compares better than a NaN)."""
    try:
        number = float(np.asarray(value))
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _recorded_value(export_dir: str, monitor: str, mode: str, model_dir: str) -> tuple:
    """The ``monitor`` value an export was made for: its metrics file's (its eval result's when
    chosen by another monitor), else the eval events' at its global step (a garbled file); NaN
    when neither tells. And the (monitor, mode) it was chosen by."""
    metrics = read_export_metrics(export_dir)
    metrics = metrics if isinstance(metrics, dict) else {}  # JSON, but not ours: garbled
    chosen_by = (metrics.get("monitor", monitor), metrics.get("mode", mode))
    own = {monitor: metrics.get("value")}
    result = metrics.get("eval_result") if chosen_by[0] != monitor else own
    if (value := _scalar(result.get(monitor) if isinstance(result, dict) else None)) is not None:
        return value, chosen_by
    try:
        reader = tf.train.load_checkpoint(os.path.join(export_dir, "variables", "variables"))
        step = int(reader.get_tensor(tf.GraphKeys.GLOBAL_STEP))
    except (tf.errors.OpError, ValueError):
        return math.nan, chosen_by
    found = [metrics_by_step(d).get(step, {}).get(monitor) for d in eval_dirs(model_dir)]
    return next((_scalar(v) for v in found if v is not None), math.nan), chosen_by


class _BestExporter(tf.estimator.BestExporter):
    """``tf.estimator.BestExporter`` deciding here, from each earlier export's metrics file: the
    official class exports on its first call after a restart whatever its events say."""

    def __init__(self, receiver_fn, monitor, mode, exports_to_keep, name):
        self._monitor, self._mode = monitor, mode
        self._best: Optional[float] = None
        self._restored_for: Optional[tuple[str, str]] = None
        self._unknown: list[str] = []  # exports whose value nothing tells
        # Filled for each export: the official exporter keeps this dict and copies its files into
        # the export, where the metrics file appears atomically with the export it describes.
        self._assets: dict[str, str] = {}
        super().__init__(
            name=name,
            serving_input_receiver_fn=receiver_fn,
            compare_fn=lambda best_eval_result, current_eval_result: True,  # decided here
            assets_extra=self._assets,
            exports_to_keep=exports_to_keep,
        )

    def export(self, estimator, export_path, checkpoint_path, eval_result, is_the_final_export):
        """Exports if ``eval_result[monitor]`` beats the best so far; else returns None."""
        if not eval_result or self._monitor not in eval_result:
            raise ValueError(
                f"best_exporter {self.name!r}: monitor {self._monitor!r} is not in the "
                f"evaluation result. Available metrics: {sorted(eval_result or {})}"
            )
        value = _scalar(eval_result[self._monitor])
        key = (estimator.model_dir, export_path)
        # Also with no complete export: it was wiped (a new run reusing this instance).
        restoring = self._restored_for != key or not complete_exports(export_path)
        if restoring:
            ours, exports = (self._monitor, self._mode), complete_exports(export_path)
            recorded = {p: _recorded_value(p, *ours, estimator.model_dir) for p in exports}
            self._unknown = [p for p, (v, _) in recorded.items() if math.isnan(v)]
            values = [v for v, _ in recorded.values() if not math.isnan(v)]
            self._best = (min if self._mode == "min" else max)(values, default=None)
            self._restored_for = key
            if other := [p for p, (_, by) in recorded.items() if by != ours]:  # made by another run
                tf.logging.warning(
                    f"Best exporter {self.name!r}: {', '.join(other)} chosen by another monitor "
                    f"or mode than {ours[0]!r} ({ours[1]}): compared by it now, and deleted as "
                    "better ones come (exports_to_keep). To keep them, name this exporter otherwise"
                )
        if self._unknown:  # it may be better: never replaced by a worse one (a warning once)
            (tf.logging.warning if restoring else tf.logging.info)(
                f"Best exporter {self.name!r}: the metrics of {', '.join(self._unknown)} are "
                "unreadable and not in the eval events: it stays the best (delete it to export)."
            )
            return None
        if value is None:  # nothing compares better than a NaN
            tf.logging.warning(
                f"Best exporter {self.name!r}: {self._monitor!r} is "
                f"{eval_result[self._monitor]} (NaN in the eval data?): not exported"
            )
            return None
        best = self._best
        if best is not None and (value >= best if self._mode == "min" else value <= best):
            tf.logging.info(f"Best exporter {self.name!r}: {value} is not better than {best}")
            return None
        metrics = {"monitor": self._monitor, "mode": self._mode, "value": value}
        metrics["checkpoint_path"] = checkpoint_path
        metrics["eval_result"] = {k: _scalar(v) for k, v in eval_result.items()}
        # On a cluster the chief may delete the checkpoint while it is exported.
        args = (estimator, export_path, checkpoint_path, eval_result, is_the_final_export)
        export = functools.partial(super().export, *args)
        with tempfile.TemporaryDirectory(prefix="tfest_kit_best_") as temp_dir:
            self._assets[EXPORT_METRICS_FILE] = os.path.join(temp_dir, EXPORT_METRICS_FILE)
            with open(self._assets[EXPORT_METRICS_FILE], "w") as f:
                json.dump(metrics, f, indent=1, sort_keys=True)
            result = export_unless_vanished(export, self.name, export_path, checkpoint_path)
        if result is not None:
            self._best = value
        return result


def best_exporter(
    serving_input_receiver_fn: Callable,
    monitor: str = "loss",
    mode: str = "auto",
    exports_to_keep: Optional[int] = 2,
    name: str = "best",
) -> tf.estimator.Exporter:
    """Returns an exporter that writes a SavedModel only when ``monitor`` improves.

    Exports go to ``model_dir/export/<name>/<timestamp>`` with the metrics they were made for in
    ``assets.extra/tfest_kit_eval_metrics.json``, from which, unlike ``tf.estimator.BestExporter``,
    the best so far is recovered after a restart (tensorflow issue 47396).

    Args:
      serving_input_receiver_fn: builds the serving inputs, e.g. :func:`raw_receiver`'s result.
      monitor: key of the evaluation result to compare, e.g. ``"loss"``, ``"accuracy"``.
      mode: ``"min"``, ``"max"`` or ``"auto"`` (from the name, as ``hooks.early_stopping``).
      exports_to_keep: keep this many newest (best) exports; ``None`` keeps all.
      name: export sub-directory name.

    Returns:
      A ``tf.estimator.Exporter``.

    Raises:
      ValueError: for a bad ``mode``, ``exports_to_keep`` or ``name``; at export time, if
        ``monitor`` is not evaluated.
      TypeError: if ``serving_input_receiver_fn`` is not a function without arguments.

    Example:

        exporter = best_exporter(raw_receiver({"x": (tf.float32, [4])}), "accuracy", "max")
        tfest_kit.train_and_evaluate(est, train_fn, eval_fn, exporters=[exporter])
    """
    try:  # else the error comes after training, at the first evaluation
        inspect.signature(serving_input_receiver_fn).bind()
    except TypeError as e:
        raise TypeError(
            "`serving_input_receiver_fn` must be a function without arguments, such as "
            f"raw_receiver(spec)'s result. Got: {serving_input_receiver_fn!r}"
        ) from e
    if name in ("", ".", "..") or os.path.basename(str(name)) != name:  # outside export/ else
        raise ValueError(f"`name` must be one directory name under model_dir/export. Got: {name!r}")
    # Resolved here, so the metrics file of each export records "min" or "max".
    mode = "max" if higher_is_better(monitor, mode, "best_exporter") else "min"
    return _BestExporter(serving_input_receiver_fn, monitor, mode, exports_to_keep, name)


class ExportMismatchError(TfestKitError):
    """An exported model answers differently from ``estimator.predict``."""


def _same(got: Any, want: Any, rtol: float, atol: float) -> bool:
    got, want = np.asarray(got), np.asarray(want)
    if got.shape == want.shape and got.dtype.kind in "fciu":
        return np.allclose(got, want, rtol=rtol, atol=atol)
    return np.array_equal(got, want)  # False for another shape


def export_and_check(
    estimator: tf.estimator.Estimator,
    serving_input_receiver_fn: Callable,
    sample_features: Mapping[str, Any],
    export_dir_base: str,
    rtol: float = 1e-5,
    atol: float = 1e-5,
) -> str:
    """Exports ``estimator``, reloads the export and checks it against ``estimator.predict``.

    ``sample_features`` go through the export (via :class:`Predictor`, its ``"predict"`` signature
    if any) and ``estimator.predict``; same-named outputs must be ``np.allclose(rtol, atol)``. Both
    read them through ``serving_input_receiver_fn``: the export is checked, not the receiver.

    Args:
      estimator: a trained ``tf.estimator.Estimator``.
      serving_input_receiver_fn: builds the serving inputs to export with.
      sample_features: what a client would send, as :class:`Predictor` takes it.
      export_dir_base: where to write the numbered export.
      rtol, atol: the relative and absolute tolerance.

    Returns:
      The path of the new export.

    Raises:
      PredictorInputError: if ``sample_features`` does not fit the signature's inputs.
      ExportMismatchError: if the outputs differ or share no name (the export is kept).

    Example:

        path = export_and_check(est, raw_receiver({"x": (tf.float32, [4])}),
                                {"x": x_test[:8]}, os.path.join(model_dir, "export", "checked"))
    """
    exported = estimator.export_saved_model(export_dir_base, serving_input_receiver_fn)
    export_dir = os.fsdecode(exported)
    # Canned estimators' serving_default classifies; "predict" mirrors estimator.predict.
    signature = "predict" if "predict" in read_signatures(export_dir)[1] else "serving_default"
    with Predictor(export_dir, signature) as predictor:
        feeds = predictor.prepare(sample_features)
        served = predictor(sample_features)
    feed_dict = {}  # the receiver's placeholders, fed what a client sends

    def input_fn():
        receiver = serving_input_receiver_fn()
        feed_dict.update({receiver.receiver_tensors[k]: v for k, v in feeds.items()})
        return receiver.features

    # The placeholders never run out: take one batch and close the generator ("predict yields
    # forever. This is probably a mistake.", Estimator's warning, is not).
    hook = tf.train.FeedFnHook(lambda: feed_dict)
    generator = estimator.predict(input_fn, hooks=[hook], yield_single_examples=False)
    with logs.quieted(tf.logging.ERROR):
        expected = next(generator)
    generator.close()
    expected = dict(expected) if isinstance(expected, Mapping) else {"output": expected}
    common = sorted(set(served) & set(expected))
    differ = [k for k in common if not _same(served[k], expected[k], rtol, atol)]
    if differ or not common:
        raise ExportMismatchError(
            f"The export {export_dir} answers differently from estimator.predict (rtol={rtol}, "
            f"atol={atol}) in {differ or 'every output: they share no name'}"
        )
    return export_dir
