"""Console scripts: each module parses flags, calls the library and prints; what they share is
console.py's."""

from t2t_lite.cli.console import ArgumentParser, import_usr_dir, run

__all__ = ["ArgumentParser", "import_usr_dir", "run"]
