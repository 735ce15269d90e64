"""The Transformer of "Attention Is All You Need" as Keras layers, on keras / keras.ops only.

keras-hub's Transformer layers cannot express the paper (one dropout knob, biased attention
projections, epsilon 1e-5), so the blocks are written here. The decoder also runs one position at
a time against a preallocated key/value cache of static shape, for fast search under tf.function/XLA.
Masks are booleans (True = may attend) so that mixed precision never casts them.
"""

import math

import keras
import keras_hub
from keras import layers, ops

from t2t_lite.config import HParams
from t2t_lite.text import PAD_ID

_MASKED = -1e9  # added to masked attention logits, in float32


def padding_mask(ids):
    """[B, S] ids -> [B, 1, 1, S]: True at real tokens."""
    return (ids != PAD_ID)[:, None, None, :]


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
        self.dropout = layers.Dropout(dropout)

    def _split_heads(self, x):
        """[B, T, d_model] -> [B, h, T, depth]."""
        batch, length = ops.shape(x)[0], ops.shape(x)[1]
        x = ops.reshape(x, (batch, length, self.num_heads, self.depth))
        return ops.transpose(x, (0, 2, 1, 3))

    def keys_and_values(self, memory):
        return self._split_heads(self.key(memory)), self._split_heads(self.value(memory))

    def attend(self, x, keys, values, mask, training=False):
        """Queries from x [B, Tq, d_model] attend to keys/values [B, h, Tk, depth] where mask."""
        queries = self._split_heads(self.query(x)) * ops.cast(self.depth**-0.5, x.dtype)
        logits = ops.cast(ops.matmul(queries, ops.transpose(keys, (0, 1, 3, 2))), "float32")
        weights = ops.softmax(ops.where(mask, logits, _MASKED), axis=-1)
        weights = self.dropout(ops.cast(weights, values.dtype), training=training)
        context = ops.transpose(ops.matmul(weights, values), (0, 2, 1, 3))
        batch, length = ops.shape(x)[0], ops.shape(x)[1]
        return self.output_projection(
            ops.reshape(context, (batch, length, self.num_heads * self.depth)))

    def call(self, x, memory, mask, training=False):
        return self.attend(x, *self.keys_and_values(memory), mask, training=training)


class FeedForward(layers.Layer):
    """FFN(x) = max(0, x W1 + b1) W2 + b2."""

    def __init__(self, d_model, d_ff, relu_dropout, **kwargs):
        super().__init__(**kwargs)
        self.hidden = layers.Dense(d_ff, activation="relu", kernel_initializer="glorot_uniform")
        self.dropout = layers.Dropout(relu_dropout)
        self.projection = layers.Dense(d_model, kernel_initializer="glorot_uniform")

    def call(self, x, training=False):
        return self.projection(self.dropout(self.hidden(x), training=training))


class _ResidualBlock(layers.Layer):
    """Sublayers in residual connections: post-norm LayerNorm(x + Dropout(f(x))) as in the paper,
    or pre-norm x + Dropout(f(LayerNorm(x)))."""

    def __init__(self, hparams, num_sublayers, **kwargs):
        super().__init__(**kwargs)
        self.pre_norm = hparams.norm_position == "pre"
        self.norms = tuple(layers.LayerNormalization(epsilon=hparams.layer_norm_epsilon)
                           for _ in range(num_sublayers))
        self.residual_dropout = layers.Dropout(hparams.dropout)
        self.feed_forward = FeedForward(hparams.d_model, hparams.d_ff, hparams.relu_dropout)

    def residual(self, index, x, sublayer, training):
        norm = self.norms[index]
        if self.pre_norm:
            return x + self.residual_dropout(sublayer(norm(x)), training=training)
        return norm(x + self.residual_dropout(sublayer(x), training=training))

    def _feed_forward(self, x, training):
        return self.residual(len(self.norms) - 1, x,
                             lambda y: self.feed_forward(y, training=training), training)


def _attention(hparams, name):
    return MultiHeadAttention(hparams.d_model, hparams.num_heads, hparams.attention_dropout,
                              name=name)


class EncoderLayer(_ResidualBlock):
    def __init__(self, hparams, **kwargs):
        super().__init__(hparams, num_sublayers=2, **kwargs)
        self.self_attention = _attention(hparams, "self_attention")

    def call(self, x, mask, training=False):
        x = self.residual(0, x, lambda y: self.self_attention(y, y, mask, training=training),
                          training)
        return self._feed_forward(x, training)


class DecoderLayer(_ResidualBlock):
    def __init__(self, hparams, **kwargs):
        super().__init__(hparams, num_sublayers=3, **kwargs)
        self.self_attention = _attention(hparams, "self_attention")
        self.cross_attention = _attention(hparams, "cross_attention")

    def call(self, x, memory, self_mask, memory_mask, training=False):
        """All target positions at once (training, scoring)."""
        return self._layer(
            x,
            lambda y: self.self_attention(y, y, self_mask, training=training),
            lambda y: self.cross_attention(y, memory, memory_mask, training=training),
            training)

    def step(self, x, step, cache, self_mask, memory_mask):
        """Position `step` only: writes its keys/values into the cache, attends to the cache."""
        updated = dict(cache)

        def self_attend(y):
            keys, values = self.self_attention.keys_and_values(y)
            updated["keys"] = ops.slice_update(cache["keys"], (0, 0, step, 0), keys)
            updated["values"] = ops.slice_update(cache["values"], (0, 0, step, 0), values)
            return self.self_attention.attend(y, updated["keys"], updated["values"], self_mask)

        def cross_attend(y):
            return self.cross_attention.attend(y, cache["memory_keys"], cache["memory_values"],
                                               memory_mask)

        return self._layer(x, self_attend, cross_attend, training=False), updated

    def _layer(self, x, self_attend, cross_attend, training):
        x = self.residual(0, x, self_attend, training)
        x = self.residual(1, x, cross_attend, training)
        return self._feed_forward(x, training)


class Transformer(keras.Model):
    """Encoder-decoder Transformer with one embedding matrix shared by source, target and softmax.

    `call({"inputs": [B, S], "targets": [B, T]})` returns float32 logits [B, T, vocab_size] that
    predict targets[:, t] from inputs and targets[:, :t] (the decoder input is shifted right with
    PAD as the start symbol).
    """

    def __init__(self, hparams, vocab_size, **kwargs):
        super().__init__(**kwargs)
        self.hparams = hparams
        self.vocab_size = vocab_size
        d_model = hparams.d_model
        self.embedding = layers.Embedding(
            vocab_size, d_model, name="shared_embedding",
            embeddings_initializer=keras.initializers.RandomNormal(stddev=d_model**-0.5))
        self.position_encoding = keras_hub.layers.SinePositionEncoding(dtype="float32")
        self.embedding_dropout = layers.Dropout(hparams.dropout)
        # Tuples, not lists: Keras 3 hides layers in lists from tf.train.Checkpoint.
        self.encoder_layers = tuple(EncoderLayer(hparams, name=f"encoder_{i}")
                                    for i in range(hparams.num_encoder_layers))
        self.decoder_layers = tuple(DecoderLayer(hparams, name=f"decoder_{i}")
                                    for i in range(hparams.num_decoder_layers))
        pre_norm = hparams.norm_position == "pre"
        self.encoder_norm, self.decoder_norm = (
            layers.LayerNormalization(epsilon=hparams.layer_norm_epsilon, name=name)
            if pre_norm else None for name in ("encoder_norm", "decoder_norm"))

    def _embed(self, ids, training, start_index=0):
        x = self.embedding(ids) * ops.cast(math.sqrt(self.hparams.d_model), self.compute_dtype)
        positions = self.position_encoding(x, start_index=start_index)
        return self.embedding_dropout(x + ops.cast(positions, x.dtype), training=training)

    def _logits(self, x):
        if self.decoder_norm is not None:
            x = self.decoder_norm(x)
        weights = ops.cast(self.embedding.embeddings, x.dtype)
        return ops.cast(ops.matmul(x, ops.transpose(weights)), "float32")

    def encode(self, inputs, training=False):
        """inputs [B, S] -> (memory [B, S, d_model], memory_mask [B, 1, 1, S])."""
        mask = padding_mask(inputs)
        x = self._embed(inputs, training)
        for layer in self.encoder_layers:
            x = layer(x, mask, training=training)
        if self.encoder_norm is not None:
            x = self.encoder_norm(x)
        return x, mask

    def decode(self, targets, memory, memory_mask, training=False):
        """Teacher-forced logits [B, T, vocab_size] for all target positions at once."""
        shifted = ops.pad(targets[:, :-1], ((0, 0), (1, 0)), constant_values=PAD_ID)
        x = self._embed(shifted, training)
        self_mask = causal_mask(ops.shape(targets)[1])
        for layer in self.decoder_layers:
            x = layer(x, memory, self_mask, memory_mask, training=training)
        return self._logits(x)

    def call(self, features, training=False):
        memory, memory_mask = self.encode(features["inputs"], training=training)
        return self.decode(features["targets"], memory, memory_mask, training=training)

    def init_cache(self, memory, memory_mask, max_length):
        """Decoding state for up to max_length steps; every entry is batch-major so that beam
        search can tile and reorder it."""
        batch = ops.shape(memory)[0]
        attention = self.decoder_layers[0].self_attention
        empty = ops.zeros((batch, attention.num_heads, max_length, attention.depth), memory.dtype)
        layer_caches = []
        for layer in self.decoder_layers:
            memory_keys, memory_values = layer.cross_attention.keys_and_values(memory)
            layer_caches.append({"keys": empty, "values": empty,
                                 "memory_keys": memory_keys, "memory_values": memory_values})
        return {"memory_mask": memory_mask, "layers": layer_caches}

    def decode_step(self, ids, step, cache):
        """ids [B] at position `step` -> (logits [B, vocab_size] for position step, new cache)."""
        x = self._embed(ids[:, None], training=False, start_index=step)
        max_length = ops.shape(cache["layers"][0]["keys"])[2]
        self_mask = (ops.arange(max_length) <= step)[None, None, None, :]
        layer_caches = []
        for layer, layer_cache in zip(self.decoder_layers, cache["layers"]):
            x, layer_cache = layer.step(x, step, layer_cache, self_mask, cache["memory_mask"])
            layer_caches.append(layer_cache)
        return self._logits(x)[:, 0], {**cache, "layers": layer_caches}

    def create_variables(self):
        """Creates the variables by running a tiny batch."""
        ids = ops.ones((1, 2), "int32")
        self({"inputs": ids, "targets": ids})
        return self

    def get_config(self):
        return {**super().get_config(), "hparams": self.hparams.to_dict(),
                "vocab_size": self.vocab_size}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        return cls(HParams(**config.pop("hparams")), **config)
