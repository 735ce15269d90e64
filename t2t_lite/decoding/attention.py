"""Attention weights of a model for sentence pairs, as tensor2tensor's visualization showed them.

Each pair is run teacher-forced through the model once, with the weights of every attention
returned (`return_attention_scores`), and stripped of the padding its batch added.
"""

import dataclasses

import numpy as np
from keras import ops

from t2t_lite.config import EOS_ID
from t2t_lite.decoding.inputs import padded


@dataclasses.dataclass
class Attention:
    """The attention weights of one (source, target) pair, each [layers, heads, query, key].

    `source_pieces` are the source's tokens and its EOS; `target_pieces` the target's and its
    EOS, where decoder position i is the one that outputs target_pieces[i] (its input is the
    piece before, or the start symbol). Each row sums to 1.
    """

    source_pieces: list
    target_pieces: list
    encoder_self: np.ndarray     # [layers, heads, source, source]
    decoder_self: np.ndarray     # [layers, heads, target, target], zero above the diagonal
    encoder_decoder: np.ndarray  # [layers, heads, target, source]


def attention_weights(translator, source_tokens, target_tokens):
    """[Attention] of each pair of token-id lists (without EOS), in order, by the model of
    `translator`, in its batch size; sources are truncated as it truncates them."""
    model, vocabulary, batch_size = translator.model, translator.vocabulary, translator.batch_size
    records = []
    for start in range(0, len(source_tokens), batch_size):
        sources = [tokens[: translator.max_input_tokens]
                   for tokens in source_tokens[start:start + batch_size]]
        targets = target_tokens[start:start + batch_size]
        memory, memory_mask, encoder_self = model.encode(padded(sources, eos=True),
                                                         return_attention_scores=True)
        _, decoder_self, encoder_decoder = model.decode(
            padded(targets, eos=True), memory, memory_mask, return_attention_scores=True)
        layers = [np.stack([ops.convert_to_numpy(w) for w in weights], axis=1)
                  for weights in (encoder_self, decoder_self, encoder_decoder)]
        for row, (source, target) in enumerate(zip(sources, targets)):
            s, t = len(source) + 1, len(target) + 1  # and EOS
            records.append(Attention(
                vocabulary.pieces(list(source) + [EOS_ID]),
                vocabulary.pieces(list(target) + [EOS_ID]),
                encoder_self=layers[0][row, :, :, :s, :s],
                decoder_self=layers[1][row, :, :, :t, :t],
                encoder_decoder=layers[2][row, :, :, :t, :s]))
    return records
