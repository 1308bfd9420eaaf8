"""A TF1 graph fed with arrays made through NumPy names of TF 1.15's time (np.bool, np.int …),
and the Python 3.7 names TF1 code used (collections.Iterable, time.clock, inspect.getargspec …)."""

import base64
import collections
import fractions
import inspect
import sys
import time
from collections import Mapping
import xml.etree.cElementTree as ET
from inspect import getargspec

import numpy as np
import tensorflow as tf
from numpy import float as np_float

mask = np.array([1, 0, 1, 1], dtype=np.bool)
ids = np.arange(4).astype(np.int)
weights = np.array([0.5, 1.0, np.NaN, 2.0], dtype=np.float_)
weights[np.isnan(weights)] = np.float(0)

x = tf.placeholder(tf.float32, [None])
keep = tf.placeholder(tf.bool, [None])
total = tf.reduce_sum(tf.boolean_mask(x, keep))
with tf.Session() as sess:
    value = sess.run(total, {x: weights * ids, keep: mask})
print("tf.Tensor:", type(x) is tf.Tensor, isinstance(total, tf.Tensor), tf.is_tensor(total))
print("total =", value, np.product([2, 3]), np_float is float, np.object is object)
# Ragged lists (e.g. a batch of (tokens, label) pairs): an object array, as before NumPy 1.24.
pairs = np.array([(np.arange(3), [0, 1]), (np.arange(3), [1, 0])])
print("ragged:", np.array([[1, 2], [3]]).shape, pairs.dtype, pairs.shape)
# A generator's sum (BERT-NER's metrics): NumPy 1 warned and summed, NumPy 2 raises.
print("generator sum:", np.sum(row[1] for row in [[0, 2], [0, 3]]), np.sum([[1, 2]], axis=1))
start = time.clock()
print("py37:", isinstance([], collections.Iterable), isinstance({}, Mapping), time.clock() >= start)
# Libraries keep the NumPy installed: the names are the script's, not a patch of numpy.
print("numpy unpatched:", not hasattr(sys.modules["numpy"], "float"))
print("python unpatched:", not hasattr(sys.modules["time"], "clock"))


def model_fn(features, labels, mode, params=None, *args):
  return features


spec = getargspec(model_fn)
print("argspec:", spec.args, spec.varargs, spec.keywords, spec.defaults, inspect.ArgSpec is type(spec))
print("gcd:", fractions.gcd(12, 18), base64.decodestring(base64.encodestring(b"tf1")))
voc = ET.fromstring("<annotation><object><name>dog</name></object></annotation>")
print("cElementTree:", [o.find("name").text for o in voc.iter("object")])
