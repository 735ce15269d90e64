"""The paper's loss (label-smoothed cross-entropy) and the statistics of a batch, as sums so that
replicas and accumulated micro-batches combine exactly. keras.ops only: any backend."""

import math

from keras import ops

from t2t_lite.config import PAD_ID


def smoothed_cross_entropy(logits, labels, smoothing):
    """Per-position cross-entropy against the smoothed target distribution: 1 - smoothing on
    the label and smoothing / (V - 1) on every other class, as in tensor2tensor."""
    vocab_size = ops.shape(logits)[-1]
    log_probs = ops.log_softmax(logits, axis=-1)
    label_log_probs = ops.take_along_axis(log_probs, labels[..., None], axis=-1)[..., 0]
    other = smoothing / ops.cast(vocab_size - 1, "float32")
    return -((1.0 - smoothing - other) * label_log_probs + other * ops.sum(log_probs, axis=-1))


def batch_statistics(logits, features, labels, smoothing):
    """Sums over one batch, so that replicas and micro-batches combine exactly."""
    weights = ops.cast(labels != PAD_ID, "float32")
    predictions = ops.cast(ops.argmax(logits, axis=-1), labels.dtype)
    nll = smoothed_cross_entropy(logits, labels, 0.0)
    return {
        "loss": ops.sum(smoothed_cross_entropy(logits, labels, smoothing) * weights),
        "nll": ops.sum(nll * weights),
        "correct": ops.sum(ops.cast(predictions == labels, "float32") * weights),
        "tokens": ops.sum(weights),
        "target_slots": ops.cast(ops.size(labels), "float32"),
        "source_tokens": ops.sum(ops.cast(features["inputs"] != PAD_ID, "float32")),
        "source_slots": ops.cast(ops.size(features["inputs"]), "float32"),
    }


def summarize(sums):
    """Means from summed batch statistics."""
    tokens = max(float(sums["tokens"]), 1.0)
    return {
        "loss": float(sums["loss"]) / tokens,
        "perplexity": math.exp(min(float(sums["nll"]) / tokens, 50.0)),
        "accuracy": float(sums["correct"]) / tokens,
        "padding_fraction": 1.0 - (float(sums["tokens"]) + float(sums["source_tokens"]))
        / max(float(sums["target_slots"]) + float(sums["source_slots"]), 1.0),
    }
