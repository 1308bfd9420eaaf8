"""``tf.contrib.rnn`` as TF 1.15 had it: ``tf.compat.v1.nn.rnn_cell`` plus the fused kernels.

- The core cells and wrappers (``LSTMCell``, ``GRUCell``, ``MultiRNNCell``, ``DropoutWrapper``
  …) and ``static_rnn`` / ``static_bidirectional_rnn`` / ``static_state_saving_rnn`` are
  TensorFlow's own (``tf.compat.v1.nn.rnn_cell``, ``tf.compat.v1.nn``), as contrib
  re-exported them.
- ``LSTMBlockCell``, ``GRUBlockCell`` (``GRUBlockCellV2``) and ``LSTMBlockFusedCell`` run
  TensorFlow's fused kernels (``tf.raw_ops.LSTMBlockCell``, ``GRUBlockCell``, ``BlockLSTM``)
  with TF 1.15's variables: ``lstm_cell/kernel`` ``[input + units, 4 * units]`` and
  ``lstm_cell/bias`` (gates i, c, f, o, the order ``LSTMCell`` uses, so the two cells'
  checkpoints are interchangeable, as they were), ``w_i_diag``/``w_f_diag``/``w_o_diag``
  peepholes; ``gru_cell/gates/{kernel,bias}`` and ``gru_cell/candidate/{kernel,bias}``;
  ``lstm_fused_cell/{kernel,bias}``.
- ``LayerNormBasicLSTMCell``: a port of contrib's (``kernel``, ``bias`` without layer norm;
  ``input``/``transform``/``forget``/``output``/``state`` ``{gamma,beta}`` with it).
- ``stack_bidirectional_rnn`` / ``stack_bidirectional_dynamic_rnn``: a port of contrib's
  (``stack_bidirectional_rnn/cell_<i>/bidirectional_rnn/{fw,bw}/…`` variables).

Example:

    cell = tf.contrib.rnn.LSTMBlockCell(64)
    outputs, state = tf.nn.dynamic_rnn(cell, inputs, dtype=tf.float32)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

from tfest_kit._tf import tf
from tfest_kit.legacy._layer_norm import layer_norm

_CELLS = tf.nn.rnn_cell
_FROM_RNN_CELL = (
    "RNNCell",
    "BasicRNNCell",
    "BasicLSTMCell",
    "LSTMCell",
    "GRUCell",
    "MultiRNNCell",
    "DropoutWrapper",
    "ResidualWrapper",
    "DeviceWrapper",
    "LSTMStateTuple",
)
_FROM_NN = ("static_rnn", "static_bidirectional_rnn", "static_state_saving_rnn")

__all__ = [
    *_FROM_RNN_CELL,
    *_FROM_NN,
    "LSTMBlockCell",
    "GRUBlockCell",
    "GRUBlockCellV2",
    "LSTMBlockFusedCell",
    "TimeReversedFusedRNN",
    "LayerNormBasicLSTMCell",
    "OutputProjectionWrapper",
    "stack_bidirectional_rnn",
    "stack_bidirectional_dynamic_rnn",
    "linear",
    "BACKING",
    "NOT_SERVED",
]

_OURS = "(tfest_kit.legacy.contrib.rnn, TF 1.15's variables)"
_PORT = "(tfest_kit.legacy.contrib.rnn, a port of contrib's)"
BACKING = {
    **{name: f"tf.compat.v1.nn.rnn_cell.{name}" for name in _FROM_RNN_CELL},
    **{name: f"tf.compat.v1.nn.{name}" for name in _FROM_NN},
    "LSTMBlockCell": f"tf.raw_ops.LSTMBlockCell {_OURS}",
    "GRUBlockCell": f"tf.raw_ops.GRUBlockCell {_OURS}",
    "GRUBlockCellV2": f"tf.raw_ops.GRUBlockCell {_OURS}",
    "LSTMBlockFusedCell": f"tf.raw_ops.BlockLSTM {_OURS}",
    "TimeReversedFusedRNN": f"tf.reverse_sequence around the fused cell {_PORT}",
    "LayerNormBasicLSTMCell": f"tf.compat.v1.nn.rnn_cell.RNNCell {_PORT}",
    "OutputProjectionWrapper": f"tf.compat.v1.nn.rnn_cell.RNNCell {_PORT}",
    "stack_bidirectional_rnn": f"tf.compat.v1.nn.static_bidirectional_rnn {_PORT}",
    "stack_bidirectional_dynamic_rnn": f"tf.compat.v1.nn.bidirectional_dynamic_rnn {_PORT}",
}
_KERAS_CELL = "a tf.keras RNN cell (tf.keras.layers.AbstractRNNCell); variable names differ"
NOT_SERVED = {
    "NASCell": _KERAS_CELL,
    "AttentionCellWrapper": _KERAS_CELL,
    "CoupledInputForgetGateLSTMCell": _KERAS_CELL,
    "UGRNNCell": _KERAS_CELL,
    "IntersectionRNNCell": _KERAS_CELL,
    "GridLSTMCell": _KERAS_CELL,
    "ConvLSTMCell": "tf.keras.layers.ConvLSTM2D (variable names differ)",
    "InputProjectionWrapper": "a tf.layers.dense on the inputs of tf.nn.dynamic_rnn",
    "EmbeddingWrapper": "tf.nn.embedding_lookup on the inputs of tf.nn.dynamic_rnn",
}

for _name in _FROM_RNN_CELL:
    globals()[_name] = getattr(_CELLS, _name)
for _name in _FROM_NN:
    globals()[_name] = getattr(tf.nn, _name)


def linear(
    args: Any,
    output_size: int,
    bias: bool,
    bias_initializer: Any = None,
    kernel_initializer: Any = None,
):
    """TF 1.15's private ``core_rnn_cell._linear``: ``concat(args) @ kernel (+ bias)``.

    Attention decoders and custom cells of the time import it; its variables are ``kernel``
    ``[sum of the args' widths, output_size]`` and ``bias`` (zeros), in the current variable
    scope, as in TF 1.15.

    Args:
      args: a ``[batch, n]`` tensor or a list of them.
      output_size: the output's width.
      bias: whether to add a bias.
      bias_initializer: the bias' initializer (zeros by default).
      kernel_initializer: the kernel's initializer (the variable scope's by default).

    Returns:
      A ``[batch, output_size]`` tensor.

    Raises:
      ValueError: no ``args``, or one that is not 2-D with a known width.

    Example:

        from tensorflow.contrib.rnn.python.ops.core_rnn_cell import _linear
        scores = _linear([query, state], num_units, True)
    """
    if args is None or (tf.nest.is_nested(args) and not args):
        raise ValueError("`args` must be specified")
    args = list(args) if tf.nest.is_nested(args) else [args]
    shapes = [a.get_shape() for a in args]
    for shape in shapes:
        if shape.ndims != 2:
            raise ValueError(f"linear is expecting 2D arguments: {shapes}")
        if tf.compat.dimension_value(shape[1]) is None:
            raise ValueError(
                f"linear expects shape[1] to be provided for shape {shape}, but saw {shape[1]}"
            )
    width = sum(tf.compat.dimension_value(shape[1]) for shape in shapes)
    dtype = args[0].dtype
    with tf.variable_scope(tf.get_variable_scope()) as outer_scope:
        kernel = tf.get_variable(
            "kernel", [width, output_size], dtype=dtype, initializer=kernel_initializer
        )
        result = tf.matmul(args[0] if len(args) == 1 else tf.concat(args, 1), kernel)
        if not bias:
            return result
        with tf.variable_scope(outer_scope) as inner_scope:
            inner_scope.set_partitioner(None)
            if bias_initializer is None:
                bias_initializer = tf.constant_initializer(0.0, dtype=dtype)
            biases = tf.get_variable(
                "bias", [output_size], dtype=dtype, initializer=bias_initializer
            )
        return tf.nn.bias_add(result, biases)


def _weights_by_suffix(layer, *suffixes: str) -> list:
    """The layer's variables whose names end with ``suffixes`` (``"/kernel"`` …), in order."""
    found = []
    for suffix in suffixes:
        matches = [w for w in layer.weights if w.name.split(":")[0].endswith(suffix)]
        found.append(matches[0] if matches else None)
    return found


class LSTMBlockCell(_CELLS.LSTMCell):
    """``tf.contrib.rnn.LSTMBlockCell``: an LSTM cell on the fused ``LSTMBlockCell`` kernel.

    Its variables and arithmetic are ``tf.nn.rnn_cell.LSTMCell``'s (same names, gate order,
    ``forget_bias`` added to the forget gate, peepholes, ``cell_clip``).

    Args:
      num_units: size of the state.
      forget_bias: added to the forget gate's pre-activation.
      cell_clip: clip the cell state to ``[-cell_clip, cell_clip]``; None for no clipping.
      use_peephole: add the diagonal peephole connections.
      dtype: the variables' dtype.
      reuse: reuse variables of an existing scope.
      name: the layer's name, TF 1.15's default ``"lstm_cell"``.

    Example:

        outputs, state = tf.nn.dynamic_rnn(LSTMBlockCell(64), inputs, dtype=tf.float32)
    """

    def __init__(
        self,
        num_units: int,
        forget_bias: float = 1.0,
        cell_clip: Optional[float] = None,
        use_peephole: bool = False,
        dtype: Any = None,
        reuse: Any = None,
        name: str = "lstm_cell",
    ):
        super().__init__(
            num_units,
            use_peepholes=use_peephole,
            cell_clip=cell_clip,
            forget_bias=forget_bias,
            state_is_tuple=True,
            reuse=reuse,
            name=name,
            dtype=dtype,
        )
        self._block_args = (forget_bias, -1.0 if cell_clip is None else cell_clip, use_peephole)

    def build(self, inputs_shape) -> None:
        super().build(inputs_shape)
        names = ("/kernel", "/bias", "/w_i_diag", "/w_f_diag", "/w_o_diag")
        self._block_weights = _weights_by_suffix(self, *names)

    def call(self, inputs, state):
        kernel, bias, w_i, w_f, w_o = self._block_weights
        forget_bias, cell_clip, use_peephole = self._block_args
        c_prev, h_prev = state
        if not use_peephole:
            w_i = w_f = w_o = tf.zeros([self._num_units], dtype=inputs.dtype)
        _, c, _, _, _, _, h = tf.raw_ops.LSTMBlockCell(
            x=inputs,
            cs_prev=c_prev,
            h_prev=h_prev,
            w=kernel,
            wci=w_i,
            wcf=w_f,
            wco=w_o,
            b=bias,
            forget_bias=forget_bias,
            cell_clip=cell_clip,
            use_peephole=use_peephole,
        )
        return h, _CELLS.LSTMStateTuple(c, h)


class GRUBlockCell(_CELLS.GRUCell):
    """``tf.contrib.rnn.GRUBlockCell``: a GRU cell on the fused ``GRUBlockCell`` kernel.

    Its variables and arithmetic are ``tf.nn.rnn_cell.GRUCell``'s (``gates/kernel``,
    ``gates/bias`` initialised to ones, ``candidate/kernel``, ``candidate/bias``).

    Args:
      num_units: size of the state.
      reuse: reuse variables of an existing scope.
      name: the layer's name, TF 1.15's default ``"gru_cell"``.
      cell_size: TF 1.15's deprecated name for ``num_units``.

    Example:

        outputs, state = tf.nn.dynamic_rnn(GRUBlockCell(64), inputs, dtype=tf.float32)
    """

    def __init__(
        self,
        num_units: Optional[int] = None,
        reuse: Any = None,
        name: str = "gru_cell",
        cell_size: Optional[int] = None,
    ):
        if num_units is None:
            num_units = cell_size
        if num_units is None:
            raise ValueError("`num_units` must be given (or TF 1.15's `cell_size`). Got: None")
        super().__init__(num_units, reuse=reuse, name=name)

    def build(self, inputs_shape) -> None:
        super().build(inputs_shape)
        names = ("gates/kernel", "candidate/kernel", "gates/bias", "candidate/bias")
        self._block_weights = _weights_by_suffix(self, *names)

    def call(self, inputs, state):
        w_ru, w_c, b_ru, b_c = self._block_weights
        _, _, _, h = tf.raw_ops.GRUBlockCell(
            x=inputs, h_prev=state, w_ru=w_ru, w_c=w_c, b_ru=b_ru, b_c=b_c
        )
        return h, h


GRUBlockCellV2 = GRUBlockCell


class LSTMBlockFusedCell(tf.layers.Layer):
    """``tf.contrib.rnn.LSTMBlockFusedCell``: a whole sequence on the fused ``BlockLSTM`` kernel.

    Called on time-major inputs ``[time, batch, depth]`` (or a list of ``[batch, depth]``),
    it returns ``(outputs, LSTMStateTuple(c, h))`` as TF 1.15's did: outputs past a
    ``sequence_length`` are zero and the final state is each sequence's last step.

    Args:
      num_units: size of the state.
      forget_bias: added to the forget gate's pre-activation.
      cell_clip: clip the cell state; None for no clipping.
      use_peephole: add the diagonal peephole connections.
      reuse: reuse variables of an existing scope.
      dtype: the variables' dtype.
      name: TF 1.15's default ``"lstm_fused_cell"``.

    Example:

        outputs, state = LSTMBlockFusedCell(64)(time_major_inputs, dtype=tf.float32)
    """

    def __init__(
        self,
        num_units: int,
        forget_bias: float = 1.0,
        cell_clip: Optional[float] = None,
        use_peephole: bool = False,
        reuse: Any = None,
        dtype: Any = None,
        name: str = "lstm_fused_cell",
    ):
        super().__init__(_reuse=reuse, name=name, dtype=dtype)
        self._num_units = num_units
        self._forget_bias = forget_bias
        self._cell_clip = -1.0 if cell_clip is None else cell_clip
        self._use_peephole = use_peephole

    @property
    def num_units(self) -> int:
        return self._num_units

    def build(self, input_shape) -> None:
        depth = tf.TensorShape(input_shape)[-1]
        if depth is None or (hasattr(depth, "value") and depth.value is None):
            raise ValueError(f"The inputs' last dimension must be known. Got: {input_shape}")
        depth = int(depth)
        units = self._num_units
        self._kernel = self.add_weight("kernel", [depth + units, 4 * units])
        self._bias = self.add_weight("bias", [4 * units], initializer=tf.constant_initializer(0.0))
        if self._use_peephole:
            self._peepholes = [
                self.add_weight(n, [units]) for n in ("w_i_diag", "w_f_diag", "w_o_diag")
            ]
        self.built = True

    def __call__(self, inputs, initial_state=None, dtype=None, sequence_length=None, scope=None):
        is_list = isinstance(inputs, (list, tuple))
        if is_list:
            inputs = tf.stack(inputs)
        return super().__call__(
            inputs,
            initial_state=initial_state,
            dtype=dtype,
            sequence_length=sequence_length,
            is_list=is_list,
            scope=scope,
        )

    def call(self, inputs, initial_state=None, dtype=None, sequence_length=None, is_list=False):
        time_len = tf.shape(inputs)[0]
        batch = tf.shape(inputs)[1]
        dtype = dtype or inputs.dtype
        if initial_state is None:
            zeros = tf.zeros(tf.stack([batch, self._num_units]), dtype=dtype)
            c0 = h0 = zeros
        else:
            c0, h0 = initial_state
        if self._use_peephole:
            w_i, w_f, w_o = self._peepholes
        else:
            w_i = w_f = w_o = tf.zeros([self._num_units], dtype=dtype)
        if sequence_length is None:
            max_len = tf.cast(time_len, tf.int64)
        else:
            max_len = tf.cast(tf.reduce_max(sequence_length), tf.int64)
        _, cs, _, _, _, _, h = tf.raw_ops.BlockLSTM(
            seq_len_max=max_len,
            x=inputs,
            cs_prev=c0,
            h_prev=h0,
            w=self._kernel,
            wci=w_i,
            wcf=w_f,
            wco=w_o,
            b=self._bias,
            forget_bias=self._forget_bias,
            cell_clip=self._cell_clip,
            use_peephole=self._use_peephole,
        )
        if sequence_length is None:
            final_c, final_h = cs[-1], h[-1]
        else:
            mask = tf.transpose(tf.sequence_mask(sequence_length, time_len, dtype=dtype), [1, 0])
            h = h * tf.expand_dims(mask, -1)
            # Each sequence's last step (its initial state when its length is 0).
            steps = tf.cast(sequence_length, tf.int32)
            index = tf.stack([steps, tf.range(batch)], axis=1)
            final_c = tf.gather_nd(tf.concat([tf.expand_dims(c0, 0), cs], 0), index)
            final_h = tf.gather_nd(tf.concat([tf.expand_dims(h0, 0), h], 0), index)
        outputs = tf.unstack(h) if is_list else h
        return outputs, _CELLS.LSTMStateTuple(final_c, final_h)


class TimeReversedFusedRNN:
    """``tf.contrib.rnn.TimeReversedFusedRNN``: a fused cell run backwards in time.

    The inputs are reversed (each sequence within its ``sequence_length``), the wrapped cell
    runs, and its outputs are reversed back; the variables are the wrapped cell's.

    Args:
      cell: a fused cell such as :class:`LSTMBlockFusedCell`.

    Example:

        backward = TimeReversedFusedRNN(LSTMBlockFusedCell(100))
        outputs, state = backward(time_major_inputs, dtype=tf.float32, sequence_length=lengths)
    """

    def __init__(self, cell):
        self._cell = cell

    @staticmethod
    def _reverse(t, lengths):
        if isinstance(t, list):
            return list(reversed(t))
        if lengths is None:
            return tf.reverse(t, [0])
        return tf.reverse_sequence(t, lengths, seq_axis=0, batch_axis=1)

    def __call__(self, inputs, initial_state=None, dtype=None, sequence_length=None, scope=None):
        inputs = self._reverse(inputs, sequence_length)
        outputs, state = self._cell(
            inputs,
            initial_state=initial_state,
            dtype=dtype,
            sequence_length=sequence_length,
            scope=scope,
        )
        return self._reverse(outputs, sequence_length), state


def _check_cells(cells_fw: Sequence, cells_bw: Sequence, initial_fw, initial_bw) -> None:
    if not cells_fw:
        raise ValueError("`cells_fw` must hold at least one cell. Got: an empty list")
    if not cells_bw:
        raise ValueError("`cells_bw` must hold at least one cell. Got: an empty list")
    if not isinstance(cells_fw, list) or not isinstance(cells_bw, list):
        raise ValueError("`cells_fw` and `cells_bw` must be lists of RNNCells.")
    if len(cells_fw) != len(cells_bw):
        raise ValueError(
            f"`cells_fw` and `cells_bw` must have the same length. Got: {len(cells_fw)} and "
            f"{len(cells_bw)}"
        )
    for states, name in ((initial_fw, "initial_states_fw"), (initial_bw, "initial_states_bw")):
        if states is not None and (not isinstance(states, list) or len(states) != len(cells_fw)):
            raise ValueError(f"`{name}` must be a list with one state per cell.")


def stack_bidirectional_rnn(
    cells_fw: list,
    cells_bw: list,
    inputs,
    initial_states_fw: Optional[list] = None,
    initial_states_bw: Optional[list] = None,
    dtype=None,
    sequence_length=None,
    scope=None,
):
    """``tf.contrib.rnn.stack_bidirectional_rnn``: static bidirectional layers, each fed the last.

    Returns:
      ``(outputs, output_states_fw, output_states_bw)``: a list of ``[batch, fw + bw]``
      tensors, and tuples of each layer's final states.

    Raises:
      ValueError: for empty or unequal cell lists or initial-state lists of the wrong length.

    Example:

        outputs, fw, bw = stack_bidirectional_rnn([cell_fw], [cell_bw], steps, dtype=tf.float32)
    """
    _check_cells(cells_fw, cells_bw, initial_states_fw, initial_states_bw)
    states_fw, states_bw = [], []
    layer = inputs
    with tf.variable_scope(scope or "stack_bidirectional_rnn"):
        for i, (cell_fw, cell_bw) in enumerate(zip(cells_fw, cells_bw)):
            with tf.variable_scope(f"cell_{i}") as cell_scope:
                layer, state_fw, state_bw = tf.nn.static_bidirectional_rnn(
                    cell_fw,
                    cell_bw,
                    layer,
                    initial_state_fw=initial_states_fw[i] if initial_states_fw else None,
                    initial_state_bw=initial_states_bw[i] if initial_states_bw else None,
                    sequence_length=sequence_length,
                    dtype=dtype,
                    scope=cell_scope,
                )
            states_fw.append(state_fw)
            states_bw.append(state_bw)
    return layer, tuple(states_fw), tuple(states_bw)


def stack_bidirectional_dynamic_rnn(
    cells_fw: list,
    cells_bw: list,
    inputs,
    initial_states_fw: Optional[list] = None,
    initial_states_bw: Optional[list] = None,
    dtype=None,
    sequence_length=None,
    parallel_iterations=None,
    time_major: bool = False,
    scope=None,
    swap_memory: bool = False,
):
    """``tf.contrib.rnn.stack_bidirectional_dynamic_rnn``: dynamic bidirectional layers, stacked.

    Returns:
      ``(outputs, output_states_fw, output_states_bw)``: outputs ``[batch, time, fw + bw]``
      (time-major if ``time_major``), and tuples of each layer's final states.

    Raises:
      ValueError: for empty or unequal cell lists or initial-state lists of the wrong length.

    Example:

        outputs, fw, bw = stack_bidirectional_dynamic_rnn(
            [cell_fw], [cell_bw], inputs, dtype=tf.float32)
    """
    _check_cells(cells_fw, cells_bw, initial_states_fw, initial_states_bw)
    states_fw, states_bw = [], []
    layer = inputs
    with tf.variable_scope(scope or "stack_bidirectional_rnn"):
        for i, (cell_fw, cell_bw) in enumerate(zip(cells_fw, cells_bw)):
            with tf.variable_scope(f"cell_{i}"):
                outputs, (state_fw, state_bw) = tf.nn.bidirectional_dynamic_rnn(
                    cell_fw,
                    cell_bw,
                    layer,
                    initial_state_fw=initial_states_fw[i] if initial_states_fw else None,
                    initial_state_bw=initial_states_bw[i] if initial_states_bw else None,
                    sequence_length=sequence_length,
                    parallel_iterations=parallel_iterations,
                    dtype=dtype,
                    swap_memory=swap_memory,
                    time_major=time_major,
                )
                layer = tf.concat(outputs, 2)
            states_fw.append(state_fw)
            states_bw.append(state_bw)
    return layer, tuple(states_fw), tuple(states_bw)


class LayerNormBasicLSTMCell(_CELLS.RNNCell):
    """``tf.contrib.rnn.LayerNormBasicLSTMCell``: an LSTM with layer norm and recurrent dropout.

    TF 1.15's arithmetic: ``[i, j, f, o] = [inputs, h] @ kernel`` (``+ bias`` only without
    layer norm), each gate layer-normalised in its own scope (``input``, ``transform``,
    ``forget``, ``output``: ``gamma``, ``beta``), ``g = activation(j)`` dropped out with
    ``dropout_keep_prob``, ``c' = c * sigmoid(f + forget_bias) + sigmoid(i) * g``, ``c'``
    normalised (``state``), ``h' = activation(c') * sigmoid(o)``.  The default scope is
    ``layer_norm_basic_lstm_cell``, as in TF 1.15.

    Args:
      num_units: size of the state.
      forget_bias: added to the forget gate's pre-activation.
      input_size: unused (deprecated in TF 1.15 too).
      activation: the inner activation.
      layer_norm: normalise the gates and the cell state.
      norm_gain: the initial value of each ``gamma``.
      norm_shift: the initial value of each ``beta``.
      dropout_keep_prob: a float or scalar tensor; below 1.0 drops ``g`` out.
      dropout_prob_seed: the dropout's seed.
      reuse: reuse variables of an existing scope.

    Example:

        cell = tf.contrib.rnn.LayerNormBasicLSTMCell(64, dropout_keep_prob=0.9)
        outputs, state = tf.nn.dynamic_rnn(cell, inputs, dtype=tf.float32)
    """

    def __init__(
        self,
        num_units: int,
        forget_bias: float = 1.0,
        input_size: Any = None,
        activation: Any = tf.tanh,
        layer_norm: bool = True,
        norm_gain: float = 1.0,
        norm_shift: float = 0.0,
        dropout_keep_prob: Any = 1.0,
        dropout_prob_seed: Optional[int] = None,
        reuse: Any = None,
    ):
        super().__init__(_reuse=reuse)
        if input_size is not None:
            tf.logging.warn("%s: The input_size parameter is deprecated.", self)
        self._num_units = num_units
        self._activation = activation
        self._forget_bias = forget_bias
        self._keep_prob = dropout_keep_prob
        self._seed = dropout_prob_seed
        self._layer_norm = layer_norm
        self._norm_gain = norm_gain
        self._norm_shift = norm_shift

    @property
    def state_size(self):
        return _CELLS.LSTMStateTuple(self._num_units, self._num_units)

    @property
    def output_size(self):
        return self._num_units

    def _norm(self, inp, scope: str, dtype):
        shape = inp.get_shape()[-1:]
        with tf.variable_scope(scope):
            tf.get_variable(
                "gamma",
                shape=shape,
                dtype=dtype,
                initializer=tf.constant_initializer(self._norm_gain),
            )
            tf.get_variable(
                "beta",
                shape=shape,
                dtype=dtype,
                initializer=tf.constant_initializer(self._norm_shift),
            )
        return layer_norm(inp, reuse=True, scope=scope)

    def call(self, inputs, state):
        """One step: ``(h', LSTMStateTuple(c', h'))``."""
        c, h = state
        args = tf.concat([inputs, h], 1)
        dtype = args.dtype
        out_size = 4 * self._num_units
        out = tf.matmul(args, tf.get_variable("kernel", [args.get_shape()[-1], out_size], dtype))
        if not self._layer_norm:
            out = tf.nn.bias_add(out, tf.get_variable("bias", [out_size], dtype))
        i, j, f, o = tf.split(out, 4, axis=1)
        if self._layer_norm:
            i = self._norm(i, "input", dtype)
            j = self._norm(j, "transform", dtype)
            f = self._norm(f, "forget", dtype)
            o = self._norm(o, "output", dtype)
        g = self._activation(j)
        if not isinstance(self._keep_prob, float) or self._keep_prob < 1:
            g = tf.nn.dropout(g, keep_prob=self._keep_prob, seed=self._seed)
        new_c = c * tf.sigmoid(f + self._forget_bias) + tf.sigmoid(i) * g
        if self._layer_norm:
            new_c = self._norm(new_c, "state", dtype)
        new_h = self._activation(new_c) * tf.sigmoid(o)
        return new_h, _CELLS.LSTMStateTuple(new_c, new_h)


class OutputProjectionWrapper(_CELLS.RNNCell):
    """TF 1.15's ``tf.contrib.rnn.OutputProjectionWrapper``: ``cell``'s output projected to
    ``output_size`` (seq2seq decoders of the time project to the vocabulary with it).

    The projection is :func:`linear` (``kernel``, ``bias``) in the wrapper's variable scope,
    ``…/output_projection_wrapper/``, around the cell's own scope, as TF 1.15 named them.

    Args:
      cell: the ``RNNCell`` wrapped.
      output_size: the projection's width.
      activation: applied to the projection, if given.
      reuse: whether to reuse the variables of an existing scope.

    Raises:
      ValueError: ``output_size`` < 1.

    Example:

        cell = tf.contrib.rnn.OutputProjectionWrapper(tf.nn.rnn_cell.GRUCell(64), vocab_size)
        logits, state = tf.nn.dynamic_rnn(cell, inputs, dtype=tf.float32)
    """

    def __init__(self, cell: Any, output_size: int, activation: Any = None, reuse: Any = None):
        super().__init__(_reuse=reuse)
        if output_size < 1:
            raise ValueError(f"Parameter output_size must be > 0: {output_size}.")
        self._cell, self._output_size, self._activation = cell, output_size, activation

    @property
    def state_size(self) -> Any:
        return self._cell.state_size

    @property
    def output_size(self) -> int:
        return self._output_size

    def zero_state(self, batch_size: Any, dtype: Any) -> Any:
        with tf.name_scope(type(self).__name__ + "ZeroState", values=[batch_size]):
            return self._cell.zero_state(batch_size, dtype)

    def call(self, inputs, state):
        """One step: the cell's output projected, and its state."""
        output, state = self._cell(inputs, state)
        projected = linear(output, self._output_size, True)
        return (self._activation(projected) if self._activation else projected), state
