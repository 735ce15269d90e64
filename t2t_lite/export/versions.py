"""Numbered versions of an export directory, the layout TensorFlow Serving watches, each written
under a temporary name and renamed so that a server never loads a half-written model."""

import os
import shutil
import time

from t2t_lite.utils.files import make_directory, temporary_directory


def new_version(export_dir, write):
    """Calls write(path) to write a new version of export_dir; returns the version's path.

    The version is the time in seconds (as tf.estimator did), and is written under a temporary
    name and renamed, so a server never loads a half-written model.
    """
    make_directory(export_dir, "export_dir")
    versions = [int(name) for name in os.listdir(export_dir) if name.isdigit()]
    version = max([int(time.time())] + [v + 1 for v in versions])
    path = os.path.join(export_dir, str(version))
    temporary = temporary_directory(export_dir, ".tmp-")
    try:
        write(os.path.join(temporary, "model"))
        os.replace(os.path.join(temporary, "model"), path)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
    return path
