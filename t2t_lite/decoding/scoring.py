"""Scoring given translations, without search: the log-probability the model gives each token of
a target (its EOS included) given the source, from one teacher-forced pass, as tensor2tensor's
--score_file and OpenNMT-tf's `score` do. For filtering noisy parallel data and rescoring n-best
lists. In keras.ops (it runs on JAX too); the CTranslate2 engine asks CTranslate2's score_batch
for the same numbers.

PAD keeps its share of the softmax, as in the search, so that the sum over a target's tokens is
the log-probability the search gives that output, and normalized as the search normalizes
(GNMT's penalty) it is the score the search reports for it.
"""

import math

from t2t_lite.config import PAD_ID

NORMALIZATIONS = ("none", "length", "gnmt")


def token_log_probs(model, inputs, targets):
    """inputs [B, S] and targets [B, T], each row EOS-terminated and PAD-padded -> float32 [B, T]:
    log P(targets[b, t] | inputs[b], targets[b, :t]), 0 at padding."""
    from keras import ops  # here: the decoder's flags and the CTranslate2 engine need no Keras

    logits = ops.cast(model({"inputs": inputs, "targets": targets}, training=False), "float32")
    log_probs = ops.log_softmax(logits, axis=-1)
    picked = ops.take_along_axis(log_probs, targets[:, :, None], axis=-1)[:, :, 0]
    return ops.where(targets != PAD_ID, picked, 0.0)


def gnmt_penalty(length, alpha):
    """GNMT's length penalty ((5 + length) / 6) ** alpha in plain Python, for engines without
    Keras (t2t_lite.decoding.search.length_penalty is its keras.ops twin, in the search)."""
    return math.pow((5 + length) / 6, alpha)


def target_score(log_probs, normalize="none", alpha=0.0):
    """The score of a target whose tokens (EOS included) have `log_probs`: their sum
    ("none"), their mean ("length"), or the sum divided by GNMT's length penalty
    ((5 + length) / 6) ** alpha ("gnmt"), the score beam search reports for its outputs."""
    total = float(sum(log_probs))
    if normalize == "length":
        return total / len(log_probs)
    if normalize == "gnmt":
        return total / gnmt_penalty(len(log_probs), alpha)
    return total
