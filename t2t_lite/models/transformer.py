"""The Transformer of "Attention Is All You Need": one embedding matrix shared by source, target
and softmax, sinusoidal positions, the encoder and decoder stacks of t2t_lite.models.layers, and
the decoder run one position at a time against its cache for search. keras / keras.ops only.
"""

import math

import keras
import keras_hub
from keras import layers, ops

from t2t_lite.config import PAD_ID, HParams
from t2t_lite.models.dropout import Dropout
from t2t_lite.models.layers import (
    DecoderLayer,
    EncoderLayer,
    causal_mask,
    padding_mask,
    segment_mask,
)


def create_model(hparams, vocab_size):
    """The Transformer with its variables, in hparams.precision (e.g. mixed_float16)."""
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(hparams.precision)
    try:
        return Transformer(hparams, vocab_size).create_variables()
    finally:
        keras.config.set_dtype_policy(previous)


class Transformer(keras.Model):
    """Encoder-decoder Transformer with one embedding matrix shared by source, target and softmax.

    `call({"inputs": [B, S], "targets": [B, T]})` returns float32 logits [B, T, vocab_size] that
    predict targets[:, t] from inputs and targets[:, :t] (the decoder input is shifted right with
    PAD as the start symbol). Packed rows (t2t_lite.data.packing: several examples a row) add
    "inputs_segmentation", "targets_segmentation" (example ids, 0 at padding) and
    "inputs_position", "targets_position" (positions counted from 0 in each example), as
    tensor2tensor's packed problems: attention stays within an example, the decoder input
    starts each example with PAD, and the logits are those of each example alone.
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
        self.embedding_dropout = Dropout(hparams.dropout)
        # One draw a token, not a feature: a dropped token's embedding is all zeros (the model
        # still sees its position), the others are scaled by 1 / (1 - rate) as dropout's are.
        self.word_dropout = layers.Dropout(hparams.word_dropout, noise_shape=(None, None, 1))
        # Tuples, not lists: Keras 3 hides layers in lists from tf.train.Checkpoint.
        self.encoder_layers = tuple(EncoderLayer(hparams, name=f"encoder_{i}")
                                    for i in range(hparams.num_encoder_layers))
        self.decoder_layers = tuple(DecoderLayer(hparams, name=f"decoder_{i}")
                                    for i in range(hparams.num_decoder_layers))
        pre_norm = hparams.norm_position == "pre"
        self.encoder_norm, self.decoder_norm = (
            layers.LayerNormalization(epsilon=hparams.layer_norm_epsilon, name=name)
            if pre_norm else None for name in ("encoder_norm", "decoder_norm"))

    def _embed(self, ids, training, start_index=0, positions=None):
        x = self.embedding(ids) * ops.cast(math.sqrt(self.hparams.d_model), self.compute_dtype)
        x = self.word_dropout(x, training=training)
        sinusoids = self.position_encoding(x, start_index=start_index)
        if positions is not None:  # packed rows: those of each token's own position
            sinusoids = ops.take(sinusoids[0], positions, axis=0)
        return self.embedding_dropout(x + ops.cast(sinusoids, x.dtype), training=training)

    def _logits(self, x):
        if self.decoder_norm is not None:
            x = self.decoder_norm(x)
        weights = ops.cast(self.embedding.embeddings, x.dtype)
        return ops.cast(ops.matmul(x, ops.transpose(weights)), "float32")

    def encode(self, inputs, training=False, return_attention_scores=False, segments=None,
               positions=None):
        """inputs [B, S] -> (memory [B, S, d_model], memory_mask [B, 1, 1, S]); with
        return_attention_scores, also each layer's self-attention weights [B, h, S, S]. Packed
        rows: with their segments and positions (the mask is then [B, 1, S, S])."""
        mask = padding_mask(inputs) if segments is None else segment_mask(segments, segments)
        x = self._embed(inputs, training, positions=positions)
        weights = []
        for layer in self.encoder_layers:
            if return_attention_scores:
                x, layer_weights = layer(x, mask, training=training, return_attention_scores=True)
                weights.append(layer_weights)
            else:
                x = layer(x, mask, training=training)
        if self.encoder_norm is not None:
            x = self.encoder_norm(x)
        return (x, mask, weights) if return_attention_scores else (x, mask)

    def decode(self, targets, memory, memory_mask, training=False, return_attention_scores=False,
               segments=None, positions=None):
        """Teacher-forced logits [B, T, vocab_size] for all target positions at once; with
        return_attention_scores, (logits, each layer's self-attention weights [B, h, T, T],
        each layer's cross-attention weights [B, h, T, S]). Packed rows: with their segments
        and positions (memory_mask: segment_mask of the targets' and the inputs' segments)."""
        shifted = ops.pad(targets[:, :-1], ((0, 0), (1, 0)), constant_values=PAD_ID)
        self_mask = causal_mask(ops.shape(targets)[1])
        if segments is not None:  # each example starts with PAD and sees only itself
            shifted = ops.where(positions == 0, ops.cast(PAD_ID, shifted.dtype), shifted)
            self_mask = self_mask & segment_mask(segments, segments)
        x = self._embed(shifted, training, positions=positions)
        self_weights, cross_weights = [], []
        for layer in self.decoder_layers:
            if return_attention_scores:
                x, layer_self, layer_cross = layer(x, memory, self_mask, memory_mask,
                                                   training=training, return_attention_scores=True)
                self_weights.append(layer_self)
                cross_weights.append(layer_cross)
            else:
                x = layer(x, memory, self_mask, memory_mask, training=training)
        logits = self._logits(x)
        return (logits, self_weights, cross_weights) if return_attention_scores else logits

    def call(self, features, training=False):
        if "inputs_segmentation" not in features:
            memory, memory_mask = self.encode(features["inputs"], training=training)
            return self.decode(features["targets"], memory, memory_mask, training=training)
        sources, targets = features["inputs_segmentation"], features["targets_segmentation"]
        memory, _ = self.encode(features["inputs"], training=training, segments=sources,
                                positions=features["inputs_position"])
        return self.decode(features["targets"], memory, segment_mask(targets, sources),
                           training=training, segments=targets,
                           positions=features["targets_position"])

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
            x, layer_cache = layer(x, None, self_mask, cache["memory_mask"], cache=layer_cache,
                                   step=step)
            layer_caches.append(layer_cache)
        return self._logits(x)[:, 0], {**cache, "layers": layer_caches}

    def build(self, input_shape=None):
        """Creates every variable from the hparams alone (no shape depends on the inputs'),
        without tracing call() as Keras's default build would."""
        self.embedding.build()
        shape = (None, None, self.hparams.d_model)
        for layer in (*self.encoder_layers, *self.decoder_layers):
            layer.build(shape)
        for norm in (self.encoder_norm, self.decoder_norm):
            if norm is not None:
                norm.build(shape)

    def create_variables(self):
        """Creates the variables, then runs a tiny batch (what a first call would find missing
        would fail here, not in a traced function)."""
        self.build()
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
