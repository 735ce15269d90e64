"""Shared test setup: two logical CPU devices (for MirroredStrategy) and small trained models."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

# Must run before TensorFlow initializes its devices, i.e. before any test touches a tensor.
_cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(_cpu, [tf.config.LogicalDeviceConfiguration()] * 2)


@pytest.fixture(autouse=True)
def _reset_keras_seed():
    import keras

    keras.utils.set_random_seed(1234)
