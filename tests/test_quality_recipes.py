"""benchmarks/quality.py's recipes are what their names and the results page say: each is
flags the trainer accepts, with one --hparams (argparse keeps only the last of several), and
the two a final comparison rests on resolve to the README's path now and as issue 42 found it.
A recipe that silently took a set's later change (sized weight decay, 2026-11-30) would have
measured something else than the record it reproduces."""

import re
import shlex
from pathlib import Path

import pytest
from beside import import_beside

from t2t_lite import registry
from t2t_lite.cli import trainer

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def quality():
    return import_beside(ROOT / "benchmarks", "quality")


def resolved(flags):
    """(TrainConfig, HParams) the trainer makes of a recipe's flags, as quality.py runs it."""
    args = trainer.parse_args(["--problem=quality_jaen", "--model_dir=unused",
                               "--train_minutes=30", "--bleu_tokenize=none", *flags])
    return trainer.train_config(args), registry.hparams(args.hparams_set).override(args.hparams)


def test_every_recipe_is_one_set_one_override_list_and_valid_flags(quality):
    for name, flags in quality.RECIPES.items():
        for flag in ("--hparams_set=", "--hparams="):
            given = [f for f in flags if f.startswith(flag)]
            assert len(given) <= 1 and (given or flag == "--hparams="), (name, given)
        resolved(flags)  # unknown flags exit 2, unknown hparams and bad values raise


def test_the_set_is_the_readmes_own_corpus_command(quality):
    """The recipe transformer_small_data is the README's trainer command, whatever the set
    becomes: the same flags give the same config and hparams."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    command = next(line for line in readme.splitlines()
                   if line.startswith("t2t-lite-trainer") and "transformer_small_data" in line)
    readme_flags = [flag for flag in shlex.split(command)[1:]
                    if not re.match(r"--(problem|data_dir|model_dir|train_minutes)=", flag)]
    assert resolved(readme_flags) == resolved(quality.RECIPES["transformer_small_data"])


def test_the_path_before_issue_42_keeps_its_shape_whatever_the_set_becomes(quality):
    """transformer_small_data_before: 3+3 layers, the paper's rate to the end, a checkpoint
    every 50 updates for the last 10 averaged, and no weight decay, fixed or sized; its
    variant with the set's sized decay differs from it in that alone."""
    config, hparams = resolved(quality.RECIPES["transformer_small_data_before"])
    assert (hparams.num_encoder_layers, hparams.num_decoder_layers) == (3, 3)
    assert (hparams.budget_cooldown, hparams.weight_decay, hparams.budget_max_weight_decay) == (
        0, 0, 0)
    assert (config.save_every, config.average_last, config.keep_best_by) == (50, 10, "bleu")
    sized_config, sized = resolved(quality.RECIPES[
        "transformer_small_data_before_sized_weight_decay"])
    set_decay = registry.hparams("transformer_small_data").budget_max_weight_decay
    assert set_decay > 0 and sized_config == config
    assert sized == hparams.replace(budget_max_weight_decay=set_decay)
