"""Word alignments from attention, in the Pharaoh format of fast_align and Moses (`i-j`: source
token i, target token j, both from 0): each target token is aligned to the source token its
encoder-decoder attention weighs most, averaged over the heads of one decoder layer, the
penultimate by default (Garg et al. 2019 found it aligns best; OpenNMT-tf's guided alignment
uses it too). Positions count the model's tokens (SentencePiece pieces, symbols), without EOS.
"""

import numpy as np

from t2t_lite.utils.errors import UserError


def default_layer(num_layers):
    """The penultimate decoder layer, or the only one (0-based)."""
    return max(num_layers - 2, 0)


def resolve_layer(layer, num_layers):
    """The 0-based decoder layer `layer` names (None: the default; negative: from the last)."""
    if layer is None:
        return default_layer(num_layers)
    if not -num_layers <= layer < num_layers:
        raise UserError(f"--alignment_layer={layer}: the model has {num_layers} decoder layers, "
                        f"use 0 to {num_layers - 1} (or -1 for the last)")
    return layer % num_layers


def pharaoh(weights):
    """weights [target tokens, source tokens] (EOS's row and column left out) -> the alignment
    of each target token to the source token of its largest weight, as 'i-j i-j ...'."""
    weights = np.asarray(weights)
    if not weights.size:
        return ""
    return " ".join(f"{i}-{j}" for j, i in enumerate(weights.argmax(axis=-1)))
