"""How much to regularize for a time budget: more, the more epochs the budget allows.

The published small-corpus recipes (fairseq's IWSLT'14, Araabi & Monz 2020, Wu et al. 2021)
use dropout 0.3 and weight decay over ~100-150 epochs, and a model that sees a small corpus many
times overfits at the paper's dropout 0.1 and no decay (dev loss rising while training accuracy
climbs). So with `--train_minutes` and hparam `budget_max_dropout` above `dropout` (or
`budget_max_weight_decay` above `weight_decay`), the run estimates the epochs its budget allows
once it has run a tenth of the budget (the target tokens an update and the updates the budget
allows, against the training split's target tokens that datagen records) and from then on
trains with

    dropout(epochs) = dropout + (budget_max_dropout - dropout) * clip((epochs - 15) / 20, 0, 1)

the set's dropout up to 15 epochs, budget_max_dropout from 35 on, linear between (every dropout
layer's rate is scaled by the same factor: models.dropout), and weight decay by the same rule.
The corners are the published recipes' and our 50k-pair hour's (~15 epochs, where dropout 0.1
beat 0.2), not a measured optimum. Measured (benchmarks/results/quality.md): dropout 0.3 gained
from English to Japanese on 10,000 pairs (~48-84 epochs) but was level or lost from Japanese to
English and cost dev BLEU on 7,000 and 2,500 pairs, so no hparams set raises dropout
(budget_max_dropout 0); weight decay 1.0 gained on dev at ~33 to ~80 epochs in both directions
and was a little below at ~17, so transformer_small_data sizes it (budget_max_weight_decay 1.0).
"""

# The rule's corners, in epochs (each training example once an epoch).
FEW_EPOCHS = 15
MANY_EPOCHS = 35
# When the budget estimates the epochs: this fraction of it in, its first updates (compiling
# each bucket shape's) behind it.
DECIDE_AT = 0.1
# Subword sampling (datagen's --bpe_dropout=0.05) was ahead on dev in all seven runs whose budget
# allowed 46-57 epochs (by 0.4 to 3.4 BLEU, 2.2 on the mean) and level on the mean in the three
# of 32-35 (7,000 and 10,000 Japanese-English pairs, benchmarks/results/quality.md); the set's
# runs of the same pairs and minutes on the data without it, which is what a run here counts,
# logged 47-61 and 35-39. From this many epochs (as the budget logs them, rounded) a run on
# data without it suggests it.
SUBWORD_SAMPLING_FROM = 46


def subword_sampling_advice(epochs):
    """The log line suggesting datagen's --bpe_dropout to a run of `epochs` whose data could have
    been written with it and was not (Problem.could_sample_subwords), or None for fewer epochs
    than SUBWORD_SAMPLING_FROM."""
    if round(epochs) < SUBWORD_SAMPLING_FROM:
        return None
    return (f"at {SUBWORD_SAMPLING_FROM} epochs or more, datagen's --bpe_dropout=0.05 was "
            "ahead on dev in all seven runs measured (by 0.4 to 3.4 BLEU, 2.2 on the mean; "
            "7,000 and 10,000 Japanese-English pairs); this data has one segmentation a pair: "
            "make a second data_dir with it and compare the two on dev "
            "(docs/guides/own-corpus.md)")


def sized(epochs, value, most):
    """What the rule gives a run of `epochs` for a knob the set has at `value`, at most `most`
    (never less than `value`), to two decimals."""
    if most <= value:
        return value
    share = min(1.0, max(0.0, (epochs - FEW_EPOCHS) / (MANY_EPOCHS - FEW_EPOCHS)))
    return round(value + (most - value) * share, 2)


def training_tokens(stats):
    """The training split's target tokens (EOS included) from its stats.json, as datagen counts
    them (of one encoding of each pair: with BPE-dropout's several, epochs are of the pairs);
    from an older datagen's, the longer side's of each example (its histogram of lengths: fewer
    epochs than were trained, so no more regularization than the rule gives); None without
    either."""
    if "target_tokens" in stats:
        return stats["target_tokens"]
    lengths = stats.get("lengths") or {}
    return sum(int(length) * count for length, count in lengths.items()) or None


class SizedRegularization:
    """The rule for one run: the set's dropout and weight decay and the most the rule may raise
    each to (the epochs come from the training.budget.TimeBudget, which knows the split's
    tokens). A knob the rule cannot raise stays as the model and optimizer were built."""

    def __init__(self, dropout, max_dropout, weight_decay=0.0, max_weight_decay=0.0):
        self.dropout, self.max_dropout = dropout, max_dropout
        self.weight_decay, self.max_weight_decay = weight_decay, max_weight_decay
        # Dropout 0 has no rate to scale (models.dropout multiplies the built rates).
        self.sizes_dropout = bool(dropout) and max_dropout > dropout
        self.sizes_weight_decay = max_weight_decay > weight_decay

    @classmethod
    def of(cls, hparams, corpus_tokens):
        """The rule for `hparams` on a training split of `corpus_tokens` (training_tokens), or
        None when it can raise neither knob (budget_max_dropout at most dropout or dropout 0,
        budget_max_weight_decay at most weight_decay) or there is no token count to count epochs
        by."""
        rule = cls(hparams.dropout, hparams.budget_max_dropout, hparams.weight_decay,
                   hparams.budget_max_weight_decay)
        if not corpus_tokens or not (rule.sizes_dropout or rule.sizes_weight_decay):
            return None
        return rule

    def dropout_scale(self, epochs):
        """What every dropout rate is multiplied by for a run of `epochs` (None: dropout is not
        sized)."""
        if not self.sizes_dropout:
            return None
        return sized(epochs, self.dropout, self.max_dropout) / self.dropout

    def weight_decay_for(self, epochs):
        """The weight decay of a run of `epochs` (None: weight decay is not sized)."""
        if not self.sizes_weight_decay:
            return None
        return sized(epochs, self.weight_decay, self.max_weight_decay)

    def knobs(self):
        """(name, hparam of the most, the set's value, the most) of each knob the rule sizes."""
        return [knob for knob, sizes in (
            (("dropout", "budget_max_dropout", self.dropout, self.max_dropout),
             self.sizes_dropout),
            (("weight decay", "budget_max_weight_decay", self.weight_decay,
              self.max_weight_decay), self.sizes_weight_decay)) if sizes]

    def describe(self, epochs, step):
        """The log line of the choice made at `step`."""
        knobs = self.knobs()
        chosen = " and ".join(f"{name} {sized(epochs, value, most):g}"
                              for name, _, value, most in knobs)
        was = " and ".join(f"{value:g}" for _, _, value, _ in knobs)
        tops = " and ".join(f"{hparam}={most:g}" for _, hparam, _, most in knobs)
        them = "it" if len(knobs) == 1 else "them"
        return (f"~{epochs:.0f} epochs in the time budget: {chosen} from step {step} (the set's "
                f"{was} until then; {FEW_EPOCHS} epochs or fewer keep {them}, {MANY_EPOCHS} or "
                f"more raise {them} to hparam {tops}, 0 turns this off)")
