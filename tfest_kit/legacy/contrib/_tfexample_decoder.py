"""``slim.tfexample_decoder`` as TF 1.15 had it: tf_slim's, with its two handlers that branch fixed.

``tf_slim`` 1.1's ``Image`` and ``BackupHandler`` call ``control_flow_ops.case`` / ``.cond``,
which left ``tensorflow.python.ops.control_flow_ops`` in TensorFlow 2.15, so decoding any
image from a ``tf.train.Example`` fails.  These subclasses make the same graph with the public
``tf.compat.v1.case`` / ``tf.compat.v1.cond`` (the ops TF 1.15's contrib code built, under the
same names ``case`` / ``cond_jpeg``); every other name of the module is tf_slim's.

Example:

    items_to_handlers = {
        "image": slim.tfexample_decoder.Image("image/encoded", "image/format"),
    }
"""

from __future__ import annotations

from typing import Any

from tf_slim.data import tfexample_decoder as _slim_decoder

from tfest_kit._tf import tf

__all__ = ["Image", "BackupHandler"]


class Image(_slim_decoder.Image):
    """tf_slim's ``tfexample_decoder.Image`` (same arguments), decoding as TF 1.15 did."""

    def _decode(self, image_buffer: Any, image_format: Any) -> Any:
        def decode_image():
            return tf.cast(
                tf.image.decode_image(image_buffer, channels=self._channels), self._dtype
            )

        def decode_jpeg():
            # decode_jpeg rather than decode_image, to pass `dct_method`.
            image = tf.image.decode_jpeg(
                image_buffer, channels=self._channels, dct_method=self._dct_method
            )
            return tf.cast(image, self._dtype)

        def check_jpeg():
            return tf.cond(
                tf.image.is_jpeg(image_buffer), decode_jpeg, decode_image, name="cond_jpeg"
            )

        def decode_raw():
            return tf.decode_raw(image_buffer, out_type=self._dtype)

        is_raw = tf.logical_or(tf.equal(image_format, "raw"), tf.equal(image_format, "RAW"))
        image = tf.case([(is_raw, decode_raw)], default=check_jpeg, exclusive=True)
        image.set_shape([None, None, self._channels])
        if self._shape is not None:
            image = tf.reshape(image, self._shape)
        return image


class BackupHandler(_slim_decoder.BackupHandler):
    """tf_slim's ``tfexample_decoder.BackupHandler``: the backup when the first item is empty."""

    def tensors_to_item(self, keys_to_tensors: dict) -> Any:
        item = self._handler.tensors_to_item(keys_to_tensors)
        return tf.cond(
            tf.equal(tf.reduce_prod(tf.shape(item)), 0),
            lambda: self._backup.tensors_to_item(keys_to_tensors),
            lambda: item,
        )
