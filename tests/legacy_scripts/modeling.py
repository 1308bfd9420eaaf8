# coding=utf-8
"""A tiny BERT-shaped encoder, written the way google-research/bert's modeling.py is.

TF1 style on purpose (tests/legacy_scripts is excluded from Ruff): `import tensorflow as tf`,
tf.contrib.layers.layer_norm, tf.nn.dropout(keep_prob), Dimension.value, tf.layers.dense.
Variable names follow the released BERT layout (bert/embeddings/LayerNorm/gamma, ...).
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import collections
import copy
import json
import re

import six
import tensorflow as tf


class ModelConfig(object):
  """Configuration for `Model`."""

  def __init__(self,
               vocab_size,
               hidden_size=32,
               num_hidden_layers=1,
               intermediate_size=64,
               hidden_act="gelu",
               hidden_dropout_prob=0.1,
               max_position_embeddings=64,
               initializer_range=0.02):
    self.vocab_size = vocab_size
    self.hidden_size = hidden_size
    self.num_hidden_layers = num_hidden_layers
    self.intermediate_size = intermediate_size
    self.hidden_act = hidden_act
    self.hidden_dropout_prob = hidden_dropout_prob
    self.max_position_embeddings = max_position_embeddings
    self.initializer_range = initializer_range

  @classmethod
  def from_dict(cls, json_object):
    config = ModelConfig(vocab_size=None)
    for (key, value) in six.iteritems(json_object):
      config.__dict__[key] = value
    return config

  @classmethod
  def from_json_file(cls, json_file):
    with tf.gfile.GFile(json_file, "r") as reader:
      text = reader.read()
    return cls.from_dict(json.loads(text))

  def to_dict(self):
    return copy.deepcopy(self.__dict__)


class Model(object):
  """Embeddings -> LayerNorm -> `num_hidden_layers` feed-forward blocks -> masked mean pool."""

  def __init__(self, config, is_training, input_ids, input_mask, scope=None):
    config = copy.deepcopy(config)
    if not is_training:
      config.hidden_dropout_prob = 0.0

    input_shape = get_shape_list(input_ids, expected_rank=2)
    seq_length = input_shape[1]

    with tf.variable_scope(scope, default_name="bert"):
      with tf.variable_scope("embeddings"):
        embedding_table = tf.get_variable(
            name="word_embeddings",
            shape=[config.vocab_size, config.hidden_size],
            initializer=create_initializer(config.initializer_range))
        output = tf.gather(embedding_table, input_ids)
        assert_op = tf.assert_less_equal(seq_length, config.max_position_embeddings)
        with tf.control_dependencies([assert_op]):
          position_embeddings = tf.get_variable(
              name="position_embeddings",
              shape=[config.max_position_embeddings, config.hidden_size],
              initializer=create_initializer(config.initializer_range))
          output += tf.expand_dims(
              tf.slice(position_embeddings, [0, 0], [seq_length, -1]), 0)
        self.embedding_output = layer_norm_and_dropout(output, config.hidden_dropout_prob)

      with tf.variable_scope("encoder"):
        layer_output = self.embedding_output
        for layer_idx in range(config.num_hidden_layers):
          with tf.variable_scope("layer_%d" % layer_idx):
            layer_input = layer_output
            with tf.variable_scope("intermediate"):
              intermediate_output = tf.layers.dense(
                  layer_input,
                  config.intermediate_size,
                  activation=get_activation(config.hidden_act),
                  kernel_initializer=create_initializer(config.initializer_range))
            with tf.variable_scope("output"):
              layer_output = tf.layers.dense(
                  intermediate_output,
                  config.hidden_size,
                  kernel_initializer=create_initializer(config.initializer_range))
              layer_output = dropout(layer_output, config.hidden_dropout_prob)
              layer_output = layer_norm(layer_output + layer_input)
        self.sequence_output = layer_output

      with tf.variable_scope("pooler"):
        mask = tf.cast(tf.expand_dims(input_mask, -1), tf.float32)
        pooled = tf.reduce_sum(self.sequence_output * mask, axis=1) / tf.maximum(
            tf.reduce_sum(mask, axis=1), 1.0)
        self.pooled_output = tf.layers.dense(
            pooled,
            config.hidden_size,
            activation=tf.tanh,
            kernel_initializer=create_initializer(config.initializer_range))

  def get_pooled_output(self):
    return self.pooled_output

  def get_sequence_output(self):
    return self.sequence_output


def gelu(x):
  cdf = 0.5 * (1.0 + tf.tanh(
      (0.7978845608028654 * (x + 0.044715 * tf.pow(x, 3)))))
  return x * cdf


def get_activation(activation_string):
  if not isinstance(activation_string, six.string_types):
    return activation_string
  act = activation_string.lower()
  if act == "gelu":
    return gelu
  elif act == "relu":
    return tf.nn.relu
  elif act == "tanh":
    return tf.tanh
  raise ValueError("Unsupported activation: %s" % act)


def get_assignment_map_from_checkpoint(tvars, init_checkpoint):
  """Compute the union of the current variables and checkpoint variables."""
  initialized_variable_names = {}

  name_to_variable = collections.OrderedDict()
  for var in tvars:
    name = var.name
    m = re.match("^(.*):\\d+$", name)
    if m is not None:
      name = m.group(1)
    name_to_variable[name] = var

  init_vars = tf.train.list_variables(init_checkpoint)

  assignment_map = collections.OrderedDict()
  for x in init_vars:
    (name, var) = (x[0], x[1])
    if name not in name_to_variable:
      continue
    assignment_map[name] = name
    initialized_variable_names[name] = 1
    initialized_variable_names[name + ":0"] = 1

  return (assignment_map, initialized_variable_names)


def dropout(input_tensor, dropout_prob):
  if dropout_prob is None or dropout_prob == 0.0:
    return input_tensor
  output = tf.nn.dropout(input_tensor, 1.0 - dropout_prob)
  return output


def layer_norm(input_tensor, name=None):
  """Run layer normalization on the last dimension of the tensor."""
  return tf.contrib.layers.layer_norm(
      inputs=input_tensor, begin_norm_axis=-1, begin_params_axis=-1, scope=name)


def layer_norm_and_dropout(input_tensor, dropout_prob, name=None):
  output_tensor = layer_norm(input_tensor, name)
  output_tensor = dropout(output_tensor, dropout_prob)
  return output_tensor


def create_initializer(initializer_range=0.02):
  return tf.truncated_normal_initializer(stddev=initializer_range)


def get_shape_list(tensor, expected_rank=None, name=None):
  if name is None:
    name = tensor.name
  if expected_rank is not None:
    actual_rank = tensor.shape.ndims
    if actual_rank != expected_rank:
      raise ValueError("For the tensor `%s`, the actual rank `%d` is not equal to the "
                       "expected rank `%s`" % (name, actual_rank, str(expected_rank)))

  shape = tensor.shape.as_list()
  non_static_indexes = []
  for (index, dim) in enumerate(shape):
    if dim is None:
      non_static_indexes.append(index)

  if not non_static_indexes:
    return shape

  dyn_shape = tf.shape(tensor)
  for index in non_static_indexes:
    shape[index] = dyn_shape[index]
  return shape
