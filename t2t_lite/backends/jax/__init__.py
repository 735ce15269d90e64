"""Keras on JAX: the only place that imports JAX."""
