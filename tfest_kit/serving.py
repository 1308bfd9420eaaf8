"""Serving: input receivers, exporters, and a fast ``Predictor`` over an exported SavedModel.

Receivers say what an exported model accepts (:func:`raw_receiver`, :func:`parsing_receiver`,
:func:`bert_receiver`, :func:`image_bytes_receiver`), built on the official
``tf.estimator.export`` receivers; :func:`best_exporter` keeps the best models during
``train_and_evaluate``; :func:`latest_export` finds the newest complete export;
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


def _is_dtype_like(value: Any) -> bool:
    # tf.as_dtype also takes numbers and arrays (their dtype): a row of example data is not a
    # dtype, a dtype name ("float32") is.
    if not isinstance(value, str) and isinstance(value, (bool, int, float, np.generic, np.ndarray)):
        return False
    try:
        tf.as_dtype(value)
    except TypeError:
        return False
    return True


def _is_dtype_shape_pair(value: Any) -> bool:
    if not isinstance(value, (tuple, list)) or len(value) != 2 or not _is_dtype_like(value[0]):
        return False
    # A tuple starting with a dtype is always meant as (dtype, shape), so a bad shape is an
    # error, never example data ("float32", 4 once became a scalar string input). A list of
    # two strings such as ["float", "int"] may be example data, so a list needs a shape.
    shape = value[1]
    return (
        isinstance(value, tuple)
        or shape is None
        or isinstance(shape, (int, np.integer, tuple, list, tf2.TensorShape))
    )


def _pair_shape(name: str, value: Any) -> list:
    """The per-example shape of a (dtype, shape) pair; an int ``n`` means ``[n]``."""
    shape = value[1]
    if shape is None:
        return []
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = [shape]
    try:
        if not isinstance(shape, (tuple, list, tf2.TensorShape)):
            raise TypeError(f"{type(shape).__name__} is not a shape")
        return list(tf2.TensorShape(shape).as_list())
    except (TypeError, ValueError) as e:
        raise TypeError(
            f"`spec[{name!r}]` must be (dtype, shape) with shape a list of dimensions such as "
            f"[4] (None for an unknown one), an int or None. Got: {value!r}"
        ) from e


def _spec_from_tensor_spec(spec: tf2.TensorSpec, batched: Optional[bool]) -> tuple[tf2.DType, list]:
    """(dtype, per-example shape) of an element_spec entry; ``batched`` None: an unknown
    leading dimension is the batch, any other shape is one example's."""
    shape = spec.shape
    if shape.rank is None:
        raise ValueError(
            f"`spec` entry {spec.name or ''!r} has unknown rank; give (dtype, shape) explicitly. "
            f"Got: {spec}"
        )
    dims = shape.as_list()
    if batched or (batched is None and dims and dims[0] is None):
        dims = dims[1:]
    return spec.dtype, dims


def _ends_in_a_fixed_batch(dataset: tf2.data.Dataset) -> bool:
    """Whether ``dataset`` is batched with ``drop_remainder=True`` (as TPUs need).

    Its element_spec then has the batch size, not None, as leading dimension (``[None, 8, 4]``
    was exported for batches of 8). tf.data keeps no public record of the batching, so its
    transformations' attributes are read defensively: else the shape decides.
    """
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


def _normalise_raw_spec(spec: Any) -> dict[str, tuple[tf2.DType, list]]:
    # None: read each shape by itself (an unknown leading dimension is the batch).
    batched = None
    if isinstance(spec, tf2.data.Dataset):
        batched = True if _ends_in_a_fixed_batch(spec) else None
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
            result[name] = _spec_from_tensor_spec(value, batched)
        elif _is_dtype_shape_pair(value):
            result[name] = (tf.as_dtype(value[0]), _pair_shape(name, value))
        elif isinstance(value, (tf2.Tensor, tf2.Variable)):
            result[name] = (value.dtype, value.shape.as_list()[1:])
        else:
            result[name] = _spec_from_examples(name, value)
    return result


def _spec_from_examples(name: str, value: Any) -> tuple[tf2.DType, list]:
    """(dtype, shape) of example data whose first axis runs over examples.

    The dtypes are those ``tfest_kit.inputs.from_arrays`` feeds for the same arrays (float64 as
    float32, strings as tf.string), so the export matches the trained graph.
    """
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
        dtype = tf.string
    elif array.dtype == np.float64:
        # from_arrays trains on float64 arrays as float32; a float64 placeholder would build
        # float64 variables that the float32 checkpoint cannot restore.
        dtype = tf.float32
    else:
        dtype = tf.as_dtype(array.dtype)
    return dtype, list(array.shape[1:])


def _op_name(name: str) -> str:
    # Feature names may hold characters TensorFlow forbids in op names; the dict key keeps them.
    cleaned = re.sub(r"[^A-Za-z0-9_.\-/]", "_", name)
    return cleaned if re.match(r"[A-Za-z0-9.]", cleaned) else f"input_{cleaned}"


def _official_raw_receiver(features_spec: Mapping[str, tuple]) -> ReceiverFn:
    """The official raw receiver for ``name -> (dtype, per-example shape)``.

    ``build_raw_serving_input_receiver_fn`` copies each template tensor's dtype, shape and op
    name into a placeholder of the export's graph; the templates live in a graph of their own.
    It hands the model_fn the very dict that becomes the signature's inputs, so a model_fn that
    pops a feature (a pass-through key, say) removed that input from the export: the model_fn
    gets a copy here.
    """
    with tf.Graph().as_default():
        templates = {
            name: tf.placeholder(dtype, [None, *shape], name=_op_name(name))
            for name, (dtype, shape) in features_spec.items()
        }
    official = tf_estimator.export.build_raw_serving_input_receiver_fn(templates)

    def serving_input_receiver_fn():
        tensors = official().receiver_tensors
        return tf_estimator.export.ServingInputReceiver(dict(tensors), dict(tensors))

    return serving_input_receiver_fn


def raw_receiver(spec: Any) -> ReceiverFn:
    """Builds a receiver that feeds named tensors straight into the model's ``features``.

    Args:
      spec: one of
        * a dict ``name -> (dtype, shape)`` where ``shape`` excludes the batch dimension
          (``(tf.float32, [3])``, ``("float32", 3)``; ``shape`` ``[]`` or ``None`` for a scalar
          per example); ``dtype`` may be a name, and an int ``shape`` ``n`` means ``[n]``;
        * a ``tf.data.Dataset`` or its ``element_spec`` yielding a features dict (or
          ``(features, labels)``): a leading unknown dimension is taken as the batch, any
          other shape as one example; a dataset batched with ``drop_remainder=True`` (as
          TPUs need), whose leading dimension is the batch size, has it taken as the batch
          too (pass the dataset itself: its ``element_spec`` alone does not say so);
        * a dict of example data (NumPy arrays, lists or tensors) whose first axis runs over
          examples, e.g. the arrays you train on; float64 arrays give float32 inputs, as
          :func:`tfest_kit.inputs.from_arrays` feeds them.

    Returns:
      A ``serving_input_receiver_fn`` (the official raw receiver, handing the model_fn a copy
      of the inputs dict); the signature inputs are named like the features.

    Raises:
      TypeError: if ``spec`` is none of the above.
      ValueError: if a ``tf.TensorSpec`` has unknown rank.

    Example:

        receiver = raw_receiver({"x": (tf.float32, [4]), "id": (tf.string, [])})
        estimator.export_saved_model(export_dir, receiver)
    """
    return _official_raw_receiver(_normalise_raw_spec(spec))


def parsing_receiver(feature_spec_or_columns: Union[Mapping, Sequence]) -> ReceiverFn:
    """Builds a receiver that takes serialized ``tf.train.Example`` protos.

    The signature has one input, ``"examples"`` (a ``[None]`` string tensor); it is parsed
    inside the graph with the given spec. :class:`tfest_kit.serving.Predictor` accepts plain
    feature dicts for such a model and serializes them itself.

    Args:
      feature_spec_or_columns: a parse spec (``name -> tf.io.FixedLenFeature`` /
        ``VarLenFeature`` / ...) or an iterable of feature columns, turned into a spec with
        ``tf.compat.v1.feature_column.make_parse_example_spec``.

    Returns:
      A ``serving_input_receiver_fn`` (the official parsing receiver).

    Raises:
      TypeError: if the argument is neither a parse spec nor feature columns.

    Example:

        receiver = parsing_receiver({"x": tf.io.FixedLenFeature([4], tf.float32)})
    """
    value = feature_spec_or_columns
    if isinstance(value, Mapping):
        bad = {k: v for k, v in value.items() if not isinstance(v, _PARSE_CONFIGS)}
        if not value or bad:
            raise TypeError(
                "`feature_spec_or_columns` as a dict must map names to tf.io.FixedLenFeature, "
                f"VarLenFeature, ... Got: {dict(bad) or value!r}"
            )
        spec = dict(value)
    else:
        try:
            columns = list(value)
            spec = tf.feature_column.make_parse_example_spec(columns)
        except (TypeError, ValueError) as e:
            raise TypeError(
                "`feature_spec_or_columns` must be a parse spec dict or an iterable of feature "
                f"columns. Got: {value!r} ({e})"
            ) from e
        if not spec:
            raise TypeError(f"`feature_spec_or_columns` gave an empty parse spec. Got: {value!r}")
    return tf_estimator.export.build_parsing_serving_input_receiver_fn(spec)


def bert_receiver(max_seq_length: int, with_label_ids: bool = False) -> ReceiverFn:
    """Builds the receiver BERT classifiers export with: token ids, mask and segment ids.

    Args:
      max_seq_length: sequence length ``L``; inputs ``input_ids``, ``input_mask`` and
        ``segment_ids`` are int32 ``[None, L]``.
      with_label_ids: also accept ``label_ids`` (int32 ``[None]``), as the original BERT
        ``run_classifier.py`` export does.

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
    return _official_raw_receiver(spec)


def _default_image_preprocess(images):
    return images / 127.5 - 1.0


def image_bytes_receiver(
    image_size: Union[int, Sequence[int]],
    preprocess: Optional[Callable[[Any], Any]] = None,
    channels: int = 3,
    feature_key: str = "image",
) -> ReceiverFn:
    """Builds a receiver that takes encoded JPEG / PNG / BMP / GIF bytes, one string per image.

    Decoding, resizing and normalisation run inside the exported graph, so a client sends
    files, not tensors. The signature input is ``"image_bytes"`` (a ``[None]`` string
    tensor); the model receives ``features[feature_key]``, float32 ``[None, H, W, channels]``.

    Args:
      image_size: ``H`` (square) or ``(H, W)``.
      preprocess: maps the resized float32 batch ``[N, H, W, C]`` with values in ``[0, 255]``
        to the model's input, e.g. ``tf.keras.applications.mobilenet_v2.preprocess_input``.
        Default: scale to ``[-1, 1]``.
      channels: 1 (grayscale) or 3 (RGB); images are converted to this many channels.
      feature_key: name of the image feature the model_fn reads.

    Returns:
      A ``serving_input_receiver_fn``.

    Raises:
      ValueError: for a bad ``image_size``, ``channels`` or ``feature_key``.
      TypeError: if ``preprocess`` is not callable.

    Example:

        receiver = image_bytes_receiver(224)
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
    preprocess_fn = preprocess or _default_image_preprocess

    def decode(encoded):
        image = tf.io.decode_image(encoded, channels=channels, expand_animations=False)
        image.set_shape([None, None, channels])
        return tf.image.resize(tf.cast(image, tf.float32), size)

    def serving_input_receiver_fn():
        image_bytes = tf.placeholder(tf.string, [None], name="image_bytes")
        images = tf.map_fn(
            decode,
            image_bytes,
            fn_output_signature=tf2.TensorSpec([*size, channels], tf.float32),
        )
        images = preprocess_fn(images)
        return tf_estimator.export.ServingInputReceiver(
            {feature_key: images}, {"image_bytes": image_bytes}
        )

    return serving_input_receiver_fn


# Written into each export by the best exporter (through ``assets_extra``, so it appears
# atomically with the export) to remember which metric value the export had.


def _scalar(value: Any) -> Optional[float]:
    try:
        number = float(np.asarray(value))
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _exported_value(export_dir: str, monitor: str) -> Optional[float]:
    """The ``monitor`` value an export was made for, from its metrics file; None if unknown."""
    metrics = read_export_metrics(export_dir) or {}
    return _scalar(metrics.get("value")) if metrics.get("monitor") == monitor else None


def _earlier_evaluations(model_dir: str, monitor: str, eval_result: dict) -> list:
    """``monitor`` in the eval events of the directory this evaluation was written to.

    Of ``eval``/``eval_<name>``, the one holding this evaluation's step and value identifies
    it; that entry itself is left out of "the best so far".
    """
    current = _scalar(eval_result[monitor])
    step = eval_result.get("global_step")
    step = None if step is None else int(np.asarray(step))
    values = []
    for eval_dir in eval_dirs(model_dir):
        history = [(s, m[monitor]) for s, m in metrics_by_step(eval_dir).items() if monitor in m]
        if step is not None and not any(
            s == step and current is not None and math.isclose(v, current, rel_tol=1e-6)
            for s, v in history
        ):
            continue
        # Through the same finiteness filter as the metrics files: nothing compares better
        # than the NaN of a diverged evaluation.
        values.extend(_scalar(v) for s, v in history if s != step)
    return values


def _decided_already(best_eval_result, current_eval_result) -> bool:
    """The official ``compare_fn``: ``_BestExporter.export`` decides before asking it."""
    return True


class _BestExporter(tf_estimator.BestExporter):
    """``tf.estimator.BestExporter`` that decides from the best so far, recovered after restarts.

    The official exporter makes the export, its ``assets_extra`` and the garbage collection.
    Whether to export is decided here: the official one exports on its first call after a
    restart whatever its event files say (tensorflow issue 47396), reads only ``eval/`` (its
    ``event_file_pattern``) and compares with an in-memory best (its ``compare_fn``) that
    outlives a wiped model_dir. The best so far comes from the metrics file stored in each
    previous export or, when no export has one (the official exporter's), from the eval event
    files of whichever ``eval``/``eval_<name>`` directory holds this evaluation.
    """

    def __init__(self, receiver_fn, monitor, mode, exports_to_keep, name, assets_extra, as_text):
        self._monitor = monitor
        self._mode = mode
        self._best: Optional[float] = None
        self._restored_for: Optional[tuple[str, str]] = None
        # Rewritten before each export, so that every export records the values it was made for
        # (the official exporter copies the assets_extra files at each export).
        self._metrics_path = os.path.join(
            tempfile.mkdtemp(prefix="tfest_kit_best_"), EXPORT_METRICS_FILE
        )
        super().__init__(
            name=name,
            serving_input_receiver_fn=receiver_fn,
            event_file_pattern=None,
            compare_fn=_decided_already,
            assets_extra={**(assets_extra or {}), EXPORT_METRICS_FILE: self._metrics_path},
            as_text=as_text,
            exports_to_keep=exports_to_keep,
        )

    def _better(self, value: Optional[float], best: Optional[float]) -> bool:
        if value is None or best is None:
            return value is not None
        return value < best if self._mode == "min" else value > best

    def _restore_best(self, model_dir: str, export_path: str, eval_result: dict) -> None:
        """Recovers the best value so far (this instance may be new after a restart)."""
        exports = complete_exports(export_path)
        values = [_exported_value(path, self._monitor) for path in exports]
        # Its own exports say what was exported: an evaluation whose export was skipped (its
        # checkpoint deleted first) is in the eval history with a better value, which would
        # have kept every later, exported improvement out.
        if exports and not any(v is not None for v in values):
            values = _earlier_evaluations(model_dir, self._monitor, eval_result)
        self._best = None
        for value in values:
            if self._better(value, self._best):
                self._best = value
        tf.logging.info(
            "Best exporter %r: best %s so far = %s (from %d earlier exports)",
            self.name,
            self._monitor,
            self._best,
            len(exports),
        )

    def _value_to_export(self, estimator, export_path, checkpoint_path, eval_result):
        """``eval_result[monitor]`` if it should be exported, else None (with the reason logged)."""
        if not eval_result or self._monitor not in eval_result:
            raise ValueError(
                f"best_exporter {self.name!r}: monitor {self._monitor!r} is not in the "
                f"evaluation result. Available metrics: {sorted(eval_result or {})}"
            )
        value = _scalar(eval_result[self._monitor])
        if value is None:
            tf.logging.warning(
                "Best exporter %r: %s = %s is not a finite number; not exporting",
                self.name,
                self._monitor,
                eval_result[self._monitor],
            )
            return None
        key = (estimator.model_dir, export_path)
        # Also when the export directory holds no complete export: it was wiped (a new run
        # reusing this instance) or never written, and the first evaluation is exported.
        if self._restored_for != key or not complete_exports(export_path):
            self._restore_best(estimator.model_dir, export_path, eval_result)
            self._restored_for = key
        if not self._better(value, self._best):
            tf.logging.info(
                "Best exporter %r: %s = %.6g is not better than %.6g; not exporting",
                self.name,
                self._monitor,
                value,
                self._best,
            )
            return None
        if checkpoint_path and not tf.gfile.Exists(checkpoint_path + ".index"):
            # In a cluster the chief may delete an old checkpoint (keep_checkpoint_max) while
            # the evaluator is still on it; the next evaluation gets its chance.
            tf.logging.warning(
                "Best exporter %r: %s = %.6g improved, but checkpoint %s was deleted before it "
                "could be exported; not exporting. Raise RunConfig(keep_checkpoint_max=…) so "
                "checkpoints outlive their evaluation.",
                self.name,
                self._monitor,
                value,
                checkpoint_path,
            )
            return None
        return value

    def export(self, estimator, export_path, checkpoint_path, eval_result, is_the_final_export):
        """Exports if ``eval_result[monitor]`` beats the best so far; see the class docstring."""
        value = self._value_to_export(estimator, export_path, checkpoint_path, eval_result)
        if value is None:
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
        # The chief can delete the checkpoint after the check above, while it is exported.
        result = export_unless_vanished(
            lambda: super(_BestExporter, self).export(
                estimator, export_path, checkpoint_path, eval_result, is_the_final_export
            ),
            self.name,
            export_path,
            checkpoint_path,
        )
        if result is not None:
            tf.logging.info(
                "Best exporter %r: %s improved %s -> %.6g; exported %s",
                self.name,
                self._monitor,
                self._best,
                value,
                os.fsdecode(result),
            )
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

    Use it in ``EvalSpec(exporters=...)`` or :func:`tfest_kit.train_and_evaluate`. Exports go
    to ``model_dir/export/<name>/<timestamp>``; each holds
    ``assets.extra/tfest_kit_eval_metrics.json`` with the metric values it was exported for.

    Unlike ``tf.estimator.BestExporter``: after a restart the best value so far is recovered
    from the earlier exports' metrics files (or, when no export has one, from the eval events
    in ``eval/`` or ``eval_<EvalSpec name>/``), so a worse model is not exported on the first
    evaluation (tensorflow issue 47396); a monitor missing from the evaluation is an error,
    not a silent no-op. Defaults: ``name="best"`` and ``exports_to_keep=2`` (official: 5).

    Caveat: when the export directory holds no complete export yet, the first evaluation is
    always exported, even if the eval events show a better earlier value (there is no model to
    keep otherwise). Exports are made on the evaluator (or the chief in local mode) only. On a
    cluster the chief may delete the checkpoint (``RunConfig(keep_checkpoint_max=…)``) before
    or while it is exported: that export is skipped with a warning, and its value does not
    become the best.

    Args:
      serving_input_receiver_fn: builds the serving inputs, e.g. :func:`raw_receiver`'s result.
      monitor: key of the evaluation result to compare, e.g. ``"loss"``, ``"accuracy"``.
      mode: ``"min"`` (lower is better), ``"max"`` or ``"auto"``: as in
        :func:`tfest_kit.hooks.early_stopping`, max for accuracy-, AUC-, precision-, recall-
        and F1-like names and min for losses and errors (the choice is logged).
      exports_to_keep: keep this many newest exports (which are the best ones); ``None``
        keeps all.
      name: export sub-directory name.
      assets_extra: extra files for ``assets.extra``, as for ``export_saved_model``.
      as_text: write ``saved_model.pbtxt`` instead of ``saved_model.pb``.

    Returns:
      A ``tf.estimator.Exporter``.

    Raises:
      ValueError: for a bad argument; at export time, if ``monitor`` is not in the
        evaluation result (the message lists the available metrics).
      TypeError: if ``serving_input_receiver_fn`` is not callable.

    Example:

        exporter = best_exporter(raw_receiver({"x": (tf.float32, [4])}), "accuracy", "max")
        tfest_kit.train_and_evaluate(est, train_fn, eval_fn, max_steps=1000,
                                     exporters=[exporter])
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

    def __init__(self):
        self.feed_dict = {}

    def before_run(self, run_context):
        return tf.train.SessionRunArgs(fetches=None, feed_dict=self.feed_dict)


_PREDICT_METHOD = tf.saved_model.PREDICT_METHOD_NAME


def _signature_to_check(signatures: Mapping[str, Mapping]) -> str:
    """The signature whose outputs mirror ``estimator.predict``: a predict-method one.

    Canned estimators make ``serving_default`` a classification / regression signature (outputs
    ``classes`` / ``scores`` / ``outputs``), or export only ``predict`` when the receiver has
    several inputs; their ``predict`` signature holds the prediction dict.
    """
    predict = sorted(n for n, sig in signatures.items() if sig["method"] == _PREDICT_METHOD)
    for name in ("serving_default", "predict", *predict):
        if name in predict:
            return name
    return "serving_default" if "serving_default" in signatures else sorted(signatures)[0]


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

    def log_filter(record: logging.LogRecord) -> bool:
        return "predict yields forever" not in record.getMessage()

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
