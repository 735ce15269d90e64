"""File writes that an interruption cannot leave half-done."""

import os
import tempfile


def write_bytes_atomically(path, data):
    """Writes to a temporary file beside `path`, then renames it over `path`."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".tmp-")
    try:
        with os.fdopen(handle, "wb") as f:
            f.write(data)
        os.replace(temporary, path)
    except BaseException:
        os.remove(temporary)
        raise


def write_text_atomically(path, text):
    write_bytes_atomically(path, text.encode("utf-8"))
