"""The settings of an experiment as typed, frozen values, each checked once when made.

HParams: how big the model is and how it trains (recorded in the model_dir); unlike
tensor2tensor's, an override with an unknown name or a value of the wrong type is an error, not a
silently added attribute, and the defaults are the paper's base model (Vaswani et al. 2017).
TrainConfig: how one training run trains, evaluates and keeps checkpoints (the trainer's flags).
"""

import dataclasses
import json
import math

from t2t_lite.utils.errors import UserError, did_you_mean

# Ids every vocabulary reserves and the model relies on, as in tensor2tensor: PAD pads and is the
# decoder's start symbol, EOS ends every sequence, UNK (SentencePiece only) is never produced
# since unknown characters fall back to bytes.
PAD_ID = 0
EOS_ID = 1
UNK_ID = 2


class HParamsError(UserError, ValueError):
    """An unknown hparam, a value of the wrong type, or an inconsistent combination."""


# Hparams that change how a model trains but none of its variables, so that a resumed run may
# change them (e.g. a lower learning_rate after the loss diverged, or float16 to go faster).
TRAINING_ONLY = ("dropout", "attention_dropout", "relu_dropout", "word_dropout", "batch_size",
                 "label_smoothing", "learning_rate", "peak_learning_rate", "warmup_steps",
                 "budget_cooldown", "budget_max_dropout", "budget_max_weight_decay",
                 "weight_decay", "clip_grad_norm", "accumulate_steps", "precision",
                 "model_parallel", "packed_length")
# Hparams that define the function a model's weights compute: a model started from another's
# weights (the trainer's --init_from) must have the same values.
ARCHITECTURE = ("num_encoder_layers", "num_decoder_layers", "d_model", "d_ff", "num_heads",
                "norm_position", "layer_norm_epsilon")


def _choice(default, *choices):
    return dataclasses.field(default=default, metadata={"choices": (default,) + choices})


INT32_MAX = 2**31 - 1


def _range(default, low, high=None, *, above=False, below=False):
    """A number from `low` (excluded if `above`) to `high` (excluded if `below`; None: no
    limit); a float must also be finite. The upper limits of sizes lie far beyond any model
    this framework trains (the paper's big model has d_model=1024) and keep a typo, or a
    hand-edited hparams.json, from exhausting memory or hanging."""
    return dataclasses.field(default=default, metadata={"range": (low, high, above, below)})


def _probability(default):
    return _range(default, 0, 1, below=True)


def _range_error(value, low, high, above, below):
    """What is wrong with `value` for the range (low, high, above, below), or None."""
    is_float = isinstance(value, float)
    if not is_float:
        if value < low:
            return f"must be at least {low}"
        return f"must be at most {high}" if high is not None and value > high else None
    if math.isfinite(value) and (value > low if above else value >= low) and (
            high is None or (value < high if below else value <= high)):
        return None
    if high is not None:
        return f"must be in {'(' if above else '['}{low}, {high}{')' if below else ']'}"
    return f"must be a finite number {'>' if above else '>='} {low}"


@dataclasses.dataclass(frozen=True)
class HParams:
    # Model (Table 3 names: N, d_model, d_ff, h, P_drop).
    num_encoder_layers: int = _range(6, 1, 1024)
    num_decoder_layers: int = _range(6, 1, 1024)
    d_model: int = _range(512, 1, 65536)
    d_ff: int = _range(2048, 1, 262144)
    num_heads: int = _range(8, 1, 1024)
    dropout: float = _probability(0.1)  # on each sublayer output and on embeddings + positions
    attention_dropout: float = _probability(0.0)  # on attention weights (not in the paper)
    relu_dropout: float = _probability(0.0)  # inside the feed-forward network (not in the paper)
    # Each source and decoder-input token's whole embedding is dropped with this probability
    # while training (word dropout, Sennrich et al. 2016's WMT systems: 0.1; not in the paper).
    # 0.1 and 0.2 lost dev BLEU to transformer_small_data on 10k ja-en pairs (quality.md).
    word_dropout: float = _probability(0.0)
    norm_position: str = _choice("post", "pre")  # post: LayerNorm(x + Sublayer(x))
    layer_norm_epsilon: float = _range(1e-6, 0, above=True)
    # Training.
    # Tokens per replica per micro-batch (the max of source and target length).
    batch_size: int = _range(4096, 1, 2**24)
    max_length: int = _range(256, 1, 65536)  # longer training examples are dropped
    label_smoothing: float = _probability(0.1)
    # Multiplies d_model^-0.5 * min(step^-0.5, step * warmup^-1.5).
    learning_rate: float = _range(1.0, 0, above=True)
    # The schedule's value at its peak (step warmup_steps) instead: fairseq's inverse_sqrt
    # `--lr`, the same curve. 0: learning_rate * d_model^-0.5 * warmup_steps^-0.5.
    peak_learning_rate: float = _range(0.0, 0)
    warmup_steps: int = _range(4000, 1, INT32_MAX)
    # With a time budget (--train_minutes): the rate falls linearly to 0 over this last fraction
    # of the budget, and --average_last's checkpoints are spread over it; 0: no cool-down.
    budget_cooldown: float = _range(0.2, 0, 1)
    # With a time budget: dropout rises from `dropout` toward this as the epochs the budget
    # allows grow (training/regularization.py: 15 epochs or fewer keep `dropout`, 35 or more
    # get this; not measured to pay yet); 0 or at most `dropout`: no change.
    budget_max_dropout: float = _range(0.0, 0, 0.9)
    adam_beta1: float = _probability(0.9)
    adam_beta2: float = _probability(0.98)
    adam_epsilon: float = _range(1e-9, 0, above=True)
    # Decoupled weight decay (AdamW, Loshchilov & Hutter 2019; not in the paper): each update
    # first shrinks the weight matrices and the embeddings by learning rate * weight_decay
    # (biases and LayerNorm's scales and offsets are left alone); 0: the paper's Adam.
    weight_decay: float = _range(0.0, 0)
    # With a time budget: weight decay rises from `weight_decay` toward this as the epochs the
    # budget allows grow, by budget_max_dropout's rule (transformer_small_data: 1.0); 0 or at
    # most `weight_decay`: no change.
    budget_max_weight_decay: float = _range(0.0, 0)
    clip_grad_norm: float = _range(0.0, 0)  # 0 = no clipping
    accumulate_steps: int = _range(1, 1, INT32_MAX)  # micro-batches per optimizer update
    precision: str = _choice("float32", "mixed_float16", "mixed_bfloat16")
    # JAX: the embedding, feed-forward and attention weights split over this many devices
    # (keras.distribution.ModelParallel; the batch over the rest); 1: DataParallel.
    model_parallel: int = _range(1, 1, 4096)
    # JAX: training rows of this many tokens a side, several examples each (segment ids; about
    # batch_size / packed_length rows a device), instead of length buckets; 0: buckets.
    packed_length: int = _range(0, 0, 65536)
    # Decoding.
    beam_size: int = _range(4, 1, 1024)
    alpha: float = _range(0.6, 0, 10)  # length penalty ((5 + length) / 6) ** alpha
    extra_length: int = _range(50, 0, 65536)  # decode at most input length + extra_length tokens
    min_length: int = _range(1, 0, 65536)  # tokens before EOS, at least (if the limit allows)

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if type(value) is not field.type and not (field.type is float and type(value) is int):
                raise HParamsError(f"hparam {field.name} must be {field.type.__name__}, "
                                   f"got {value!r}")
            if field.type is float and type(value) is int:
                object.__setattr__(self, field.name, float(value))
            choices = field.metadata.get("choices")
            if choices and value not in choices:
                raise HParamsError(f"hparam {field.name} must be one of {', '.join(choices)}; "
                                   f"got '{value}'")
            value = getattr(self, field.name)
            wrong = self.out_of_range(field.name, value)
            if wrong:
                raise HParamsError(f"hparam {field.name} {wrong}, got {value}")
        if self.peak_learning_rate and self.learning_rate != 1.0:
            raise HParamsError(f"set learning_rate={self.learning_rate} (a multiplier on the "
                               f"paper's schedule) or peak_learning_rate="
                               f"{self.peak_learning_rate} (its peak), not both")
        if self.d_model % self.num_heads:
            raise HParamsError(f"d_model={self.d_model} must be divisible by "
                               f"num_heads={self.num_heads}")

    @property
    def schedule_multiplier(self):
        """The factor on the paper's d_model^-0.5 * min(step^-0.5, step * warmup^-1.5) that
        gives learning_rate, or peak_learning_rate at step warmup_steps."""
        if self.peak_learning_rate:
            return self.peak_learning_rate * (self.d_model * self.warmup_steps) ** 0.5
        return self.learning_rate

    @classmethod
    def out_of_range(cls, name, value):
        """What is wrong with the number `value` for the hparam `name` ("must be at least 1"),
        or None when it is in the hparam's range. The decoder checks its flags with this."""
        limits = {f.name: f.metadata.get("range") for f in dataclasses.fields(cls)}[name]
        return _range_error(value, *limits) if limits else None

    def replace(self, **changes):
        """A copy with `changes`; unknown names are errors."""
        self._check_names(changes)
        return dataclasses.replace(self, **changes)

    def override(self, overrides):
        """A copy with `"name=value,name=value"` applied, each value parsed as its field's type."""
        changes = {}
        for item in filter(None, (part.strip() for part in (overrides or "").split(","))):
            name, sep, text = item.partition("=")
            name, text = name.strip(), text.strip()
            if not sep or not name:
                raise HParamsError(f"bad --hparams item '{item}': expected name=value")
            self._check_names({name: text})
            changes[name] = _parse(name, self._types()[name], text)
        return self.replace(**changes)

    def to_dict(self):
        return dataclasses.asdict(self)

    def to_json(self):
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text):
        return cls.from_dict(json.loads(text))

    @classmethod
    def from_dict(cls, values):
        cls._check_names(values)
        return cls(**values)

    @classmethod
    def _types(cls):
        return {f.name: f.type for f in dataclasses.fields(cls)}

    @classmethod
    def _check_names(cls, values):
        for name in values:
            if name not in cls._types():
                raise HParamsError(f"unknown hparam '{name}'{did_you_mean(name, cls._types())}")


def _parse(name, kind, text):
    try:
        return kind(text)
    except ValueError:
        raise HParamsError(f"hparam {name} expects {kind.__name__}, got '{text}'") from None


class TrainConfigError(UserError, ValueError):
    """A training option out of its range, or options that contradict each other."""


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """How a training run trains, evaluates and keeps checkpoints: the trainer's flags, named as
    the flags (`--eval_every` is eval_every), so that the CLI, the Runner and the tests share one
    checked value. Checks that need the problem (which metrics keep_best_by may name) are the
    Evaluator's.
    """

    train_steps: int = 100_000  # total optimizer updates, counting those of earlier runs
    train_minutes: float | None = None  # this run's wall-clock budget for training; None: none
    eval_every: int = 1000  # 0: only at the end
    save_every: int | None = None  # None: eval_every, or only at the end
    eval_steps: int | None = None  # dev batches per teacher-forced evaluation; None: all
    eval_decode_examples: int = 3000  # decoded dev examples (a sample when more); 0: none
    eval_decode_every: int | None = None  # decode at evaluations that are multiples of it
    eval_beam_size: int = 1  # 1: greedy
    keep_best_by: str | None = None  # a metric name: keep the best checkpoint as best/
    early_stopping: int = 0  # evaluations without improvement of keep_best_by; 0: never
    early_stopping_min_delta: float = 0.0
    average_last: int = 0  # average the last N checkpoints into avg/ at the end
    average_best: int = 0  # ... or the N best by keep_best_by
    keep_checkpoints: int = 20
    log_every: int = 100
    random_seed: int | None = None
    jit_compile: bool = False
    bleu_tokenize: str | None = None  # sacreBLEU's tokenizer for dev BLEU; None: the language's

    def __post_init__(self):
        at_least = {name: 1 for name in ("train_steps", "save_every", "eval_steps",
                                         "eval_decode_every", "keep_checkpoints",
                                         "log_every")}
        at_least.update({name: 0 for name in ("eval_every", "eval_decode_examples",
                                              "early_stopping", "average_last",
                                              "average_best")})
        for name, lowest in at_least.items():
            value = getattr(self, name)
            if value is not None and value < lowest:
                wanted = "be positive" if lowest else "not be negative"
                raise TrainConfigError(f"--{name} must {wanted}, got {value}")
        wrong = HParams.out_of_range("beam_size", self.eval_beam_size)  # --beam_size's range
        if wrong:
            raise TrainConfigError(f"--eval_beam_size {wrong}, got {self.eval_beam_size}")
        if self.eval_decode_every and self.eval_every and self.eval_decode_every % self.eval_every:
            raise TrainConfigError(f"--eval_decode_every={self.eval_decode_every} must be a "
                                   f"multiple of --eval_every={self.eval_every}")
        if self.train_minutes is not None and not 0 < self.train_minutes < math.inf:
            raise TrainConfigError(f"--train_minutes must be a positive number, got "
                                   f"{self.train_minutes}")
        if not 0 <= self.early_stopping_min_delta < math.inf:  # nan fails too
            raise TrainConfigError("--early_stopping_min_delta must be a finite number >= 0, got "
                                   f"{self.early_stopping_min_delta}")
        if self.average_last and self.average_best:
            raise TrainConfigError("pass --average_last or --average_best, not both")
        if self.early_stopping and not self.keep_best_by:
            raise TrainConfigError("--early_stopping needs --keep_best_by: the metric whose "
                                   "improvement it watches (e.g. bleu or loss)")
        if self.average_best and not self.keep_best_by:
            raise TrainConfigError("--average_best needs --keep_best_by: the metric that ranks "
                                   "the checkpoints")

    @property
    def save_interval(self):
        """Updates between checkpoints: save_every, or eval_every, or only at the end."""
        return self.save_every or self.eval_every or self.train_steps

    def decodes_at(self, step):
        """Whether the periodic evaluation at `step` decodes (the final one always does, unless
        eval_decode_examples is 0)."""
        return self.eval_decode_examples != 0 and (
            not self.eval_decode_every or step % self.eval_decode_every == 0)

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)
