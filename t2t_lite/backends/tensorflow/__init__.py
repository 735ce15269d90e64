"""Keras on TensorFlow: the only place, with the SavedModel export, that imports TensorFlow."""
