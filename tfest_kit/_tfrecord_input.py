"""``inputs.from_tfrecord`` and ``inputs.write_tfrecord``: TFRecords of ``tf.train.Example``."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any, Optional, Union

import numpy as np

from tfest_kit._checks import check_int
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
from tfest_kit._tf import tf, tf2
from tfest_kit._tfrecord_framing import check_complete

# --------------------------------------------------------------------------- TFRecord


def _check_compression(compression: Optional[str]) -> Optional[str]:
    if compression not in (None, "", "GZIP", "ZLIB"):
        raise ValueError(f"`compression` must be None, 'GZIP' or 'ZLIB'. Got: {compression!r}")
    return compression or None


def _first_example(path: str, compression: Optional[str]):
    options = tf.io.TFRecordOptions(compression or "")
    for record in tf.io.tf_record_iterator(path, options=options):
        return tf2.train.Example.FromString(record)
    return None


def _check_spec_against_data(files: list[str], spec: Mapping[str, Any], compression):
    """Reads the first non-empty shard's first Example; required keys it lacks raise DataError."""
    for path in files:
        try:
            example = _first_example(path, compression)
        except Exception as error:  # noqa: BLE001 - corrupt file or wrong compression
            raise DataError(
                f"{path}: cannot read a tf.train.Example (compression={compression!r}): {error}"
            ) from error
        if example is None:
            continue
        present = set(example.features.feature)
        missing = sorted(
            key
            for key, feature in spec.items()
            if isinstance(feature, tf2.io.FixedLenFeature)
            and feature.default_value is None
            and key not in present
        )
        if missing:
            raise DataError(
                f"{path}: the first example has no feature {missing}, which `feature_spec` "
                f"requires; the examples have: {sorted(present)}."
            )
        problems = [
            problem
            for key, feature in spec.items()
            if key in present
            for problem in [_mismatch(key, feature, example.features.feature[key])]
            if problem
        ]
        if problems:
            # tf.io.parse_example would fail mid-training, naming neither the file nor the fix.
            raise DataError(
                f"{path}: the first example does not match `feature_spec`: "
                f"{'; '.join(problems)}."
            )
        return
    raise DataError(f"No file matched by the pattern holds any example: {files}")


_LIST_OF_DTYPE = {tf2.int64: "int64_list", tf2.float32: "float_list", tf2.string: "bytes_list"}


def _mismatch(key: str, config: Any, feature) -> Optional[str]:
    """What makes one stored feature unparseable with its spec entry, or None."""
    checked = (tf2.io.FixedLenFeature, tf2.io.VarLenFeature, tf2.io.FixedLenSequenceFeature)
    kind = feature.WhichOneof("kind")
    if not isinstance(config, checked) or config.dtype not in _LIST_OF_DTYPE or kind is None:
        return None
    if kind != _LIST_OF_DTYPE[config.dtype]:
        return (
            f"{key!r} is stored as {kind} but the spec asks for {config.dtype.name}: store "
            f"{config.dtype.name} values or ask for {_DTYPE_OF_LIST[kind]}"
        )
    count = len(getattr(feature, kind).value)
    # An empty list too: parse_example refuses it even when the spec has a default_value.
    if isinstance(config, tf2.io.FixedLenFeature):
        size = int(np.prod(config.shape, dtype=np.int64)) if config.shape else 1
        if count != size:
            return (
                f"{key!r} holds {count} values; the spec's shape {list(config.shape)} needs {size}"
            )
    return None


_DTYPE_OF_LIST = {"int64_list": "tf.int64", "float_list": "tf.float32", "bytes_list": "tf.string"}


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
) -> InputFn:
    """Builds an ``input_fn`` over TFRecord files of serialized ``tf.train.Example``.

    Records are batched first and then parsed with one ``tf.io.parse_example`` call per batch,
    mapped in parallel, which is much faster than parsing example by example. The first example
    is checked at once against ``feature_spec`` (required keys present, list types and
    ``FixedLenFeature`` sizes as the spec says), and so is the end of every local, uncompressed
    shard: one cut short by an interrupted copy is named now, not when training reaches it.

    Args:
      file_pattern: a path, glob pattern or list of them (``"data/train.tfrecord-*"``).
      feature_spec: ``{key: tf.io.FixedLenFeature | VarLenFeature | …}``, e.g. from
        ``tf.feature_column.make_parse_example_spec(columns)`` plus the label's entry.
      label_key: the key of ``feature_spec`` to return as the label, or None for features only.
      compression: None, ``"GZIP"`` or ``"ZLIB"`` (as written by :func:`write_tfrecord`).
      num_parallel_reads: files read at once and interleaved; by default (``AUTOTUNE``) up
        to 8 when shuffling, so that the shuffle buffer mixes several shards, else one file
        after another in the order given (predictions follow the files' records).
      batch_size: examples per batch unless ``params["batch_size"]`` is given.
      shuffle: shuffle files and records (use False for evaluation and prediction).
      num_epochs: passes over the data; None repeats forever.
      shuffle_buffer: shuffle buffer size (default 10,000 records).
      drop_remainder: drop the last, smaller batch (static batch shapes, TPU style).
      seed: shuffle seed for reproducible order.

    Returns:
      ``input_fn(params=None)`` returning a ``tf.data.Dataset`` of ``(features, label)`` batches
      (``features`` without the label), or of ``features`` when ``label_key`` is None.

    Raises:
      TypeError: ``feature_spec`` is not a dict.
      ValueError: ``label_key`` not in ``feature_spec``, an empty spec, a dtype other than
        ``tf.int64`` / ``tf.float32`` / ``tf.string`` in it, a bad argument.
      DataError: no file matches, a file is not TFRecord (or has another compression) or is
        truncated, or the first example lacks a feature the spec requires or stores one with
        another type or number of values.

    Example:

        spec = tf.feature_column.make_parse_example_spec(columns)
        spec["label"] = tf.io.FixedLenFeature([], tf.int64)
        train_fn = from_tfrecord("/tmp/data/train.tfrecord-*", spec, "label", num_epochs=None)
    """
    _check_common(batch_size, num_epochs, shuffle_buffer)
    compression = _check_compression(compression)
    if not isinstance(feature_spec, Mapping) or not feature_spec:
        error = ValueError if isinstance(feature_spec, Mapping) else TypeError
        raise error(
            "`feature_spec` must be a non-empty dict {key: tf.io.FixedLenFeature(...) | ...}. "
            f"Got: {feature_spec!r}"
        )
    if label_key is not None and label_key not in feature_spec:
        raise ValueError(
            f"`label_key` {label_key!r} is not a key of `feature_spec`; keys are: "
            f"{sorted(feature_spec)}. Add e.g. "
            f"feature_spec[{label_key!r}] = tf.io.FixedLenFeature([], tf.int64)."
        )
    spec = dict(feature_spec)
    for key, config in spec.items():
        dtype = getattr(config, "dtype", None)
        if dtype is not None and tf2.as_dtype(dtype) not in _LIST_OF_DTYPE:
            # parse_example refuses it only inside train(), naming `dense_defaults`.
            raise ValueError(
                f"`feature_spec` {key!r} asks for {tf2.as_dtype(dtype).name}, which a "
                "tf.train.Example cannot hold: ask for tf.int64, tf.float32 or tf.string (and "
                f"cast in the model_fn). Got: {config!r}"
            )
    files = _glob(file_pattern)
    _check_spec_against_data(files, spec, compression)
    check_complete(files, compression)
    buffer = shuffle_buffer or _DEFAULT_SHUFFLE_BUFFER

    def parse(serialized):
        feats = tf2.io.parse_example(serialized, spec)
        if label_key is None:
            return feats
        label = feats.pop(label_key)
        return feats, label

    def input_fn(params=None):
        ds = _read_files(
            files,
            lambda path: tf2.data.TFRecordDataset(path, compression_type=compression or ""),
            shuffle,
            seed,
            # TFRecordDataset's own AUTOTUNE read the files one after another (TF 2.15).
            None if num_parallel_reads in (None, AUTOTUNE) else num_parallel_reads,
        )
        ds = _shuffle_repeat(ds, shuffle, buffer, num_epochs, seed)
        ds = ds.batch(_batch_size(params, batch_size), drop_remainder=drop_remainder)
        ds = ds.map(parse, num_parallel_calls=AUTOTUNE)
        return ds.prefetch(AUTOTUNE)

    return input_fn


_KIND_NAMES = {0: "int64", 1: "float", 2: "bytes"}


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _value_kind(value: Any, key: str, row: int) -> tuple[Optional[int], list]:
    """Returns (kind, flat list of values); kind None for an empty list."""
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
        ints = [int(v) for v in flat]
        outside = [v for v in ints if not _INT64_MIN <= v <= _INT64_MAX]
        if outside:
            raise ValueError(
                f"{where}: {outside[0]} is outside int64, the only integer type a "
                "tf.train.Example holds; write it as a string (bytes_list) or scale it."
            )
        return 0, ints
    if values.dtype.kind == "f":
        return 1, [float(v) for v in flat]
    if values.dtype.kind in "SUO":
        big = [v for v in flat if isinstance(v, int) and not isinstance(v, bool)]
        if big and len(big) == len(flat):  # ints NumPy holds in no integer type
            raise ValueError(
                f"{where}: {big[0]} is outside int64, the only integer type a "
                "tf.train.Example holds; write it as a string (bytes_list) or scale it."
            )
        out = []
        for v in flat:
            if not isinstance(v, (str, bytes)):
                raise TypeError(
                    f"{where}: mixed value types; expected numbers or strings (no None). "
                    f"Got: {value!r}"
                )
            out.append(v.encode("utf-8") if isinstance(v, str) else v)
        return 2, out
    raise TypeError(
        f"Row {row}, feature {key!r}: expected int, float, str/bytes or a list/array of them. "
        f"Got: {value!r} ({values.dtype})"
    )


def _to_feature(kind: int, values: list):
    if kind == 0:
        return tf2.train.Feature(int64_list=tf2.train.Int64List(value=values))
    if kind == 1:
        return tf2.train.Feature(float_list=tf2.train.FloatList(value=values))
    return tf2.train.Feature(bytes_list=tf2.train.BytesList(value=values))


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
                if seen == 2 and kind != 2 or seen != 2 and kind == 2:
                    raise TypeError(
                        f"Row {index}, feature {key!r}: {_KIND_NAMES[kind]} value {value!r}, "
                        f"but earlier rows hold {_KIND_NAMES[seen]}."
                    )
                # An int column with some float values is a float column.
                kinds[key] = max(seen, kind)
            entry[str(key)] = (kind, values)
        converted.append(entry)
    _warn_inexact_floats(converted, kinds)
    serialized = []
    for entry in converted:
        feature = {
            key: _to_feature(kinds.get(key, 1), values) for key, (_, values) in entry.items()
        }
        example = tf2.train.Example(features=tf2.train.Features(feature=feature))
        serialized.append(example.SerializeToString())
    return serialized


# float32, which a float_list holds, has every integer only up to 2**24 (some above too).
_FLOAT32_EXACT_INTS = 2**24


def _warn_inexact_floats(converted: list[dict], kinds: dict[str, int]) -> None:
    """Warns about int values a key's float_list (it also holds floats) cannot hold exactly."""
    for key, kind in kinds.items():
        if kind != 1:
            continue
        big = [
            v
            for entry in converted
            if entry.get(key, (None,))[0] == 0
            for v in entry[key][1]
            if abs(v) > _FLOAT32_EXACT_INTS and int(np.float32(v)) != v
        ]
        if big:
            tf.logging.warning(
                "write_tfrecord: feature %r holds floats in some rows, so all its values are "
                "written as float32, which holds every integer only up to 2**24; %d int "
                "value(s) are rounded (e.g. %d). Write ids as ints only, or as strings.",
                key,
                len(big),
                big[0],
            )


def write_tfrecord(
    rows: Union[Iterable[Mapping[str, Any]], Any],
    path: Union[str, os.PathLike],
    *,
    num_shards: int = 1,
    compression: Optional[str] = None,
) -> list[str]:
    """Writes dict rows as ``tf.train.Example`` records into one or more TFRecord shards.

    Each value's type decides its feature: ints and bools → ``int64_list``, floats →
    ``float_list``, ``str`` / ``bytes`` → ``bytes_list``; lists and arrays give multi-valued
    features. A key whose values are ints in some rows and floats in others is written as floats
    (float32: a warning names ints above 2**24, which it rounds).
    Rows are dealt round-robin over the shards.

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
        nested lists of different lengths, or a key holding numbers in some rows and strings
        in others.

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
    if num_shards == 1:
        paths = [path]
    else:
        paths = [f"{path}-{i:05d}-of-{num_shards:05d}" for i in range(num_shards)]
    options = tf2.io.TFRecordOptions(compression_type=compression or "")
    for shard, shard_path in enumerate(paths):
        with tf2.io.TFRecordWriter(shard_path, options) as writer:
            for record in serialized[shard::num_shards]:
                writer.write(record)
    tf.logging.info(
        "write_tfrecord: %d examples in %d file(s) at %s", len(serialized), len(paths), path
    )
    stale = _other_shards(path, paths)
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


def _other_shards(path: str, written: list[str]) -> list[str]:
    """Files named like shards of ``path`` (``PATH-00000-of-00004``) that were not just written."""
    directory = os.path.dirname(path)
    shard = re.compile(re.escape(os.path.basename(path)) + r"-\d{5}-of-\d{5}")
    fresh = {os.path.basename(p) for p in written}
    names = sorted(tf2.io.gfile.listdir(directory or "."))
    return [os.path.join(directory, n) for n in names if shard.fullmatch(n) and n not in fresh]
