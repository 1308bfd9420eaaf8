"""``tf.contrib.seq2seq``'s helpers: a port of TF 1.15's ``helper.py``.

``TrainingHelper``, ``ScheduledEmbeddingTrainingHelper``, ``GreedyEmbeddingHelper``,
``SampleEmbeddingHelper``, ``InferenceHelper`` and ``CustomHelper`` with TF 1.15's constructor
arguments; ``BasicDecoder`` (in ``seq2seq.py``) samples with them.  Sampling uses
``tf.random.categorical`` / ``tf.random.uniform`` where TF 1.15 used ``tf.distributions``.
"""

from __future__ import annotations

import abc
from typing import Callable, Optional

from tfest_kit._tf import tf

__all__ = [
    "Helper",
    "CustomHelper",
    "TrainingHelper",
    "ScheduledEmbeddingTrainingHelper",
    "GreedyEmbeddingHelper",
    "SampleEmbeddingHelper",
    "InferenceHelper",
    "embedding_fn",
    "int_scalar",
    "int_vector",
    "transpose_batch_time",
]


def transpose_batch_time(x):
    """``[batch, time, ...]`` <-> ``[time, batch, ...]``; tensors of rank < 2 are returned as is."""
    rank = x.shape.rank
    if rank is not None and rank < 2:
        return x
    perm = tf.concat(([1, 0], tf.range(2, tf.rank(x))), axis=0)
    result = tf.transpose(x, perm)
    if rank is not None:
        dims = x.shape.as_list()
        result.set_shape([dims[1], dims[0], *dims[2:]])
    return result


def embedding_fn(embedding) -> Callable:
    if callable(embedding):
        return embedding
    return lambda ids: tf.nn.embedding_lookup(embedding, ids)


def int_vector(value, name: str):
    tensor = tf.convert_to_tensor(value, dtype=tf.int32, name=name)
    if tensor.shape.ndims != 1:
        raise ValueError(f"`{name}` must be a vector of token ids. Got shape: {tensor.shape}")
    return tensor


def int_scalar(value, name: str):
    tensor = tf.convert_to_tensor(value, dtype=tf.int32, name=name)
    if tensor.shape.ndims != 0:
        raise ValueError(f"`{name}` must be a scalar token id. Got shape: {tensor.shape}")
    return tensor


class Helper(metaclass=abc.ABCMeta):
    """TF 1.15's ``tf.contrib.seq2seq.Helper`` interface: what ``BasicDecoder`` samples with.

    Example:

        class MyHelper(Helper): ...  # batch_size, sample_ids_*, initialize, sample, next_inputs
    """

    @property
    def batch_size(self):
        raise NotImplementedError

    @property
    def sample_ids_shape(self):
        raise NotImplementedError

    @property
    def sample_ids_dtype(self):
        raise NotImplementedError

    @abc.abstractmethod
    def initialize(self, name=None):
        """Returns ``(initial_finished, initial_inputs)``."""

    @abc.abstractmethod
    def sample(self, time, outputs, state, name=None):
        """Returns ``sample_ids``."""

    @abc.abstractmethod
    def next_inputs(self, time, outputs, state, sample_ids, name=None):
        """Returns ``(finished, next_inputs, next_state)``."""


class CustomHelper(Helper):
    """``tf.contrib.seq2seq.CustomHelper``: a ``Helper`` from three functions.

    Args:
      initialize_fn: ``() -> (finished, next_inputs)``.
      sample_fn: ``(time, outputs, state) -> sample_ids``.
      next_inputs_fn: ``(time, outputs, state, sample_ids) -> (finished, next_inputs, state)``.
      sample_ids_shape: each sample's shape, ``[]`` by default.
      sample_ids_dtype: int32 by default.

    Example:

        helper = CustomHelper(init_fn, sample_fn, next_inputs_fn)
    """

    def __init__(
        self,
        initialize_fn: Callable,
        sample_fn: Callable,
        next_inputs_fn: Callable,
        sample_ids_shape=None,
        sample_ids_dtype=None,
    ):
        self._initialize_fn = initialize_fn
        self._sample_fn = sample_fn
        self._next_inputs_fn = next_inputs_fn
        self._batch_size = None
        self._sample_ids_shape = tf.TensorShape(sample_ids_shape or [])
        self._sample_ids_dtype = sample_ids_dtype or tf.int32

    @property
    def batch_size(self):
        if self._batch_size is None:
            raise ValueError("CustomHelper.batch_size was read before initialize() was called.")
        return self._batch_size

    @property
    def sample_ids_shape(self):
        return self._sample_ids_shape

    @property
    def sample_ids_dtype(self):
        return self._sample_ids_dtype

    def initialize(self, name=None):
        with tf.name_scope(name, "CustomHelperInitialize"):
            finished, next_inputs = self._initialize_fn()
            if self._batch_size is None:
                self._batch_size = tf.size(finished)
        return finished, next_inputs

    def sample(self, time, outputs, state, name=None):
        with tf.name_scope(name, "CustomHelperSample", (time, outputs, state)):
            return self._sample_fn(time=time, outputs=outputs, state=state)

    def next_inputs(self, time, outputs, state, sample_ids, name=None):
        with tf.name_scope(name, "CustomHelperNextInputs", (time, outputs, state, sample_ids)):
            return self._next_inputs_fn(
                time=time, outputs=outputs, state=state, sample_ids=sample_ids
            )


class _TokenIdHelper(Helper):
    """A helper whose samples are one int32 token id per sequence, its batch in ``_batch_size``."""

    @property
    def batch_size(self):
        return self._batch_size

    @property
    def sample_ids_shape(self):
        return tf.TensorShape([])

    @property
    def sample_ids_dtype(self):
        return tf.int32


class TrainingHelper(_TokenIdHelper):
    """``tf.contrib.seq2seq.TrainingHelper``: reads the given inputs step by step (teacher forcing).

    Args:
      inputs: ``[batch, time, ...]`` (``[time, batch, ...]`` with ``time_major``).
      sequence_length: ``[batch]`` lengths; a sequence is finished after its length.
      time_major: ``inputs`` is time-major.
      name: name scope.

    Raises:
      ValueError: ``sequence_length`` is not a vector.

    Example:

        helper = TrainingHelper(tf.nn.embedding_lookup(embeddings, decoder_ids), lengths)
    """

    def __init__(self, inputs, sequence_length, time_major: bool = False, name=None):
        with tf.name_scope(name, "TrainingHelper", [inputs, sequence_length]):
            inputs = tf.convert_to_tensor(inputs, name="inputs")
            self._inputs = inputs
            if not time_major:
                inputs = tf.nest.map_structure(transpose_batch_time, inputs)
            self._sequence_length = tf.convert_to_tensor(sequence_length, name="sequence_length")
            if self._sequence_length.shape.ndims != 1:
                raise ValueError(
                    "`sequence_length` must be a vector of lengths. Got shape: "
                    f"{self._sequence_length.shape}"
                )
            self._input_tas = tf.nest.map_structure(
                lambda inp: tf.TensorArray(
                    dtype=inp.dtype, size=tf.shape(inp)[0], element_shape=inp.shape[1:]
                ).unstack(inp),
                inputs,
            )
            self._zero_inputs = tf.nest.map_structure(lambda inp: tf.zeros_like(inp[0, :]), inputs)
            self._batch_size = tf.size(sequence_length)

    @property
    def inputs(self):
        return self._inputs

    @property
    def sequence_length(self):
        return self._sequence_length

    def initialize(self, name=None):
        with tf.name_scope(name, "TrainingHelperInitialize"):
            finished = tf.equal(0, self._sequence_length)
            next_inputs = tf.cond(
                tf.reduce_all(finished),
                lambda: self._zero_inputs,
                lambda: tf.nest.map_structure(lambda inp: inp.read(0), self._input_tas),
            )
            return finished, next_inputs

    def sample(self, time, outputs, name=None, **unused_kwargs):
        with tf.name_scope(name, "TrainingHelperSample", [time, outputs]):
            return tf.cast(tf.argmax(outputs, axis=-1), tf.int32)

    def next_inputs(self, time, outputs, state, name=None, **unused_kwargs):
        with tf.name_scope(name, "TrainingHelperNextInputs", [time, outputs, state]):
            next_time = time + 1
            finished = next_time >= self._sequence_length
            next_inputs = tf.cond(
                tf.reduce_all(finished),
                lambda: self._zero_inputs,
                lambda: tf.nest.map_structure(lambda inp: inp.read(next_time), self._input_tas),
            )
            return finished, next_inputs, state


class ScheduledEmbeddingTrainingHelper(TrainingHelper):
    """``tf.contrib.seq2seq.ScheduledEmbeddingTrainingHelper``: teacher forcing, or with
    ``sampling_probability`` the embedding of a token sampled from the outputs.

    Args:
      inputs, sequence_length, time_major, name: as ``TrainingHelper``.
      embedding: the embedding matrix, or a callable on ids.
      sampling_probability: a scalar or ``[batch]`` probability of sampling.
      seed: the token sampler's seed.
      scheduling_seed: the seed choosing which entries sample.

    Raises:
      ValueError: ``sampling_probability`` is neither a scalar nor a vector.

    Example:

        helper = ScheduledEmbeddingTrainingHelper(inputs, lengths, embeddings, 0.25)
    """

    def __init__(
        self,
        inputs,
        sequence_length,
        embedding,
        sampling_probability,
        time_major: bool = False,
        seed=None,
        scheduling_seed=None,
        name=None,
    ):
        with tf.name_scope(
            name, "ScheduledEmbeddingSamplingWrapper", [embedding, sampling_probability]
        ):
            self._embedding_fn = embedding_fn(embedding)
            self._sampling_probability = tf.convert_to_tensor(
                sampling_probability, name="sampling_probability"
            )
            if self._sampling_probability.shape.ndims not in (0, 1):
                raise ValueError(
                    "`sampling_probability` must be a scalar or a vector. Got shape: "
                    f"{self._sampling_probability.shape}"
                )
            self._seed = seed
            self._scheduling_seed = scheduling_seed
            super().__init__(
                inputs=inputs, sequence_length=sequence_length, time_major=time_major, name=name
            )

    def sample(self, time, outputs, state, name=None):
        with tf.name_scope(name, "ScheduledEmbeddingTrainingHelperSample", [time, outputs, state]):
            select_sample = (
                tf.random.uniform([self.batch_size], seed=self._scheduling_seed)
                < self._sampling_probability
            )
            sampled = tf.squeeze(
                tf.random.categorical(outputs, 1, dtype=tf.int32, seed=self._seed), -1
            )
            return tf.where(select_sample, sampled, tf.fill([self.batch_size], -1))

    def next_inputs(self, time, outputs, state, sample_ids, name=None):
        with tf.name_scope(
            name, "ScheduledEmbeddingTrainingHelperNextInputs", [time, outputs, state, sample_ids]
        ):
            finished, base_next_inputs, state = super().next_inputs(
                time=time, outputs=outputs, state=state, sample_ids=sample_ids, name=name
            )

            def maybe_sample():
                where_sampling = tf.cast(tf.where(sample_ids > -1), tf.int32)
                where_not_sampling = tf.cast(tf.where(sample_ids <= -1), tf.int32)
                sampled_next_inputs = self._embedding_fn(tf.gather_nd(sample_ids, where_sampling))
                inputs_not_sampling = tf.gather_nd(base_next_inputs, where_not_sampling)
                base_shape = tf.shape(base_next_inputs)
                return tf.scatter_nd(
                    indices=where_sampling, updates=sampled_next_inputs, shape=base_shape
                ) + tf.scatter_nd(
                    indices=where_not_sampling, updates=inputs_not_sampling, shape=base_shape
                )

            next_inputs = tf.cond(tf.reduce_all(finished), lambda: base_next_inputs, maybe_sample)
            return finished, next_inputs, state


class GreedyEmbeddingHelper(_TokenIdHelper):
    """``tf.contrib.seq2seq.GreedyEmbeddingHelper``: feeds back the embedding of the argmax.

    Args:
      embedding: the embedding matrix, or a callable on ids.
      start_tokens: ``[batch]`` int32 first tokens.
      end_token: int32 scalar; a sequence that emits it is finished.

    Raises:
      ValueError: ``start_tokens`` is not a vector or ``end_token`` not a scalar.

    Example:

        helper = GreedyEmbeddingHelper(embeddings, tf.fill([batch_size], GO), EOS)
    """

    def __init__(self, embedding, start_tokens, end_token):
        self._embedding_fn = embedding_fn(embedding)
        self._start_tokens = int_vector(start_tokens, "start_tokens")
        self._end_token = int_scalar(end_token, "end_token")
        self._batch_size = tf.size(start_tokens)
        self._start_inputs = self._embedding_fn(self._start_tokens)

    def initialize(self, name=None):
        return tf.tile([False], [self._batch_size]), self._start_inputs

    def sample(self, time, outputs, state, name=None):
        del time, state
        if not isinstance(outputs, tf.Tensor):
            raise TypeError(f"`outputs` must be a single Tensor. Got: {type(outputs).__name__}")
        return tf.argmax(outputs, axis=-1, output_type=tf.int32)

    def next_inputs(self, time, outputs, state, sample_ids, name=None):
        del time, outputs
        finished = tf.equal(sample_ids, self._end_token)
        next_inputs = tf.cond(
            tf.reduce_all(finished),
            lambda: self._start_inputs,
            lambda: self._embedding_fn(sample_ids),
        )
        return finished, next_inputs, state


class SampleEmbeddingHelper(GreedyEmbeddingHelper):
    """``tf.contrib.seq2seq.SampleEmbeddingHelper``: feeds back a token sampled from the logits.

    Args:
      embedding, start_tokens, end_token: as ``GreedyEmbeddingHelper``.
      softmax_temperature: divides the logits; None for 1.
      seed: the sampler's seed.

    Example:

        helper = SampleEmbeddingHelper(embeddings, start_tokens, EOS, softmax_temperature=0.7)
    """

    def __init__(self, embedding, start_tokens, end_token, softmax_temperature=None, seed=None):
        super().__init__(embedding, start_tokens, end_token)
        self._softmax_temperature = softmax_temperature
        self._seed = seed

    def sample(self, time, outputs, state, name=None):
        del time, state
        if not isinstance(outputs, tf.Tensor):
            raise TypeError(f"`outputs` must be a single Tensor. Got: {type(outputs).__name__}")
        logits = (
            outputs if self._softmax_temperature is None else outputs / self._softmax_temperature
        )
        return tf.squeeze(tf.random.categorical(logits, 1, dtype=tf.int32, seed=self._seed), -1)


class InferenceHelper(Helper):
    """``tf.contrib.seq2seq.InferenceHelper``: outputs fed back through ``sample_fn``.

    Args:
      sample_fn: ``outputs -> sample_ids``.
      sample_shape: each sample's shape.
      sample_dtype: the samples' dtype.
      start_inputs: ``[batch, ...]`` first inputs.
      end_fn: ``sample_ids -> finished``.
      next_inputs_fn: ``sample_ids -> next_inputs``; the samples themselves by default.

    Example:

        helper = InferenceHelper(lambda x: x, [1], tf.float32, start, lambda s: s[:, 0] > 9)
    """

    def __init__(
        self,
        sample_fn: Callable,
        sample_shape,
        sample_dtype,
        start_inputs,
        end_fn: Callable,
        next_inputs_fn: Optional[Callable] = None,
    ):
        self._sample_fn = sample_fn
        self._end_fn = end_fn
        self._sample_shape = tf.TensorShape(sample_shape)
        self._sample_dtype = sample_dtype
        self._next_inputs_fn = next_inputs_fn
        self._batch_size = tf.shape(start_inputs)[0]
        self._start_inputs = tf.convert_to_tensor(start_inputs, name="start_inputs")

    @property
    def batch_size(self):
        return self._batch_size

    @property
    def sample_ids_shape(self):
        return self._sample_shape

    @property
    def sample_ids_dtype(self):
        return self._sample_dtype

    def initialize(self, name=None):
        return tf.tile([False], [self._batch_size]), self._start_inputs

    def sample(self, time, outputs, state, name=None):
        del time, state
        return self._sample_fn(outputs)

    def next_inputs(self, time, outputs, state, sample_ids, name=None):
        del time, outputs
        next_inputs = (
            sample_ids if self._next_inputs_fn is None else self._next_inputs_fn(sample_ids)
        )
        return self._end_fn(sample_ids), next_inputs, state
