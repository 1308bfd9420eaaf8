"""The ``tf.contrib`` packages the legacy runner serves, one module per package.

Each module holds what that package needs beyond the library that carries it on (TensorFlow's
own ops, ``tf_slim``, tfest_kit); ``tfest_kit.legacy._contrib`` assembles them into the
``tf.contrib`` stand-in.  They are imported only when a script first reaches the package.
"""

__all__: list = []
