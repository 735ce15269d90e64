"""The analytic matmul FLOPs of the Transformer (2 FLOPs per multiply-add), for the MFU of the
training benchmarks (training.py, backends.py).

Each weight matrix is counted against the tokens it actually sees: encoder matrices against
source tokens, decoder matrices against target tokens, cross-attention keys/values against
source tokens, the tied output projection against target tokens. This is why it is not
2 x parameters x (source + target tokens): the output projection alone is about a quarter of
base's FLOPs while its embedding lookups are gathers, not matmuls. Attention scores and
contexts are counted in full (the causal mask does not save work in either framework);
biases, LayerNorm, softmax and the loss are not matmuls and are left out.
"""


def forward_flops(config, vocab, batch, source_length, target_length):
    """{part: FLOPs} of one forward pass over `batch` sequences of source_length source and
    target_length target tokens; `config` has the layer counts, d_model and d_ff."""
    d_model, d_ff = config["d_model"], config["d_ff"]
    sources, targets = batch * source_length, batch * target_length

    def attention(queries, keys, query_length, key_length):
        projections = 2 * d_model * d_model * (2 * queries + 2 * keys)  # Q, O; K, V
        scores_and_context = 2 * 2 * batch * query_length * key_length * d_model
        return projections + scores_and_context

    def feed_forward(tokens):
        return 2 * 2 * tokens * d_model * d_ff

    encoder_layer = (attention(sources, sources, source_length, source_length)
                     + feed_forward(sources))
    decoder_layer = (attention(targets, targets, target_length, target_length)
                     + attention(targets, sources, target_length, source_length)
                     + feed_forward(targets))
    return {"encoder": config["num_encoder_layers"] * encoder_layer,
            "decoder": config["num_decoder_layers"] * decoder_layer,
            "output projection": 2 * targets * d_model * vocab}


def training_flops(config, vocab, batch, source_length, target_length):
    """FLOPs of one training step: 3 x forward, since the backward pass computes two matmuls
    (the gradients of the input and of the weight) for each of the forward's."""
    return 3 * sum(forward_flops(config, vocab, batch, source_length, target_length).values())
