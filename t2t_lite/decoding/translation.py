"""What a translator of every engine returns for an input: its text, its score (the
length-penalized log-probability; see t2t_lite.decoding.search) and, when the search was asked
for target phrases (a glossary's terms), those the output misses. Kept apart from the engines so
that using one (CTranslate2) imports nothing of another (TensorFlow)."""

import collections

import numpy as np

from t2t_lite.decoding.inputs import length_batches, padded

Translation = collections.namedtuple("Translation", "text score")
# What translate_constrained returns: also the target phrases the output misses.
ConstrainedTranslation = collections.namedtuple("ConstrainedTranslation", "text score unmet")


def n_best_translations(token_lists, n, search_batch, vocabulary, batch_size, max_input_tokens,
                        progress=None, phrases=None):
    """[[Translation] * n] of token_lists (cut to max_input_tokens) by search_batch(indices,
    EOS-terminated inputs of token_lists[indices]) -> (ids [>= batch, n, length], scores
    [>= batch, n]) of either engine's arrays, each input's n sorted best first; an empty input
    has n empty outputs of score 0. Batches of batch_size tokens, by length.

    With `phrases` (each input's target phrases, [[str]]), search_batch also returns which each
    output meets (bool [>= batch, n, C]): the outputs meeting all come first, and each is a
    ConstrainedTranslation whose `unmet` names those it misses (an empty input's: all)."""
    constrained = phrases is not None
    wanted_of = phrases if constrained else [()] * len(token_lists)

    def translation(text, score, unmet):
        return (ConstrainedTranslation(text, score, unmet) if constrained
                else Translation(text, score))

    results = [[translation("", 0.0, tuple(wanted_of[i]))] * n for i in range(len(token_lists))]
    indices = [i for i, tokens in enumerate(token_lists) if tokens]
    nonempty = [token_lists[i][:max_input_tokens] for i in indices]
    if progress:
        progress.update(len(token_lists) - len(nonempty))
    for chunk in length_batches(nonempty, batch_size):
        found = search_batch([indices[i] for i in chunk],
                             padded([nonempty[i] for i in chunk], eos=True))
        outputs, scores = np.asarray(found[0]), np.asarray(found[1])
        met = np.asarray(found[2]) if constrained else np.ones(scores.shape + (0,), bool)
        for row, i in enumerate(chunk):
            wanted = wanted_of[indices[i]]
            meets = met[row][:, : len(wanted)]
            order = np.lexsort((-scores[row], ~meets.all(axis=1)))
            results[indices[i]] = [
                translation(vocabulary.decode(outputs[row, k]), float(scores[row, k]),
                            tuple(p for p, ok in zip(wanted, meets[k]) if not ok))
                for k in order[:n]]
        if progress:
            progress.update(len(chunk))
    return results
