"""Damaged data shards: training and decoding refuse them in one line naming the shard and the
command that mends it, and datagen finds them (by size, checksum, or for shards written before
records were kept by reading them) and writes the split again, byte for byte as before."""

import glob
import json
import os
import shutil

import pytest
from cli_output import error_lines, run_cli
from tiny_model_dir import train_flags

TRAIN = "test_short_reverse-train-00000-of-00002"
DEV = "test_short_reverse-dev-00000-of-00001"


@pytest.fixture
def data_copy(short_reverse_data, tmp_path):
    path = str(tmp_path / "data")
    shutil.copytree(short_reverse_data, path)
    return path


def contents(data_dir):
    """{file name: bytes} of the shards and statistics in data_dir."""
    return {os.path.basename(path): open(path, "rb").read()
            for path in glob.glob(f"{data_dir}/test_short_reverse-*")}


def datagen(data_dir, capsys):
    from t2t_lite.cli import datagen as datagen_cli

    return run_cli(datagen_cli.main, ["--problem=test_short_reverse", f"--data_dir={data_dir}"],
                   capsys)


def flip_a_byte(path, offset=100):
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 1]))


def test_datagen_records_every_shard(short_reverse_data):
    """Examples, bytes and SHA-256 of each shard, as they are on disk."""
    from t2t_lite.backends.tensorflow.pipeline import count_records
    from t2t_lite.data.shard_records import sha256

    for split, shards in (("train", 2), ("dev", 1), ("test", 1)):
        with open(f"{short_reverse_data}/test_short_reverse-{split}.stats.json") as f:
            stats = json.load(f)
        paths = sorted(glob.glob(f"{short_reverse_data}/test_short_reverse-{split}-*-of-*"))
        assert len(paths) == shards
        assert stats["shards"] == {
            os.path.basename(path): {"examples": count, "bytes": os.path.getsize(path),
                                     "sha256": sha256(path)}
            for path, count in zip(paths, count_records(paths))}
        assert sum(r["examples"] for r in stats["shards"].values()) == stats["examples"]


def test_a_cut_shard_is_refused_and_datagen_writes_it_again(data_copy, tmp_path, capsys):
    from t2t_lite.cli import trainer

    original = contents(data_copy)
    with open(f"{data_copy}/{TRAIN}", "r+b") as f:
        f.truncate(1000)
    model_dir = str(tmp_path / "model")
    code, _, err = run_cli(trainer.main, train_flags(
        model_dir, data_copy, 2, "--problem=test_short_reverse",
        "--hparams_set=transformer_tiny"), capsys)
    (line,) = error_lines(err)
    assert code == 2 and f"{data_copy}/{TRAIN} is 1,000 bytes, but datagen wrote " in line
    assert ("the train data is damaged; run `t2t-lite-datagen --problem=test_short_reverse "
            f"--data_dir={data_copy}` to write it again") in line
    assert not glob.glob(f"{model_dir}/ckpt-*")

    code, _, err = datagen(data_copy, capsys)
    assert code == 0, err
    assert (f"{data_copy}/{TRAIN} is 1,000 bytes, but datagen wrote "
            f"{len(original[TRAIN]):,}: writing the train split of test_short_reverse again"
            ) in err
    assert "test_short_reverse is ready" in err and "dev split" not in err
    assert contents(data_copy) == original


def test_a_changed_shard_is_found_by_its_checksum(data_copy, capsys):
    """Same size, one byte changed: the size check of other commands cannot see it, datagen's
    checksum does."""
    original = contents(data_copy)
    flip_a_byte(f"{data_copy}/{DEV}")
    code, _, err = datagen(data_copy, capsys)
    assert code == 0, err
    assert (f"{data_copy}/{DEV} changed since datagen wrote it (its SHA-256 differs): writing "
            "the dev split of test_short_reverse again") in err
    assert contents(data_copy) == original


def test_decoding_a_cut_split_is_one_line(model_copy, data_copy, capsys):
    """--split=dev on a cut dev shard: TensorFlow's DataLossError traceback before."""
    from t2t_lite.cli import decoder

    with open(f"{data_copy}/{DEV}", "r+b") as f:
        f.truncate(os.path.getsize(f"{data_copy}/{DEV}") - 7)
    code, out, err = run_cli(decoder.main, [f"--model_dir={model_copy}",
                                            f"--data_dir={data_copy}", "--split=dev"], capsys)
    (line,) = error_lines(err)
    assert code == 2 and out == "" and "Traceback" not in err
    assert f"{data_copy}/{DEV} is " in line and "the dev data is damaged" in line


def test_shards_written_before_records_are_read_through_and_recorded(data_copy, capsys):
    """A data_dir from before the records: datagen reads each shard to its end, writes a cut
    split again, and records the intact ones as a new datagen would."""
    original = contents(data_copy)
    for split in ("train", "dev", "test"):
        path = f"{data_copy}/test_short_reverse-{split}.stats.json"
        with open(path) as f:
            stats = json.load(f)
        del stats["shards"]
        with open(path, "w") as f:
            json.dump(stats, f)
    with open(f"{data_copy}/{TRAIN}", "r+b") as f:
        f.truncate(5000)
    code, _, err = datagen(data_copy, capsys)
    assert code == 0, err
    assert (f"{data_copy}/{TRAIN} does not read to its end: writing the train split of "
            "test_short_reverse again") in err
    assert "dev split" not in err and "test split" not in err
    now = contents(data_copy)
    assert {name: data for name, data in now.items() if "stats" not in name} == {
        name: data for name, data in original.items() if "stats" not in name}
    for name in original:
        if name.endswith("stats.json"):
            assert json.loads(now[name]) == json.loads(original[name]), name


def test_a_changed_shard_met_while_reading_is_one_line(model_copy, data_copy, tmp_path,
                                                        capsys):
    """A shard changed in place (its size intact) fails TFRecord's CRC only when it is read:
    --split then stops with one line naming the data_dir and the datagen run that finds it (a
    DataLossError traceback before); training checks the shards' SHA-256 at its start (the
    dev split's first, which it evaluates on), and stops there with one line naming the
    shard, not hours in."""
    from t2t_lite.cli import decoder, trainer

    datagen_run = (f"run `t2t-lite-datagen --problem=test_short_reverse --data_dir={data_copy}`"
                   " to check every shard")
    flip_a_byte(f"{data_copy}/{DEV}")
    code, out, err = run_cli(decoder.main, [f"--model_dir={model_copy}",
                                            f"--data_dir={data_copy}", "--split=dev"], capsys)
    (line,) = error_lines(err)
    assert code == 2 and out == "" and "Traceback" not in err
    assert f"a shard in {data_copy} is damaged (corrupted record at" in line
    assert datagen_run in line

    flip_a_byte(f"{data_copy}/{TRAIN}")
    code, _, err = run_cli(trainer.main, train_flags(
        str(tmp_path / "model"), data_copy, 2, "--problem=test_short_reverse",
        "--hparams_set=transformer_tiny"), capsys)
    (line,) = error_lines(err)
    assert code == 2 and "Traceback" not in err and line == (
        f"t2t-lite: error: {data_copy}/{DEV} changed since datagen wrote it (its SHA-256 "
        "differs): the dev data is damaged; run `t2t-lite-datagen --problem=test_short_reverse "
        f"--data_dir={data_copy}` to write it again")


def test_the_jax_path_finds_a_changed_shard_by_its_checksum(data_copy):
    """Read without TensorFlow (the JAX path, which checks no record CRC), a shard changed in
    place (its size intact) is refused by its SHA-256 in one line, as TensorFlow's CRC refuses
    it; the same shard unchanged reads."""
    from t2t_lite import registry
    from t2t_lite.utils.errors import UserError

    problem = registry.problem("test_short_reverse")
    assert len(list(problem.examples("dev", data_copy, tensorflow=False))) == 500
    flip_a_byte(f"{data_copy}/{DEV}")
    with pytest.raises(UserError) as error:
        list(problem.examples("dev", data_copy, tensorflow=False))
    assert str(error.value) == (
        f"{data_copy}/{DEV} changed since datagen wrote it (its SHA-256 differs): the dev data "
        "is damaged; run `t2t-lite-datagen --problem=test_short_reverse "
        f"--data_dir={data_copy}` to write it again")


def test_a_split_without_its_stats_is_read_with_a_warning_and_datagen_records_it(
        data_copy, capsys, caplog):
    """The dev split's stats.json deleted: reading it (on either path) warns once that its
    shards cannot be checked; datagen reads them to their end, says so, and records them as
    the datagen that wrote them did, so that a shard changed afterwards is found again."""
    from t2t_lite import registry
    from t2t_lite.utils.errors import UserError

    stats_path = f"{data_copy}/test_short_reverse-dev.stats.json"
    with open(stats_path) as f:
        original = json.load(f)
    os.remove(stats_path)
    problem = registry.problem("test_short_reverse")
    for tensorflow in (False, True):
        assert len(list(problem.examples("dev", data_copy, tensorflow=tensorflow))) == 500
    (warning,) = [r.getMessage() for r in caplog.records if "no record" in r.getMessage()]
    assert warning.startswith(f"the dev shards of test_short_reverse in {data_copy} have no "
                              "record of what datagen wrote (test_short_reverse-dev.stats.json "
                              "missing or damaged, or from an older datagen)")

    code, _, err = datagen(data_copy, capsys)
    assert code == 0, err
    assert (f"{stats_path} was missing: the dev shards read to their end and are now "
            "recorded") in err
    with open(stats_path) as f:
        recorded = json.load(f)
    assert recorded == {"examples": original["examples"], "shards": original["shards"]}
    flip_a_byte(f"{data_copy}/{DEV}")
    with pytest.raises(UserError, match="changed since datagen wrote it"):
        list(problem.examples("dev", data_copy, tensorflow=False))
