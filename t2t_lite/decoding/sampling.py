"""Random sampling, the decoder's alternative to searching for the best output: each token is
drawn from the model's distribution, as back-translation wants (Edunov et al. 2018: sampled
synthetic sources teach more than beam-searched ones), like OpenNMT-tf's and CTranslate2's
`sampling_topk`, `sampling_topp` and `sampling_temperature`.

A token is drawn by inverting the cumulative distribution at one uniform number, so that the
randomness is an input to the search, made before it: in-graph code stays keras.ops (it runs on
JAX too) and needs no random state, and each input line has its own stream of uniforms, seeded
by (seed, line number, sample number), so that its samples do not depend on the batch it is in.
"""

import dataclasses
import math

import numpy as np

from t2t_lite.utils.errors import UserError

# The largest float32 below 1: a uniform rounded up to 1.0 would fall past the last token.
_BELOW_ONE = np.nextafter(np.float32(1), np.float32(0))
# The smallest temperature the float32 search divides by: below float32's smallest normal
# number a temperature is 0 (or a denormal that CPUs flush to 0), and every division is inf.
SMALLEST_TEMPERATURE = float(np.finfo(np.float32).tiny)


@dataclasses.dataclass(frozen=True)
class Sampling:
    """How each output token is drawn: from the model's distribution divided by `temperature`
    (towards 0: the most probable token; above 1: flatter), restricted to its `top_k` most
    probable tokens (0: all of them), then to its nucleus (Holtzman et al. 2020): the most
    probable tokens whose probabilities, renormalized after top-k, first reach `top_p` (1: all).
    `seed` makes the samples repeatable."""

    top_k: int = 0
    top_p: float = 1.0
    temperature: float = 1.0
    seed: int = 0

    def __post_init__(self):
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or self.top_k < 0:
            raise UserError(f"--sampling_topk must be 0 (the whole vocabulary) or positive, got "
                            f"{self.top_k}")
        if not 0 < self.top_p <= 1:
            raise UserError(f"--sampling_topp must be in (0, 1], got {self.top_p}")
        if not (SMALLEST_TEMPERATURE <= self.temperature < math.inf):
            raise UserError(f"--sampling_temperature must be at least {SMALLEST_TEMPERATURE:.3g}"
                            " (the smallest normal float32; towards 0, sampling is greedy "
                            f"search), got {self.temperature}")
        if not 0 <= self.seed < 2**32:
            raise UserError(f"--random_seed must be in [0, 2**32), got {self.seed}")

    def uniforms(self, line_numbers, samples, length):
        """float32 [len(line_numbers) * samples, length] in [0, 1): row i * samples + k is the
        stream of sample k of line line_numbers[i], one number per output position; a longer
        `length` extends each stream, never changes its start."""
        rows = [np.random.Generator(np.random.PCG64([self.seed, line, sample])).random(length)
                for line in line_numbers for sample in range(samples)]
        return np.minimum(np.asarray(rows, "float32").reshape(-1, length), _BELOW_ONE)


def sample_tokens(log_probs, uniforms, sampling, impossible):
    """log_probs [rows, vocab] (a token the search forbids at `impossible` or below) and
    uniforms [rows] in [0, 1) -> int32 [rows]: the token each uniform picks from the
    distribution `sampling` makes of log_probs. keras.ops. `sampling` has top_k, top_p and
    temperature: Python numbers (a Sampling; a filter that keeps every token is left out of the
    trace) or scalar tensors (the exported model's `sample` signature takes them as inputs)."""
    from keras import ops

    possible = log_probs > impossible / 2
    # Divided once the best token is at 0, so that a tiny temperature sends the others to -inf
    # (the best token's probability to 1: greedy), never the best one too (0/0 or -inf - -inf).
    best = ops.max(ops.where(possible, log_probs, -math.inf), axis=-1, keepdims=True)
    scaled = ops.where(possible, (log_probs - best) / sampling.temperature, -math.inf)
    probs = ops.where(possible, ops.softmax(scaled, axis=-1), 0.0)
    top_k, top_p = sampling.top_k, sampling.top_p
    vocab = ops.shape(log_probs)[-1]
    if isinstance(top_k, int) and isinstance(top_p, (int, float)):
        if 0 < top_k < vocab:
            kth = ops.top_k(probs, top_k)[0][:, -1:]
            probs = ops.where(probs >= kth, probs, 0.0)
        if top_p < 1:
            probs = _nucleus(probs, top_p)
    else:
        rank = ops.zeros_like(probs[:, :1], "int32") + ops.clip(top_k - 1, 0, vocab - 1)
        kth = ops.take_along_axis(_descending(probs), rank, axis=1)
        probs = ops.where((top_k > 0) & (probs < kth), 0.0, probs)
        probs = ops.where(top_p < 1, _nucleus(probs, top_p), probs)
    cumulative = ops.cumsum(probs, axis=-1)
    beyond = cumulative > uniforms[:, None] * cumulative[:, -1:]
    # The first token whose cumulative probability passes the uniform; if rounding put the
    # uniform past the total, the last token of non-zero probability.
    nonzero = ops.cast(probs > 0, "int32")
    last = vocab - 1 - ops.argmax(ops.flip(nonzero, axis=-1), axis=-1)
    first = ops.argmax(ops.cast(beyond, "int32"), axis=-1)
    return ops.cast(ops.where(ops.any(beyond, axis=-1), first, last), "int32")


def _descending(probs):
    from keras import ops

    return ops.flip(ops.sort(probs, axis=-1), axis=-1)


def _nucleus(probs, top_p):
    """probs [rows, vocab] with the tokens outside each row's nucleus of mass top_p zeroed."""
    from keras import ops

    descending = _descending(probs)
    cumulative = ops.cumsum(descending, axis=-1)
    # A token is in the nucleus if the more probable ones hold less than top_p of the mass.
    in_nucleus = cumulative - descending < top_p * cumulative[:, -1:]
    smallest = ops.min(ops.where(in_nucleus, descending, math.inf), axis=-1, keepdims=True)
    return ops.where(probs >= smallest, probs, 0.0)
