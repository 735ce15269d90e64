"""Autoregressive search over the Transformer's cached decoder, on keras.ops.

Both searches encode once and run one cached decoder step per output position inside one
`while_loop`, so they trace into a tf.function, compile with XLA and export in a SavedModel.
A hypothesis ends at EOS or at its example's length limit, input length + extra_length (the
input counted with its EOS), so that an example's result does not depend on the batch it is in.
PAD is never generated (it is not a token but the decoder's start symbol), though it keeps its
share of the softmax: scores are the model's own probabilities.

Greedy search also draws samples (t2t_lite.decoding.sampling) instead of taking the most
probable token.

No hypothesis ends before `min_length` tokens (EOS gets probability 0 until then, as fairseq's
and CTranslate2's minimum length does; 1 keeps an output from being empty), unless its limit
comes first. With `blank`, the ids of tokens that show no text on their own (SentencePiece's
lone "▁"; t2t_lite.decoding.visible_ending says why), no hypothesis ends with one: EOS never
follows it and none is chosen at an example's last position. Both rules are search rules, not
constraints, as they need only EOS's column and the previous token, and combine with any
constraint.

Scores are as in tensor2tensor: the log-probability of the hypothesis (EOS included) divided by
GNMT's length penalty ((5 + length) / 6) ** alpha (Wu et al. 2016).

A problem may constrain the search (parsing: only well-formed trees) with an object of three
methods on keras.ops tensors, whose state is a tuple of arrays with one row per hypothesis:
  start(inputs, max_length) -> state;  allowed(state, step, limits) -> bool [rows, vocab];
  update(state, tokens) -> state.
Tokens it does not allow get probability 0 at that step, so beam search ranks only allowed
outputs; their scores stay the model's log-probabilities, not renormalized.

A user may ask for target phrases in the outputs (a glossary's terms): constrained_beam_search,
by dynamic beam allocation (t2t_lite.decoding.lexical), with or without a problem's constraint.
"""

import dataclasses
import functools
from typing import Any, NamedTuple

import keras
from keras import ops

from t2t_lite.config import EOS_ID, PAD_ID
from t2t_lite.decoding import lexical
from t2t_lite.decoding.sampling import sample_tokens

_INVALID = -1e9  # log-probability of an impossible token or an empty beam slot


@dataclasses.dataclass(frozen=True)
class SearchSettings:
    """How a search runs, as one value, so that no caller spells (and orders) them one by one:
    the beam's width (1: greedy), GNMT's alpha, the output limit input length + extra_length,
    the fewest tokens before EOS and, for greedy search only, how tokens are drawn (`sampling`:
    a t2t_lite.decoding.sampling.Sampling, or scalar tensors of its top_k, top_p and
    temperature; None takes the most probable token). Python values are static: each distinct
    settings traces its own graph."""

    beam_size: int
    alpha: float
    extra_length: int
    min_length: int = 0
    sampling: Any = None

    @classmethod
    def of(cls, hparams, sampling=None):
        """The settings of the decoding hparams (beam_size, alpha, extra_length, min_length),
        drawing by `sampling` if given."""
        return cls(hparams.beam_size, hparams.alpha, hparams.extra_length, hparams.min_length,
                   sampling)

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)


def length_penalty(length, alpha):
    """((5 + length) / 6) ** alpha; alpha = 0 ranks hypotheses by log-probability alone."""
    return ops.power((5.0 + ops.cast(length, "float32")) / 6.0, alpha)


def search(model, inputs, settings, constraint=None, blank=(), uniforms=None):
    """inputs [B, S] (EOS-terminated, PAD-padded) -> (ids [B, S + extra_length], scores [B]):
    the best hypothesis of each example, by beam search, or greedy search when beam_size is 1
    (as tensor2tensor does: a one-wide beam that sets finished hypotheses aside is not greedy);
    with settings.sampling, a sample of each, drawn by `uniforms` (see greedy_search)."""
    if settings.beam_size == 1 or settings.sampling is not None:
        return greedy_search(model, inputs, settings, constraint, blank, uniforms)
    ids, scores = beam_search(model, inputs, settings, constraint, blank)
    return ids[:, 0], scores[:, 0]


def _start(model, inputs, extra_length):
    """Encodes the inputs; returns the per-example length limits [B], the static output length
    and the decoder cache for that length."""
    limits = ops.sum(ops.cast(inputs != PAD_ID, "int32"), axis=1) + extra_length
    max_length = ops.shape(inputs)[1] + extra_length
    memory, memory_mask = model.encode(inputs)
    return limits, max_length, model.init_cache(memory, memory_mask, max_length)


def _top_k(x, k, chunk=128):
    """ops.top_k over the last axis of x [rows, width], exactly, in two cheap stages: the k
    chunks with the largest maxima hold the k largest values. TensorFlow's CPU top_k over a
    32k vocabulary is ~5x slower than this (and XLA's sorts)."""
    rows, width = ops.shape(x)
    if width < 4 * k * chunk:
        return ops.top_k(x, k)
    padding = -width % chunk
    chunks = ops.reshape(ops.pad(x, ((0, 0), (0, padding)), constant_values=_INVALID),
                         (-1, chunk))
    num_chunks = (width + padding) // chunk
    _, best_chunks = ops.top_k(ops.reshape(ops.max(chunks, axis=-1), (rows, num_chunks)), k)
    first_chunk = ops.arange(rows, dtype="int32")[:, None] * num_chunks
    candidates = ops.take(chunks, ops.reshape(first_chunk + best_chunks, (-1,)), axis=0)
    values, indices = ops.top_k(ops.reshape(candidates, (rows, k * chunk)), k)
    first_best = ops.arange(rows, dtype="int32")[:, None] * k
    chunk_of = ops.take(ops.reshape(best_chunks, (-1,)), first_best + indices // chunk, axis=0)
    return values, chunk_of * chunk + indices % chunk


def _reorder(before, after, rows):
    """Gathers `rows` of each cache entry that the decoder step changed; the entries it never
    changes are still identical across an example's beams, as tiled."""
    return keras.tree.map_structure(
        lambda old, new: new if new is old else ops.take(new, rows, axis=0), before, after)


def _is_blank(tokens, blank):
    """bool, the shape of tokens: whether each is one of the ids in `blank` (a few, static)."""
    return ops.any(ops.expand_dims(tokens, -1) == ops.convert_to_tensor(blank, "int32"), axis=-1)


def _constrain(constraint, log_probs, state, step, limits):
    """log_probs [rows, vocab] with the tokens the constraint forbids made impossible."""
    if constraint is None:
        return log_probs
    return ops.where(constraint.allowed(state, step, limits), log_probs, _INVALID)


class _GreedyState(NamedTuple):
    """What greedy search carries from one step to the next, per example."""

    step: Any  # the output position being decided
    previous: Any  # [batch] the token at step - 1 (PAD, the start symbol, at step 0)
    outputs: Any  # [batch, max_length] the tokens so far, PAD after the end
    log_probs: Any  # [batch] their summed log-probabilities
    lengths: Any  # [batch] their number, EOS included
    finished: Any  # [batch] ended at EOS or at the example's limit
    cache: Any  # the decoder's keys and values (Transformer.init_cache)
    constraint_state: Any  # the search constraint's state, () without one


class _BeamState(NamedTuple):
    """What beam search carries from one step to the next: beam_size hypotheses per example,
    each set ranked best first."""

    step: Any
    previous: Any  # [batch * beam] the last token of each alive hypothesis
    alive: Any  # [batch, beam, max_length] hypotheses still growing
    alive_log_probs: Any  # [batch, beam] their log-probabilities (_INVALID: an empty slot)
    finished: Any  # [batch, beam, max_length] the best ended hypotheses so far
    finished_scores: Any  # [batch, beam] their length-penalized scores
    cache: Any  # the decoder's, one row per alive hypothesis
    constraint_state: Any
    lexical: Any  # the alive hypotheses' lexical.LexicalState, () without phrases
    finished_met: Any  # [batch, beam, C] which phrases each finished one meets, () without


def greedy_search(model, inputs, settings, constraint=None, blank=(), uniforms=None):
    """inputs [B, S] -> (ids [B, S + extra_length], scores [B]): the most probable token at each
    step, or with settings.sampling the token that uniforms[:, step] draws (uniforms
    [B, S + extra_length] in [0, 1)); each row EOS-terminated unless it reached its limit, then
    PAD-padded. Scores are the model's own log-probabilities of the tokens, whatever
    distribution they were drawn from. settings.beam_size is not used."""
    alpha, extra_length, min_length = settings.alpha, settings.extra_length, settings.min_length
    sampling = settings.sampling
    batch = ops.shape(inputs)[0]
    limits, max_length, cache = _start(model, inputs, extra_length)
    start = _GreedyState(
        step=0, previous=ops.full((batch,), PAD_ID, "int32"),
        outputs=ops.zeros((batch, max_length), "int32"), log_probs=ops.zeros((batch,), "float32"),
        lengths=ops.zeros((batch,), "int32"), finished=limits <= 0, cache=cache,
        constraint_state=constraint.start(inputs, max_length) if constraint else ())

    def not_done(state):
        return ops.logical_and(state.step < max_length, ops.logical_not(ops.all(state.finished)))

    def body(state):
        step, finished = state.step, state.finished
        logits, cache = model.decode_step(state.previous, step, state.cache)
        ids = ops.arange(ops.shape(logits)[-1])
        never = (ids == PAD_ID) | ((ids == EOS_ID) & (step < min_length))
        if blank:  # [batch, vocab]: no EOS right after a blank token, none at the last position
            never = never | (((ids == EOS_ID) & _is_blank(state.previous, blank)[:, None])
                             | (_is_blank(ids, blank) & (step + 1 >= limits)[:, None]))
        step_log_probs = ops.where(never, _INVALID, ops.log_softmax(logits, axis=-1))
        step_log_probs = _constrain(constraint, step_log_probs, state.constraint_state, step,
                                    limits)
        if sampling is None:
            best = ops.cast(ops.argmax(step_log_probs, axis=-1), "int32")
        else:
            best = sample_tokens(step_log_probs, ops.take(uniforms, step, axis=1), sampling,
                                 _INVALID)
        best_log_prob = ops.take_along_axis(step_log_probs, best[:, None], axis=1)[:, 0]
        next_ids = ops.where(finished, PAD_ID, best)
        return (_GreedyState(
            step=step + 1, previous=next_ids,
            outputs=ops.slice_update(state.outputs, (0, step), next_ids[:, None]),
            log_probs=state.log_probs + ops.where(finished, 0.0, best_log_prob),
            lengths=state.lengths + ops.cast(ops.logical_not(finished), "int32"),
            finished=finished | (next_ids == EOS_ID) | (step + 1 >= limits), cache=cache,
            constraint_state=(constraint.update(state.constraint_state, next_ids) if constraint
                              else ())),)

    (end,) = ops.while_loop(not_done, body, (start,))
    return end.outputs, end.log_probs / length_penalty(ops.maximum(end.lengths, 1), alpha)


def beam_search(model, inputs, settings, constraint=None, blank=()):
    """inputs [B, S] -> (ids [B, beam_size, S + extra_length], scores [B, beam_size]): the
    beam_size best finished hypotheses of each example, best first (tensor2tensor's algorithm),
    by `settings` (a SearchSettings without sampling: a beam does not draw).

    Two sets per example: `alive` hypotheses, extended at every step by their beam_size best
    non-EOS continuations (all beams together), and `finished` ones, the best beam_size among
    every EOS continuation seen so far; a finished hypothesis is frozen. At an example's length
    limit its alive hypotheses finish as they are. An example stops when its worst finished
    score beats the best score an alive hypothesis could still reach (its log-probability only
    falls, and the length penalty is at most that of the limit), so early stopping never
    changes the result.
    """
    ids, scores, _ = _beam_search(model, inputs, settings, constraint, blank)
    return ids, scores


def constrained_beam_search(model, inputs, phrases, settings, constraint=None, blank=()):
    """beam_search whose outputs contain `phrases` int32 [B, C, L] (each example's target
    phrases, PAD-padded; t2t_lite.decoding.lexical), by dynamic beam allocation: EOS only once
    a hypothesis has met them all, so that only an output cut at its length limit may fail
    them. -> (ids, scores, met bool [B, beam_size, C]), the outputs meeting all their phrases
    ranked first, then by score. Beam size 1 works too (greedy, but for the constraints)."""
    return _beam_search(model, inputs, settings, constraint, blank, phrases)


def _candidates(log_probs, per_beam, blank, last_step):
    """(tokens, log-probs) [rows, per_beam]: each row's best tokens other than EOS, PAD (and a
    blank token at the last position), the others' log-probability made _INVALID."""
    top_log_probs, top_tokens = _top_k(log_probs, per_beam)
    special = (top_tokens == EOS_ID) | (top_tokens == PAD_ID)
    if blank:
        special = special | (_is_blank(top_tokens, blank) & last_step[:, None])
    return top_tokens, ops.where(special, _INVALID, top_log_probs)


def _beam_search(model, inputs, settings, constraint, blank, phrases=None):
    """beam_search, or with `phrases` constrained_beam_search: one loop, so that the two
    cannot drift apart (without phrases, its outputs are beam_search's bit for bit)."""
    if settings.sampling is not None:
        raise ValueError("beam search does not sample: use greedy_search")
    beam_size, alpha, extra_length = settings.beam_size, settings.alpha, settings.extra_length
    min_length = settings.min_length
    batch = ops.shape(inputs)[0]
    limits, max_length, cache = _start(model, inputs, extra_length)
    beam_limits = ops.repeat(limits, beam_size, axis=0)
    empty = ops.zeros((batch, beam_size, max_length), "int32")
    batch_offsets = ops.arange(batch, dtype="int32")[:, None] * beam_size
    tiled = functools.partial(keras.tree.map_structure,
                              lambda x: ops.repeat(x, beam_size, axis=0))
    start = _BeamState(
        step=0, previous=ops.full((batch * beam_size,), PAD_ID, "int32"), alive=empty,
        # One live beam per example at first, so the first step does not pick beam_size
        # copies.
        alive_log_probs=ops.tile(
            ops.convert_to_tensor([[0.0] + [_INVALID] * (beam_size - 1)]), (batch, 1)),
        finished=empty, finished_scores=ops.full((batch, beam_size), _INVALID),
        # Every cache entry is batch-major: beams of example b are rows b * beam_size + k.
        cache=tiled(cache),
        constraint_state=tiled(constraint.start(inputs, max_length) if constraint else ()),
        lexical=tiled(lexical.start(phrases)) if phrases is not None else (),
        finished_met=(ops.ones((batch, beam_size, ops.shape(phrases)[1]), "bool")
                      if phrases is not None else ()))
    # The most constraint tokens an example has, for the banks of dynamic beam allocation.
    most = (ops.max(ops.sum(lexical.lengths_of(phrases), axis=1)) if phrases is not None
            else 0)

    def not_done(state):
        best_possible = ops.max(state.alive_log_probs, axis=1) / length_penalty(limits, alpha)
        example_done = (state.step >= limits) | (state.finished_scores[:, -1] > best_possible)
        return ops.logical_and(state.step < max_length,
                               ops.logical_not(ops.all(example_done)))

    def body(state):
        step, alive, alive_log_probs = state.step, state.alive, state.alive_log_probs
        logits, new_cache = model.decode_step(state.previous, step, state.cache)
        log_probs = _constrain(constraint, ops.log_softmax(logits, axis=-1),
                               state.constraint_state, step, beam_limits)  # [batch * beam, V]
        penalty = length_penalty(step + 1, alpha)
        alive_valid = alive_log_probs > _INVALID / 2
        last_step = (step + 1 >= limits)[:, None]

        # Each alive hypothesis + EOS.
        eos_ids = ops.slice_update(alive, (0, 0, step), ops.full((batch, beam_size, 1), EOS_ID,
                                                                 "int32"))
        eos_log_probs = alive_log_probs + ops.reshape(ops.take(log_probs, EOS_ID, axis=1),
                                                      (batch, beam_size))
        may_end = step >= min_length
        if blank:  # no EOS right after a blank token
            may_end = may_end & ops.logical_not(
                ops.reshape(_is_blank(state.previous, blank), (batch, beam_size)))
        if phrases is not None:  # nor before every phrase is met
            may_end = may_end & ops.reshape(lexical.all_met(state.lexical), (batch, beam_size))
        eos_scores = ops.where(alive_valid & (eos_log_probs > _INVALID / 2) & may_end,
                               eos_log_probs / penalty, _INVALID)

        # The beam_size best continuations other than EOS, PAD (and a blank token at the last
        # position) of all beams together are among each beam's beam_size + 2 + len(blank)
        # best tokens; with phrases, also the tokens that advance one (dynamic beam allocation).
        per_beam = min(beam_size + 2 + len(blank), ops.shape(logits)[-1])
        tokens, token_log_probs = _candidates(log_probs, per_beam, blank, step + 1 >= beam_limits)
        if phrases is not None:
            tokens, token_log_probs, lexical_states, banks = _advancing(
                state.lexical, log_probs, tokens, token_log_probs, blank, step + 1 >= beam_limits)
        width = ops.shape(tokens)[1]
        continuations = ops.reshape(ops.reshape(alive_log_probs, (-1, 1)) + token_log_probs,
                                    (batch, beam_size * width))
        if phrases is None:
            top_log_probs, top_indices = ops.top_k(continuations, beam_size)
        else:
            _, top_indices = ops.top_k(lexical.allocation_order(
                continuations, ops.reshape(banks, (batch, -1)),
                continuations > _INVALID / 2, most), beam_size)
            top_log_probs = ops.take_along_axis(continuations, top_indices, axis=1)
        chosen = ops.reshape(batch_offsets * width + top_indices, (-1,))
        tokens = ops.reshape(ops.take(ops.reshape(tokens, (-1,)), chosen, axis=0),
                             (batch, beam_size))
        rows = ops.reshape(batch_offsets + top_indices // width, (-1,))
        alive = ops.reshape(ops.take(ops.reshape(alive, (batch * beam_size, -1)), rows, axis=0),
                            (batch, beam_size, max_length))
        alive = ops.slice_update(alive, (0, 0, step), tokens[:, :, None])
        constraint_state = state.constraint_state
        if constraint:
            constraint_state = constraint.update(
                keras.tree.map_structure(lambda x: ops.take(x, rows, axis=0), constraint_state),
                ops.reshape(tokens, (-1,)))
        lexical_state = state.lexical
        if phrases is not None:
            lexical_state = keras.tree.map_structure(
                lambda x: ops.take(ops.reshape(x, (-1, *ops.shape(x)[2:])), chosen, axis=0),
                lexical_states)

        # At its limit an example's alive hypotheses finish unterminated.
        truncated_scores = ops.where(last_step & (top_log_probs > _INVALID / 2),
                                     top_log_probs / penalty, _INVALID)
        candidate_scores = ops.concatenate([state.finished_scores, eos_scores, truncated_scores],
                                           1)
        finished_met = ()
        if phrases is None:
            finished_scores, best = ops.top_k(candidate_scores, beam_size)
        else:
            met = ops.concatenate([state.finished_met] + [
                ops.reshape(x.met, (batch, beam_size, -1)) for x in (state.lexical,
                                                                      lexical_state)], axis=1)
            finished_scores, best = lexical.met_first(
                candidate_scores, ops.all(met, axis=-1), beam_size, _INVALID)
            finished_met = ops.take_along_axis(met, best[:, :, None], axis=1)
        candidates = ops.reshape(ops.concatenate([state.finished, eos_ids, alive], axis=1),
                                 (batch * 3 * beam_size, max_length))
        finished = ops.reshape(
            ops.take(candidates, ops.reshape(best + 3 * batch_offsets, (-1,)), axis=0),
            (batch, beam_size, max_length))
        return (_BeamState(
            step=step + 1, previous=ops.reshape(tokens, (-1,)), alive=alive,
            alive_log_probs=ops.where(last_step, _INVALID, top_log_probs), finished=finished,
            finished_scores=finished_scores, cache=_reorder(state.cache, new_cache, rows),
            constraint_state=constraint_state, lexical=lexical_state,
            finished_met=finished_met),)

    (end,) = ops.while_loop(not_done, body, (start,))
    return end.finished, end.finished_scores, end.finished_met if phrases is not None else None


def _advancing(state, log_probs, tokens, token_log_probs, blank, last_step):
    """The candidates (tokens, log-probs [rows, width]) with each row's tokens that advance a
    phrase added, each candidate's lexical state ([rows, width, ...]) and bank (its progress)."""
    extra = lexical.candidate_tokens(state)
    keep = lexical.first_occurrences(extra, tokens)
    if blank:
        keep = keep & ops.logical_not(_is_blank(extra, blank) & last_step[:, None])
    extra_log_probs = ops.where(keep, ops.take_along_axis(log_probs, extra, axis=1), _INVALID)
    tokens = ops.concatenate([tokens, extra], axis=1)
    width = ops.shape(tokens)[1]
    states = lexical.advance(keras.tree.map_structure(
        lambda x: ops.repeat(ops.expand_dims(x, 1), width, axis=1), state), tokens)
    return (tokens, ops.concatenate([token_log_probs, extra_log_probs], axis=1), states,
            lexical.progress(states))

