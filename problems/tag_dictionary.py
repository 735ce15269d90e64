"""The tag dictionary of a treebank: which preterminal tags each training word was seen with, so
that the parsing search tags a known word only with those, and an unknown word never with a tag
EVALB deletes (COLLINS.prm's punctuation: , : `` '' .).

Why: EVALB drops a word whose tag in *that* tree is punctuation, so a comma tagged NNP, or a
word tagged `,`, leaves the two trees' words unequal and the sentence is scored as an error
(the C program stops after 10 of them). The search's tree constraint guarantees one tag a word,
not the right kind; this makes a punctuation tag follow its word. A word seen with both kinds
(WSJ's `'`: POS or '') stays ambiguous.

The search sees ids, not words: a word is found by a 30-bit key of its SentencePiece pieces
(the sum of random per-piece codes, in two 15-bit halves so that int32 never overflows), the
same in numpy here and in keras.ops in problems.tree_constraint. Training words whose keys
collide share the union of their tags, which only allows more.
"""

import numpy as np

from t2t_lite.config import EOS_ID, PAD_ID
from t2t_lite.evaluation.evalb import COLLINS

_HALF = 2**15
_SEED = 20261125  # fixed: the codes must be the same wherever the vocabulary is loaded
DELETED_TAGS = COLLINS.delete_labels


def piece_codes(size):
    """int32 [2, size]: the two 15-bit codes of each piece id; 0 for PAD and EOS, which follow
    the last word in the search's inputs."""
    codes = np.random.default_rng(_SEED).integers(0, _HALF, (2, size)).astype("int32")
    codes[:, [PAD_ID, EOS_ID]] = 0
    return codes


def word_key(piece_ids, codes):
    """The key of the word made of `piece_ids` (the in-graph computation's numpy twin)."""
    high, low = (int(codes[half, list(piece_ids)].sum()) % _HALF for half in (0, 1))
    return high * _HALF + low


class TagDictionary:
    """`keys` int32 [entries] sorted; `allowed` bool [entries + 1, tags], the last row an
    unknown word's (every tag but the deleted ones, or every tag if only those exist)."""

    def __init__(self, word_tags, pieces_of, tags, vocab_size):
        """word_tags: {word: [tags seen with it]}; pieces_of(word) -> its piece ids; tags: the
        vocabulary's sorted tags."""
        self.codes = piece_codes(vocab_size)
        column = {tag: i for i, tag in enumerate(tags)}
        by_key = {}
        for word, seen in word_tags.items():
            row = by_key.setdefault(word_key(pieces_of(word), self.codes),
                                    np.zeros(len(tags), bool))
            row[[column[tag] for tag in seen if tag in column]] = True
        self.keys = np.array(sorted(by_key), "int32")
        unknown = np.array([tag not in DELETED_TAGS for tag in tags])
        if not unknown.any():
            unknown[:] = True
        self.allowed = np.stack([by_key[key] for key in sorted(by_key)] + [unknown])

    def tags_of(self, piece_ids):
        """bool [tags]: the tags allowed for the word of `piece_ids`."""
        key = word_key(piece_ids, self.codes)
        at = int(np.searchsorted(self.keys, key))
        known = at < len(self.keys) and self.keys[at] == key
        return self.allowed[at if known else -1]


def word_tags_of(trees):
    """{word: sorted tags} over the preterminals of `trees`."""
    seen = {}
    for tree in trees:
        for leaf in tree.preterminals():
            seen.setdefault(leaf.children[0], set()).add(leaf.label)
    return {word: sorted(tags) for word, tags in seen.items()}
