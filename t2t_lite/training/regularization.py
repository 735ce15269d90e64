"""How much dropout a time budget calls for: more, the more epochs the budget allows.

The published small-corpus recipes (fairseq's IWSLT'14, Araabi & Monz 2020, Wu et al. 2021)
use dropout 0.3 over ~100-150 epochs, and a model that sees a small corpus many times overfits
at 0.1 (dev loss rising while training accuracy climbs). So with `--train_minutes` and hparam
`budget_max_dropout` above `dropout`, the run estimates the epochs its budget allows once it has
run a tenth of the budget (the target tokens an update and the updates the budget allows,
against the training split's target tokens that datagen records) and from then on trains with

    dropout(epochs) = dropout + (budget_max_dropout - dropout) * clip((epochs - 15) / 20, 0, 1)

the set's dropout up to 15 epochs, budget_max_dropout from 35 on, linear between (every dropout
layer's rate is scaled by the same factor: models.dropout). The corners are the published
recipes' and our 50k-pair hour's (~15 epochs, where 0.1 beat 0.2), not a measured optimum: in
20-minute runs on 7,000 and 2,500 pairs of small_parallel_enja (~18 and ~60 epochs), 0.3 cost
dev BLEU though it lowered dev perplexity, and on 10,000 pairs (~44-84 epochs) it gained from
English to Japanese but was level or lost from Japanese to English
(benchmarks/results/quality.md), so no hparams set turns the rule on (budget_max_dropout 0).
"""

# The rule's corners, in epochs (each training example once an epoch).
FEW_EPOCHS = 15
MANY_EPOCHS = 35
# When the budget estimates the epochs: this fraction of it in, its first updates (compiling
# each bucket shape's) behind it.
DECIDE_AT = 0.1


def dropout_for(epochs, dropout, max_dropout):
    """The dropout the rule gives a run of `epochs` whose set has `dropout`, at most
    `max_dropout` (never less than `dropout`), to two decimals."""
    if max_dropout <= dropout:
        return dropout
    share = min(1.0, max(0.0, (epochs - FEW_EPOCHS) / (MANY_EPOCHS - FEW_EPOCHS)))
    return round(dropout + (max_dropout - dropout) * share, 2)


def training_tokens(stats):
    """The training split's target tokens (EOS included) from its stats.json, as datagen counts
    them; from an older datagen's, the longer side's of each example (its histogram of lengths:
    fewer epochs than were trained, so no more dropout than the rule gives); None without
    either."""
    if "target_tokens" in stats:
        return stats["target_tokens"]
    lengths = stats.get("lengths") or {}
    return sum(int(length) * count for length, count in lengths.items()) or None


class SizedDropout:
    """The rule for one run: the set's dropout and the most the rule may raise it to (the
    epochs come from the training.budget.TimeBudget, which knows the split's tokens)."""

    def __init__(self, dropout, max_dropout):
        self.dropout = dropout
        self.max_dropout = max_dropout

    @classmethod
    def of(cls, hparams, corpus_tokens):
        """The rule for `hparams` on a training split of `corpus_tokens` (training_tokens), or
        None when it cannot raise dropout (budget_max_dropout at most dropout, dropout 0, or no
        token count to count epochs by)."""
        if (not hparams.dropout or hparams.budget_max_dropout <= hparams.dropout
                or not corpus_tokens):
            return None
        return cls(hparams.dropout, hparams.budget_max_dropout)

    def scale(self, epochs):
        """What every dropout rate is multiplied by for a run of `epochs`."""
        return dropout_for(epochs, self.dropout, self.max_dropout) / self.dropout

    def describe(self, epochs, step):
        """The log line of the choice made at `step`."""
        chosen = dropout_for(epochs, self.dropout, self.max_dropout)
        return (f"~{epochs:.0f} epochs in the time budget: dropout {chosen:g} from step {step} "
                f"(the set's {self.dropout:g} until then; {FEW_EPOCHS} epochs or fewer keep it, "
                f"{MANY_EPOCHS} or more raise it to hparam budget_max_dropout="
                f"{self.max_dropout:g}, 0 turns this off)")
