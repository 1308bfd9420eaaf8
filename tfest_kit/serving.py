"""Serving: receivers, ``best_exporter``, ``latest_export``, ``Predictor``, ``export_and_check``.

Example:

    receiver = serving.raw_receiver({"x": (tf.float32, [4])})
    export_dir = serving.export_and_check(est, receiver, {"x": x_test[:8]}, "/tmp/exports")
    serving.Predictor("/tmp/exports")({"x": x_test})["probabilities"]
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any, Callable, Optional, Union

import numpy as np

from tfest_kit._checks import check_int
from tfest_kit._errors import TfestKitError
from tfest_kit._metric_direction import higher_is_better
from tfest_kit._model_dir import (
    EXPORT_METRICS_FILE,
    ExportNotFoundError,
    complete_exports,
    eval_dirs,
    latest_export,
    metrics_by_step,
    read_export_metrics,
)
from tfest_kit._predictor import ExportLoadError, Predictor, PredictorInputError, read_signatures
from tfest_kit._tf import estimator as tf_estimator
from tfest_kit._tf import tf, tf2
from tfest_kit._vanished_checkpoint import export_unless_vanished

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

ReceiverFn = Callable[[], Any]

_PARSE_CONFIGS = (
    tf.io.FixedLenFeature,
    tf.io.VarLenFeature,
    tf.io.FixedLenSequenceFeature,
    tf.io.SparseFeature,
    tf2.io.RaggedFeature,
)


def _pair(name: str, value: Any) -> Optional[tuple[tf2.DType, list]]:
    """(dtype, per-example shape) of a ``(dtype, shape)`` pair; None if ``value`` is not one."""
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        return None
    dtype, shape = value
    # tf.as_dtype also takes numbers and arrays (their dtype): those are example data.
    if not isinstance(dtype, str) and isinstance(dtype, (bool, int, float, np.generic, np.ndarray)):
        return None
    try:
        dtype = tf.as_dtype(dtype)
    except TypeError:
        return None
    # A tuple starting with a dtype is always (dtype, shape), so a bad shape is an error; a
    # list of two strings (["float", "int"]) may be example data, so a list needs a shape.
    is_shape = shape is None or isinstance(shape, (int, np.integer, tuple, list, tf2.TensorShape))
    if isinstance(value, list) and not is_shape:
        return None
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = [shape]
    if shape is None or isinstance(shape, (tuple, list, tf2.TensorShape)):
        try:
            return dtype, tf2.TensorShape([] if shape is None else shape).as_list()
        except (TypeError, ValueError):
            pass
    raise TypeError(
        f"`spec[{name!r}]` must be (dtype, shape) with shape a list of dimensions such as "
        f"[4] (None for an unknown one), an int or None. Got: {value!r}"
    )


def _ends_in_a_fixed_batch(dataset: tf2.data.Dataset) -> bool:
    """Whether ``dataset`` is batched with ``drop_remainder=True``; read defensively (private)."""
    for _ in range(1000):  # a pipeline is a chain of transformations, not a cycle
        name = type(dataset).__name__
        if "Unbatch" in name or "Rebatch" in name:
            return False
        drop_remainder = getattr(dataset, "_drop_remainder", None)
        if drop_remainder is not None and "Batch" in name:
            return bool(tf2.get_static_value(drop_remainder))
        dataset = getattr(dataset, "_input_dataset", None)
        if dataset is None:
            return False
    return False


def _spec_from_examples(name: str, value: Any) -> tuple[tf2.DType, list]:
    """(dtype, shape) of example data, with the dtypes ``inputs.from_arrays`` feeds."""
    try:
        array = np.asarray(value)
    except ValueError as e:  # rows of different lengths
        raise TypeError(
            f"`spec[{name!r}]` holds examples of different shapes; give (dtype, shape) with "
            f"None for the varying dimension. Got: {e}"
        ) from e
    is_strings = array.dtype == object and all(isinstance(v, (str, bytes)) for v in array.ravel())
    if array.ndim == 0 or (array.dtype == object and not is_strings):
        raise TypeError(
            f"`spec[{name!r}]` must be (dtype, shape), a tf.TensorSpec or an array of "
            f"examples with a leading batch axis. Got: {value!r}"
        )
    if array.dtype.kind in "USO":
        return tf.string, list(array.shape[1:])
    # from_arrays trains on float64 as float32: a float64 placeholder would build float64
    # variables that the float32 checkpoint cannot restore.
    dtype = tf.float32 if array.dtype == np.float64 else tf.as_dtype(array.dtype)
    return dtype, list(array.shape[1:])


def _normalise_raw_spec(spec: Any) -> dict[str, tuple[tf2.DType, list]]:
    fixed_batch = isinstance(spec, tf2.data.Dataset) and _ends_in_a_fixed_batch(spec)
    if isinstance(spec, tf2.data.Dataset):
        spec = spec.element_spec
    if isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[0], Mapping):
        spec = spec[0]  # a (features, labels) element_spec
    if not isinstance(spec, Mapping) or not spec:
        raise TypeError(
            "`spec` must be a non-empty dict of name -> (dtype, shape), a dataset (or its "
            f"element_spec) yielding a features dict, or a dict of example arrays. Got: {spec!r}"
        )
    result = {}
    for name, value in spec.items():
        if not isinstance(name, str):
            raise TypeError(f"`spec` keys must be feature names (str). Got: {name!r}")
        if isinstance(value, tf2.TensorSpec):
            if value.shape.rank is None:
                raise ValueError(
                    f"`spec` entry {name!r} has unknown rank; give (dtype, shape). Got: {value}"
                )
            dims = value.shape.as_list()
            # Otherwise an unknown leading dimension is the batch, any other shape one example's.
            batched = fixed_batch or (dims and dims[0] is None)
            result[name] = (value.dtype, dims[1:] if batched else dims)
        elif isinstance(value, (tf2.Tensor, tf2.Variable)):
            result[name] = (value.dtype, value.shape.as_list()[1:])
        else:
            result[name] = _pair(name, value) or _spec_from_examples(name, value)
    return result


def _placeholder_receiver(features_spec: Mapping[str, tuple]) -> ReceiverFn:
    """What ``build_raw_serving_input_receiver_fn`` builds, handing the model_fn a copy."""

    def serving_input_receiver_fn():
        tensors = {
            # Op names forbid some characters feature names may hold; the dict key keeps them.
            name: tf.placeholder(dtype, [None, *shape], name=_op_name(name))
            for name, (dtype, shape) in features_spec.items()
        }
        return tf_estimator.export.ServingInputReceiver(dict(tensors), tensors)

    return serving_input_receiver_fn


def _op_name(name: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9_.\-/]", "_", name)
    return cleaned if re.match(r"[A-Za-z0-9.]", cleaned) else f"input_{cleaned}"


def raw_receiver(spec: Any) -> ReceiverFn:
    """Builds a receiver that feeds named tensors straight into the model's ``features``.

    Unlike the official raw receiver, a model_fn popping a feature does not drop the input.

    Args:
      spec: a dict ``name -> (dtype, shape)``, ``shape`` without the batch dimension (an int
        ``n`` means ``[n]``, ``[]``/``None`` a scalar); or a ``tf.data.Dataset`` (or its
        ``element_spec``) of features or ``(features, labels)``, whose unknown leading
        dimension, or fixed one with ``drop_remainder=True``, is the batch; or a dict of
        example arrays (float64 gives float32, as ``inputs.from_arrays`` feeds it).

    Returns:
      A ``serving_input_receiver_fn``; the signature inputs are named like the features.

    Raises:
      TypeError: if ``spec`` is none of the above.
      ValueError: if a ``tf.TensorSpec`` has unknown rank.

    Example:

        receiver = raw_receiver({"x": (tf.float32, [4]), "id": (tf.string, [])})
    """
    return _placeholder_receiver(_normalise_raw_spec(spec))


def parsing_receiver(feature_spec_or_columns: Union[Mapping, Sequence]) -> ReceiverFn:
    """Builds the official receiver of serialized ``tf.train.Example``s (input ``"examples"``).

    :class:`Predictor` also takes plain feature dicts for such a model and serializes them.

    Args:
      feature_spec_or_columns: a parse spec (``name -> tf.io.FixedLenFeature`` / ...) or
        feature columns (made a spec with ``make_parse_example_spec``).

    Returns:
      A ``serving_input_receiver_fn``.

    Raises:
      TypeError: if the argument is neither a parse spec nor feature columns.

    Example:

        receiver = parsing_receiver({"x": tf.io.FixedLenFeature([4], tf.float32)})
    """
    value = feature_spec_or_columns
    # Checked now: upstream fails only at export, deep inside the parser.
    if isinstance(value, Mapping):
        bad = {k: v for k, v in value.items() if not isinstance(v, _PARSE_CONFIGS)}
        spec = dict(value)
    else:
        try:
            bad, spec = None, tf.feature_column.make_parse_example_spec(list(value))
        except (TypeError, ValueError) as e:
            bad, spec = e, None
    if bad or not spec:
        raise TypeError(
            "`feature_spec_or_columns` must be a non-empty parse spec dict (name -> "
            "tf.io.FixedLenFeature, VarLenFeature, ...) or an iterable of feature columns. "
            f"Got: {value!r} ({bad or 'empty'})"
        )
    return tf_estimator.export.build_parsing_serving_input_receiver_fn(spec)


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


def image_bytes_receiver(
    image_size: Union[int, Sequence[int]],
    preprocess: Optional[Callable[[Any], Any]] = None,
    channels: int = 3,
    feature_key: str = "image",
) -> ReceiverFn:
    """Builds a receiver of encoded JPEG / PNG / BMP / GIF bytes, one string per image.

    Decoding, resizing and normalisation run in the exported graph. The signature input is
    ``"image_bytes"`` (``[None]`` strings); the model gets float32 ``[None, H, W, channels]``.

    Args:
      image_size: ``H`` (square) or ``(H, W)``.
      preprocess: maps the resized float32 batch (values in ``[0, 255]``) to the model's input;
        default: scale to ``[-1, 1]``.
      channels: 1 (grayscale) or 3 (RGB); images are converted to this many channels.
      feature_key: name of the image feature the model_fn reads.

    Returns:
      A ``serving_input_receiver_fn``.

    Raises:
      ValueError: for a bad ``image_size``, ``channels`` or ``feature_key``.
      TypeError: if ``preprocess`` is not callable.

    Example:

        Predictor(export_dir)({"image_bytes": [open("cat.jpg", "rb").read()]})
    """
    if isinstance(image_size, (int, np.integer)) and not isinstance(image_size, bool):
        size = (check_int("image_size", image_size),) * 2
    elif isinstance(image_size, (tuple, list)) and len(image_size) == 2:
        size = tuple(check_int("image_size", s) for s in image_size)
    else:
        raise ValueError(f"`image_size` must be an int or (height, width). Got: {image_size!r}")
    if channels not in (1, 3):
        raise ValueError(f"`channels` must be 1 or 3. Got: {channels!r}")
    if not isinstance(feature_key, str) or not feature_key:
        raise ValueError(f"`feature_key` must be a non-empty str. Got: {feature_key!r}")
    if preprocess is not None and not callable(preprocess):
        raise TypeError(f"`preprocess` must be callable or None. Got: {preprocess!r}")

    def decode(encoded):
        image = tf.io.decode_image(encoded, channels=channels, expand_animations=False)
        image.set_shape([None, None, channels])
        return tf.image.resize(tf.cast(image, tf.float32), size)

    def serving_input_receiver_fn():
        image_bytes = tf.placeholder(tf.string, [None], name="image_bytes")
        spec = tf2.TensorSpec([*size, channels], tf.float32)
        images = tf.map_fn(decode, image_bytes, fn_output_signature=spec)
        images = preprocess(images) if preprocess else images / 127.5 - 1.0
        return tf_estimator.export.ServingInputReceiver(
            {feature_key: images}, {"image_bytes": image_bytes}
        )

    return serving_input_receiver_fn


def _scalar(value: Any) -> Optional[float]:
    """``value`` as a finite float, else None (nothing compares better than a NaN)."""
    try:
        number = float(np.asarray(value))
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _earlier_evaluations(model_dir: str, monitor: str, eval_result: dict) -> list:
    """``monitor`` in the eval events of the directory this evaluation was written to.

    Of ``eval``/``eval_<name>``, the one holding this evaluation's step and value is it; that
    entry itself is left out.
    """
    current = _scalar(eval_result[monitor])
    step = eval_result.get("global_step")
    step = None if step is None else int(np.asarray(step))
    values = []
    for eval_dir in eval_dirs(model_dir):
        history = [(s, m[monitor]) for s, m in metrics_by_step(eval_dir).items() if monitor in m]
        if step is None or any(
            s == step and current is not None and math.isclose(v, current, rel_tol=1e-6)
            for s, v in history
        ):
            values.extend(_scalar(v) for s, v in history if s != step)
    return values


class _BestExporter(tf_estimator.BestExporter):
    """``tf.estimator.BestExporter`` deciding from the best so far, recovered after restarts.

    The official class makes the export, its ``assets_extra`` and the garbage collection. It
    exports on its first call after a restart whatever its events say (tensorflow issue 47396),
    reads only ``eval/`` and keeps its best in memory across a wiped model_dir; so the decision
    is made here, from the metrics file in each earlier export or, when none has one, from the
    eval events of this evaluation's ``eval``/``eval_<name>`` directory.
    """

    def __init__(self, receiver_fn, monitor, mode, exports_to_keep, name, assets_extra, as_text):
        self._monitor, self._mode = monitor, mode
        self._best: Optional[float] = None
        self._restored_for: Optional[tuple[str, str]] = None
        # Rewritten before each export: the official exporter copies assets_extra each time,
        # so the file appears atomically with the export it describes.
        self._metrics_path = os.path.join(
            tempfile.mkdtemp(prefix="tfest_kit_best_"), EXPORT_METRICS_FILE
        )
        super().__init__(
            name=name,
            serving_input_receiver_fn=receiver_fn,
            event_file_pattern=None,
            compare_fn=lambda best_eval_result, current_eval_result: True,  # decided here
            assets_extra={**(assets_extra or {}), EXPORT_METRICS_FILE: self._metrics_path},
            as_text=as_text,
            exports_to_keep=exports_to_keep,
        )

    def _restore_best(self, model_dir: str, export_path: str, eval_result: dict) -> None:
        exports = complete_exports(export_path)
        metrics = [read_export_metrics(path) or {} for path in exports]
        values = [_scalar(m.get("value")) for m in metrics if m.get("monitor") == self._monitor]
        # Its own exports say what was exported: an evaluation whose export was skipped (its
        # checkpoint deleted first) must not keep later, exported improvements out.
        if exports and all(v is None for v in values):
            values = _earlier_evaluations(model_dir, self._monitor, eval_result)
        values = [v for v in values if v is not None]
        self._best = (min if self._mode == "min" else max)(values, default=None)
        tf.logging.info(
            f"Best exporter {self.name!r}: best {self._monitor} so far = {self._best} "
            f"(from {len(exports)} earlier exports)"
        )

    def export(self, estimator, export_path, checkpoint_path, eval_result, is_the_final_export):
        """Exports if ``eval_result[monitor]`` beats the best so far; else returns None."""
        if not eval_result or self._monitor not in eval_result:
            raise ValueError(
                f"best_exporter {self.name!r}: monitor {self._monitor!r} is not in the "
                f"evaluation result. Available metrics: {sorted(eval_result or {})}"
            )
        value = _scalar(eval_result[self._monitor])
        say = f"Best exporter {self.name!r}: {self._monitor} = {eval_result[self._monitor]}"
        if value is None:
            tf.logging.warning(f"{say} is not a finite number; not exporting")
            return None
        key = (estimator.model_dir, export_path)
        # Also with no complete export: it was wiped (a new run reusing this instance) or never
        # written, and the first evaluation is exported.
        if self._restored_for != key or not complete_exports(export_path):
            self._restore_best(estimator.model_dir, export_path, eval_result)
            self._restored_for = key
        best = self._best
        if best is not None and (value >= best if self._mode == "min" else value <= best):
            tf.logging.info(f"{say} is not better than {self._best:.6g}; not exporting")
            return None
        if checkpoint_path and not tf.gfile.Exists(checkpoint_path + ".index"):
            # On a cluster the chief may delete it (keep_checkpoint_max) while we evaluate.
            tf.logging.warning(
                f"{say} improved, but checkpoint {checkpoint_path} was deleted before it could "
                "be exported; not exporting. Raise RunConfig(keep_checkpoint_max=…) so "
                "checkpoints outlive their evaluation."
            )
            return None
        metrics = {
            "monitor": self._monitor,
            "mode": self._mode,
            "value": value,
            "checkpoint_path": checkpoint_path,
            "eval_result": {k: _scalar(v) for k, v in eval_result.items()},
        }
        with open(self._metrics_path, "w") as f:
            json.dump(metrics, f, indent=1, sort_keys=True)
        # The chief can also delete the checkpoint while it is exported.
        result = export_unless_vanished(
            lambda: super(_BestExporter, self).export(
                estimator, export_path, checkpoint_path, eval_result, is_the_final_export
            ),
            self.name,
            export_path,
            checkpoint_path,
        )
        if result is not None:
            tf.logging.info(f"{say}, better than {self._best}; exported {os.fsdecode(result)}")
            self._best = value
        return result


def best_exporter(
    serving_input_receiver_fn: Callable,
    monitor: str = "loss",
    mode: str = "auto",
    exports_to_keep: Optional[int] = 2,
    name: str = "best",
    *,
    assets_extra: Optional[dict] = None,
    as_text: bool = False,
) -> tf_estimator.Exporter:
    """Returns an exporter that writes a SavedModel only when ``monitor`` improves.

    Exports go to ``model_dir/export/<name>/<timestamp>``, each with
    ``assets.extra/tfest_kit_eval_metrics.json`` (the metrics it was exported for). Unlike
    ``tf.estimator.BestExporter``, the best so far is recovered after a restart (from those
    files, else from the eval events), so a worse model is not exported (tensorflow issue
    47396); a missing monitor is an error. Defaults: ``exports_to_keep=2`` (official: 5).

    Caveat: with no complete export yet, the first evaluation is always exported. On a cluster
    a checkpoint the chief deletes before or while it is exported is skipped with a warning.

    Args:
      serving_input_receiver_fn: builds the serving inputs, e.g. :func:`raw_receiver`'s result.
      monitor: key of the evaluation result to compare, e.g. ``"loss"``, ``"accuracy"``.
      mode: ``"min"``, ``"max"`` or ``"auto"`` (from the name, as ``hooks.early_stopping``).
      exports_to_keep: keep this many newest (best) exports; ``None`` keeps all.
      name: export sub-directory name.
      assets_extra: extra files for ``assets.extra``, as for ``export_saved_model``.
      as_text: write ``saved_model.pbtxt`` instead of ``saved_model.pb``.

    Returns:
      A ``tf.estimator.Exporter``.

    Raises:
      ValueError: for a bad argument; at export time, if ``monitor`` is not evaluated.
      TypeError: if ``serving_input_receiver_fn`` is not callable.

    Example:

        exporter = best_exporter(raw_receiver({"x": (tf.float32, [4])}), "accuracy", "max")
        tfest_kit.train_and_evaluate(est, train_fn, eval_fn, exporters=[exporter])
    """
    if not callable(serving_input_receiver_fn):
        raise TypeError(
            f"`serving_input_receiver_fn` must be callable. Got: {serving_input_receiver_fn!r}"
        )
    if not isinstance(monitor, str) or not monitor:
        raise ValueError(f"`monitor` must be a metric name (str). Got: {monitor!r}")
    # Resolved here, so the metrics file of each export records "min" or "max".
    mode = "max" if higher_is_better(monitor, mode, "best_exporter") else "min"
    exports_to_keep = check_int("exports_to_keep", exports_to_keep, allow_none=True)
    if not isinstance(name, str) or not name or os.sep in name:
        raise ValueError(f"`name` must be a non-empty directory name. Got: {name!r}")
    return _BestExporter(
        serving_input_receiver_fn, monitor, mode, exports_to_keep, name, assets_extra, as_text
    )


class ExportMismatchError(TfestKitError):
    """An exported model answers differently from ``estimator.predict``."""


class _FeedHook(tf_estimator.SessionRunHook):
    """Feeds the receiver's placeholders, so estimator.predict sees what a client sends."""

    feed_dict: dict = {}

    def before_run(self, run_context):
        return tf.train.SessionRunArgs(fetches=None, feed_dict=self.feed_dict)


def _signature_to_check(signatures: Mapping[str, Mapping]) -> str:
    """A predict-method signature (canned estimators' ``serving_default`` classifies)."""
    method = tf.saved_model.PREDICT_METHOD_NAME
    predict = sorted(n for n, sig in signatures.items() if sig["method"] == method)
    for name in ("serving_default", "predict", *predict):
        if name in predict:
            return name
    return "serving_default" if "serving_default" in signatures else sorted(signatures)[0]


def _estimator_predictions(estimator, serving_input_receiver_fn, feeds: dict) -> dict:
    hook = _FeedHook()

    def input_fn():
        receiver = serving_input_receiver_fn()
        tensors = receiver.receiver_tensors
        if set(feeds) <= set(tensors):
            hook.feed_dict = {tensors[k]: v for k, v in feeds.items()}
        elif len(tensors) == 1 and len(feeds) == 1:  # a classify signature's one "inputs"
            hook.feed_dict = {next(iter(tensors.values())): next(iter(feeds.values()))}
        else:
            raise ExportMismatchError(
                f"The signature's inputs {sorted(feeds)} do not match the receiver's "
                f"{sorted(tensors)}; is `serving_input_receiver_fn` the one exported with?"
            )
        return receiver.features

    # The placeholders never run out: take one batch and close the generator, hiding the
    # Estimator's warning that such an input "yields forever".
    generator = estimator.predict(input_fn, hooks=[hook], yield_single_examples=False)

    def log_filter(record: logging.LogRecord) -> bool:
        return "predict yields forever" not in record.getMessage()

    logger = logging.getLogger("tensorflow")
    logger.addFilter(log_filter)
    try:
        predictions = next(generator)
    finally:
        generator.close()
        logger.removeFilter(log_filter)
    return dict(predictions) if isinstance(predictions, Mapping) else {"output": predictions}


def export_and_check(
    estimator: tf_estimator.Estimator,
    serving_input_receiver_fn: Callable,
    sample_features: Mapping[str, Any],
    export_dir_base: str,
    rtol: float = 1e-5,
    atol: float = 1e-5,
) -> str:
    """Exports ``estimator``, reloads the export and checks it against ``estimator.predict``.

    ``sample_features`` go through the export (a predict signature, via :class:`Predictor`) and
    through ``estimator.predict`` behind the receiver's graph; outputs of the same name are
    compared with ``np.allclose(rtol, atol)``.

    Args:
      estimator: a trained ``tf.estimator.Estimator``.
      serving_input_receiver_fn: builds the serving inputs to export with.
      sample_features: what a client would send, as :class:`Predictor` takes it.
      export_dir_base: where to write the numbered export.
      rtol: relative tolerance.
      atol: absolute tolerance.

    Returns:
      The path of the new export.

    Raises:
      TypeError: if ``estimator`` is not an Estimator or the receiver is not callable.
      PredictorInputError: if ``sample_features`` does not fit the signature's inputs.
      ExportMismatchError: if the outputs differ or share no name (the export is kept).

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
    export_dir = os.fsdecode(
        estimator.export_saved_model(export_dir_base, serving_input_receiver_fn)
    )
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
