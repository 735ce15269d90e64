"""TensorFlow's import without its C++ start-up notices.

TensorFlow prints notices (oneDNN, CUDA probing) on stderr before its log level applies. The
commands import it through here, once, with stderr pointed elsewhere meanwhile, unless the user
set TF_CPP_MIN_LOG_LEVEL (then its notices are what they asked for).
"""

import importlib.util
import os
import sys


def import_tensorflow_quietly(if_installed=False):
    """Imports TensorFlow (a no-op once imported) and returns it; with `if_installed`, returns
    None where it is not installed (or is blocked, as the tests block it)."""
    if if_installed and sys.modules.get("tensorflow", False) is None:
        return None
    if if_installed and "tensorflow" not in sys.modules and not importlib.util.find_spec(
            "tensorflow"):
        return None
    if "tensorflow" in sys.modules or "TF_CPP_MIN_LOG_LEVEL" in os.environ:
        import tensorflow as tf

        return tf
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
    sys.stderr.flush()
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        import tensorflow as tf

        tf.config.list_physical_devices()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)
    return tf
