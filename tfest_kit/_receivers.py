"""Serving input receivers: what an exported model accepts and how it becomes ``features``.

Each public function checks its arguments at once and returns a ``serving_input_receiver_fn``
(a function of no arguments returning a ``tf.estimator.export.ServingInputReceiver``) for
``Estimator.export_saved_model`` and the exporters. See :mod:`tfest_kit.serving`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Callable, Optional, Union

import numpy as np

from tfest_kit._checks import check_int
from tfest_kit._tf import estimator, tf, tf2

__all__ = ["raw_receiver", "parsing_receiver", "bert_receiver", "image_bytes_receiver"]

ReceiverFn = Callable[[], Any]

_PARSE_CONFIGS = (
    tf.io.FixedLenFeature,
    tf.io.VarLenFeature,
    tf.io.FixedLenSequenceFeature,
    tf.io.SparseFeature,
    tf2.io.RaggedFeature,
)


def _as_dtype(value: Any) -> Optional[tf2.DType]:
    try:
        return tf.as_dtype(value)
    except TypeError:
        return None


def _is_dtype_like(value: Any) -> bool:
    # tf.as_dtype also takes numbers and arrays (their dtype): a row of example data is not a
    # dtype, a dtype name ("float32") is.
    if not isinstance(value, str) and isinstance(value, (bool, int, float, np.generic, np.ndarray)):
        return False
    return _as_dtype(value) is not None


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
    """(dtype, per-example shape) of an element_spec entry.

    ``batched`` True: the leading dimension is the batch (see :func:`_ends_in_a_fixed_batch`);
    None: an unknown leading dimension is the batch and any other shape is one example's.
    """
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

    Its element_spec then gives the batch size, not None, as the leading dimension, which is
    otherwise read as one example's first axis (``[None, 8, 4]`` was exported for batches of
    8). tf.data keeps no public record of the batching; the transformations' Python objects
    do, so they are read defensively: a pipeline they do not describe keeps the reading by
    shape.
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
      A ``serving_input_receiver_fn``; the signature inputs are named like the features.

    Raises:
      TypeError: if ``spec`` is none of the above.
      ValueError: if a ``tf.TensorSpec`` has unknown rank.

    Example:

        receiver = raw_receiver({"x": (tf.float32, [4]), "id": (tf.string, [])})
        estimator.export_saved_model(export_dir, receiver)
    """
    features_spec = _normalise_raw_spec(spec)

    def serving_input_receiver_fn():
        tensors = {
            name: tf.placeholder(dtype, [None, *shape], name=_op_name(name))
            for name, (dtype, shape) in features_spec.items()
        }
        return estimator.export.ServingInputReceiver(tensors, dict(tensors))

    return serving_input_receiver_fn


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
    return estimator.export.build_parsing_serving_input_receiver_fn(spec)


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
    with_labels = bool(with_label_ids)

    def serving_input_receiver_fn():
        tensors = {
            name: tf.placeholder(tf.int32, [None, length], name=name)
            for name in ("input_ids", "input_mask", "segment_ids")
        }
        if with_labels:
            tensors["label_ids"] = tf.placeholder(tf.int32, [None], name="label_ids")
        return estimator.export.ServingInputReceiver(tensors, dict(tensors))

    return serving_input_receiver_fn


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
        return estimator.export.ServingInputReceiver(
            {feature_key: images}, {"image_bytes": image_bytes}
        )

    return serving_input_receiver_fn
