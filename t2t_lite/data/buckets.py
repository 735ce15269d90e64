"""Length buckets (tensor2tensor's): batches hold about `batch_size` tokens, many short
sentences or few long ones, so that little of a batch is padding. Shared by the tf.data
pipeline and the JAX path's (t2t_lite.data.numpy_pipeline), without TensorFlow."""


def bucket_boundaries(max_length, min_length=8, step=1.1):
    """Geometric length boundaries (tensor2tensor's): 8, 9, 10, ..., 19, 20, 22, ..."""
    boundaries = []
    length = min_length
    while length < max_length:
        boundaries.append(length)
        length = max(length + 1, int(length * step))
    return boundaries


def buckets(batch_size, max_length):
    """(boundaries, batch_sizes): bucket i holds lengths in [boundaries[i-1], boundaries[i]),
    batch_sizes[i] examples of which fit the budget; the last bucket, past the boundaries, holds
    the examples longer than max_length (kept in evaluation), one per batch."""
    boundaries = bucket_boundaries(max_length) + [max_length + 1]
    return boundaries, [max(1, batch_size // length) for length in boundaries] + [1]


def training_length_limit(hparams):
    """(name, value) of the hparam that caps a training example's length: packed_length where
    training packs rows (the JAX path's), else max_length; messages name the one to change."""
    name = "packed_length" if hparams.packed_length else "max_length"
    return name, getattr(hparams, name)


def nothing_fits(hparam, limit):
    """The one message for a training share that keeps no example, every one longer than
    `hparam`'s `limit`: the numpy, packed and multi-host JAX paths all raise it."""
    return f"no training example is at most {hparam}={limit} long"
