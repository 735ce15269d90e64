"""Built-in hparams sets; importing this package registers them."""

from t2t_lite.hparams import transformer  # noqa: F401
