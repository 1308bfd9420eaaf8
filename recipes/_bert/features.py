"""Examples -> word-piece features -> cached TFRecord files -> ``input_fn(params)``.

Each example becomes ``[CLS] A [SEP] B [SEP]`` (or ``[CLS] A [SEP]``) padded to
``max_seq_length``, with ``input_ids``, ``input_mask``, ``segment_ids``, ``label_ids`` and
``is_real_example`` (0 for the padding examples a TPU needs to fill its last batch), written
as ``tf.train.Example`` records. A ``.meta.json`` beside each file holds a fingerprint of the
examples, labels, vocabulary and sequence length, so a second run reuses the file. Both are
written atomically (a temporary name, then a rename), so concurrent writers of the same cache
(the tasks of a cluster) never leave a reader a half-written file.

Example:

    path = cached_tfrecord(examples, ["0", "1"], 128, tokenizer, "/tmp/out/train.tf_record")
    input_fn = input_fn_builder(path, 128, is_training=True, drop_remainder=True)
    estimator.train(input_fn, max_steps=1000)   # input_fn(params) batches params["batch_size"]
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import uuid
from collections.abc import Sequence
from typing import Callable

from recipes._bert.processors import InputExample
from recipes._bert.tokenization import FullTokenizer
from tfest_kit._tf import tf, tf2

__all__ = [
    "FEATURE_NAMES",
    "InputFeatures",
    "cached_tfrecord",
    "convert_single_example",
    "input_fn_builder",
    "pad_examples",
]

FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids")


@dataclasses.dataclass(frozen=True)
class InputFeatures:
    input_ids: list
    input_mask: list
    segment_ids: list
    label_id: int
    is_real_example: bool = True


@dataclasses.dataclass(frozen=True)
class PaddingInputExample:
    """A fake example that fills the last batch on a TPU; it has ``is_real_example`` 0."""


def pad_examples(examples: Sequence, batch_size: int) -> list:
    """Appends padding examples up to a multiple of ``batch_size`` (static TPU batches)."""
    examples = list(examples)
    while len(examples) % batch_size:
        examples.append(PaddingInputExample())
    return examples


def _truncate_seq_pair(tokens_a: list, tokens_b: list, max_length: int) -> None:
    # Trim the longer one a token at a time: a short sentence keeps all its tokens.
    while len(tokens_a) + len(tokens_b) > max_length:
        (tokens_a if len(tokens_a) > len(tokens_b) else tokens_b).pop()


def convert_single_example(
    example, label_list: Sequence[str], max_seq_length: int, tokenizer: FullTokenizer
) -> InputFeatures:
    """Tokenises one example into fixed-length features.

    Raises:
      ValueError: for a label not in ``label_list``.
    """
    if isinstance(example, PaddingInputExample):
        zeros = [0] * max_seq_length
        return InputFeatures(zeros, zeros, zeros, 0, is_real_example=False)
    label_map = {label: i for i, label in enumerate(label_list)}
    if example.label not in label_map:
        raise ValueError(
            f"Example {example.guid}: label must be one of {list(label_list)}. "
            f"Got: {example.label!r}"
        )
    tokens_a = tokenizer.tokenize(example.text_a)
    tokens_b = tokenizer.tokenize(example.text_b) if example.text_b else None
    if tokens_b is not None:
        _truncate_seq_pair(tokens_a, tokens_b, max_seq_length - 3)  # [CLS] A [SEP] B [SEP]
    else:
        tokens_a = tokens_a[: max_seq_length - 2]  # [CLS] A [SEP]
    tokens = ["[CLS]", *tokens_a, "[SEP]"]
    segment_ids = [0] * len(tokens)
    if tokens_b is not None:
        tokens += [*tokens_b, "[SEP]"]
        segment_ids += [1] * (len(tokens_b) + 1)
    input_ids = tokenizer.convert_tokens_to_ids(tokens)
    padding = max_seq_length - len(input_ids)
    return InputFeatures(
        input_ids=input_ids + [0] * padding,
        input_mask=[1] * len(input_ids) + [0] * padding,
        segment_ids=segment_ids + [0] * padding,
        label_id=label_map[example.label],
    )


def _fingerprint(examples, label_list, max_seq_length, tokenizer) -> str:
    digest = hashlib.sha1()
    header = [list(label_list), max_seq_length, tokenizer.basic_tokenizer.do_lower_case]
    digest.update(json.dumps(header).encode())
    digest.update("\n".join(tokenizer.vocab).encode())
    for ex in examples:
        row = ["pad"] if isinstance(ex, PaddingInputExample) else dataclasses.astuple(ex)
        digest.update(json.dumps(row).encode())
    return digest.hexdigest()


def _to_example(feature: InputFeatures) -> tf2.train.Example:
    def ints(values):
        return tf2.train.Feature(int64_list=tf2.train.Int64List(value=list(values)))

    return tf2.train.Example(
        features=tf2.train.Features(
            feature={
                "input_ids": ints(feature.input_ids),
                "input_mask": ints(feature.input_mask),
                "segment_ids": ints(feature.segment_ids),
                "label_ids": ints([feature.label_id]),
                "is_real_example": ints([int(feature.is_real_example)]),
            }
        )
    )


def _reusable(output_file: str, meta_file: str, fingerprint: str) -> bool:
    if not (tf.io.gfile.exists(output_file) and tf.io.gfile.exists(meta_file)):
        return False
    try:
        with tf.io.gfile.GFile(meta_file, "r") as f:
            meta = json.load(f)
        size = tf.io.gfile.stat(output_file).length
    except (ValueError, tf.errors.OpError) as e:
        tf.logging.warning("Rewriting %s: its cache metadata is unreadable (%s)", output_file, e)
        return False
    # The size check catches a data file cut short by a writer from before writes were atomic.
    return meta.get("fingerprint") == fingerprint and meta.get("num_bytes") in (None, size)


@contextlib.contextmanager
def _atomic_path(path: str):
    """Yields a unique temporary name beside ``path``; renames it to ``path`` on success.

    Tasks of a cluster write the same cache at the same time: each writes its own file and
    the rename (atomic on a local file system) swaps in a complete file, so a reader never
    opens a half-written one. A failed write removes its temporary file.
    """
    temp = f"{path}.tmp-{uuid.uuid4().hex}"
    try:
        yield temp
        tf.io.gfile.rename(temp, path, overwrite=True)
    finally:
        if tf.io.gfile.exists(temp):
            tf.io.gfile.remove(temp)


def cached_tfrecord(
    examples: Sequence[InputExample],
    label_list: Sequence[str],
    max_seq_length: int,
    tokenizer: FullTokenizer,
    output_file: str,
) -> str:
    """Writes the examples' features to ``output_file`` unless an identical cache is there.

    The data file and then its ``.meta.json`` are each written under a unique temporary name
    and renamed into place, so tasks of a cluster writing the same cache concurrently never
    leave a reader a half-written file (the last rename wins; the contents are identical).

    Returns:
      ``output_file``.

    Raises:
      ValueError: if there are no examples or a label is unknown.

    Example:

        path = cached_tfrecord(examples, ["0", "1"], 128, tokenizer, "/tmp/out/eval.tf_record")
    """
    if not examples:
        raise ValueError(f"No examples to write to {output_file}. Got: {examples!r}")
    meta_file = output_file + ".meta.json"
    fingerprint = _fingerprint(examples, label_list, max_seq_length, tokenizer)
    if _reusable(output_file, meta_file, fingerprint):
        tf.logging.info("Reusing cached TFRecords %s (%d examples)", output_file, len(examples))
        return output_file
    with _atomic_path(output_file) as temp:
        with tf.io.TFRecordWriter(temp) as writer:
            for example in examples:
                feature = convert_single_example(example, label_list, max_seq_length, tokenizer)
                writer.write(_to_example(feature).SerializeToString())
        num_bytes = tf.io.gfile.stat(temp).length
    # The meta file comes second: whoever sees it with this fingerprint finds complete data.
    meta = {"fingerprint": fingerprint, "num_examples": len(examples), "num_bytes": num_bytes}
    with _atomic_path(meta_file) as temp, tf.io.gfile.GFile(temp, "w") as f:
        json.dump(meta, f)
    tf.logging.info("Wrote %d examples to %s", len(examples), output_file)
    return output_file


def input_fn_builder(
    input_file: str,
    seq_length: int,
    is_training: bool,
    drop_remainder: bool,
    with_labels: bool = True,
    seed: int = 0,
) -> Callable:
    """Returns ``input_fn(params)`` reading ``input_file`` in batches of ``params['batch_size']``.

    Training repeats and shuffles; evaluation and prediction read the file once in order.
    Yields ``(features, label_ids)`` (features only when ``with_labels`` is False); ids are
    int32 as a TPU requires.
    """
    name_to_features = {
        name: tf.io.FixedLenFeature([seq_length], tf.int64) for name in FEATURE_NAMES
    }
    name_to_features["label_ids"] = tf.io.FixedLenFeature([], tf.int64)
    name_to_features["is_real_example"] = tf.io.FixedLenFeature([], tf.int64)

    def decode(record):
        parsed = tf.io.parse_single_example(record, name_to_features)
        parsed = {k: tf.cast(v, tf.int32) for k, v in parsed.items()}
        labels = parsed.pop("label_ids")
        return (parsed, labels) if with_labels else parsed

    def input_fn(params):
        dataset = tf2.data.TFRecordDataset(input_file)
        if is_training:
            dataset = dataset.shuffle(1000, seed=seed).repeat()
        dataset = dataset.map(decode, num_parallel_calls=tf2.data.AUTOTUNE)
        dataset = dataset.batch(params["batch_size"], drop_remainder=drop_remainder)
        return dataset.prefetch(tf2.data.AUTOTUNE)

    return input_fn
