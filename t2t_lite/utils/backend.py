"""Which Keras backend this process runs, found as Keras finds it (KERAS_BACKEND, else the
"backend" of $KERAS_HOME/keras.json or ~/.keras/keras.json, else tensorflow) without importing
Keras, which on TensorFlow imports TensorFlow (seconds): the commands decide before that whether
they need TensorFlow at all."""

import json
import os
import sys


def keras_backend():
    if "keras" in sys.modules:
        import keras

        return keras.config.backend()
    if os.environ.get("KERAS_BACKEND"):
        return os.environ["KERAS_BACKEND"]
    home = os.environ.get("KERAS_HOME") or os.path.join(os.path.expanduser("~"), ".keras")
    try:
        with open(os.path.join(home, "keras.json"), encoding="utf-8") as f:
            return json.load(f).get("backend", "tensorflow")
    except (OSError, ValueError, AttributeError):
        return "tensorflow"
