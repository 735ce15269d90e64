"""Training: schedule, loss, the training loop, distribution, checkpoints."""
