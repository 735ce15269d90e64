"""Built-in problems; importing this package registers them."""

from t2t_lite.problems import algorithmic  # noqa: F401
