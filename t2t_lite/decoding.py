"""Autoregressive search over the Transformer's cached decoder, on keras.ops."""

from keras import ops

from t2t_lite.text import EOS_ID, PAD_ID


def greedy_search(model, inputs, extra_length):
    """inputs [B, S] -> ids [B, S + extra_length], each row EOS-terminated (if it ended) and padded.

    Encodes once, then runs one cached decoder step per position until every row has produced
    EOS or the length limit is reached.
    """
    memory, memory_mask = model.encode(inputs)
    batch = ops.shape(inputs)[0]
    max_length = ops.shape(inputs)[1] + extra_length
    cache = model.init_cache(memory, memory_mask, max_length)
    outputs = ops.zeros((batch, max_length), "int32")
    finished = ops.zeros((batch,), "bool")
    previous = ops.full((batch,), PAD_ID, "int32")

    def not_done(step, previous, outputs, finished, cache):
        return ops.logical_and(step < max_length, ops.logical_not(ops.all(finished)))

    def body(step, previous, outputs, finished, cache):
        logits, cache = model.decode_step(previous, step, cache)
        next_ids = ops.where(finished, PAD_ID, ops.cast(ops.argmax(logits, axis=-1), "int32"))
        outputs = ops.slice_update(outputs, (0, step), next_ids[:, None])
        return step + 1, next_ids, outputs, ops.logical_or(finished, next_ids == EOS_ID), cache

    _, _, outputs, _, _ = ops.while_loop(not_done, body, (0, previous, outputs, finished, cache))
    return outputs
