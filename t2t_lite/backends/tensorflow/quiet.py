"""TensorFlow's import without its C++ start-up notices, and without what it imports for
features t2t_lite does not use.

TensorFlow prints notices (oneDNN, CUDA probing) on stderr before its log level applies. The
commands import it through here, once, with stderr pointed elsewhere meanwhile, unless the user
set TF_CPP_MIN_LOG_LEVEL (then its notices are what they asked for).

Where installed (as the jax and viz extras install them), `import tensorflow` also imports JAX
(for TFLite's JAX converter) and matplotlib.pyplot (for Keras's image-gallery plot): ~1 s of
every command's start on 2 cores. They are kept out while TensorFlow loads and import as usual
afterwards (the attention plots import matplotlib when they draw); only those two features of
TensorFlow and Keras then lack them in that process.
"""

import contextlib
import importlib.util
import os
import sys

NOT_NEEDED = ("jax", "matplotlib")


def import_tensorflow_quietly(if_installed=False):
    """Imports TensorFlow (a no-op once imported) and returns it; with `if_installed`, returns
    None where it is not installed (or is blocked, as the tests block it)."""
    if if_installed and sys.modules.get("tensorflow", False) is None:
        return None
    if if_installed and "tensorflow" not in sys.modules and not importlib.util.find_spec(
            "tensorflow"):
        return None
    if "tensorflow" in sys.modules:
        import tensorflow as tf

        return tf
    if "TF_CPP_MIN_LOG_LEVEL" in os.environ:
        with _kept_out(NOT_NEEDED):
            import tensorflow as tf
        return tf
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
    sys.stderr.flush()
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        with _kept_out(NOT_NEEDED):
            import tensorflow as tf

        tf.config.list_physical_devices()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)
    return tf


@contextlib.contextmanager
def _kept_out(names):
    """Inside, importing the modules `names` not yet imported fails with ImportError (which
    TensorFlow's and Keras's optional imports expect); after, they import as usual."""
    blocked = [name for name in names if name not in sys.modules]
    for name in blocked:
        sys.modules[name] = None
    try:
        yield
    finally:
        for name in blocked:
            if sys.modules.get(name, False) is None:
                del sys.modules[name]
