"""Built-in problems; importing this package registers them."""

from t2t_lite.problems import algorithmic, translate, translate_files  # noqa: F401
