"""The tiny model_dir that fault tests copy and damage (the `tiny_model` and `model_copy`
fixtures), and the trainer's flags that resume a copy of it."""

# One layer each side: what these tests check (records, checkpoints, resumes, faults) does not
# depend on depth, and each trainer or decoder they run traces ~40% less than at 2+2 layers.
OVERRIDES = ("num_encoder_layers=1,num_decoder_layers=1,d_model=32,d_ff=64,num_heads=4,"
             "batch_size=256,warmup_steps=10,learning_rate=0.5")


def train_tiny_model(model_dir, data_dir):
    """transformer_tiny at OVERRIDES trained on test_short_reverse for 4 updates, with
    checkpoints at steps 2 and 4."""
    from t2t_lite.config import TrainConfig
    from t2t_lite.runner import Runner

    runner = Runner.create_or_resume(model_dir, "test_short_reverse", "transformer_tiny",
                                     OVERRIDES, data_dir)
    runner.train(TrainConfig(train_steps=4, random_seed=3, eval_every=0, save_every=2,
                             eval_steps=1, eval_decode_examples=0))


def train_flags(model_dir, data_dir, steps, *flags):
    return [f"--model_dir={model_dir}", f"--data_dir={data_dir}", f"--train_steps={steps}",
            "--save_every=2", "--eval_every=0", "--eval_steps=1", "--eval_decode_examples=0",
            "--random_seed=3", *flags]
