"""Slow, obviously correct decoders to check the fast ones against (tests and benchmarks only).

They score with the full teacher-forced forward pass, never with the key/value cache, and search in
plain Python over explicit lists of hypotheses.
"""

import itertools

import numpy as np
from keras import ops

from t2t_lite.config import EOS_ID, PAD_ID


class UncachedDecoder:
    """Stands in for the model in the searches of t2t_lite.decoding.search, but recomputes the whole
    decoder over every token so far at each step instead of using the key/value cache."""

    def __init__(self, model):
        self.model = model

    def encode(self, inputs):
        return self.model.encode(inputs)

    def init_cache(self, memory, memory_mask, max_length):
        tokens = ops.zeros((ops.shape(memory)[0], max_length), "int32")
        return {"memory": memory, "memory_mask": memory_mask, "tokens": tokens}

    def decode_step(self, ids, step, cache):
        # decode() predicts targets[t] from targets[:t]: the token chosen at step - 1 goes there.
        tokens = ops.slice_update(cache["tokens"], (0, ops.maximum(step - 1, 0)), ids[:, None])
        logits = self.model.decode(tokens, cache["memory"], cache["memory_mask"])
        return ops.take(logits, step, axis=1), {**cache, "tokens": tokens}


def _log_softmax(logits):
    logits = np.array(logits, "float64")
    return logits - np.logaddexp.reduce(logits, axis=-1, keepdims=True)


def next_log_probs(model, inputs, prefixes):
    """Log-probabilities [len(prefixes), vocab] of the token after each prefix of one example."""
    length = max(len(p) for p in prefixes) + 1
    targets = np.zeros((len(prefixes), length), "int32")
    for row, prefix in enumerate(prefixes):
        targets[row, : len(prefix)] = prefix
    logits = model({"inputs": np.repeat(inputs[None], len(prefixes), 0), "targets": targets})
    positions = [len(p) for p in prefixes]
    log_probs = _log_softmax(np.asarray(logits)[np.arange(len(prefixes)), positions])
    log_probs[:, PAD_ID] = -np.inf  # never generated
    return log_probs


def penalty(length, alpha):
    return ((5.0 + length) / 6.0) ** alpha


def sequence_scores(model, inputs, sequences, alpha):
    """Length-penalized log-probability of each sequence (a tuple of ids) for one example."""
    length = max(len(s) for s in sequences)
    targets = np.zeros((len(sequences), length), "int32")
    for row, sequence in enumerate(sequences):
        targets[row, : len(sequence)] = sequence
    log_probs = _log_softmax(
        model({"inputs": np.repeat(inputs[None], len(sequences), 0), "targets": targets}))
    token_log_probs = np.take_along_axis(log_probs, targets[..., None], -1)[..., 0]
    return [token_log_probs[row, : len(s)].sum() / penalty(len(s), alpha)
            for row, s in enumerate(sequences)]


def limit(inputs, extra_length):
    return int((inputs != PAD_ID).sum()) + extra_length


def exhaustive_search(model, inputs, alpha, extra_length, top, min_length=0):
    """The `top` best (sequence, score) of one example among every EOS-terminated sequence up to
    its length limit with at least min_length tokens before EOS, and every unterminated sequence
    of exactly that length."""
    max_length = limit(inputs, extra_length)
    symbols = range(EOS_ID + 1, model.vocab_size)
    sequences = [prefix + (EOS_ID,) for n in range(min_length, max_length)
                 for prefix in itertools.product(symbols, repeat=n)]
    sequences += list(itertools.product(symbols, repeat=max_length))
    scores = sequence_scores(model, inputs, sequences, alpha)
    return sorted(zip(sequences, scores), key=lambda pair: -pair[1])[:top]


def reference_beam_search(model, inputs, beam_size, alpha, extra_length, min_length=0):
    """tensor2tensor's alive/finished beam search for one example, written the slow plain way
    and without early stopping; returns its beam_size best (sequence, score)."""
    max_length = limit(inputs, extra_length)
    alive, finished = [((), 0.0)], []
    for step in range(max_length):
        log_probs = next_log_probs(model, inputs, [sequence for sequence, _ in alive])
        continuations = []
        for (sequence, log_prob), row in zip(alive, log_probs):
            if step >= min_length:
                finished.append((sequence + (EOS_ID,),
                                 (log_prob + row[EOS_ID]) / penalty(step + 1, alpha)))
            continuations += [(sequence + (token,), log_prob + row[token])
                              for token in range(EOS_ID + 1, len(row))]
        alive = sorted(continuations, key=lambda pair: -pair[1])[:beam_size]
        if step + 1 == max_length:
            finished += [(s, log_prob / penalty(max_length, alpha)) for s, log_prob in alive]
        finished = sorted(finished, key=lambda pair: -pair[1])[:beam_size]
    return finished


def reference_greedy_search(model, inputs, alpha, extra_length, min_length=0, blank=()):
    """(sequence, score) of one example: the most probable next token until EOS or the limit,
    EOS not before min_length tokens nor right after a token in `blank`, nor one of those at
    the limit's last position."""
    sequence, log_prob = (), 0.0
    while len(sequence) < limit(inputs, extra_length) and EOS_ID not in sequence:
        row = next_log_probs(model, inputs, [sequence])[0]
        if len(sequence) < min_length or sequence[-1:] and sequence[-1] in blank:
            row[EOS_ID] = -np.inf
        if len(sequence) + 1 == limit(inputs, extra_length):
            row[list(blank)] = -np.inf
        sequence += (int(row.argmax()),)
        log_prob += row.max()
    return sequence, log_prob / penalty(len(sequence), alpha)


def as_sequence(ids):
    """Output ids -> the hypothesis as a tuple: up to and including EOS, without padding."""
    ids = [int(i) for i in ids]
    if EOS_ID in ids:
        return tuple(ids[: ids.index(EOS_ID) + 1])
    return tuple(i for i in ids if i != PAD_ID)
