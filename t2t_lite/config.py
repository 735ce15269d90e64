"""HParams: the typed, frozen settings of a model and its training.

Unlike tensor2tensor's HParams, an override with an unknown name or a value of the wrong type is an
error, not a silently added attribute. Defaults are the paper's base model (Vaswani et al. 2017).
"""

import dataclasses
import json

from t2t_lite.utils.errors import UserError, did_you_mean


class HParamsError(UserError, ValueError):
    """An unknown hparam, a value of the wrong type, or an inconsistent combination."""


# Hparams that change how a model trains but none of its variables, so that a resumed run may
# change them (e.g. a lower learning_rate after the loss diverged, or float16 to go faster).
TRAINING_ONLY = ("dropout", "attention_dropout", "relu_dropout", "batch_size", "label_smoothing",
                 "learning_rate", "warmup_steps", "clip_grad_norm", "accumulate_steps",
                 "precision")


def _choice(default, *choices):
    return dataclasses.field(default=default, metadata={"choices": (default,) + choices})


@dataclasses.dataclass(frozen=True)
class HParams:
    # Model (Table 3 names: N, d_model, d_ff, h, P_drop).
    num_encoder_layers: int = 6
    num_decoder_layers: int = 6
    d_model: int = 512
    d_ff: int = 2048
    num_heads: int = 8
    dropout: float = 0.1  # on each sublayer output and on embeddings + positions
    attention_dropout: float = 0.0  # on attention weights (not in the paper)
    relu_dropout: float = 0.0  # inside the feed-forward network (not in the paper)
    norm_position: str = _choice("post", "pre")  # post: LayerNorm(x + Sublayer(x))
    layer_norm_epsilon: float = 1e-6
    # Training.
    batch_size: int = 4096  # tokens per replica per micro-batch (max of source, target length)
    max_length: int = 256  # longer training examples are dropped
    label_smoothing: float = 0.1
    learning_rate: float = 1.0  # multiplies d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)
    warmup_steps: int = 4000
    adam_beta1: float = 0.9
    adam_beta2: float = 0.98
    adam_epsilon: float = 1e-9
    clip_grad_norm: float = 0.0  # 0 = no clipping
    accumulate_steps: int = 1  # micro-batches per optimizer update
    precision: str = _choice("float32", "mixed_float16", "mixed_bfloat16")
    # Decoding.
    beam_size: int = 4
    alpha: float = 0.6  # length penalty ((5 + length) / 6) ** alpha
    extra_length: int = 50  # decode at most input length + extra_length tokens

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
        self._check_ranges()

    def _check_ranges(self):
        positive = ("num_encoder_layers", "num_decoder_layers", "d_model", "d_ff", "num_heads",
                    "batch_size", "max_length", "warmup_steps", "accumulate_steps", "beam_size")
        for name in positive:
            if getattr(self, name) < 1:
                raise HParamsError(f"hparam {name} must be at least 1, got {getattr(self, name)}")
        for name in ("dropout", "attention_dropout", "relu_dropout", "label_smoothing"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise HParamsError(f"hparam {name} must be in [0, 1), got {getattr(self, name)}")
        if self.d_model % self.num_heads:
            raise HParamsError(f"d_model={self.d_model} must be divisible by "
                               f"num_heads={self.num_heads}")
        if self.extra_length < 0 or self.clip_grad_norm < 0 or self.alpha < 0:
            raise HParamsError("extra_length, clip_grad_norm and alpha must not be negative")

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
