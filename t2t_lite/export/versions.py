"""Numbered versions of an export directory, the layout TensorFlow Serving watches, each written
under a temporary name and renamed so that a server never loads a half-written model."""

import logging
import os
import time

from t2t_lite.utils.files import (
    locked_temporary_directory,
    make_directory,
    remove_stale_temporaries,
    write_refusals_named,
)
from t2t_lite.utils.progress import duration

logger = logging.getLogger("t2t_lite")
TEMPORARY_PREFIX = ".tmp-"


def new_version(export_dir, write):
    """Calls write(path) to write a new version of export_dir; returns the version's path.

    The version is the time in seconds (as tf.estimator did), and is written under a temporary
    name (.tmp-XXXX) and renamed, so a server never loads a half-written model. The temporary
    directories of exports that were killed are removed first, and only those: see
    t2t_lite.utils.files.remove_stale_temporaries (one of a running export is kept).
    """
    make_directory(export_dir, "export_dir")
    for path in remove_stale_temporaries(export_dir, TEMPORARY_PREFIX):
        logger.info("removed %s, left by an export that was killed", path)
    versions = [int(name) for name in os.listdir(export_dir) if name.isdigit()]
    version = max([int(time.time())] + [v + 1 for v in versions])
    path = os.path.join(export_dir, str(version))
    start = time.perf_counter()
    # Tracing the signatures and writing a big model take minutes: say what is going on.
    logger.info("writing version %d of %s", version, export_dir)
    with locked_temporary_directory(export_dir, TEMPORARY_PREFIX) as temporary:
        with write_refusals_named("export", export_dir):  # e.g. TensorFlow's full disk
            write(os.path.join(temporary, "model"))
        os.replace(os.path.join(temporary, "model"), path)
    logger.info("wrote %s in %s", path, duration(time.perf_counter() - start))
    return path
