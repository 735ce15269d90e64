"""datagen's BPE-dropout (--bpe_dropout, Provilkov et al. 2020): each training pair written in
several random segmentations of the same text, dev and test as decoding segments them, and the
stats counting one segmentation's target tokens, so that a time budget's epochs stay epochs of
the pairs."""

import json
import os
import re
from pathlib import Path

import pytest
from cli_output import error_lines, run_cli
from test_translate_files import (
    EMPTY_TRAIN_LINES,
    VOCAB_SIZE,
    sentence_pairs,
    write_corpus,
)

from t2t_lite import registry
from t2t_lite.backends.tensorflow.pipeline import read_examples
from t2t_lite.cli import datagen

SAMPLES = 3
FLAGS = ["--problem=sampled", "--source_lang=en", "--target_lang=de",
         f"--vocab_size={VOCAB_SIZE}"]


@pytest.fixture(scope="module")
def sampled(tmp_path_factory):
    """(files_dir, data_dir) of the test corpus made with BPE-dropout 0.1, 3 samples a pair."""
    files = write_corpus(tmp_path_factory.mktemp("files"))
    data = str(tmp_path_factory.mktemp("data"))
    datagen.main([*FLAGS, f"--files_dir={files}", f"--data_dir={data}", "--bpe_dropout=0.1",
                  f"--bpe_dropout_samples={SAMPLES}"])
    return files, data


def examples(problem, split, data_dir):
    """[(inputs ids, targets ids)] of the split's shards, EOS dropped."""
    return [tuple(list(example[side][:-1]) for side in ("inputs", "targets"))
            for example in read_examples(problem.shard_paths(split, data_dir), shuffle=False)
            .as_numpy_iterator()]


def test_each_training_pair_is_written_in_several_segmentations_of_its_text(sampled):
    _, data = sampled
    problem = registry.problem("sampled", data)
    vocabulary = problem.vocabulary(data)
    spec = json.loads(Path(data, "sampled.problem.json").read_text())
    assert spec["bpe_dropout"] == {"alpha": 0.1, "samples": SAMPLES}
    pairs = [pair for pair in sentence_pairs("train") if pair[0].strip() and pair[1].strip()]
    train = examples(problem, "train", data)
    # every sample decodes to its pair's text: SAMPLES of each pair, nothing else
    texts = sorted(tuple(vocabulary.decode(ids) for ids in example) for example in train)
    assert texts == sorted(pairs * SAMPLES)
    # and is another segmentation than datagen's one where a merge was dropped: on both sides
    # some are (most sentences here take tens of merges), and some are not (two short words)
    for side in (0, 1):
        plain = {vocabulary.decode(ids): vocabulary.encode(vocabulary.decode(ids))
                 for ids in (example[side] for example in train)}
        changed = sum(example[side] != plain[vocabulary.decode(example[side])]
                      for example in train)
        assert 0 < changed < len(train)
    stats = json.loads(Path(problem.stats_path("train", data)).read_text())
    assert stats["examples"] == SAMPLES * len(pairs) == len(train)
    assert stats["skipped_empty"] == len(EMPTY_TRAIN_LINES)
    # one segmentation's target tokens (EOS included) a pair: the mean over the samples
    sampled_tokens = sum(len(targets) + 1 for _, targets in train)
    assert abs(stats["target_tokens"] - sampled_tokens / SAMPLES) <= 1
    for split in ("dev", "test"):  # as decoding segments them, once each
        expected = [pair for pair in sentence_pairs(split) if pair[0].strip() and pair[1].strip()]
        assert sorted(examples(problem, split, data)) == sorted(
            (vocabulary.encode(source), vocabulary.encode(target)) for source, target in expected)


@pytest.mark.parametrize("flags, message", [
    (["--bpe_dropout=1.5"], r"--bpe_dropout is a probability between 0 and 1, got 1.5"),
    (["--bpe_dropout_samples=4"],
     r"--bpe_dropout_samples is a positive number of segmentations, with --bpe_dropout"),
    (["--bpe_dropout=0.1", "--bpe_dropout_samples=0"], r"--bpe_dropout_samples is a positive"),
    (["--bpe_dropout=0.1", "--vocab_type=unigram"],
     r"--bpe_dropout drops merges of a BPE vocabulary, and this one is unigram"),
])
def test_bpe_dropout_flags_that_cannot_work_are_one_line(flags, message, tmp_path, capsys):
    files = write_corpus(tmp_path / "files")
    code, _, err = run_cli(datagen.main, [*FLAGS, f"--files_dir={files}",
                                          f"--data_dir={tmp_path / 'data'}", *flags], capsys)
    assert code == 2 and len(error_lines(err)) == 1 and re.search(message, err), err
    assert not (tmp_path / "data").exists() or not os.listdir(tmp_path / "data")


def test_data_made_with_bpe_dropout_is_not_silently_remade_without_it(sampled, capsys):
    files, data = sampled
    code, _, err = run_cli(datagen.main, [*FLAGS, f"--files_dir={files}", f"--data_dir={data}"],
                           capsys)
    assert code == 2 and "has data of sampled made with other bpe_dropout" in err, err
    code, _, err = run_cli(datagen.main, ["--problem=sampled", f"--data_dir={data}"], capsys)
    assert code == 0, err  # the recorded problem, already made: nothing to do


def test_a_budget_suggests_bpe_dropout_only_where_datagen_could_add_it(sampled):
    """The trainer's suggestion (training.regularization.subword_sampling_advice) is for data of
    one's own corpus with a BPE vocabulary written without --bpe_dropout: not for data written
    with it, nor for a unigram vocabulary (datagen refuses it there), nor a registered problem."""
    _, data = sampled
    problem = registry.problem("sampled", data)
    assert not problem.could_sample_subwords()
    plain = {**problem.spec, "bpe_dropout": None}
    assert type(problem)("plain", plain).could_sample_subwords()
    assert not type(problem)("plain", {**plain, "vocab_type": "unigram"}).could_sample_subwords()
    assert not registry.problem("algorithmic_reverse").could_sample_subwords()
