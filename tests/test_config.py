import dataclasses

import pytest

from t2t_lite.config import HParams, HParamsError
from t2t_lite.utils.errors import UserError


def test_overrides_are_parsed_as_their_field_types():
    hparams = HParams().override("num_heads=16, dropout=0.3,norm_position=pre")
    assert hparams.num_heads == 16 and type(hparams.num_heads) is int
    assert hparams.dropout == 0.3 and hparams.norm_position == "pre"
    assert HParams().override("learning_rate=2").learning_rate == 2.0
    assert HParams().override("") == HParams()


@pytest.mark.parametrize("overrides, message", [
    ("num_head=16", "unknown hparam 'num_head' \\(did you mean num_heads"),
    ("num_heads=1.5", "num_heads expects int, got '1.5'"),
    ("dropout=high", "dropout expects float, got 'high'"),
    ("num_heads", "expected name=value"),
    ("norm_position=middle", "norm_position must be one of post, pre"),
    ("num_heads=7", "d_model=512 must be divisible by num_heads=7"),
    ("dropout=1.5", "dropout must be in \\[0, 1\\)"),
    ("accumulate_steps=0", "accumulate_steps must be at least 1"),
    ("learning_rate=-1", "learning_rate must be a finite number > 0, got -1.0"),
    ("learning_rate=nan", "learning_rate must be a finite number > 0, got nan"),
    ("adam_beta2=1", "adam_beta2 must be in \\[0, 1\\), got 1.0"),
    ("adam_epsilon=0", "adam_epsilon must be a finite number > 0"),
    ("clip_grad_norm=inf", "clip_grad_norm must be a finite number >= 0, got inf"),
    ("alpha=nan", "alpha must be in \\[0, 10\\], got nan"),
    ("extra_length=-1", "extra_length must be at least 0"),
    ("d_model=1099511627776", "d_model must be at most 65536, got 1099511627776"),
    ("num_encoder_layers=1000000", "num_encoder_layers must be at most 1024"),
])
def test_bad_overrides_are_user_errors(overrides, message):
    with pytest.raises(HParamsError, match=message) as error:
        HParams().override(overrides)
    assert isinstance(error.value, UserError)


def test_json_round_trip_keeps_values_and_types():
    hparams = HParams().override("d_model=256,num_heads=4,learning_rate=2,precision=mixed_float16")
    assert HParams.from_json(hparams.to_json()) == hparams
    with pytest.raises(HParamsError, match="unknown hparam 'hidden_size'"):
        HParams.from_json('{"hidden_size": 512}')


def test_hparams_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        HParams().d_model = 1024
    with pytest.raises(HParamsError, match="unknown hparam"):
        HParams().replace(d_modle=1024)
