"""The classifier's in-graph check that labels lie in ``[0, num_classes)``, with a short error.

The official heads say "Labels must be <= n_classes - 1" without the label, and in EVAL the
confusion-matrix metrics fail first, naming the first three labels, not the bad one.
"""

import contextlib
import re
from collections.abc import Iterator

from tfest_kit._tf import tf

_ASSERTION = re.compile(
    r"assertion failed: \[(`labels` must be class ids[^\]]*)\] \[(-?\d+)\] \[to\] \[(-?\d+)\]"
)
_MESSAGE = "`labels` must be class ids in [0, {}). Got: labels from"
# The sparse softmax op's own check (Keras' sparse losses, tf.losses.sparse_softmax_*).
_OUT_OF_RANGE = re.compile(r"valid range of \[0, (\d+)\)\.\s+Label values: (-?\d+(?: -?\d+)*)")


def check_class_ids(labels, num_classes: int):
    """``labels`` as int32, failing at run time when one is outside the range."""
    labels = tf.cast(labels, tf.int32)
    in_range = tf.reduce_all((labels >= 0) & (labels < num_classes))
    low, high = tf.reduce_min(labels), tf.reduce_max(labels)
    message = _MESSAGE.format(f"num_classes={num_classes}")
    check = tf.Assert(in_range, [message, low, "to", high], name="check_labels")
    with tf.control_dependencies([check]):
        return tf.identity(labels, name="labels")


@contextlib.contextmanager
def label_errors() -> Iterator[None]:
    """Re-raises a failed :func:`check_class_ids`, not ~40 lines of op stack; others pass."""
    try:
        yield
    except tf.errors.InvalidArgumentError as e:
        match, op = _ASSERTION.search(str(e.message)), _OUT_OF_RANGE.search(str(e.message))
        if match is None and op is None:
            raise
        text, low, high = match.groups() if match else (_MESSAGE.format(op[1]), None, None)
        if op:
            low, high = min(map(int, op[2].split())), max(map(int, op[2].split()))
        raise ValueError(
            f"{text} {low} to {high}. Map the labels to class ids 0…num_classes-1 in the "
            "input_fn (or raise num_classes)."
        ) from None
