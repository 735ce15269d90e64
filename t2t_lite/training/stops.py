"""How a training run stops before its last step, for both trainers (TensorFlow's and JAX's)."""

from t2t_lite.utils.errors import UserError


class TrainingDiverged(UserError):
    """The loss became NaN or infinite."""


class Stopped(UserError):
    """SIGTERM or SIGINT (here, or to another worker) stopped training after a checkpoint."""

    def __init__(self, signal_name, step, saved):
        """saved: the checkpoint written before stopping (None: no checkpoint directory)."""
        where = (f"saved {saved}: run the same command to resume" if saved
                 else "nothing saved (no checkpoint directory)")
        super().__init__(f"stopped by {signal_name or 'a signal to another worker'} at step "
                         f"{step}; {where}")
