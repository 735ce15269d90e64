"""The paper's optimizer: Adam (0.9, 0.98, 1e-9) on the warmup / inverse-square-root schedule,
loss-scaled in float16. keras only, so any backend's training loop uses it.

The schedule's `rate_factor` multiplies it: a time budget's cool-down (training/budget.py),
which depends on the clock, so the trainers feed it to each update as a value of the update (a
variable on TensorFlow, an argument of the compiled update on JAX) rather than a Python number
that tracing would freeze. None, as without a budget, is 1. So does a budget's sized weight
decay (training/regularization.py), through `decaying`.
"""

import contextlib

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="t2t_lite")
class TransformerSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """lrate = learning_rate * d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5).

    Keras passes the number of updates already applied; the paper's step counts from 1.
    """

    def __init__(self, d_model, warmup_steps, learning_rate=1.0):
        self.d_model = d_model
        self.warmup_steps = warmup_steps
        self.learning_rate = learning_rate
        self.rate_factor = None

    def __call__(self, iterations):
        step = ops.cast(iterations, "float32") + 1.0
        decay = ops.minimum(ops.rsqrt(step), step * self.warmup_steps**-1.5)
        rate = self.learning_rate * self.d_model**-0.5 * decay
        return rate if self.rate_factor is None else rate * ops.cast(self.rate_factor, "float32")

    def get_config(self):
        return {"d_model": self.d_model, "warmup_steps": self.warmup_steps,
                "learning_rate": self.learning_rate}


def learning_rate_schedule(hparams):
    return TransformerSchedule(hparams.d_model, hparams.warmup_steps, hparams.schedule_multiplier)


# Variables weight decay leaves alone (by their names in keras: Dense's and LayerNormalization's
# `bias`, LayerNormalization's `gamma` and `beta`), as AdamW's users (BERT, fairseq) do: shrinking
# an offset or a scale toward 0 does not make the model simpler.
NOT_DECAYED = ("bias", "gamma", "beta")


def create_optimizer(hparams, schedule=None):
    """Adam with the paper's betas and epsilon on `schedule` (the paper's, learning_rate_schedule,
    by default), with hparam weight_decay's decoupled decay (keras applies it as AdamW does, the
    variable times rate * weight_decay subtracted before Adam's step); loss-scaled in float16."""
    optimizer = keras.optimizers.Adam(
        learning_rate=schedule or learning_rate_schedule(hparams),
        beta_1=hparams.adam_beta1, beta_2=hparams.adam_beta2, epsilon=hparams.adam_epsilon,
        weight_decay=hparams.weight_decay or None)
    # Also without weight_decay, for `decaying` (keras takes exclusions only before building).
    # The name's last part: keras's own variables are named `gamma`, the tf.Variables the
    # TensorFlow backend decays under a distribution strategy `.../gamma:0`.
    optimizer.exclude_from_weight_decay(
        var_names=[rf"(?:^|/)(?:{'|'.join(NOT_DECAYED)})(?::\d+)?$"])
    if hparams.precision == "mixed_float16":
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer


@contextlib.contextmanager
def decaying(optimizer, weight_decay):
    """Has the updates `optimizer` traces meanwhile decay the weights by `weight_decay`, a
    variable or a traced value (a time budget's sized weight decay); None: by hparam
    weight_decay, as built. keras reads its optimizer's weight_decay while tracing, so a number
    would be frozen into the compiled update."""
    adam = getattr(optimizer, "inner_optimizer", optimizer)  # a LossScaleOptimizer's
    built = adam.weight_decay
    if weight_decay is not None:
        adam.weight_decay = weight_decay
    try:
        yield
    finally:
        adam.weight_decay = built
