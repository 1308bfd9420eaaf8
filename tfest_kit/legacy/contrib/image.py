"""``tf.contrib.image``'s projective transforms as TF 1.15 had them, on TensorFlow's own kernel.

TF 1.15's ``rotate``, ``translate`` and ``transform`` ran contrib's ``ImageProjectiveTransformV2``
op, which TensorFlow 2 has in its core (with its gradient, and a ``fill_mode`` whose default,
``CONSTANT``, is contrib's zero fill); the functions here are ports of contrib's
``image_ops.py`` that build that op: the same output pixels, the same empty space filled with
zeros. The package's other names (warps, splines, colour and graph ops) are not served.

Example:

    rotated = tf.contrib.image.rotate(images, angles=tf.random_uniform([batch], -0.3, 0.3))
"""

from __future__ import annotations

from typing import Any, Optional

from tfest_kit._tf import tf

__all__ = [
    "rotate",
    "translate",
    "transform",
    "angles_to_projective_transforms",
    "translations_to_projective_transforms",
    "compose_transforms",
    "flat_transforms_to_matrices",
    "matrices_to_flat_transforms",
    "BACKING",
    "NOT_SERVED",
]

_PORT = "a port of TF 1.15's, on tf.raw_ops.ImageProjectiveTransformV2"
BACKING = {name: f"tfest_kit.legacy.contrib.image.{name} ({_PORT})" for name in __all__[:8]}
_TFA = "tensorflow-addons' tfa.image.{} (TensorFlow 2.15 only)"
_WARPS = ("dense_image_warp", "interpolate_spline", "sparse_image_warp")
_OTHERS = ("connected_components", "random_hsv_in_yiq", "adjust_hsv_in_yiq")
NOT_SERVED = {name: _TFA.format(name) for name in (*_WARPS, *_OTHERS)}

_IMAGE_DTYPES = {tf.uint8, tf.int32, tf.int64, tf.float16, tf.float32, tf.float64}


def _as_batch(images: Any, name: str = "images") -> tuple[Any, Any]:
    """``(the images as NHWC, the tensor given)``, checking the dtype and rank as TF 1.15 did."""
    given = tf.convert_to_tensor(images, name=name)
    if given.dtype.base_dtype not in _IMAGE_DTYPES:
        raise TypeError(f"Invalid dtype {given.dtype}.")
    rank = given.get_shape().ndims
    if rank is None:
        raise TypeError("image_or_images rank must be statically known")
    if rank not in (2, 3, 4):
        raise TypeError("Images should have rank between 2 and 4.")
    batch = {2: lambda: given[None, :, :, None], 3: lambda: given[None], 4: lambda: given}[rank]()
    return batch, given


def _as_given(output: Any, given: Any) -> Any:
    rank = given.get_shape().ndims
    return output[0, :, :, 0] if rank == 2 else output[0] if rank == 3 else output


def rotate(images: Any, angles: Any, interpolation: str = "NEAREST", name: Optional[str] = None):
    """Rotates image(s) counterclockwise, filling the corners with zeros.

    Args:
      images: ``NHWC``, ``HWC`` or ``HW`` images of a statically known rank.
      angles: radians: one for all, or a vector of one per image.
      interpolation: ``"NEAREST"`` or ``"BILINEAR"``.
      name: the op's name scope.

    Returns:
      The images rotated, with the dtype and shape of ``images``.

    Raises:
      TypeError: images of another dtype than TF 1.15 took, or of another rank.

    Example:

        images = tf.contrib.image.rotate(images, tf.random_uniform([batch], -0.3, 0.3))
    """
    with tf.name_scope(name, "rotate"):
        batch, given = _as_batch(images)
        height = tf.cast(tf.shape(batch)[1], tf.float32)[None]
        width = tf.cast(tf.shape(batch)[2], tf.float32)[None]
        transforms = angles_to_projective_transforms(angles, height, width)
        return _as_given(transform(batch, transforms, interpolation=interpolation), given)


def translate(
    images: Any, translations: Any, interpolation: str = "NEAREST", name: Optional[str] = None
):
    """Translates image(s), filling the space left with zeros.

    Args:
      images: ``NHWC``, ``HWC`` or ``HW`` images of a statically known rank.
      translations: ``[dx, dy]``, or an ``(N, 2)`` matrix of one per image.
      interpolation: ``"NEAREST"`` or ``"BILINEAR"``.
      name: the op's name scope.

    Returns:
      The images translated, with the dtype and shape of ``images``.

    Example:

        shifted = tf.contrib.image.translate(images, [2.0, -1.0])  # right 2, up 1
    """
    with tf.name_scope(name, "translate"):
        transforms = translations_to_projective_transforms(translations)
        return transform(images, transforms, interpolation=interpolation)


def angles_to_projective_transforms(
    angles: Any, image_height: Any, image_width: Any, name: Optional[str] = None
):
    """Returns the projective transforms that rotate images of that size by ``angles``.

    Args:
      angles: radians: a scalar, or a vector of one per image.
      image_height: the images' height (a float tensor).
      image_width: the images' width (a float tensor).
      name: the op's name scope.

    Returns:
      An ``(N, 8)`` float32 tensor for :func:`transform`.

    Example:

        transforms = tf.contrib.image.angles_to_projective_transforms(0.5, 32.0, 32.0)
    """
    with tf.name_scope(name, "angles_to_projective_transforms"):
        angles = tf.convert_to_tensor(angles, name="angles", dtype=tf.float32)
        if angles.get_shape().ndims == 0:
            angles = angles[None]
        elif angles.get_shape().ndims != 1:
            raise TypeError("Angles should have rank 0 or 1.")
        cos, sin = tf.cos(angles), tf.sin(angles)
        x_offset = ((image_width - 1) - (cos * (image_width - 1) - sin * (image_height - 1))) / 2.0
        y_offset = ((image_height - 1) - (sin * (image_width - 1) + cos * (image_height - 1))) / 2.0
        columns = [cos, -sin, x_offset, sin, cos, y_offset]
        zeros = tf.zeros((tf.shape(angles)[0], 2), tf.float32)
        return tf.concat([c[:, None] for c in columns] + [zeros], axis=1)


def translations_to_projective_transforms(translations: Any, name: Optional[str] = None):
    """Returns the projective transforms that translate images by ``translations``.

    Args:
      translations: ``[dx, dy]``, or an ``(N, 2)`` matrix of one per image.
      name: the op's name scope.

    Returns:
      An ``(N, 8)`` float32 tensor for :func:`transform`.

    Raises:
      TypeError: ``translations`` of an unknown rank or of a rank other than 1 or 2.

    Example:

        transforms = tf.contrib.image.translations_to_projective_transforms([[1.0, 0.0]])
    """
    with tf.name_scope(name, "translations_to_projective_transforms"):
        translations = tf.convert_to_tensor(translations, name="translations", dtype=tf.float32)
        rank = translations.get_shape().ndims
        if rank is None:
            raise TypeError("translation_or_translations rank must be statically known")
        if rank not in (1, 2):
            raise TypeError("Translations should have rank 1 or 2.")
        if rank == 1:
            translations = translations[None]
        ones = tf.ones((tf.shape(translations)[0], 1), tf.float32)
        zeros = tf.zeros_like(ones)
        # [[1, 0, -dx], [0, 1, -dy], [0, 0, 1]], the last entry implicit.
        columns = [ones, zeros, -translations[:, 0, None], zeros, ones, -translations[:, 1, None]]
        return tf.concat(columns + [zeros, zeros], axis=1)


def transform(
    images: Any,
    transforms: Any,
    interpolation: str = "NEAREST",
    output_shape: Any = None,
    name: Optional[str] = None,
):
    """Applies projective transforms to image(s), as TF 1.15's ``tf.contrib.image.transform``.

    Args:
      images: ``NHWC``, ``HWC`` or ``HW`` images of a statically known rank.
      transforms: ``[a0, a1, a2, b0, b1, b2, c0, c1]`` or ``(N, 8)``: each maps an *output*
        point ``(x, y)`` to the input point ``((a0 x + a1 y + a2) / k, (b0 x + b1 y + b2) / k)``,
        ``k = c0 x + c1 y + 1``; no gradient flows into them.
      interpolation: ``"NEAREST"`` or ``"BILINEAR"``.
      output_shape: ``[height, width]`` of the output (the input's by default).
      name: the op's name scope.

    Returns:
      The transformed images; points outside the input are zeros.

    Raises:
      TypeError: images of another dtype or rank, transforms of rank other than 1 or 2.
      ValueError: an ``output_shape`` that is not ``[height, width]``.

    Example:

        flipped = tf.contrib.image.transform(images, [-1.0, 0, width - 1, 0, 1, 0, 0, 0])
    """
    with tf.name_scope(name, "transform"):
        batch, given = _as_batch(images)
        transforms = tf.convert_to_tensor(transforms, name="transforms", dtype=tf.float32)
        if output_shape is None:
            output_shape = tf.shape(batch)[1:3]
            if not tf.executing_eagerly():
                static = tf.get_static_value(output_shape)
                output_shape = output_shape if static is None else static
        output_shape = tf.convert_to_tensor(output_shape, tf.int32, name="output_shape")
        if not output_shape.get_shape().is_compatible_with([2]):
            raise ValueError(
                "output_shape must be a 1-D Tensor of 2 elements: new_height, new_width"
            )
        rank = transforms.get_shape().ndims
        if rank is None:
            raise TypeError("transform_or_transforms rank must be statically known")
        if rank not in (1, 2):
            raise TypeError("Transforms should have rank 1 or 2.")
        output = tf.raw_ops.ImageProjectiveTransformV2(
            images=batch,
            transforms=transforms[None] if rank == 1 else transforms,
            output_shape=output_shape,
            interpolation=interpolation.upper(),
        )
        return _as_given(output, given)


def compose_transforms(*transforms: Any):
    """Returns one transform equivalent to applying ``transforms`` in order.

    Args:
      *transforms: transforms of equal shape, ``(8,)`` or ``(N, 8)``, at least one.

    Returns:
      An ``(N, 8)`` tensor for :func:`transform`.

    Example:

        both = tf.contrib.image.compose_transforms(rotation, translation)
    """
    assert transforms, "transforms cannot be empty"
    with tf.name_scope("compose_transforms"):
        composed = flat_transforms_to_matrices(transforms[0])
        for later in transforms[1:]:
            composed = tf.matmul(composed, flat_transforms_to_matrices(later))
        return matrices_to_flat_transforms(composed)


def flat_transforms_to_matrices(transforms: Any):
    """Returns ``transforms`` as ``(N, 3, 3)`` matrices (output to input coordinates).

    Args:
      transforms: ``(8,)`` or ``(N, 8)`` projective transforms.

    Returns:
      An ``(N, 3, 3)`` tensor; ``tf.linalg.inv`` of it maps input to output points.

    Raises:
      ValueError: ``transforms`` of a rank other than 1 or 2.

    Example:

        matrices = tf.contrib.image.flat_transforms_to_matrices(transforms)
    """
    with tf.name_scope("flat_transforms_to_matrices"):
        transforms = tf.convert_to_tensor(transforms, name="transforms")
        if transforms.shape.ndims not in (1, 2):
            raise ValueError(f"Transforms should be 1D or 2D, got: {transforms}")
        transforms = tf.reshape(transforms, tf.constant([-1, 8]))
        ones = tf.ones([tf.shape(transforms)[0], 1])
        return tf.reshape(tf.concat([transforms, ones], axis=1), tf.constant([-1, 3, 3]))


def matrices_to_flat_transforms(transform_matrices: Any):
    """Returns matrices (output to input coordinates) as projective transforms.

    Args:
      transform_matrices: ``(3, 3)`` or ``(N, 3, 3)`` matrices.

    Returns:
      An ``(N, 8)`` tensor for :func:`transform`, each matrix divided by its last entry.

    Raises:
      ValueError: matrices of a rank other than 2 or 3.

    Example:

        transforms = tf.contrib.image.matrices_to_flat_transforms(tf.linalg.inv(forward))
    """
    with tf.name_scope("matrices_to_flat_transforms"):
        matrices = tf.convert_to_tensor(transform_matrices, name="transform_matrices")
        if matrices.shape.ndims not in (2, 3):
            raise ValueError(f"Matrices should be 2D or 3D, got: {matrices}")
        flat = tf.reshape(matrices, tf.constant([-1, 9]))
        flat /= flat[:, 8:9]  # divided by the last entry, normally 1
        return flat[:, :8]
