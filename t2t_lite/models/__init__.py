"""The Transformer as Keras layers, on keras / keras.ops only (any Keras backend)."""
