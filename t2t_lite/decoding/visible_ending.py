"""The tokens that show no text on their own, such as SentencePiece's lone "▁" (a word boundary
before a piece it could not merge with): at min_length 1 or more the translator gives their ids
to the search (t2t_lite.decoding.search, `blank`), under which no hypothesis ends with one: EOS
never follows such a token, and none is chosen at the last position an example's length limit
allows.

Why: a minimum length counts tokens, so at min_length 1 a half-trained model's best output can
still be "▁" + EOS, an empty line (2 of 500 on a real dev set; benchmarks/RESULTS.md,
"Quality"). Under this rule every output of at least one token ends with a token that shows
text, so none is empty. What it removes ends with a token that adds nothing to its text.
"""

from t2t_lite.config import EOS_ID


def blank_ids(vocabulary):
    """The ids above EOS whose text alone is empty or spaces, as a tuple (a few, or none)."""
    return tuple(i for i in range(EOS_ID + 1, vocabulary.size)
                 if not vocabulary.decode([i]).strip())
