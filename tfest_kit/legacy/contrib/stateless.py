"""``tf.contrib.stateless`` as TF 1.15 had it: TensorFlow's own stateless random ops.

TF 1.15's package re-exported the four functions of ``stateless_random_ops`` that TensorFlow
exports as ``tf.random.stateless_uniform``, ``stateless_normal``, ``stateless_truncated_normal``
and ``stateless_multinomial``: the same functions, the same numbers for the same seed.

Example:

    noise = tf.contrib.stateless.stateless_random_normal([4], seed=[1, 2])
"""

from __future__ import annotations

from tfest_kit._tf import tf

__all__ = [
    "stateless_random_uniform",
    "stateless_random_normal",
    "stateless_truncated_normal",
    "stateless_multinomial",
    "BACKING",
]

stateless_random_uniform = tf.random.stateless_uniform
stateless_random_normal = tf.random.stateless_normal
stateless_truncated_normal = tf.random.stateless_truncated_normal
stateless_multinomial = tf.random.stateless_multinomial

BACKING = {
    "stateless_random_uniform": "tf.compat.v1.random.stateless_uniform",
    "stateless_random_normal": "tf.compat.v1.random.stateless_normal",
    "stateless_truncated_normal": "tf.compat.v1.random.stateless_truncated_normal",
    "stateless_multinomial": "tf.compat.v1.random.stateless_multinomial",
}
