"""Preparing inputs for a search, in one place for both engines, the decoder and the attention
path: token ids (without EOS) are truncated to max_length tokens with their EOS, batched by
similar length so that little of the search is spent on padding, and PAD-padded. An empty input
has the empty output. (The exported model does the same in-graph:
TensorFlowTranslator._translate.)
"""

import itertools
import logging

import numpy as np

from t2t_lite.config import EOS_ID, PAD_ID
from t2t_lite.utils.errors import UserError

logger = logging.getLogger("t2t_lite")


def max_input_tokens(hparams):
    """The most tokens of an input a model sees: max_length with the EOS appended."""
    return hparams.max_length - 1


def padded(token_lists, eos=False):
    """int32 [len(token_lists), longest] of the lists (each followed by EOS if `eos`),
    PAD-padded."""
    ends = [EOS_ID] if eos else []
    rows = [list(tokens) + ends for tokens in token_lists]
    ids = np.full((len(rows), max(map(len, rows))), PAD_ID, "int32")
    for row, tokens in zip(ids, rows):
        row[: len(tokens)] = tokens
    return ids


def phrase_array(phrase_lists):
    """int32 [len(phrase_lists), C, L]: each input's target phrases (lists of ids), PAD-padded
    to the most phrases and the longest phrase (at least 1), for
    t2t_lite.decoding.search.constrained_beam_search."""
    count = max([len(phrases) for phrases in phrase_lists] + [1])
    longest = max([len(phrase) for phrases in phrase_lists for phrase in phrases] + [1])
    array = np.full((len(phrase_lists), count, longest), PAD_ID, "int32")
    for row, phrases in zip(array, phrase_lists):
        for line, phrase in zip(row, phrases):
            line[: len(phrase)] = phrase
    return array


def check_utf8(text):
    """UserError for a text holding a lone surrogate (JSON's "\\ud800", a file read with
    surrogateescape), which no vocabulary encodes (SentencePiece fails on it), as the exported
    model refuses invalid UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise UserError("not valid UTF-8") from None


def length_batches(token_lists, batch_size, same_length=False):
    """Lists of indices of `token_lists`, at most batch_size each, in order of length, so that
    each batch holds lists of similar length; with `same_length`, of equal length only."""
    order = sorted(range(len(token_lists)), key=lambda i: len(token_lists[i]))
    groups = ([list(group) for _, group in itertools.groupby(
        order, key=lambda i: len(token_lists[i]))] if same_length else [order])
    for group in groups:
        for start in range(0, len(group), batch_size):
            yield group[start:start + batch_size]


def encode_lines(vocabulary, lines, source, limit, first_number=1):
    """The token ids of each of `lines` (line first_number, ... of `source`), warning about
    lines longer than `limit` tokens, of which the model will see only the first; a line the
    vocabulary cannot encode is a UserError naming it."""
    token_lists = []
    for number, line in enumerate(lines, first_number):
        try:
            tokens = vocabulary.encode(line)
        except UserError as error:
            raise UserError(f"{source} line {number}: {error}") from None
        if len(tokens) > limit:
            logger.warning("%s line %d has %d tokens: only its first %d are translated "
                           "(max_length=%d)", source, number, len(tokens), limit, limit + 1)
        token_lists.append(tokens)
    return token_lists
