"""VisibleEnding: a search constraint (see t2t_lite.decoding.search) under which no hypothesis
ends with a token that shows no text on its own, such as SentencePiece's lone "▁" (a word
boundary before a piece it could not merge with): EOS never follows such a token, and none is
chosen at the last position an example's length limit allows.

Why: a minimum length counts tokens, so at min_length 1 a half-trained model's best output can
still be "▁" + EOS, an empty line (2 of 500 on a real dev set; benchmarks/RESULTS.md,
"Quality"). Under this rule every output of at least one token ends with a token that shows
text, so none is empty. What it removes ends with a token that adds nothing to its text.
"""

import numpy as np
from keras import ops

from t2t_lite.config import EOS_ID


def blank_ids(vocabulary):
    """bool [vocabulary.size]: the ids above EOS whose text alone is empty or spaces."""
    return np.array([i > EOS_ID and not vocabulary.decode([i]).strip()
                     for i in range(vocabulary.size)])


class VisibleEnding:
    """State per hypothesis: whether its last token is blank (int32 0/1)."""

    def __init__(self, blank):
        self.blank = np.asarray(blank, "int32")

    @classmethod
    def of_vocabulary(cls, vocabulary):
        """The constraint for `vocabulary`, or None where no token is blank (nothing to do)."""
        blank = blank_ids(vocabulary)
        return cls(blank) if blank.any() else None

    def start(self, inputs, max_length):
        return (ops.zeros((ops.shape(inputs)[0],), "int32"),)

    def allowed(self, state, step, limits):
        (after_blank,) = state
        eos = ops.arange(len(self.blank))[None, :] == EOS_ID
        blank = ops.convert_to_tensor(self.blank)[None, :] > 0
        last = (step + 1 >= limits)[:, None]  # the limit ends the hypothesis after this token
        return ops.logical_not((eos & (after_blank > 0)[:, None]) | (blank & last))

    def update(self, state, tokens):
        return (ops.take(ops.convert_to_tensor(self.blank), tokens),)
