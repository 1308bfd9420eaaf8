"""``input_fn`` builders over tf.data: NumPy / pandas, CSV, TFRecord of ``tf.train.Example``.

Each builder checks its arguments and files at once and returns an ``input_fn(params=None)``
(batch size: ``params["batch_size"]`` when the Estimator passes it). Upstream reads
(``CsvDataset``, ``TFRecordDataset``, ``parse_example``); our checks fill gaps that the
``test_official_*`` tests in tests/test_inputs.py show. Bad data raises :class:`DataError`.

Example:

    train_fn = inputs.from_arrays({"x": x_train}, y_train, batch_size=64, num_epochs=None)
    eval_fn = inputs.from_csv("data/eval-*.csv", label_name="species", shuffle=False)
    paths = inputs.write_tfrecord(rows, "/tmp/data/train.tfrecord", num_shards=4)
    tfrecord_fn = inputs.from_tfrecord(paths, {"label": tf.io.FixedLenFeature([], tf.int64)})
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Callable, Optional, Union

import numpy as np

from tfest_kit._checks import check_int
from tfest_kit._file_checks import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    DataError,
    FilePattern,
    check_csv,
    check_feature_spec,
    check_tfrecords,
    glob_files,
)
from tfest_kit._tf import tf, tf2

__all__ = ["DataError", "from_arrays", "from_csv", "from_tfrecord", "write_tfrecord"]

AUTOTUNE = tf2.data.AUTOTUNE
InputFn = Callable[..., Any]

_DEFAULT_SHUFFLE_BUFFER = 10_000
_FILES_AT_ONCE = 8  # files read at once while shuffling: the buffer then mixes several shards


# --------------------------------------------------------------------------- shared


def _check_common(batch_size: int, num_epochs: Optional[int], shuffle_buffer: Optional[int]):
    check_int("batch_size", batch_size)
    check_int("num_epochs", num_epochs, allow_none=True, hint="None repeats forever")
    check_int("shuffle_buffer", shuffle_buffer, allow_none=True)


def _check_compression(compression: Optional[str]) -> Optional[str]:
    if compression not in (None, "", "GZIP", "ZLIB"):
        raise ValueError(f"`compression` must be None, 'GZIP' or 'ZLIB'. Got: {compression!r}")
    return compression or None


def _batch_size(params: Optional[Mapping[str, Any]], default: int) -> int:
    # Estimator(params=...) hands params over unchecked; batch(0) or batch(8.9) would fail late.
    if params and params.get("batch_size") is not None:
        return check_int(
            "params['batch_size']",
            params["batch_size"],
            hint="the Estimator's params override the builder's batch_size",
        )
    return default


def _pipeline(ds, params, batch_size, shuffle, buffer, num_epochs, seed, drop_remainder, parse):
    """Shuffle before repeat (each epoch sees every example once), batch, parse, prefetch."""
    if shuffle:
        ds = ds.shuffle(buffer, seed=seed, reshuffle_each_iteration=True)
    ds = ds.repeat(num_epochs)
    ds = ds.batch(_batch_size(params, batch_size), drop_remainder=drop_remainder)
    if parse is not None:
        ds = ds.map(parse, num_parallel_calls=AUTOTUNE)
    return ds.prefetch(AUTOTUNE)


def _read_files(files, read, shuffle: bool, seed, files_at_once: Optional[int] = None):
    """The records of ``files``, each file read by ``read(path)`` into a Dataset.

    Shuffling: files in an order the seed fixes, up to 8 interleaved (files of one class each
    gave batches of one class). Not shuffling: one file after another in the order given, so
    that predictions follow the rows (make_csv_dataset and make_batched_features_dataset sort
    them: test_official_pipelines_read_unshuffled_files_sorted_not_as_given).
    """
    paths = tf2.data.Dataset.from_tensor_slices(files)
    if shuffle:
        paths = paths.shuffle(len(files), seed=seed)
    if files_at_once is None:
        files_at_once = _FILES_AT_ONCE if shuffle else 1
    cycle = max(1, min(files_at_once, len(files)))
    if cycle == 1:
        return paths.interleave(read, cycle_length=1)
    # Deterministic (tf.data's default): the order is the shuffles', which a seed fixes.
    return paths.interleave(read, cycle_length=cycle, num_parallel_calls=AUTOTUNE)


# --------------------------------------------------------------------------- from_arrays


def _as_feature_dict(features: Any, feature_name: str) -> dict[str, np.ndarray]:
    if hasattr(features, "to_dict") and hasattr(features, "columns"):  # a pandas DataFrame
        return {str(col): features[col].to_numpy() for col in features.columns}
    if isinstance(features, Mapping):
        if not features:
            raise ValueError("`features` must not be an empty dict.")
        return {str(k): np.asarray(v) for k, v in features.items()}
    if isinstance(features, (np.ndarray, list, tuple)):
        return {feature_name: np.asarray(features)}
    raise TypeError(
        "`features` must be a dict of arrays, a NumPy array or a pandas DataFrame. "
        f"Got: {type(features).__name__}"
    )


def _check_same_index(features: Any, labels: Any) -> None:
    """ValueError for a pandas ``features`` and ``labels`` whose indexes differ.

    Rows are paired by position, so unequal indexes would pair rows with other rows' labels
    (``pandas_input_fn`` refuses them too).
    """
    if not all(hasattr(v, "index") and hasattr(v, "iloc") for v in (features, labels)):
        return
    if features.index.equals(labels.index):
        return
    raise ValueError(
        "`features` and `labels` are pandas objects with different indexes; rows are paired by "
        f"position. Got: features.index starts {list(features.index[:5])}, labels.index starts "
        f"{list(labels.index[:5])} ({len(features.index)} and {len(labels.index)} rows). Pass "
        "labels.loc[features.index], or reset_index(drop=True) on both if positions match."
    )


def _tf_friendly(array: np.ndarray, name: str) -> np.ndarray:
    if array.dtype == np.float64:
        # Keras layers and feature columns compute in float32; float64 input only costs casts.
        return array.astype(np.float32)
    if array.dtype == object:
        odd = [v for v in array.ravel() if not isinstance(v, (str, bytes))]
        if not odd:
            return array.astype(str)
        raise TypeError(
            f"Feature {name!r} holds Python objects that are not all strings (missing values?); "
            f"convert it to a numeric or string array. Got: {odd[0]!r} ({type(odd[0]).__name__})"
        )
    return array


def _arrays(features: Any, labels: Any, feature_name: str):
    """(features dict, label array or None, number of rows), checked."""
    _check_same_index(features, labels)
    feats = _as_feature_dict(features, feature_name)
    if isinstance(labels, str):
        if labels not in feats:
            raise DataError(
                f"Label column {labels!r} is not in `features`; columns are: {sorted(feats)}."
            )
        labels = feats.pop(labels)
        if not feats:
            raise ValueError("`features` has no column left once the label column is removed.")
    feats = {k: _tf_friendly(v, k) for k, v in feats.items()}
    label_array = None if labels is None else _tf_friendly(np.asarray(labels), "labels")
    lengths = {k: (len(v) if v.ndim else -1) for k, v in feats.items()}
    if label_array is not None:
        lengths["<labels>"] = len(label_array) if label_array.ndim else -1
    if len(set(lengths.values())) != 1 or -1 in lengths.values() or 0 in lengths.values():
        raise ValueError(
            "All feature arrays and the labels must have the same number (>= 1) of rows. "
            f"Got rows per key: {lengths}"
        )
    return feats, label_array, next(iter(lengths.values()))


# Arrays up to this many bytes in all become constants of the input_fn's graph; Estimator
# writes that graph into graph.pbtxt, the events file and every checkpoint's .meta (40 MB of
# data made 300 MB of files), and a graph cannot exceed 2 GB. Larger arrays stay in this
# process and are looked up a batch at a time, as numpy_input_fn's feeding did.
_EMBEDDED_ARRAYS_LIMIT = 16 << 20


def from_arrays(
    features: Any,
    labels: Any = None,
    *,
    batch_size: int = 32,
    shuffle: bool = True,
    num_epochs: Optional[int] = 1,
    shuffle_buffer: Optional[int] = None,
    drop_remainder: bool = False,
    seed: Optional[int] = None,
    feature_name: str = "x",
) -> InputFn:
    """Builds an ``input_fn`` over in-memory NumPy arrays or a pandas DataFrame.

    Not ``tf.compat.v1.estimator.inputs.numpy_input_fn`` / ``pandas_input_fn``: they feed
    through queue runners, with no ``Dataset`` (which ``TPUEstimator`` needs) and no
    ``drop_remainder`` (test_official_numpy_input_fn_gives_queue_tensors_without_static_batches).
    ``float64`` arrays are fed as ``float32``, object arrays of strings as ``tf.string``. Arrays
    over 16 MB in all stay in this process and are read a batch at a time through
    ``tf.numpy_function``, so their ``input_fn`` runs only where it was built.

    Args:
      features: a dict ``{name: array}``, a pandas DataFrame (one feature per column) or a single
        array, which becomes the feature ``feature_name``.
      labels: an array / pandas Series with one label per row (with the same index as a
        DataFrame ``features``), the *name* of a column of ``features`` (removed from the
        features), or None for features only (prediction).
      batch_size: examples per batch unless ``params["batch_size"]`` is given.
      shuffle: shuffle the rows (use False for evaluation and prediction).
      num_epochs: passes over the data; None repeats forever.
      shuffle_buffer: shuffle buffer size; default: all rows, at most 10,000.
      drop_remainder: drop the last, smaller batch (static batch shapes, TPU style).
      seed: shuffle seed for reproducible order.
      feature_name: the key a bare array ``features`` gets.

    Returns:
      ``input_fn(params=None)`` returning a ``tf.data.Dataset`` of ``(features, labels)`` batches,
      or of ``features`` when ``labels`` is None.

    Raises:
      DataError: if ``labels`` names a column that is not in ``features``.
      ValueError: arrays with different numbers of rows, pandas indexes that differ, a bad
        argument or (from the ``input_fn``) ``params["batch_size"]``.
      TypeError: if ``features`` is of an unsupported type.

    Example:

        train_fn = from_arrays(df, "target", batch_size=64, num_epochs=None)
        predict_fn = from_arrays({"x": x_test}, shuffle=False)
    """
    _check_common(batch_size, num_epochs, shuffle_buffer)
    feats, label_array, num_rows = _arrays(features, labels, feature_name)
    buffer = shuffle_buffer or min(num_rows, _DEFAULT_SHUFFLE_BUFFER)
    data = feats if label_array is None else (feats, label_array)
    embed = sum(array.nbytes for array in tf2.nest.flatten(data)) <= _EMBEDDED_ARRAYS_LIMIT

    def input_fn(params=None):
        if embed:
            ds, parse = tf2.data.Dataset.from_tensor_slices(data), None
        else:  # row numbers, looked up batch by batch
            ds, parse = tf2.data.Dataset.range(num_rows), lambda rows: _rows_of(data, rows)
        return _pipeline(
            ds, params, batch_size, shuffle, buffer, num_epochs, seed, drop_remainder, parse
        )

    return input_fn


def _rows_of(data: Any, rows: Any) -> Any:
    """``data``'s rows numbered by the int64 tensor ``rows``, read from NumPy in Python."""
    arrays = tf2.nest.flatten(data)

    def look_up(index):
        # numpy_function turns str arrays into bytes as ASCII: encode them as UTF-8 first.
        return [
            np.char.encode(array[index], "utf-8") if array.dtype.kind == "U" else array[index]
            for array in arrays
        ]

    looked_up = tf2.numpy_function(
        look_up,
        [rows],
        [tf2.as_dtype(np.bytes_ if array.dtype.kind == "U" else array.dtype) for array in arrays],
        stateful=False,
    )
    for tensor, array in zip(looked_up, arrays):
        tensor.set_shape(rows.shape.concatenate(array.shape[1:]))
    return tf2.nest.pack_sequence_as(data, looked_up)


# --------------------------------------------------------------------------- CSV
# CsvDataset reads, as in make_csv_dataset, after check_csv's pass over the files, which
# make_csv_dataset lacks: it names no file:line for a bad row, reads a numeric column with "NA"
# as strings, types "1_000" as an int that CsvDataset refuses, sorts unshuffled files and has no
# drop_remainder (the test_official_* tests show each).


def _record_default(value: Any):
    """CsvDataset's record default: a dtype makes the column required, a value optional."""
    if isinstance(value, tf2.dtypes.DType):
        return value
    if isinstance(value, np.integer):  # as wide as the NumPy type (uint32 needs int64)
        wide = value.dtype.itemsize > 4 or (value.dtype.kind == "u" and value.dtype.itemsize == 4)
        return tf2.constant([int(value)], tf2.int64 if wide else tf2.int32)
    if isinstance(value, int):
        wide = not INT32_MIN <= value <= INT32_MAX
        return tf2.constant([value], tf2.int64 if wide else tf2.int32)
    if isinstance(value, (float, np.floating)):
        return tf2.constant([float(value)], tf2.float32)
    return tf2.constant([value], tf2.string)


def from_csv(
    file_pattern: FilePattern,
    column_names: Optional[Sequence[str]] = None,
    label_name: Optional[str] = None,
    *,
    column_defaults: Any = None,
    select_columns: Optional[Sequence[str]] = None,
    header: bool = True,
    field_delim: str = ",",
    na_value: str = "",
    compression: Optional[str] = None,
    batch_size: int = 32,
    shuffle: bool = True,
    num_epochs: Optional[int] = 1,
    shuffle_buffer: Optional[int] = None,
    drop_remainder: bool = False,
    seed: Optional[int] = None,
    validate: bool = True,
) -> InputFn:
    """Builds an ``input_fn`` over CSV files with ``tf.data.experimental.CsvDataset``.

    The files are checked once, in Python, when the builder is called: row widths (the error
    names ``file:line``), the label column, and column types, inferred (int32, int64, float32,
    string) unless ``column_defaults`` gives them. A numeric column with a few other fields or
    a missing-value marker (``"NA"``, ``"?"``) is refused, naming ``na_value``, not read as text.

    Args:
      file_pattern: a path, glob pattern or list of them (``"data/train-*.csv"``).
      column_names: the column names; default: the header line of the first file.
      label_name: the column to return as the label, or None for features only.
      column_defaults: one default per column (a list, or a dict ``{name: default}`` for some);
        a value (``0``, ``0.0``, ``""``) fills empty fields, a dtype (``tf.float32``) makes the
        column required. Default: inferred from the data.
      select_columns: read only these columns (the label is always read).
      header: whether each file starts with a header line (skipped).
      field_delim: the field separator.
      na_value: a string that stands for a missing value.
      compression: None, ``"GZIP"`` or ``"ZLIB"``.
      batch_size: examples per batch unless ``params["batch_size"]`` is given.
      shuffle: shuffle files (8 read at once) and rows; False reads the files in the order given.
      num_epochs: passes over the data; None repeats forever.
      shuffle_buffer: shuffle buffer size (default 10,000 rows).
      drop_remainder: drop the last, smaller batch (static batch shapes, TPU style).
      seed: shuffle seed for reproducible order.
      validate: check every row up front; False reads 100 rows per file (to infer types).

    Returns:
      ``input_fn(params=None)`` returning a ``tf.data.Dataset`` of ``(features, label)`` batches,
      ``features`` a dict of ``[batch]`` tensors, or of ``features`` when ``label_name`` is None.

    Raises:
      DataError: no file matches; a bad row or header; a missing column named; a numeric column
        with non-numeric fields.
      ValueError: a bad argument, or (from the ``input_fn``) a bad ``params["batch_size"]``.
      TypeError: a ``column_defaults`` entry that is not an int, float, str or tf dtype.

    Example:

        train_fn = from_csv("/tmp/iris/train.csv", label_name="species", num_epochs=None)
        eval_fn = from_csv("/tmp/iris/test.csv", label_name="species", shuffle=False)
    """
    _check_common(batch_size, num_epochs, shuffle_buffer)
    compression = _check_compression(compression)
    if not isinstance(field_delim, str) or len(field_delim) != 1:
        raise ValueError(f"`field_delim` must be a single character. Got: {field_delim!r}")
    files = glob_files(file_pattern)
    scan = (header, field_delim, compression, None if validate else 100, na_value)
    indices, picked, defaults = check_csv(
        files, column_names, label_name, select_columns, column_defaults, scan
    )
    buffer = shuffle_buffer or _DEFAULT_SHUFFLE_BUFFER

    def to_dict(*columns):
        feats = dict(zip(picked, columns))
        return feats if label_name is None else (feats, feats.pop(label_name))

    def input_fn(params=None):
        record_defaults = [_record_default(d) for d in defaults]

        def read(path):
            return tf2.data.experimental.CsvDataset(
                path,
                record_defaults,
                compression_type=compression or "",
                header=header,
                field_delim=field_delim,
                na_value=na_value,
                select_cols=indices,
            )

        ds = _read_files(files, read, shuffle, seed)
        return _pipeline(
            ds, params, batch_size, shuffle, buffer, num_epochs, seed, drop_remainder, to_dict
        )

    return input_fn


# --------------------------------------------------------------------------- TFRecord


def from_tfrecord(
    file_pattern: FilePattern,
    feature_spec: Mapping[str, Any],
    label_key: Optional[str] = None,
    *,
    compression: Optional[str] = None,
    num_parallel_reads: Optional[int] = AUTOTUNE,
    batch_size: int = 32,
    shuffle: bool = True,
    num_epochs: Optional[int] = 1,
    shuffle_buffer: Optional[int] = None,
    drop_remainder: bool = False,
    seed: Optional[int] = None,
    validate: bool = True,
) -> InputFn:
    """Builds an ``input_fn`` over TFRecord files of serialized ``tf.train.Example``.

    ``TFRecordDataset`` reads, ``tf.io.parse_example`` parses each batch. When the builder is
    called, every local shard is read once (a cut one is named now, not mid-training; see
    ``validate``) and the first example is checked against ``feature_spec``.

    Args:
      file_pattern: a path, glob pattern or list of them (``"data/train.tfrecord-*"``).
      feature_spec: ``{key: tf.io.FixedLenFeature | VarLenFeature | …}``, e.g. from
        ``tf.feature_column.make_parse_example_spec(columns)`` plus the label's entry.
      label_key: the key of ``feature_spec`` to return as the label, or None for features only.
      compression: None, ``"GZIP"`` or ``"ZLIB"`` (as written by :func:`write_tfrecord`).
      num_parallel_reads: files read at once and interleaved; by default (``AUTOTUNE``) up
        to 8 when shuffling, else one file after another in the order given.
      batch_size: examples per batch unless ``params["batch_size"]`` is given.
      shuffle: shuffle files and records (use False for evaluation and prediction).
      num_epochs: passes over the data; None repeats forever.
      shuffle_buffer: shuffle buffer size (default 10,000 records).
      drop_remainder: drop the last, smaller batch (static batch shapes, TPU style).
      seed: shuffle seed for reproducible order.
      validate: read every local shard up front (TensorFlow's reader: about 250 MB/s); False
        reads only the first example, for data too large to read twice.

    Returns:
      ``input_fn(params=None)`` returning a ``tf.data.Dataset`` of ``(features, label)`` batches
      (``features`` without the label), or of ``features`` when ``label_key`` is None.

    Raises:
      TypeError: ``feature_spec`` is not a dict.
      ValueError: ``label_key`` not in ``feature_spec``, an empty spec, a dtype an Example
        cannot hold, a bad argument.
      DataError: no file matches, a file is unreadable, cut or corrupt, or the first example
        does not match ``feature_spec``.

    Example:

        spec = tf.feature_column.make_parse_example_spec(columns)
        spec["label"] = tf.io.FixedLenFeature([], tf.int64)
        train_fn = from_tfrecord("/tmp/data/train.tfrecord-*", spec, "label", num_epochs=None)
    """
    _check_common(batch_size, num_epochs, shuffle_buffer)
    compression = _check_compression(compression)
    spec = check_feature_spec(feature_spec, label_key)
    files = glob_files(file_pattern)
    check_tfrecords(files, spec, compression, whole=validate)
    buffer = shuffle_buffer or _DEFAULT_SHUFFLE_BUFFER
    # Not make_batched_features_dataset: it sorts unshuffled files (see _read_files).
    # TFRecordDataset's own AUTOTUNE read the files one after another (TF 2.15).
    parallel = None if num_parallel_reads in (None, AUTOTUNE) else num_parallel_reads

    def parse(serialized):
        feats = tf2.io.parse_example(serialized, spec)
        return feats if label_key is None else (feats, feats.pop(label_key))

    def input_fn(params=None):
        ds = _read_files(
            files,
            lambda path: tf2.data.TFRecordDataset(path, compression_type=compression or ""),
            shuffle,
            seed,
            parallel,
        )
        return _pipeline(
            ds, params, batch_size, shuffle, buffer, num_epochs, seed, drop_remainder, parse
        )

    return input_fn


_KIND_NAMES = {0: "int64", 1: "float", 2: "bytes"}


def _outside_int64(where: str, value: int) -> ValueError:
    return ValueError(
        f"{where}: {value} is outside int64, the only integer type a tf.train.Example holds; "
        "write it as a string (bytes_list) or scale it."
    )


def _value_kind(value: Any, key: str, row: int) -> tuple[Optional[int], list]:
    """(kind, flat list of values) of one row's value; kind None for an empty list."""
    where = f"Row {row}, feature {key!r}"
    if value is None:
        raise TypeError(
            f"{where} is None (a missing value?): a tf.train.Example has no missing values. "
            "Leave the key out of that row (the reader's default_value then fills it) or write "
            "a value."
        )
    try:
        values = np.asarray(value)
        if values.dtype == object and values.ndim > 0:
            values = np.asarray(list(values.ravel()))
    except ValueError as error:  # NumPy: "inhomogeneous shape"
        raise TypeError(
            f"{where}: nested lists of different lengths; a feature is one list of values "
            f"(flatten it, or write one feature per inner list). Got: {value!r}"
        ) from error
    flat = values.ravel().tolist() if values.ndim else [values.item()]
    if values.size == 0:
        return None, []
    if values.dtype.kind in "biu":
        outside = [int(v) for v in flat if not INT64_MIN <= int(v) <= INT64_MAX]
        if outside:
            raise _outside_int64(where, outside[0])
        return 0, [int(v) for v in flat]
    if values.dtype.kind == "f":
        return 1, [float(v) for v in flat]
    if values.dtype.kind in "SUO":
        if all(isinstance(v, int) and not isinstance(v, bool) for v in flat):
            raise _outside_int64(where, flat[0])  # ints NumPy holds in no integer type
        if not all(isinstance(v, (str, bytes)) for v in flat):
            raise TypeError(
                f"{where}: mixed value types; expected numbers or strings (no None). "
                f"Got: {value!r}"
            )
        return 2, [v.encode("utf-8") if isinstance(v, str) else v for v in flat]
    raise TypeError(
        f"{where}: expected int, float, str/bytes or a list/array of them. "
        f"Got: {value!r} ({values.dtype})"
    )


# float32, which a float_list holds, has every integer only up to 2**24 (some above too).
_FLOAT32_EXACT_INTS = 2**24


def _rows_to_examples(rows: list[Mapping[str, Any]]) -> list[bytes]:
    converted: list[dict[str, tuple[Optional[int], list]]] = []
    kinds: dict[str, int] = {}
    for index, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise TypeError(f"`rows` must hold dicts {{feature: value}}. Row {index} is: {row!r}")
        entry = {}
        for key, value in row.items():
            kind, values = _value_kind(value, key, index)
            if kind is not None:
                seen = kinds.setdefault(key, kind)
                if (seen == 2) != (kind == 2):
                    raise TypeError(
                        f"Row {index}, feature {key!r}: {_KIND_NAMES[kind]} value {value!r}, "
                        f"but earlier rows hold {_KIND_NAMES[seen]}."
                    )
                kinds[key] = max(seen, kind)  # an int column with some floats holds floats
            entry[str(key)] = (kind, values)
        converted.append(entry)
    for key, kind in kinds.items():
        rounded = [
            v
            for entry in converted
            if kind == 1 and entry.get(key, (None,))[0] == 0
            for v in entry[key][1]
            if abs(v) > _FLOAT32_EXACT_INTS and int(np.float32(v)) != v
        ]
        if rounded:
            tf.logging.warning(
                "write_tfrecord: feature %r holds floats in some rows, so all its values are "
                "written as float32, which holds every integer only up to 2**24; %d int "
                "value(s) are rounded (e.g. %d). Write ids as ints only, or as strings.",
                key,
                len(rounded),
                rounded[0],
            )
    lists = [tf2.train.Int64List, tf2.train.FloatList, tf2.train.BytesList]
    fields = ["int64_list", "float_list", "bytes_list"]
    return [
        tf2.train.Example(
            features=tf2.train.Features(
                feature={
                    key: tf2.train.Feature(
                        **{fields[kinds.get(key, 1)]: lists[kinds.get(key, 1)](value=values)}
                    )
                    for key, (_, values) in entry.items()
                }
            )
        ).SerializeToString()
        for entry in converted
    ]


def write_tfrecord(
    rows: Union[Iterable[Mapping[str, Any]], Any],
    path: Union[str, os.PathLike],
    *,
    num_shards: int = 1,
    compression: Optional[str] = None,
) -> list[str]:
    """Writes dict rows as ``tf.train.Example`` records into one or more TFRecord shards.

    Ints and bools → ``int64_list``, floats → ``float_list`` (a key with ints and floats too;
    a warning names ints float32 rounds), ``str`` / ``bytes`` → ``bytes_list``; lists and arrays
    give multi-valued features. Rows are dealt round-robin over the shards.

    Args:
      rows: an iterable of dicts ``{feature: value}`` or a pandas DataFrame (one row each).
      path: the output file; with ``num_shards > 1`` the shards are
        ``PATH-00000-of-0000N`` … (read them back with the pattern ``PATH-*``).
      num_shards: how many files to write.
      compression: None, ``"GZIP"`` or ``"ZLIB"``.

    Returns:
      The paths written, in shard order.

    Raises:
      ValueError: ``num_shards`` < 1, a bad ``compression``, or an int outside int64.
      TypeError: a row that is not a dict, a value of an unsupported type (None among them),
        ragged nested lists, or a key holding numbers in some rows and strings in others.

    Example:

        rows = [{"age": 39, "income": 5.2e4, "city": "Oslo", "label": 1}, ...]
        paths = write_tfrecord(rows, "/tmp/data/train.tfrecord", num_shards=4)
    """
    num_shards = check_int("num_shards", num_shards)
    compression = _check_compression(compression)
    if hasattr(rows, "to_dict") and hasattr(rows, "columns"):  # a pandas DataFrame
        rows = rows.to_dict("records")
    serialized = _rows_to_examples(list(rows))
    path = os.fspath(path)
    directory = os.path.dirname(path)
    if directory:
        tf2.io.gfile.makedirs(directory)
    paths = (
        [path]
        if num_shards == 1
        else [f"{path}-{i:05d}-of-{num_shards:05d}" for i in range(num_shards)]
    )
    options = tf2.io.TFRecordOptions(compression_type=compression or "")
    for shard, shard_path in enumerate(paths):
        with tf2.io.TFRecordWriter(shard_path, options) as writer:
            for record in serialized[shard::num_shards]:
                writer.write(record)
    tf.logging.info(
        "write_tfrecord: %d examples in %d file(s) at %s", len(serialized), len(paths), path
    )
    shard_name = re.compile(re.escape(os.path.basename(path)) + r"-\d{5}-of-\d{5}")
    fresh = {os.path.basename(p) for p in paths}
    stale = [
        os.path.join(directory, n)
        for n in sorted(tf2.io.gfile.listdir(directory or "."))
        if shard_name.fullmatch(n) and n not in fresh
    ]
    if stale:
        tf.logging.warning(
            "write_tfrecord: %d shard(s) of %s from an earlier write with another num_shards "
            "remain (%s): the pattern %s-* reads them too. Read the paths write_tfrecord "
            "returns, or delete those files.",
            len(stale),
            path,
            ", ".join(os.path.basename(p) for p in stale[:3]) + (", ..." if len(stale) > 3 else ""),
            path,
        )
    return paths
