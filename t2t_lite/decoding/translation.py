"""What a translator of every engine returns for an input: its text and its score (the
length-penalized log-probability; see t2t_lite.decoding.search). Kept apart from the engines so
that using one (CTranslate2) imports nothing of another (TensorFlow)."""

import collections

import numpy as np

from t2t_lite.decoding.inputs import length_batches, padded

Translation = collections.namedtuple("Translation", "text score")


def n_best_translations(token_lists, n, search_batch, vocabulary, batch_size, max_input_tokens,
                        progress=None):
    """[[Translation] * n] of token_lists (cut to max_input_tokens) by search_batch(indices,
    EOS-terminated inputs of token_lists[indices]) -> (ids [>= batch, n, length], scores
    [>= batch, n]) of either engine's arrays, each input's n sorted best first; an empty input
    has n empty outputs of score 0. Batches of batch_size tokens, by length."""
    results = [[Translation("", 0.0)] * n for _ in token_lists]
    indices = [i for i, tokens in enumerate(token_lists) if tokens]
    nonempty = [token_lists[i][:max_input_tokens] for i in indices]
    if progress:
        progress.update(len(token_lists) - len(nonempty))
    for chunk in length_batches(nonempty, batch_size):
        outputs, scores = search_batch([indices[i] for i in chunk],
                                       padded([nonempty[i] for i in chunk], eos=True))
        for i, beams, beam_scores in zip(chunk, np.asarray(outputs), np.asarray(scores)):
            order = np.argsort(-beam_scores, kind="stable")
            results[indices[i]] = [
                Translation(vocabulary.decode(beams[k]), float(beam_scores[k]))
                for k in order[:n]]
        if progress:
            progress.update(len(chunk))
    return results
