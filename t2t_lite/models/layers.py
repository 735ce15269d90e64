"""The blocks of "Attention Is All You Need" as Keras layers, on keras.ops only (any backend).

keras-hub's Transformer layers cannot express the paper (one dropout knob, biased attention
projections, epsilon 1e-5), so the blocks are written here. Attention runs against a
preallocated key/value cache of static shape too, for fast incremental decoding under
tf.function/XLA/jax.jit. Masks are booleans (True = may attend) so that mixed precision never
casts them.
"""

from keras import layers, ops

from t2t_lite.config import PAD_ID
from t2t_lite.models.dropout import Dropout

_MASKED = -1e9  # added to masked attention logits, in float32


def padding_mask(ids):
    """[B, S] ids -> [B, 1, 1, S]: True at real tokens."""
    return (ids != PAD_ID)[:, None, None, :]


def segment_mask(query_segments, key_segments):
    """Packed rows ([B, Tq] and [B, Tk] segment ids, 0 at padding) -> [B, 1, Tq, Tk]: True
    where a query and a real key belong to the same example."""
    same = query_segments[:, :, None] == key_segments[:, None, :]
    return (same & (key_segments != 0)[:, None, :])[:, None]


def causal_mask(length):
    """[1, 1, T, T]: position i may attend to positions <= i."""
    positions = ops.arange(length)
    return (positions[None, :] <= positions[:, None])[None, None]


class MultiHeadAttention(layers.Layer):
    """Scaled dot-product attention over h heads with the paper's bias-free projections."""

    def __init__(self, d_model, num_heads, dropout, **kwargs):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.depth = d_model // num_heads
        self.query, self.key, self.value, self.output_projection = (
            layers.Dense(d_model, use_bias=False, kernel_initializer="glorot_uniform", name=name)
            for name in ("query", "key", "value", "output"))
        self.dropout = Dropout(dropout)

    def build(self, input_shape):
        """Creates the projections for inputs [..., d_model]. Each block here builds its
        sublayers from the shape alone: Keras's default build runs call() symbolically, which
        took ~2.7 s of CPU per model (nested blocks are traced again inside their parents)."""
        for projection in (self.query, self.key, self.value):
            projection.build(input_shape)
        self.output_projection.build((*input_shape[:-1], self.num_heads * self.depth))

    def _split_heads(self, x):
        """[B, T, d_model] -> [B, h, T, depth]."""
        batch, length = ops.shape(x)[0], ops.shape(x)[1]
        x = ops.reshape(x, (batch, length, self.num_heads, self.depth))
        return ops.transpose(x, (0, 2, 1, 3))

    def keys_and_values(self, memory):
        return self._split_heads(self.key(memory)), self._split_heads(self.value(memory))

    def attend(self, x, keys, values, mask, training=False):
        """Queries from x [B, Tq, d_model] attend to keys/values [B, h, Tk, depth] where mask;
        returns the output [B, Tq, d_model] and the weights [B, h, Tq, Tk] (float32, before
        dropout)."""
        queries = self._split_heads(self.query(x)) * ops.cast(self.depth**-0.5, x.dtype)
        logits = ops.cast(ops.matmul(queries, ops.transpose(keys, (0, 1, 3, 2))), "float32")
        weights = ops.softmax(ops.where(mask, logits, _MASKED), axis=-1)
        dropped = self.dropout(ops.cast(weights, values.dtype), training=training)
        context = ops.transpose(ops.matmul(dropped, values), (0, 2, 1, 3))
        batch, length = ops.shape(x)[0], ops.shape(x)[1]
        output = self.output_projection(
            ops.reshape(context, (batch, length, self.num_heads * self.depth)))
        return output, weights

    def call(self, x, memory, mask, cache=None, cache_index=None, training=False,
             return_attention_scores=False):
        """x [B, Tq, d_model] attends to memory [B, Tk, d_model] where mask, as keras-hub's
        CachedMultiHeadAttention does: with `cache` (keys, values) [B, h, max_length, depth],
        the keys and values of memory are written into it at `cache_index` and x attends to
        the whole cache; with cache_index None the cache holds memory's keys and values already
        (memory is not used). Returns the output, then the new cache if one was given, then the
        weights [B, h, Tq, Tk] if return_attention_scores (as Keras's MultiHeadAttention)."""
        if cache is None:
            keys, values = self.keys_and_values(memory)
        elif cache_index is None:
            keys, values = cache
        else:
            new_keys, new_values = self.keys_and_values(memory)
            start = (0, 0, cache_index, 0)
            keys = ops.slice_update(cache[0], start, new_keys)
            values = ops.slice_update(cache[1], start, new_values)
            cache = keys, values
        output, weights = self.attend(x, keys, values, mask, training=training)
        outputs = (output,) if cache is None else (output, cache)
        outputs += (weights,) if return_attention_scores else ()
        return outputs if len(outputs) > 1 else output


class FeedForward(layers.Layer):
    """FFN(x) = max(0, x W1 + b1) W2 + b2."""

    def __init__(self, d_model, d_ff, relu_dropout, **kwargs):
        super().__init__(**kwargs)
        self.hidden = layers.Dense(d_ff, activation="relu", kernel_initializer="glorot_uniform",
                                   name="hidden")
        self.dropout = Dropout(relu_dropout)
        self.projection = layers.Dense(d_model, kernel_initializer="glorot_uniform",
                                       name="projection")

    def build(self, input_shape):
        self.hidden.build(input_shape)
        self.projection.build((*input_shape[:-1], self.hidden.units))

    def call(self, x, training=False):
        return self.projection(self.dropout(self.hidden(x), training=training))


class _ResidualBlock(layers.Layer):
    """Sublayers in residual connections: post-norm LayerNorm(x + Dropout(f(x))) as in the paper,
    or pre-norm x + Dropout(f(LayerNorm(x))), each sublayer with its own named LayerNorm.

    The norms are created first, then the feed-forward and attention sublayers: this order is
    the order of the variables, which checkpoints' optimizer slots follow."""

    def __init__(self, hparams, norm_names, **kwargs):
        super().__init__(**kwargs)
        self.pre_norm = hparams.norm_position == "pre"
        self.norm_names = norm_names
        for name in norm_names:
            setattr(self, name, layers.LayerNormalization(epsilon=hparams.layer_norm_epsilon,
                                                          name=name))
        self.residual_dropout = Dropout(hparams.dropout)
        self.feed_forward = FeedForward(hparams.d_model, hparams.d_ff, hparams.relu_dropout,
                                        name="feed_forward")

    def build(self, input_shape):
        """Builds the norms, the feed-forward and the attention sublayers (all of them take
        [..., d_model]), in the order they were created."""
        for name in self.norm_names:
            getattr(self, name).build(input_shape)
        self.feed_forward.build(input_shape)
        for attention in self.attentions():
            attention.build(input_shape)

    def attentions(self):
        return ()

    def _sublayer_input(self, norm, x):
        return norm(x) if self.pre_norm else x

    def _add(self, norm, x, sublayer_output, training):
        y = x + self.residual_dropout(sublayer_output, training=training)
        return y if self.pre_norm else norm(y)

    def _feed_forward(self, x, training):
        y = self._sublayer_input(self.feed_forward_norm, x)
        return self._add(self.feed_forward_norm, x, self.feed_forward(y, training=training),
                         training)


def _attention(hparams, name):
    return MultiHeadAttention(hparams.d_model, hparams.num_heads, hparams.attention_dropout,
                              name=name)


class EncoderLayer(_ResidualBlock):
    def __init__(self, hparams, **kwargs):
        super().__init__(hparams, ("self_attention_norm", "feed_forward_norm"), **kwargs)
        self.self_attention = _attention(hparams, "self_attention")

    def attentions(self):
        return (self.self_attention,)

    def call(self, x, mask, training=False, return_attention_scores=False):
        """x [B, S, d_model] -> the same shape; with return_attention_scores, also the
        self-attention weights [B, h, S, S]."""
        y = self._sublayer_input(self.self_attention_norm, x)
        attended, weights = self.self_attention(y, y, mask, training=training,
                                                return_attention_scores=True)
        x = self._feed_forward(self._add(self.self_attention_norm, x, attended, training),
                               training)
        return (x, weights) if return_attention_scores else x


class DecoderLayer(_ResidualBlock):
    def __init__(self, hparams, **kwargs):
        super().__init__(
            hparams, ("self_attention_norm", "cross_attention_norm", "feed_forward_norm"),
            **kwargs)
        self.self_attention = _attention(hparams, "self_attention")
        self.cross_attention = _attention(hparams, "cross_attention")

    def attentions(self):
        return self.self_attention, self.cross_attention

    def call(self, x, memory, self_mask, memory_mask, cache=None, step=None, training=False,
             return_attention_scores=False):
        """One call for training and incremental decoding, as keras-hub's TransformerDecoder.

        Without `cache`: x [B, T, d_model] holds all target positions at once (training,
        scoring) and memory [B, S, d_model] is the encoder's output; returns the new x. With
        `cache` (a layer's entry of Transformer.init_cache): x [B, 1, d_model] is position
        `step` alone, whose keys and values are written into the cache and which attends to
        the cache (memory is not used); returns (x, new cache). With return_attention_scores,
        the self- and cross-attention weights [B, h, Tq, Tk] (float32) follow.
        """
        self_cache = memory_cache = None
        if cache is not None:
            self_cache = cache["keys"], cache["values"]
            memory_cache = cache["memory_keys"], cache["memory_values"]
        y = self._sublayer_input(self.self_attention_norm, x)
        attended, *self_rest = self.self_attention(
            y, y, self_mask, cache=self_cache, cache_index=step, training=training,
            return_attention_scores=True)
        x = self._add(self.self_attention_norm, x, attended, training)
        y = self._sublayer_input(self.cross_attention_norm, x)
        attended, *cross_rest = self.cross_attention(
            y, memory, memory_mask, cache=memory_cache, training=training,
            return_attention_scores=True)
        x = self._feed_forward(self._add(self.cross_attention_norm, x, attended, training),
                               training)
        outputs = (x,)
        if cache is not None:
            keys, values = self_rest[0]
            outputs += ({**cache, "keys": keys, "values": values},)
        if return_attention_scores:
            outputs += (self_rest[-1], cross_rest[-1])
        return outputs if len(outputs) > 1 else x
