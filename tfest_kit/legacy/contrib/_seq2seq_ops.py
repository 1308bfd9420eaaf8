"""``tf.contrib.seq2seq``'s arithmetic in TensorFlow ops, written after TF 1.15's.

``sequence_loss`` (``loss.py``), ``tile_batch``, ``gather_tree`` and
``gather_tree_from_array`` (``beam_search_decoder.py``, ``beam_search_ops.py``), and the
attention arithmetic of ``attention_wrapper.py``: ``hardmax``, ``safe_cumprod``,
``monotonic_attention`` and the scores, masks and monotonic probabilities the mechanisms in
``_seq2seq_attention.py`` use.  TF 1.15's sources are Apache 2.0; the same code runs on every
supported TensorFlow.

TF 1.15's ``gather_tree`` was a C++ kernel of contrib's; here it is a ``tf.scan`` backtrack over
reversed time with the kernel's results: steps past ``max_sequence_lengths`` and after a
beam's first ``end_token`` hold ``end_token``.
"""

from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from tfest_kit._tf import tf

__all__ = [
    "sequence_loss",
    "tile_batch",
    "gather_tree",
    "gather_tree_from_array",
    "hardmax",
    "safe_cumprod",
    "monotonic_attention",
    "luong_score",
    "bahdanau_score",
    "monotonic_probability_fn",
    "maybe_mask_score",
    "prepare_memory",
]


def sequence_loss(
    logits,
    targets,
    weights,
    average_across_timesteps: bool = True,
    average_across_batch: bool = True,
    sum_over_timesteps: bool = False,
    sum_over_batch: bool = False,
    softmax_loss_function: Optional[Callable] = None,
    name: Optional[str] = None,
):
    """The weighted cross-entropy of a sequence of logits, as TF 1.15's.

    Args:
      logits: ``[batch_size, sequence_length, num_classes]``.
      targets: ``[batch_size, sequence_length]`` int class ids.
      weights: ``[batch_size, sequence_length]`` float weights (a 0/1 mask for padding).
      average_across_timesteps: sum over time and divide by the weights' sum over time.
      average_across_batch: sum over the batch and divide by the weights' sum over it.
      sum_over_timesteps: sum over time and divide by the count of non-zero weights.
      sum_over_batch: sum over the batch and divide by the count of non-zero weights.
      softmax_loss_function: ``fn(labels=, logits=)`` instead of the sparse softmax.
      name: name scope, ``"sequence_loss"`` by default.

    Returns:
      A float tensor of rank 0, 1 or 2, depending on which axes were reduced.

    Raises:
      ValueError: a rank other than 3 / 2 / 2, or an ``average_*`` and ``sum_*`` flag both set
        for one axis.

    Example:

        loss = sequence_loss(outputs.rnn_output, targets, tf.sequence_mask(lengths, T, tf.float32))
    """
    ranks = (("logits", logits, 3), ("targets", targets, 2), ("weights", weights, 2))
    for arg, value, rank in ranks:
        if len(value.shape) != rank:
            raise ValueError(f"`{arg}` must have rank {rank}. Got shape: {value.shape}")
    for average, total, axis in (
        (average_across_timesteps, sum_over_timesteps, "timesteps"),
        (average_across_batch, sum_over_batch, "batch"),
    ):
        if average and total:
            raise ValueError(
                f"Set at most one of `average_across_{axis}` and `sum_over_{axis}`. Got both True."
            )
    with tf.name_scope(name, "sequence_loss", [logits, targets, weights]):
        num_classes = tf.shape(logits)[2]
        logits_flat = tf.reshape(logits, [-1, num_classes])
        targets = tf.reshape(targets, [-1])
        loss_fn = softmax_loss_function or tf.nn.sparse_softmax_cross_entropy_with_logits
        crossent = loss_fn(labels=targets, logits=logits_flat)
        crossent *= tf.reshape(weights, [-1])
        if average_across_timesteps and average_across_batch:
            return tf.div_no_nan(tf.reduce_sum(crossent), tf.reduce_sum(weights))
        if sum_over_timesteps and sum_over_batch:
            count = tf.cast(tf.count_nonzero(weights), crossent.dtype)
            return tf.div_no_nan(tf.reduce_sum(crossent), count)
        crossent = tf.reshape(crossent, tf.shape(logits)[0:2])
        if average_across_timesteps or average_across_batch:
            axis = [0] if average_across_batch else [1]
            total = tf.reduce_sum(weights, axis=axis)
            return tf.div_no_nan(tf.reduce_sum(crossent, axis=axis), total)
        if sum_over_timesteps or sum_over_batch:
            axis = [0] if sum_over_batch else [1]
            count = tf.cast(tf.count_nonzero(weights, axis=axis), crossent.dtype)
            return tf.div_no_nan(tf.reduce_sum(crossent, axis=axis), count)
        return crossent


def _tile_one(t, multiplier: int):
    t = tf.convert_to_tensor(t, name="t")
    if t.shape.ndims is None or t.shape.ndims < 1:
        raise ValueError(f"tile_batch needs tensors of known rank >= 1. Got shape: {t.shape}")
    shape = tf.shape(t)
    tiling = [1] * (t.shape.ndims + 1)
    tiling[1] = multiplier
    tiled = tf.tile(tf.expand_dims(t, 1), tiling)
    tiled = tf.reshape(tiled, tf.concat(([shape[0] * multiplier], shape[1:]), 0))
    static_batch = tf.compat.dimension_value(t.shape[0])
    static_batch = None if static_batch is None else static_batch * multiplier
    tiled.set_shape(tf.TensorShape([static_batch]).concatenate(t.shape[1:]))
    return tiled


def tile_batch(t, multiplier: int, name: Optional[str] = None):
    """Repeats each batch entry ``multiplier`` times in place: ``[a, b]`` -> ``[a, a, b, b]``.

    Args:
      t: a tensor ``[batch_size, ...]`` or a nested structure of them.
      multiplier: how many copies of each entry (the beam width).
      name: name scope, ``"tile_batch"`` by default.

    Returns:
      The same structure of ``[batch_size * multiplier, ...]`` tensors.

    Raises:
      ValueError: a tensor whose rank is unknown or 0.

    Example:

        memory = tile_batch(encoder_outputs, multiplier=beam_width)
    """
    flat = tf.nest.flatten(t)
    with tf.name_scope(name, "tile_batch", flat + [multiplier]):
        return tf.nest.map_structure(lambda one: _tile_one(one, multiplier), t)


def gather_tree(step_ids, parent_ids, max_sequence_lengths, end_token, name=None):
    """Whole beams from per-step ids and parent beams, backtracking from each last step.

    Args:
      step_ids: int32 ``[max_time, batch_size, beam_width]`` ids chosen at each step.
      parent_ids: int32 ``[max_time, batch_size, beam_width]`` the beam each came from.
      max_sequence_lengths: int32 ``[batch_size]`` steps to read per batch entry.
      end_token: int32 scalar; it fills the steps past the lengths and past a beam's first one.
      name: name scope, ``"GatherTree"`` by default.

    Returns:
      int32 ``[max_time, batch_size, beam_width]`` beams.

    Raises:
      tf.errors.InvalidArgumentError (when run): a parent id outside ``[0, beam_width)``.

    Example:

        beams = gather_tree(outputs.predicted_ids, outputs.parent_ids, lengths, EOS)
    """
    values = [step_ids, parent_ids, max_sequence_lengths, end_token]
    with tf.name_scope(name, "GatherTree", values):
        step_ids = tf.convert_to_tensor(step_ids, tf.int32, name="step_ids")
        parent_ids = tf.convert_to_tensor(parent_ids, tf.int32, name="parent_ids")
        end_token = tf.convert_to_tensor(end_token, tf.int32, name="end_token")
        shape = tf.shape(parent_ids)
        max_time, batch_size, beam_width = shape[0], shape[1], shape[2]
        lengths = tf.minimum(
            tf.convert_to_tensor(max_sequence_lengths, tf.int32, name="max_sequence_lengths"),
            max_time,
        )
        in_bounds = tf.broadcast_to(
            tf.expand_dims(tf.transpose(tf.sequence_mask(lengths, max_time)), 2), shape
        )
        end_tokens = tf.fill(shape, end_token)
        step_ids = tf.where(in_bounds, step_ids, end_tokens)
        parent_ids = tf.where(in_bounds, parent_ids, tf.zeros_like(parent_ids))
        valid = tf.reduce_all((parent_ids >= 0) & (parent_ids < beam_width))
        check = tf.Assert(valid, ["gather_tree: every parent id must be in [0, beam_width)."])
        # Both inputs wait for the check: a bad parent id would otherwise fail in tf.gather.
        with tf.control_dependencies([check]):
            reversed_ids = tf.reverse_sequence(step_ids, lengths, seq_axis=0, batch_axis=1)
            reversed_parents = tf.reverse_sequence(parent_ids, lengths, seq_axis=0, batch_axis=1)

        def backtrack(carry, step):
            _, beam = carry
            ids, parents = step
            return (
                tf.gather(ids, beam, axis=1, batch_dims=1),
                tf.gather(parents, beam, axis=1, batch_dims=1),
            )

        # Each beam is read from itself at its last step, then through its parents.
        beams = tf.tile(tf.expand_dims(tf.range(beam_width), 0), [batch_size, 1])
        beams, _ = tf.scan(backtrack, (reversed_ids, reversed_parents), (beams, beams))
        beams = tf.reverse_sequence(beams, lengths, seq_axis=0, batch_axis=1)
        ended = tf.cumsum(tf.cast(tf.equal(beams, end_token), tf.int32), axis=0, exclusive=True)
        beams = tf.where(ended > 0, end_tokens, beams)
        beams.set_shape(step_ids.shape)
        return beams


def gather_tree_from_array(t, parent_ids, sequence_length):
    """A stacked ``TensorArray``'s beams put in ``gather_tree``'s order, as TF 1.15's.

    Args:
      t: ``[max_time, batch_size, beam_width, ...]`` or ``[max_time, batch_size * beam_width,
        ...]``.
      parent_ids: ``[max_time, batch_size, beam_width]``.
      sequence_length: ``[batch_size, beam_width]``; steps past it keep their beam.

    Returns:
      ``t`` with its beams reordered, same shape.

    Example:

        alignments = gather_tree_from_array(history.stack(), outputs.parent_ids, state.lengths)
    """
    shape = tf.shape(parent_ids)
    max_time, batch_size, beam_width = shape[0], shape[1], shape[2]
    beam_ids = tf.tile(tf.reshape(tf.range(beam_width), [1, 1, -1]), [max_time, batch_size, 1])
    max_sequence_lengths = tf.cast(tf.reduce_max(sequence_length, axis=1), tf.int32)
    sorted_beam_ids = gather_tree(beam_ids, parent_ids, max_sequence_lengths, beam_width + 1)
    in_bounds = tf.transpose(tf.sequence_mask(sequence_length, maxlen=max_time), [2, 0, 1])
    sorted_beam_ids = tf.where(in_bounds, sorted_beam_ids, beam_ids)
    gather_from = tf.reshape(t, [max_time, batch_size, beam_width, -1])
    ordered = tf.gather(gather_from, sorted_beam_ids, axis=2, batch_dims=2)
    return tf.reshape(ordered, tf.shape(t))


def hardmax(logits, name: Optional[str] = None):
    """One-hot vectors at the maximum logit of each row.

    Args:
      logits: ``[..., depth]`` logits.
      name: name scope, ``"Hardmax"`` by default.

    Returns:
      One-hot tensor of ``logits``' shape and dtype.

    Example:

        attention = LuongAttention(64, memory, probability_fn=hardmax)
    """
    with tf.name_scope(name, "Hardmax", [logits]):
        logits = tf.convert_to_tensor(logits, name="logits")
        depth = tf.compat.dimension_value(logits.shape[-1]) or tf.shape(logits)[-1]
        return tf.one_hot(tf.argmax(logits, -1), depth, dtype=logits.dtype)


def safe_cumprod(x, *args, **kwargs):
    """``tf.cumprod`` computed as ``exp(cumsum(log(x)))``, stable for tiny positive ``x``.

    Args:
      x: a tensor of values in ``(0, 1]`` (clipped to that range).
      *args: passed to ``tf.cumsum`` (``axis``).
      **kwargs: passed to ``tf.cumsum`` (``axis``, ``exclusive``, ``reverse``).

    Returns:
      The cumulative product of ``x``.

    Example:

        keep = safe_cumprod(1 - p_choose, axis=1, exclusive=True)
    """
    with tf.name_scope(None, "SafeCumprod", [x]):
        x = tf.convert_to_tensor(x, name="x")
        tiny = np.finfo(x.dtype.as_numpy_dtype).tiny
        return tf.exp(tf.cumsum(tf.log(tf.clip_by_value(x, tiny, 1)), *args, **kwargs))


def monotonic_attention(p_choose_i, previous_attention, mode: str):
    """The monotonic attention distribution from each memory entry's choosing probability.

    Args:
      p_choose_i: ``[batch_size, memory_length]`` probabilities in ``[0, 1]``.
      previous_attention: ``[batch_size, memory_length]`` the last step's attention
        (``[1, 0, …, 0]`` at the first step).
      mode: ``"recursive"`` (a ``tf.scan``, exact), ``"parallel"`` (cumulative sums and
        products, approximate) or ``"hard"`` (``p_choose_i`` of 0s and 1s).

    Returns:
      ``[batch_size, memory_length]`` attention.

    Raises:
      ValueError: another ``mode``.

    Example:

        attention = monotonic_attention(tf.sigmoid(scores), previous, "parallel")
    """
    if mode not in ("recursive", "parallel", "hard"):
        raise ValueError(f"`mode` must be 'recursive', 'parallel' or 'hard'. Got: {mode!r}")
    p_choose_i = tf.convert_to_tensor(p_choose_i, name="p_choose_i")
    previous_attention = tf.convert_to_tensor(previous_attention, name="previous_attention")
    if mode == "recursive":
        batch_size = tf.compat.dimension_value(p_choose_i.shape[0]) or tf.shape(p_choose_i)[0]
        # q[i] = (1 - p_choose_i[i - 1]) * q[i - 1] + previous_attention[i]
        shifted_1mp = tf.concat(
            [tf.ones((batch_size, 1), p_choose_i.dtype), 1 - p_choose_i[:, :-1]], 1
        )
        q = tf.scan(
            lambda x, yz: tf.reshape(yz[0] * x + yz[1], (batch_size,)),
            [tf.transpose(shifted_1mp), tf.transpose(previous_attention)],
            tf.zeros((batch_size,), p_choose_i.dtype),
        )
        return p_choose_i * tf.transpose(q)
    if mode == "parallel":
        cumprod_1mp = safe_cumprod(1 - p_choose_i, axis=1, exclusive=True)
        # The closed form divides by the cumprod: clipped to avoid dividing by 0.
        ratio = previous_attention / tf.clip_by_value(cumprod_1mp, 1e-10, 1.0)
        return p_choose_i * cumprod_1mp * tf.cumsum(ratio, axis=1)
    p_choose_i *= tf.cumsum(previous_attention, axis=1)
    return p_choose_i * tf.cumprod(1 - p_choose_i, axis=1, exclusive=True)


def luong_score(query, keys, attention_g=None):
    """Multiplicative scores ``query . keys``, times ``attention_g`` when given.

    Args:
      query: ``[batch_size, depth]``.
      keys: ``[batch_size, max_time, depth]``.
      attention_g: a scalar scale, or None.

    Returns:
      ``[batch_size, max_time]`` scores.

    Raises:
      ValueError: ``query`` and ``keys`` depths differ.

    Example:

        score = luong_score(cell_output, mechanism.keys)
    """
    depth, key_depth = query.shape[-1], keys.shape[-1]
    if depth != key_depth:
        raise ValueError(
            f"The query's depth ({depth}) must equal the keys' ({key_depth}): set `num_units` "
            "of LuongAttention to the query's depth."
        )
    score = tf.squeeze(tf.matmul(tf.expand_dims(query, 1), keys, transpose_b=True), [1])
    return score if attention_g is None else attention_g * score


def bahdanau_score(processed_query, keys, attention_v, attention_g=None, attention_b=None):
    """Additive scores ``v . tanh(keys + query)``; weight-normalised ``v`` when ``g`` is given.

    Args:
      processed_query: ``[batch_size, num_units]``.
      keys: ``[batch_size, max_time, num_units]``.
      attention_v: ``[num_units]``.
      attention_g: scalar gain of the normalised form, or None.
      attention_b: ``[num_units]`` bias of the normalised form, or None.

    Returns:
      ``[batch_size, max_time]`` scores.

    Example:

        score = bahdanau_score(query_layer(query), mechanism.keys, v)
    """
    processed_query = tf.expand_dims(processed_query, 1)
    if attention_g is None:
        return tf.reduce_sum(attention_v * tf.tanh(keys + processed_query), [2])
    normed_v = attention_g * attention_v * tf.rsqrt(tf.reduce_sum(tf.square(attention_v)))
    return tf.reduce_sum(normed_v * tf.tanh(keys + processed_query + attention_b), [2])


def monotonic_probability_fn(score, previous_alignments, sigmoid_noise, mode, seed=None):
    """Monotonic alignments: noisy scores through a sigmoid, then ``monotonic_attention``.

    Args:
      score: ``[batch_size, max_time]`` scores.
      previous_alignments: ``[batch_size, max_time]``.
      sigmoid_noise: std of the Gaussian noise added before the sigmoid (0 for none).
      mode: as ``monotonic_attention``; ``"hard"`` uses ``score > 0`` instead of the sigmoid.
      seed: the noise's seed.

    Returns:
      ``[batch_size, max_time]`` alignments.

    Example:

        alignments = monotonic_probability_fn(score, previous, 0.0, "parallel")
    """
    if sigmoid_noise > 0:
        score += sigmoid_noise * tf.random.normal(tf.shape(score), dtype=score.dtype, seed=seed)
    # "hard" mode chooses with a step function in place of the sigmoid.
    p_choose_i = tf.cast(score > 0, score.dtype) if mode == "hard" else tf.sigmoid(score)
    return monotonic_attention(p_choose_i, previous_alignments, mode)


def maybe_mask_score(score, memory_sequence_length, score_mask_value):
    """``score`` with ``score_mask_value`` past each memory length (lengths must be > 0).

    Args:
      score: ``[batch_size, max_time]``.
      memory_sequence_length: ``[batch_size]`` or None (then ``score`` is returned).
      score_mask_value: the value of masked scores.

    Returns:
      The masked scores.

    Example:

        score = maybe_mask_score(score, lengths, -np.inf)
    """
    if memory_sequence_length is None:
        return score
    message = "All values in memory_sequence_length must be greater than zero."
    check = tf.assert_positive(memory_sequence_length, message=message)
    with tf.control_dependencies([check]):
        mask = tf.sequence_mask(memory_sequence_length, maxlen=tf.shape(score)[1])
        return tf.where(mask, score, score_mask_value * tf.ones_like(score))


def prepare_memory(memory, memory_sequence_length=None, check_inner_dims_defined: bool = True):
    """``memory`` as tensors, zeroed past ``memory_sequence_length``.

    Args:
      memory: ``[batch_size, max_time, ...]`` or a nested structure of them.
      memory_sequence_length: ``[batch_size]`` or None (no masking).
      check_inner_dims_defined: require ``memory.shape[2:]`` to be fully defined.

    Returns:
      The (masked) memory.

    Raises:
      ValueError: an inner dimension is unknown while ``check_inner_dims_defined``.

    Example:

        values = prepare_memory(encoder_outputs, lengths)
    """
    memory = tf.nest.map_structure(lambda m: tf.convert_to_tensor(m, name="memory"), memory)
    if check_inner_dims_defined:
        for m in tf.nest.flatten(memory):
            if not m.shape[2:].is_fully_defined():
                raise ValueError(
                    f"`memory` must have fully defined inner dimensions. Got shape: {m.shape}"
                )
    if memory_sequence_length is None:
        return memory
    lengths = tf.convert_to_tensor(memory_sequence_length, name="memory_sequence_length")
    first = tf.nest.flatten(memory)[0]
    mask = tf.sequence_mask(lengths, maxlen=tf.shape(first)[1], dtype=first.dtype)
    length_batch = tf.compat.dimension_value(lengths.shape[0]) or tf.shape(lengths)[0]

    def masked(m):
        batch = tf.compat.dimension_value(m.shape[0]) or tf.shape(m)[0]
        message = "memory_sequence_length and memory tensor batch sizes do not match."
        with tf.control_dependencies([tf.assert_equal(length_batch, batch, message=message)]):
            rank = m.shape.ndims if m.shape.ndims is not None else tf.rank(m)
            ones = tf.ones(rank - 2, dtype=tf.int32)
            return m * tf.reshape(mask, tf.concat((tf.shape(mask), ones), 0))

    return tf.nest.map_structure(masked, memory)
