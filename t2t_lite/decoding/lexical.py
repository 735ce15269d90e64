"""Lexical constraints: target phrases that every output must contain, for beam search
(t2t_lite.decoding.search.constrained_beam_search), on keras.ops.

An example's constraints are `phrases` int32 [C, L]: C phrases of token ids, PAD-padded (a row
of PAD is no phrase). An output meets a phrase when the phrase's ids occur in it contiguously;
occurrences of different phrases may overlap. Each hypothesis tracks its last L tokens and,
per phrase, whether it is met and how long a prefix of it its tokens end with (`partial`);
its *progress* is the number of constraint tokens it has met: whole phrases, plus the longest
prefix it is in. Exact for repeated tokens ("a a b" after "a a a b"), as a suffix is checked
against every prefix at each step rather than followed by one pointer.

Dynamic beam allocation (Post & Vilar 2018, as fairseq's LexicallyConstrainedBeamSearch does):
each step's candidates are every hypothesis's best tokens plus, for each phrase it has not met,
the token that continues its prefix and the phrase's first token; the beam is then filled by
turns from the *banks* of candidates of equal progress, highest first, each turn taking every
bank's best remaining candidate. The most advanced hypothesis always keeps a slot and its
continuation of its prefix always advances it, so that after as many steps as the phrases have
tokens some hypothesis meets them all, and one that does (the highest bank) always leads: with
a limit of at least that, some output meets its phrases.
"""

from typing import Any, NamedTuple

from keras import ops

from t2t_lite.config import EOS_ID, PAD_ID


class LexicalState(NamedTuple):
    """Per hypothesis row: the phrases it must contain and how far it got."""

    phrases: Any  # int32 [rows, C, L], PAD-padded
    window: Any  # int32 [rows, L] its last L tokens (PAD before the first)
    met: Any  # bool [rows, C]; an absent phrase (all PAD) is met from the start
    partial: Any  # int32 [rows, C] the longest prefix of each phrase its tokens end with


def lengths_of(phrases):
    """int32 [..., C]: the number of ids of each phrase."""
    return ops.sum(ops.cast(phrases != PAD_ID, "int32"), axis=-1)


def start(phrases):
    """The state of empty hypotheses that must contain `phrases` [rows, C, L]."""
    rows, count, longest = ops.shape(phrases)
    return LexicalState(phrases, ops.full((rows, longest), PAD_ID, "int32"),
                        lengths_of(phrases) == 0, ops.zeros((rows, count), "int32"))


def all_met(state):
    """bool [rows]: whether each hypothesis contains all its phrases (EOS may follow)."""
    return ops.all(state.met, axis=-1)


def progress(state):
    """int32 [...]: constraint tokens met, those of whole phrases plus the longest prefix being
    followed (one: a token that begins two phrases is one step, not two), so that the best
    hypothesis's progress grows by one with the next token of that prefix."""
    met_tokens = ops.sum(ops.where(state.met, lengths_of(state.phrases), 0), axis=-1)
    return met_tokens + ops.max(ops.where(state.met, 0, state.partial), axis=-1)


def advance(state, tokens):
    """The state after appending `tokens` [...] to the hypotheses of `state` (whose arrays have
    the same leading axes, phrases broadcastable)."""
    longest = ops.shape(state.window)[-1]  # static or not: the exported model's is not
    window = ops.concatenate([state.window[..., 1:], ops.expand_dims(tokens, -1)], axis=-1)
    # suffixes[..., k - 1, i]: token i of the window's last k tokens (i < k; others unused).
    sizes = ops.arange(1, longest + 1, dtype="int32")
    positions = ops.arange(longest, dtype="int32")
    used = positions[None, :] < sizes[:, None]
    gather = ops.reshape(ops.where(used, longest - sizes[:, None] + positions[None, :], 0),
                         (-1,))
    suffixes = ops.reshape(ops.take(window, gather, axis=-1),
                           (*ops.shape(window)[:-1], longest, longest))
    # ends_with[..., c, k - 1]: the window ends with the first k ids of phrase c.
    equal = ops.expand_dims(suffixes, -3) == ops.expand_dims(state.phrases, -2)
    lengths = lengths_of(state.phrases)
    ends_with = ops.logical_and(ops.all(ops.logical_or(equal, ops.logical_not(used)), axis=-1),
                                sizes <= ops.expand_dims(lengths, -1))
    partial = ops.max(ops.where(ends_with, sizes, 0), axis=-1)
    met = ops.logical_or(state.met, ops.logical_and(partial == lengths, lengths > 0))
    return LexicalState(state.phrases, window, met, ops.where(met, 0, partial))


def candidate_tokens(state):
    """int32 [rows, 2C]: the tokens that advance a phrase each hypothesis has not met (the next
    id of the prefix it ends with, and the phrase's first id); PAD where there is none."""
    lengths = lengths_of(state.phrases)
    next_ids = ops.take_along_axis(
        state.phrases, ops.expand_dims(ops.minimum(state.partial, ops.maximum(lengths - 1, 0)),
                                       -1), axis=-1)[..., 0]
    first_ids = state.phrases[..., 0]
    open_phrase = ops.logical_not(state.met)
    return ops.concatenate([ops.where(open_phrase, next_ids, PAD_ID),
                            ops.where(open_phrase, first_ids, PAD_ID)], axis=-1)


def _earlier(count):
    """bool [count, count]: [j, i] is whether i comes before j."""
    order = ops.arange(count, dtype="int32")
    return order[None, :] < order[:, None]


def first_occurrences(tokens, seen):
    """bool [rows, E]: which of `tokens` [rows, E] are not PAD or EOS, not among `seen`
    [rows, K] and not an earlier entry of their row, so that no hypothesis is a candidate
    twice."""
    earlier = _earlier(ops.shape(tokens)[-1])
    repeated = ops.any(ops.logical_and(
        ops.expand_dims(tokens, -1) == ops.expand_dims(tokens, -2), earlier), axis=-1)
    in_seen = ops.any(ops.expand_dims(tokens, -1) == ops.expand_dims(seen, -2), axis=-1)
    return ops.logical_and(ops.logical_and(tokens != PAD_ID, tokens != EOS_ID),
                           ops.logical_not(ops.logical_or(repeated, in_seen)))


def allocation_order(scores, banks, valid, most):
    """float32 [batch, M]: a key to take the beam by (larger first) from the M candidates of
    each example, their `scores`, `banks` (progress, below `most`) and `valid` [batch, M]: by
    turns, each turn every bank's best remaining candidate, higher banks first."""
    same_bank = ops.expand_dims(banks, -1) == ops.expand_dims(banks, -2)  # [b, i, j]
    earlier = _earlier(ops.shape(scores)[-1])
    others, own = ops.expand_dims(scores, -2), ops.expand_dims(scores, -1)
    ahead = ops.logical_or(others > own, ops.logical_and(others == own, earlier))
    counted = ops.logical_and(ops.logical_and(same_bank, ahead), ops.expand_dims(valid, -2))
    rank = ops.sum(ops.cast(counted, "int32"), axis=-1)
    key = rank * (most + 1) + (most - banks)
    return ops.where(valid, -ops.cast(key, "float32"), -1e9)


def met_first(scores, met, k, invalid):
    """(scores, indices) [batch, k]: the k best of `scores` [batch, N], those whose `met` is
    true before the others, each group by score (valid ones before `invalid` ones, whose score
    stays `invalid` though an index may repeat a valid one's)."""
    met_scores, met_best = ops.top_k(ops.where(met, scores, invalid), k)
    other_scores, other_best = ops.top_k(ops.where(met, invalid, scores), k)
    slots = ops.arange(k, dtype="int32")[None, :]
    order = ops.concatenate([ops.where(met_scores > invalid / 2, slots, 2 * k + slots),
                             ops.where(other_scores > invalid / 2, k + slots, 3 * k + slots)],
                            axis=1)
    _, picked = ops.top_k(-ops.cast(order, "float32"), k)
    return (ops.take_along_axis(ops.concatenate([met_scores, other_scores], axis=1), picked,
                                axis=1),
            ops.take_along_axis(ops.concatenate([met_best, other_best], axis=1), picked, axis=1))
