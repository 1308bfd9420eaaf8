"""``tf.contrib.lookup`` as TF 1.15 had it, from TensorFlow's own ``lookup_ops``.

TF 1.15's ``tf.contrib.lookup`` re-exported the functions and classes of
``tensorflow.python.ops.lookup_ops``; TensorFlow 2.15 still has them there, with the same
defaults (``num_oov_buckets=0``, ``default_value=-1``, ``FastHashSpec``, ``"UNK"`` for
``index_to_string``), so they are served as they are.  Kept from contrib itself:
``MutableHashTable``'s ``shared_name`` argument (accepted and not used: each table is its own),
``MutableDenseHashTable`` (``lookup_ops.DenseHashTable``), and the deprecated
``string_to_index_table_from_*``, ``string_to_index`` and ``index_to_string``.

Example:

    table = tf.contrib.lookup.index_table_from_file("vocab.txt", num_oov_buckets=1)
    ids = table.lookup(tokens)       # tf.tables_initializer() must run first, as in TF 1.15
"""

from __future__ import annotations

from typing import Optional

from tfest_kit._tf import tf

from tensorflow.python.ops import lookup_ops  # tf.lookup has just the classes

_SAME = (
    "index_table_from_file",
    "index_table_from_tensor",
    "index_to_string_table_from_file",
    "index_to_string_table_from_tensor",
    "LookupInterface",
    "InitializableLookupTableBase",
    "IdTableWithHashBuckets",
    "HashTable",
    "TableInitializerBase",
    "KeyValueTensorInitializer",
    "TextFileIndex",
    "TextFileInitializer",
    "TextFileIdTableInitializer",
    "TextFileStringTableInitializer",
    "HasherSpec",
    "StrongHashSpec",
    "FastHashSpec",
)

__all__ = [
    *_SAME,
    "MutableHashTable",
    "MutableDenseHashTable",
    "string_to_index_table_from_file",
    "string_to_index_table_from_tensor",
    "string_to_index",
    "index_to_string",
    "BACKING",
]

_PREFIX = "tensorflow.python.ops.lookup_ops"
BACKING = {
    **{name: f"{_PREFIX}.{name}" for name in _SAME},
    "MutableHashTable": f"{_PREFIX}.MutableHashTable (taking TF 1.15's shared_name)",
    "MutableDenseHashTable": f"{_PREFIX}.DenseHashTable",
    "string_to_index_table_from_file": f"{_PREFIX}.index_table_from_file",
    "string_to_index_table_from_tensor": f"{_PREFIX}.index_table_from_tensor",
    "string_to_index": f"{_PREFIX}.index_table_from_tensor",
    "index_to_string": f"{_PREFIX}.index_to_string_table_from_tensor",
}

for _name in _SAME:
    globals()[_name] = getattr(lookup_ops, _name)
string_to_index_table_from_file = lookup_ops.index_table_from_file
MutableDenseHashTable = lookup_ops.DenseHashTable


class MutableHashTable(lookup_ops.MutableHashTable):
    """``tf.contrib.lookup.MutableHashTable``: TF 1.15's arguments, ``shared_name`` included.

    Args:
      key_dtype: the keys' dtype.
      value_dtype: the values' dtype.
      default_value: the value of a missing key.
      shared_name: accepted for TF 1.15's signature; not used.
      name: the table's name.
      checkpoint: whether the table is saved in checkpoints.

    Example:

        table = MutableHashTable(tf.string, tf.int64, -1)
    """

    def __init__(
        self,
        key_dtype,
        value_dtype,
        default_value,
        shared_name: Optional[str] = None,
        name: str = "MutableHashTable",
        checkpoint: bool = True,
    ):
        del shared_name
        super().__init__(key_dtype, value_dtype, default_value, name=name, checkpoint=checkpoint)


def string_to_index_table_from_tensor(
    mapping, num_oov_buckets=0, default_value=-1, hasher_spec=lookup_ops.FastHashSpec, name=None
):
    """Deprecated in TF 1.15: ``index_table_from_tensor(vocabulary_list=mapping, …)``.

    Example:

        table = string_to_index_table_from_tensor(['a', 'b'])
    """
    return lookup_ops.index_table_from_tensor(
        vocabulary_list=mapping,
        num_oov_buckets=num_oov_buckets,
        default_value=default_value,
        hasher_spec=hasher_spec,
        name=name,
    )


def string_to_index(tensor, mapping, default_value=-1, name=None):
    """Deprecated in TF 1.15: the index of each string of ``tensor`` in ``mapping``.

    Example:

        ids = string_to_index(words, ['a', 'b'])
    """
    table = lookup_ops.index_table_from_tensor(
        vocabulary_list=mapping, default_value=default_value, name=name
    )
    return table.lookup(tensor)


def index_to_string(tensor, mapping, default_value="UNK", name=None):
    """Deprecated in TF 1.15: the string of ``mapping`` at each index of ``tensor``.

    Example:

        words = index_to_string(ids, ['a', 'b'])
    """
    table = lookup_ops.index_to_string_table_from_tensor(
        vocabulary_list=mapping, default_value=default_value, name=name
    )
    return table.lookup(tf.cast(tensor, tf.int64))
