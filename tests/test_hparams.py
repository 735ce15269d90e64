"""The hparams sets against Table 3 of Vaswani et al. (2017)."""

import pytest

from t2t_lite import registry
from t2t_lite.models.transformer import create_model

VOCAB_SIZE = 37_000  # the paper's shared English-German vocabulary


def table3_parameter_count(n, d_model, d_ff, vocab_size):
    """Weights of the paper's architecture, counted from its equations: bias-free attention
    projections (W^Q, W^K, W^V, W^O), the FFN's two affine maps, a LayerNorm (gain and bias)
    per sublayer, and one embedding matrix shared with the pre-softmax projection."""
    attention = 4 * d_model * d_model
    ffn = 2 * d_model * d_ff + d_ff + d_model
    layer_norm = 2 * d_model
    encoder_layer = attention + ffn + 2 * layer_norm
    decoder_layer = 2 * attention + ffn + 3 * layer_norm
    return vocab_size * d_model + n * (encoder_layer + decoder_layer)


def test_base_and_big_match_table3_hyperparameters():
    base, big = registry.hparams("transformer_base"), registry.hparams("transformer_big")
    assert (base.num_encoder_layers, base.num_decoder_layers, base.d_model, base.d_ff,
            base.num_heads, base.dropout, base.label_smoothing) == (6, 6, 512, 2048, 8, 0.1, 0.1)
    assert base.d_model // base.num_heads == 64
    assert (big.d_model, big.d_ff, big.num_heads, big.dropout) == (1024, 4096, 16, 0.3)
    assert (base.adam_beta1, base.adam_beta2, base.adam_epsilon, base.warmup_steps) == (
        0.9, 0.98, 1e-9, 4000)
    assert base.batch_size == 4096 and base.norm_position == "post"


@pytest.mark.parametrize("name, paper_millions, tolerance", [
    # Table 3 says 65M for base. The paper's equations give 63.05M with a 37k shared vocabulary
    # (tensor2tensor's count too); no single counting convention yields both 65M for base and
    # 213M for big, so base is held to 3.5% and big, which the equations match, to 2%.
    ("transformer_base", 65, 0.035),
    ("transformer_big", 213, 0.02),
])
def test_parameter_counts_match_the_paper(name, paper_millions, tolerance):
    hparams = registry.hparams(name)
    count = create_model(hparams, VOCAB_SIZE).count_params()
    assert count == table3_parameter_count(hparams.num_encoder_layers, hparams.d_model,
                                           hparams.d_ff, VOCAB_SIZE)
    assert abs(count / (paper_millions * 1e6) - 1) < tolerance


def test_cpu_sets_derive_from_base():
    small, tiny = registry.hparams("transformer_small"), registry.hparams("transformer_tiny")
    assert (small.num_encoder_layers, small.d_model, small.d_ff, small.num_heads) == (
        3, 256, 1024, 4)
    assert small.adam_beta2 == tiny.adam_beta2 == 0.98 and tiny.d_model < small.d_model


def docstring(hparams_set):
    """The set's docstring on one line, so that a phrase may be looked for across its breaks."""
    return " ".join(registry.hparams_sets.get(hparams_set).__doc__.split())


def test_parsing_matches_section_6_3():
    """A 4-layer Transformer with d_model = 1024; beam 21, alpha 0.3, input length + 300. The
    small one keeps its decoding and sizes weight decay by the budget, as its docstring says."""
    parsing = registry.hparams("transformer_parsing")
    assert (parsing.num_encoder_layers, parsing.num_decoder_layers, parsing.d_model) == (
        4, 4, 1024)
    assert (parsing.beam_size, parsing.alpha, parsing.extra_length) == (21, 0.3, 300)
    small = registry.hparams("transformer_parsing_small")
    assert (small.beam_size, small.alpha, small.extra_length) == (21, 0.3, 300)
    assert small.d_model < parsing.d_model
    # The budget's weight decay rule, as the set's docstring states (measured on parsing).
    assert small.budget_max_weight_decay == 1.0
    assert "budget_max_weight_decay=1.0" in docstring("transformer_parsing_small")
    assert parsing.budget_max_weight_decay == 0


def test_small_data_is_the_documented_recipe():
    """transformer_small_data's values are those its docstring states and justifies."""
    small_data = registry.hparams("transformer_small_data")
    small = registry.hparams("transformer_small")
    doc = docstring("transformer_small_data")
    documented = [("num_encoder_layers", 2, "2+2 layers"), ("num_decoder_layers", 2, "2+2"),
                  ("d_model", 256, "d_model=256"), ("d_ff", 1024, "d_ff=1024"),
                  ("num_heads", 4, "h=4"), ("dropout", 0.1, "dropout 0.1"),
                  ("label_smoothing", 0.1, "label smoothing 0.1"),
                  ("peak_learning_rate", 2e-3, "peak 2e-3"),
                  ("warmup_steps", 1000, "1,000 warmup updates"), ("beam_size", 5, "Beam 5"),
                  ("alpha", 1.0, "alpha 1.0"),
                  ("budget_max_weight_decay", 1.0, "budget_max_weight_decay=1.0"),
                  ("weight_decay", 0.0, "none up to 15 epochs")]
    for name, value, text in documented:
        assert getattr(small_data, name) == value and text in doc, name
    changed = {name for name in small.to_dict() if getattr(small, name) != getattr(small_data,
                                                                                  name)}
    assert changed == {"num_encoder_layers", "num_decoder_layers", "warmup_steps",
                       "peak_learning_rate", "beam_size", "alpha", "budget_max_weight_decay"}
    # "warming up to 1e-3": transformer_small's peak, the paper's formula at its warmup.
    assert small.d_model**-0.5 * small.warmup_steps**-0.5 == pytest.approx(1e-3, rel=0.02)


@pytest.mark.slow  # trains 40 updates: ~18 s
def test_small_data_learns_the_toy_corpus(short_reverse_data, tmp_path):
    """40 updates of transformer_small_data (512-token batches, for time) on reversing 1-8
    symbols: dev token accuracy 0.27 here (0.13, 0.27, 0.31, 0.43, 0.54 at 20 to 100 updates
    with the set's 2+2 layers, measured 2026-11-29; 0.21 to 0.46 with its former 3+3), where an
    untrained model scores chance, ~0.09 (one of its ~11 tokens); a recipe that did not train (a
    zero or diverging rate) stays there."""
    from t2t_lite.cli import trainer

    trained = trainer.main([
        "--problem=test_short_reverse", "--hparams_set=transformer_small_data",
        f"--data_dir={short_reverse_data}", "--eval_every=0", "--eval_decode_examples=0",
        "--random_seed=5", "--hparams=batch_size=512", f"--model_dir={tmp_path}",
        "--train_steps=40"])
    assert trained["accuracy"] > 0.2  # over twice chance
