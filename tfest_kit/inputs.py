"""``input_fn`` builders: NumPy / pandas, CSV files, TFRecord files of ``tf.train.Example``.

Each builder checks its arguments and files at once and returns an ``input_fn(params=None)``
that builds a ``tf.data.Dataset`` the recommended way: files read in parallel, a shuffle buffer
before ``repeat``, batching (optionally with ``drop_remainder`` for TPU-style static shapes),
parsing mapped in parallel *after* batching, and ``prefetch(AUTOTUNE)`` at the end.

The batch size is ``params["batch_size"]`` when the Estimator passes ``params`` that contain it
(``Estimator`` and ``TPUEstimator`` pass ``params`` to an ``input_fn`` that accepts it; tfest_kit's
``TPUEstimator`` puts the per-mode batch size there), else the builder's ``batch_size``.
``num_epochs=None`` repeats forever (train with ``steps`` / ``max_steps`` then).

Problems with the data itself (no file matches a pattern, a CSV row of the wrong width, a label
that is not in the files) raise :class:`DataError`, a :class:`tfest_kit.TfestKitError` that is
also a ``ValueError``; wrong arguments raise ``ValueError`` / ``TypeError``.

Example:

    from tfest_kit import inputs

    train_fn = inputs.from_arrays({"x": x_train}, y_train, batch_size=64, num_epochs=None)
    eval_fn = inputs.from_csv("data/eval-*.csv", label_name="species", shuffle=False)
    paths = inputs.write_tfrecord(rows, "/tmp/data/train.tfrecord", num_shards=4)
    spec = {"age": tf.io.FixedLenFeature([], tf.int64),  # write_tfrecord keeps ints as int64
            "label": tf.io.FixedLenFeature([], tf.int64)}
    tfrecord_fn = inputs.from_tfrecord("/tmp/data/train.tfrecord-*", spec, "label")
    estimator.train(train_fn, max_steps=1000)
"""

from __future__ import annotations

import collections
import csv
import gzip
import io
import re
import zlib
from collections.abc import Mapping, Sequence
from typing import Any, Optional

import numpy as np

from tfest_kit._input_common import (
    _DEFAULT_SHUFFLE_BUFFER,
    AUTOTUNE,
    DataError,
    FilePattern,
    InputFn,
    _batch_size,
    _check_common,
    _glob,
    _read_files,
    _shuffle_repeat,
)
from tfest_kit._tf import tf2
from tfest_kit._tfrecord_input import from_tfrecord, write_tfrecord

__all__ = ["DataError", "from_arrays", "from_csv", "from_tfrecord", "write_tfrecord"]

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


def _is_pandas(value: Any) -> bool:
    """True for a pandas DataFrame or Series (checked by duck type: pandas is optional)."""
    return hasattr(value, "index") and hasattr(value, "to_numpy") and hasattr(value, "iloc")


def _check_same_index(features: Any, labels: Any) -> None:
    """Raises a ValueError unless a pandas ``features`` and ``labels`` have equal indexes.

    The arrays are paired by position, so unequal indexes (``x`` sorted or filtered apart
    from ``y``) would pair rows with other rows' labels; ``pandas_input_fn`` refused them too.
    """
    if not (_is_pandas(features) and _is_pandas(labels)):
        return
    if features.index.equals(labels.index):
        return
    raise ValueError(
        "`features` and `labels` are pandas objects with different indexes; rows are paired by "
        "position, so each row would get another row's label. Got: features.index starts "
        f"{list(features.index[:5])}, labels.index starts {list(labels.index[:5])} "
        f"({len(features.index)} and {len(labels.index)} rows). Pass labels.loc[features.index] "
        "to pair rows by index label, or call reset_index(drop=True) on both if their "
        "positions already match."
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

    Like ``tf.compat.v1.estimator.inputs.numpy_input_fn`` and ``pandas_input_fn``, which
    feed through queue runners: this one returns a ``tf.data.Dataset`` (what ``TPUEstimator``
    needs) with ``drop_remainder`` and ``params["batch_size"]``. ``float64`` arrays are fed
    as ``float32``; object arrays of strings as ``tf.string``. Arrays of up to 16 MB in all
    become part of the graph; larger ones stay in this process's memory and are read a batch
    at a time through ``tf.numpy_function`` (in the graph, Estimator would copy them into
    every checkpoint's ``.meta`` file), so their ``input_fn`` runs only where it was built,
    not on a remote TPU host.

    Args:
      features: a dict ``{name: array}``, a pandas DataFrame (one feature per column) or a single
        array, which becomes the feature ``feature_name`` (``"x"`` by default).
      labels: an array / pandas Series with one label per row (a Series or DataFrame with the
        same index as a DataFrame ``features``), the *name* of a column of
        ``features`` to use as the label (it is removed from the features), or None for
        features only (prediction).
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
      ValueError: if the arrays have different numbers of rows, a pandas ``features`` and
        ``labels`` have different indexes, or a bad batch size / epochs (the ``input_fn``
        raises it for a ``params["batch_size"]`` that is not a positive int).
      TypeError: if ``features`` is of an unsupported type.

    Example:

        train_fn = from_arrays(df, "target", batch_size=64, num_epochs=None)
        predict_fn = from_arrays({"x": x_test}, shuffle=False)
    """
    _check_common(batch_size, num_epochs, shuffle_buffer)
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
            f"All feature arrays and the labels must have the same number (>= 1) of rows. "
            f"Got rows per key: {lengths}"
        )
    num_rows = next(iter(lengths.values()))
    buffer = shuffle_buffer or min(num_rows, _DEFAULT_SHUFFLE_BUFFER)

    data = feats if label_array is None else (feats, label_array)
    embed = sum(array.nbytes for array in tf2.nest.flatten(data)) <= _EMBEDDED_ARRAYS_LIMIT

    def input_fn(params=None):
        if embed:
            ds = tf2.data.Dataset.from_tensor_slices(data)
        else:
            ds = tf2.data.Dataset.range(num_rows)  # row numbers, looked up batch by batch
        ds = _shuffle_repeat(ds, shuffle, buffer, num_epochs, seed)
        ds = ds.batch(_batch_size(params, batch_size), drop_remainder=drop_remainder)
        if not embed:
            ds = ds.map(lambda rows: _rows_of(data, rows), num_parallel_calls=AUTOTUNE)
        return ds.prefetch(AUTOTUNE)

    return input_fn


# Arrays up to this many bytes in all become constants of the input_fn's graph; Estimator
# writes that graph into graph.pbtxt, the events file and every checkpoint's .meta (40 MB of
# data made 300 MB of files), and a graph cannot exceed 2 GB. Larger arrays stay in this
# process and are looked up a batch at a time, as numpy_input_fn's feeding did.
_EMBEDDED_ARRAYS_LIMIT = 16 << 20


def _rows_of(data: Any, rows: Any) -> Any:
    """``data``'s rows numbered by the tensor ``rows``, read from the NumPy arrays in Python.

    Args:
      data: the features dict, or ``(features, labels)``, of NumPy arrays.
      rows: an int64 tensor of row numbers (one batch).

    Returns:
      The same structure of tensors, holding those rows.
    """
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


def _open_text(path: str, compression: Optional[str]):
    if compression == "GZIP":
        return gzip.open(tf2.io.gfile.GFile(path, "rb"), "rt", newline="")
    if compression == "ZLIB":
        raw = tf2.io.gfile.GFile(path, "rb").read()
        try:
            return io.StringIO(zlib.decompress(raw).decode("utf-8"), newline="")
        except _READ_ERRORS as error:
            raise _unreadable(path, compression, error) from error
    return tf2.io.gfile.GFile(path, "r")


# What reading a file with the wrong compression or encoding raises, from gzip, zlib or codecs.
_READ_ERRORS = (OSError, EOFError, zlib.error, UnicodeDecodeError)


class _ReadErrorsNamed:
    """A text file's lines; a read error becomes a DataError naming the file and the fix."""

    def __init__(self, handle, path: str, compression: Optional[str]) -> None:
        self._handle, self._path, self._compression = handle, path, compression

    def __iter__(self):
        return self

    def __next__(self) -> str:
        try:
            return next(self._handle)
        except _READ_ERRORS as error:
            raise _unreadable(self._path, self._compression, error) from error


def _unreadable(path: str, compression: Optional[str], error: Exception) -> DataError:
    """A DataError for a CSV file that cannot be read as text with ``compression``."""
    with tf2.io.gfile.GFile(path, "rb") as raw:
        start = raw.read(2)
    if start == b"\x1f\x8b" and compression != "GZIP":
        fix = "it is GZIP-compressed: pass compression='GZIP'"
    elif compression is not None:
        fix = f"check that it is {compression}-compressed, or pass compression=None"
    elif isinstance(error, UnicodeDecodeError):
        fix = "it is not UTF-8 text: save it as UTF-8"
    else:
        fix = "check that it is a CSV text file"
    return DataError(f"{path}: cannot read it (compression={compression!r}): {fix}. ({error})")


_INT32, _INT64, _FLOAT, _STRING = range(4)  # column kinds, in the order they widen
_INT32_RANGE = (-(2**31), 2**31 - 1)
_INT64_RANGE = (-(2**63), 2**63 - 1)


# What CsvDataset itself parses (probed against TF 2.15): Python's int() / float() also take
# "1_000", non-ASCII digits, "+1" as an int and "infinity", which CsvDataset rejects at the first
# batch, naming no file.  Anything else is a string column, which always parses.
_INT_CELL = re.compile(r"-?[0-9]+")
_FLOAT_CELL = re.compile(
    r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|nan|inf)", re.IGNORECASE
)


def _cell_kind(value: str) -> int:
    if _INT_CELL.fullmatch(value):
        number = int(value)
        # Ids and timestamps overflow int32; CsvDataset rejects them in an int32 column.
        if _INT32_RANGE[0] <= number <= _INT32_RANGE[1]:
            return _INT32
        return _INT64 if _INT64_RANGE[0] <= number <= _INT64_RANGE[1] else _FLOAT
    return _FLOAT if _FLOAT_CELL.fullmatch(value) else _STRING


class _ColumnText:
    """The non-numeric fields of one CSV column, kept to tell a string column from bad cells."""

    _KEPT_TOKENS = 5

    def __init__(self):
        self.numbers = 0  # fields that parse as numbers
        self.texts = 0  # fields that do not
        self.first: Optional[tuple[str, int, str]] = None  # (path, line, field) of the first text
        self.tokens: dict[str, int] = {}  # a few distinct texts and how often they occur
        self.only_first_rows = True  # every text is in the first row of its file

    def add_text(self, path: str, line: int, cell: str, first_row: bool) -> None:
        self.texts += 1
        if self.first is None:
            self.first = (path, line, cell)
        if cell in self.tokens or len(self.tokens) < self._KEPT_TOKENS:
            self.tokens[cell] = self.tokens.get(cell, 0) + 1
        self.only_first_rows = self.only_first_rows and first_row


def _duplicates(names: Sequence[str]) -> list[str]:
    return sorted(name for name, count in collections.Counter(names).items() if count > 1)


def _scan_csv(
    files: list[str],
    column_names: Optional[list[str]],
    header: bool,
    delim: str,
    compression: Optional[str],
    max_rows: Optional[int],
    na_value: str = "",
) -> tuple[list[str], list[int], list[_ColumnText]]:
    """Reads the CSV files in Python: checks header and row widths, infers each column's kind.

    Returns:
      (column names, per-column kind, per-column non-numeric fields); ``max_rows`` limits how
      many rows per file are checked.
    """
    names = list(column_names) if column_names is not None else None
    if names is not None and _duplicates(names):
        raise ValueError(
            "`column_names` must be unique; rename the repeated ones. "
            f"Got: {names} (repeated: {_duplicates(names)})"
        )
    first_head: Optional[list[str]] = None
    kinds: Optional[list[int]] = None
    for path in files:
        with _open_text(path, compression) as handle:
            reader = csv.reader(_ReadErrorsNamed(handle, path, compression), delimiter=delim)
            if header:
                head = next(reader, None)
                if head is None:
                    raise DataError(
                        f"{path}: the file is empty but `header=True` expects a header."
                    )
                # Spreadsheet programs start UTF-8 CSV files with a byte-order mark.
                head = [h.strip() for h in head]
                head[0] = head[0].lstrip("\ufeff")
                if names is None:
                    # CsvDataset selects columns by strictly increasing index: a repeated name
                    # would fail at the first batch ("select_cols should be strictly increasing").
                    if _duplicates(head):
                        raise DataError(
                            f"{path}:1: header repeats the column names {_duplicates(head)}; "
                            "rename them in the file, or pass unique `column_names` (the header "
                            "line is still skipped)."
                        )
                    names = head
                elif len(head) != len(names):
                    raise DataError(
                        f"{path}:1: header has {len(head)} columns {head}, expected "
                        f"{len(names)}: {names}."
                    )
                if first_head is None:
                    first_head = head
                elif head != first_head:
                    # Columns are read by position: another order would mix them up silently.
                    raise DataError(
                        f"{path}:1: header {head} differs from {files[0]}'s {first_head}; "
                        "all files must have the same columns in the same order."
                    )
            for index, row in enumerate(reader):
                line = reader.line_num
                if not row:
                    # CsvDataset reads a blank line as a one-field record and fails mid-training.
                    raise DataError(f"{path}:{line}: blank line; remove it (CSV rows only).")
                if names is None:
                    raise ValueError(
                        "`column_names` is required when `header=False`. Got: None "
                        f"(the first row of {path} has {len(row)} fields)."
                    )
                if len(row) != len(names):
                    raise DataError(
                        f"{path}:{line}: row has {len(row)} fields, expected {len(names)} "
                        f"({', '.join(names)}). Row: {delim.join(row)!r}"
                    )
                if kinds is None:
                    kinds = [None] * len(names)  # None: no value seen yet
                    texts = [_ColumnText() for _ in names]
                for col, cell in enumerate(row):
                    # An empty or na_value field takes the column default; it says nothing of type.
                    if cell.strip() and cell != na_value:
                        kind = _cell_kind(cell.strip())
                        kinds[col] = kind if kinds[col] is None else max(kinds[col], kind)
                        if kind == _STRING:
                            texts[col].add_text(path, line, cell, index == 0)
                        else:
                            texts[col].numbers += 1
                if max_rows is not None and index + 1 >= max_rows:
                    break
    if names is None:
        raise ValueError("`column_names` is required when `header=False`. Got: None")
    if kinds is None:
        kinds, texts = [None] * len(names), [_ColumnText() for _ in names]
    # A column with no value in the rows read is float: its later values (validate=False reads
    # 100 rows) may be ints or floats, and a float column parses both.
    return names, [_FLOAT if kind is None else kind for kind in kinds], texts


def _is_text_default(default: Any) -> bool:
    if isinstance(default, tf2.dtypes.DType):
        return default == tf2.string
    return isinstance(default, (str, bytes))


# The missing-value markers pandas reads as NaN by default (``nan`` parses as a float here), and
# the "?" of the UCI datasets.
_MISSING_MARKERS = frozenset(
    ["#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "1.#IND", "1.#QNAN", "<NA>", "N/A", "NA"]
    + ["NULL", "None", "n/a", "null", "?"]
)


def _numbers_with_stray_text(text: _ColumnText, header: bool) -> bool:
    """Tells whether an inferred column is numeric but for a few fields (or a header line)."""
    if not text.numbers or not text.texts:
        return False
    # header=False on a file with a header: its field is a numeric column's only text.
    if not header and text.only_first_rows:
        return True
    # Numbers and one missing-value marker, however often it occurs, is a numeric column with
    # gaps (a mostly-"NA" column read as strings fails far from the file).
    # (``tokens`` holds every distinct text while there are fewer than five.)
    if len(text.tokens) == 1 and next(iter(text.tokens)).strip() in _MISSING_MARKERS:
        return True
    # A string column may hold a few numbers ("7" among city names); mostly numbers means bad
    # fields in a numeric column.
    return text.numbers > text.texts


def _check_numeric_columns(
    names: list[str],
    texts: list[_ColumnText],
    defaults: list[Any],
    user_set: set[int],
    header: bool,
    indices: list[int],
) -> None:
    """Raises DataError for a numeric column that is read and has non-numeric fields.

    Inferred, such a column would become a string column and fail far from the file, where
    the model stacks it with numbers ("Pack Op have types [string, float32]"); with a numeric
    ``column_defaults`` entry CsvDataset itself fails at the first batch, naming no file.
    A column of mostly non-numeric fields stays a string column, unless they are all one
    missing-value marker ("NA", "?", "NULL"...).
    """
    for col in indices:
        name, text = names[col], texts[col]
        if col in user_set:
            # The caller chose the type: a string default reads anything, a number fails on text.
            if not text.texts or _is_text_default(defaults[col]):
                continue
        elif not _numbers_with_stray_text(text, header):
            continue
        path, line, token = text.first
        as_strings = f"column_defaults={{{name!r}: ''}}"
        if not header and text.only_first_rows:
            raise DataError(
                f"{path}:{line}: column {name!r} holds numbers but its first row is {token!r}, "
                f"which looks like a header line; pass header=True to skip it (or {as_strings} "
                "if the column holds strings)."
            )
        seen = ""
        if text.texts > 1:
            listed = ", ".join(f"{t!r} {n}x" for t, n in text.tokens.items())
            seen = f" ({text.texts} non-numeric fields in the rows read: {listed})"
        raise DataError(
            f"{path}:{line}: column {name!r} holds numbers but also {token!r}{seen}; if it "
            f"marks a missing value pass na_value={token!r} or leave the field empty, else fix "
            f"the file or pass {as_strings} to read the column as strings."
        )


def _csv_defaults(names: list[str], kinds: list[int], column_defaults: Any) -> list[Any]:
    inferred = [[0, np.int64(0), 0.0, ""][k] for k in kinds]
    if column_defaults is None:
        return inferred
    if isinstance(column_defaults, Mapping):
        unknown = sorted(set(column_defaults) - set(names))
        if unknown:
            raise DataError(
                f"`column_defaults` names columns {unknown} that are not in the data; "
                f"columns are: {names}."
            )
        defaults = [column_defaults.get(n, d) for n, d in zip(names, inferred)]
    else:
        defaults = list(column_defaults)
        if len(defaults) != len(names):
            raise ValueError(
                f"`column_defaults` must have one entry per column ({len(names)}: {names}). "
                f"Got {len(defaults)}: {defaults!r}"
            )
    return defaults


def _check_record_defaults(names: list[str], defaults: list[Any], indices: list[int]) -> None:
    # The columns read, checked when the builder is called, not only when the input_fn builds
    # its graph inside train(); a column select_columns leaves out may hold anything.
    for i in indices:
        if isinstance(defaults[i], (bool, np.bool_)) or not isinstance(
            defaults[i], _RECORD_DEFAULT_TYPES
        ):
            raise TypeError(
                f"`column_defaults` for column {names[i]!r} must be an int, float, str or a tf "
                f"dtype. Got: {defaults[i]!r} ({type(defaults[i]).__name__})"
            )
        if (
            isinstance(defaults[i], (int, np.integer))
            and not _INT64_MIN <= defaults[i] <= _INT64_MAX
        ):
            raise ValueError(
                f"`column_defaults` for column {names[i]!r} is outside int64, the widest integer "
                f"column: pass a float or a string default. Got: {defaults[i]!r}"
            )


_RECORD_DEFAULT_TYPES = (tf2.dtypes.DType, int, np.integer, float, np.floating, str, bytes)
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _record_default(value: Any):
    # Defaults given as dtypes make the column required; plain values make it optional.
    # _check_record_defaults has refused every other type (bool among them) already.
    if isinstance(value, tf2.dtypes.DType):
        return value
    if isinstance(value, np.integer):
        # The column's width follows the NumPy type's: int64 (and uint32 / uint64) need int64.
        wide = value.dtype.itemsize > 4 or (value.dtype.kind == "u" and value.dtype.itemsize == 4)
        return tf2.constant([int(value)], tf2.int64 if wide else tf2.int32)
    if isinstance(value, int):
        wide = not _INT32_MIN <= value <= _INT32_MAX
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

    The files are checked once, in Python, when the builder is called: every row must have one
    field per column (the error names ``file:line``), the label column must exist, and column
    types are inferred (int32, int64 beyond its range, float32, string; empty and ``na_value``
    fields are ignored, and a column with no other value is float32) unless
    ``column_defaults`` gives them. A column of mostly numbers with a few other fields
    (``"NA"``, ``"?"``, ``"1,000"``), or of numbers and one missing-value marker however often
    it occurs (``"NA"``, ``"?"``, ``"NULL"``), is refused rather than read as strings (the error
    says to pass ``na_value``), and so are non-numeric fields in a column that
    ``column_defaults`` gives a numeric type.

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
      shuffle: shuffle files and rows, reading up to 8 files at once (use False for
        evaluation and prediction: files are then read one after another in the order given,
        so predictions follow their rows).
      num_epochs: passes over the data; None repeats forever.
      shuffle_buffer: shuffle buffer size (default 10,000 rows).
      drop_remainder: drop the last, smaller batch (static batch shapes, TPU style).
      seed: shuffle seed for reproducible order.
      validate: check every row of every file up front. With False only the first 100 rows
        of each file are read (to infer types) — use it for files too large to scan.

    Returns:
      ``input_fn(params=None)`` returning a ``tf.data.Dataset`` of ``(features, label)`` batches,
      ``features`` a dict of ``[batch]`` tensors, or of ``features`` when ``label_name`` is None.

    Raises:
      DataError: no file matches; a row of the wrong width; a header that differs between
        files or repeats a name; ``label_name`` / ``select_columns`` / ``column_defaults``
        naming a missing column; a numeric column with non-numeric fields (the message names
        ``file:line`` and the field, and suggests ``header=True`` when only the first row of
        a file is not numeric under ``header=False``).
      ValueError: a bad argument (``column_names`` missing with ``header=False`` or repeating a
        name …); from the ``input_fn``, a ``params["batch_size"]`` that is not a positive int.
      TypeError: a ``column_defaults`` entry that is not an int, float, str or tf dtype.

    Example:

        train_fn = from_csv("/tmp/iris/train.csv", label_name="species", num_epochs=None)
        eval_fn = from_csv("/tmp/iris/test.csv", label_name="species", shuffle=False)
    """
    _check_common(batch_size, num_epochs, shuffle_buffer)
    if compression not in (None, "GZIP", "ZLIB"):
        raise ValueError(f"`compression` must be None, 'GZIP' or 'ZLIB'. Got: {compression!r}")
    if not isinstance(field_delim, str) or len(field_delim) != 1:
        raise ValueError(f"`field_delim` must be a single character. Got: {field_delim!r}")
    files = _glob(file_pattern)
    names, kinds, texts = _scan_csv(
        files,
        column_names,
        header,
        field_delim,
        compression,
        None if validate else 100,
        na_value,
    )
    if label_name is not None and label_name not in names:
        raise DataError(
            f"`label_name` {label_name!r} is not a column of {files[0]}; columns are: {names}."
        )
    defaults = _csv_defaults(names, kinds, column_defaults)
    wanted = list(names) if select_columns is None else list(select_columns)
    missing = [c for c in wanted if c not in names]
    if missing:
        raise DataError(f"`select_columns` {missing} not in the data; columns are: {names}.")
    if label_name is not None and label_name not in wanted:
        wanted.append(label_name)
    indices = sorted(names.index(c) for c in wanted)
    _check_record_defaults(names, defaults, indices)
    if column_defaults is None:
        user_set: set[int] = set()
    elif isinstance(column_defaults, Mapping):
        user_set = {names.index(n) for n in column_defaults}
    else:
        user_set = set(range(len(names)))
    _check_numeric_columns(names, texts, defaults, user_set, header, indices)
    picked = [names[i] for i in indices]
    buffer = shuffle_buffer or _DEFAULT_SHUFFLE_BUFFER

    def to_dict(*columns):
        feats = dict(zip(picked, columns))
        if label_name is None:
            return feats
        label = feats.pop(label_name)
        return feats, label

    # Not make_csv_dataset: it reads a numeric column with "NA" as strings, files sorted
    # when not shuffling, names no file:line for a bad row, and has no drop_remainder (the
    # tests named test_official_make_csv_dataset_* show each); the checks above are ours.
    def input_fn(params=None):
        record_defaults = [_record_default(defaults[i]) for i in indices]

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
        ds = _shuffle_repeat(ds, shuffle, buffer, num_epochs, seed)
        ds = ds.batch(_batch_size(params, batch_size), drop_remainder=drop_remainder)
        ds = ds.map(to_dict, num_parallel_calls=AUTOTUNE)
        return ds.prefetch(AUTOTUNE)

    return input_fn
