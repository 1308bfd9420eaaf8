# coding=utf-8
"""TF1's MNIST softmax tutorial, as the TF 1.x tutorials and countless projects wrote it.

Kept as TF1 code on purpose: tests/test_legacy_mnist.py runs it unchanged with
`python -m tfest_kit.legacy mnist_softmax.py --data_dir=DIR [--source_url=URL]`: placeholders,
a tf.InteractiveSession, `mnist.train.next_batch`, the loss every 50 steps and the test
accuracy printed at the end.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import argparse
import sys

from tensorflow.examples.tutorials.mnist import input_data

import tensorflow as tf

FLAGS = None


def main(_):
  # Import data
  mnist = input_data.read_data_sets(FLAGS.data_dir, one_hot=True,
                                    source_url=FLAGS.source_url)
  print("train %d, validation %d, test %d" % (mnist.train.num_examples,
                                              mnist.validation.num_examples,
                                              mnist.test.num_examples))

  # Create the model
  x = tf.placeholder(tf.float32, [None, 784])
  W = tf.Variable(tf.zeros([784, 10]))
  b = tf.Variable(tf.zeros([10]))
  y = tf.matmul(x, W) + b

  # Define loss and optimizer
  y_ = tf.placeholder(tf.float32, [None, 10])
  cross_entropy = tf.reduce_mean(
      tf.nn.softmax_cross_entropy_with_logits(labels=y_, logits=y))
  train_step = tf.train.GradientDescentOptimizer(0.5).minimize(cross_entropy)

  sess = tf.InteractiveSession()
  tf.global_variables_initializer().run()
  # Train
  for i in range(FLAGS.steps):
    batch_xs, batch_ys = mnist.train.next_batch(100)
    _, loss = sess.run([train_step, cross_entropy],
                       feed_dict={x: batch_xs, y_: batch_ys})
    if i % 50 == 0:
      print("step %d, loss %g" % (i, loss))

  # Test trained model
  correct_prediction = tf.equal(tf.argmax(y, 1), tf.argmax(y_, 1))
  accuracy = tf.reduce_mean(tf.cast(correct_prediction, tf.float32))
  print("epochs %d, test accuracy %g" % (
      mnist.train.epochs_completed,
      sess.run(accuracy, feed_dict={x: mnist.test.images, y_: mnist.test.labels})))


if __name__ == '__main__':
  parser = argparse.ArgumentParser()
  parser.add_argument('--data_dir', type=str, default='/tmp/tensorflow/mnist/input_data',
                      help='Directory for storing input data')
  parser.add_argument('--source_url', type=str,
                      default='https://storage.googleapis.com/cvdf-datasets/mnist/')
  parser.add_argument('--steps', type=int, default=200)
  FLAGS, unparsed = parser.parse_known_args()
  tf.app.run(main=main, argv=[sys.argv[0]] + unparsed)
