"""Built-in problems; importing this package registers them."""

from t2t_lite.problems import algorithmic, parsing, translate, translate_files  # noqa: F401
