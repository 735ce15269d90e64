"""Importing the scripts of docs/ and benchmarks/, which are not a package: each runs with its
own folder on sys.path (as MkDocs imports the hook and as `python benchmarks/X.py` runs), so
the modules beside it that it imports are found."""

import importlib
import sys


def import_beside(folder, name):
    """The module `name` of `folder`, imported with `folder` on sys.path while it loads."""
    sys.path.insert(0, str(folder))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(folder))
