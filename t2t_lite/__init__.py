"""t2t_lite: sequence-to-sequence Transformers (Vaswani et al. 2017) on Keras 3 and TensorFlow."""

__version__ = "0.1.0"
