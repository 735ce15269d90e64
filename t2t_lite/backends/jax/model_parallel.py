"""The Transformer's weights split over devices (hparams model_parallel=M), with
keras.distribution.ModelParallel: for vocabularies and models whose weights, with Adam's two
moments, dominate a device's memory (transformer_big's 32k-piece embedding and feed-forward
layers).

The devices form a (batch, model) mesh of (devices / M, M): a batch's rows are split over the
first axis as under DataParallel, and over the second, as Megatron-LM splits a Transformer, the
shared embedding (also the softmax) by vocabulary rows, each feed-forward network's hidden units
(its first kernel and bias by columns, its second kernel by rows) and each attention's heads
(query, key and value kernels by columns, the output kernel by rows). XLA partitions the same
programs and adds the collectives; the layer norms and biases of width d_model stay whole.
A dimension that M does not divide stays whole (e.g. a vocabulary of 8,001 pieces).
"""

import keras

from t2t_lite.utils.errors import UserError

# (path pattern, which dimension is split: the vocabulary rows, a width's columns or rows)
_SPLITS = (
    ("shared_embedding/embeddings", 0, "vocab_size"),
    ("feed_forward/hidden/kernel", 1, "d_ff"),
    ("feed_forward/hidden/bias", 0, "d_ff"),
    ("feed_forward/projection/kernel", 0, "d_ff"),
    ("attention/(query|key|value)/kernel", 1, "d_model"),
    ("attention/output/kernel", 0, "d_model"),
)


def model_parallel(hparams, vocab_size, devices):
    """The ModelParallel of hparams.model_parallel over `devices` (jax devices, all the
    run's)."""
    split = hparams.model_parallel
    if len(devices) % split:
        raise UserError(f"model_parallel={split} must divide the {len(devices)} devices of "
                        "this run: set it with --hparams to a divisor")
    if hparams.num_heads % split:
        raise UserError(f"model_parallel={split} must divide num_heads={hparams.num_heads} "
                        "(each device holds whole heads)")
    mesh = keras.distribution.DeviceMesh((len(devices) // split, split), ("batch", "model"),
                                         devices=devices)
    layout_map = keras.distribution.LayoutMap(mesh)
    sizes = {"vocab_size": vocab_size, "d_ff": hparams.d_ff, "d_model": hparams.d_model}
    ranks = {"embeddings": 2, "kernel": 2, "bias": 1}
    for pattern, dimension, size in _SPLITS:
        if sizes[size] % split == 0:
            axes = [None] * ranks[pattern.rsplit("/", 1)[1]]
            axes[dimension] = "model"
            layout_map[f".*{pattern}"] = tuple(axes)
    return keras.distribution.ModelParallel(layout_map=layout_map, batch_dim_name="batch")
