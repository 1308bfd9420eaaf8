"""Benchmark cases; each module defines ``CASE`` and ``GOALS`` and imports TensorFlow lazily."""
