"""Progress of long jobs: lines done, rate and ETA on stderr while the decoder translates a file
or a split, while datagen writes a split, and while checkpoints are averaged; never on
stdout."""

import io
import logging
import re

import pytest
from cli_output import run_cli

from t2t_lite.cli import decoder
from t2t_lite.utils import progress
from t2t_lite.utils.progress import Progress, duration


class Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.fixture
def every_update(monkeypatch):
    """Shows progress at every update instead of every 30 s (or 0.5 s on a terminal)."""
    monkeypatch.setattr(progress, "LOG_EVERY_SECONDS", 0.0)
    monkeypatch.setattr(progress, "REDRAW_EVERY_SECONDS", 0.0)


def test_progress_counts_and_estimates_the_time_left(every_update, caplog):
    counter = Progress("translated", "lines", total=10, stream=io.StringIO())
    with caplog.at_level(logging.INFO, logger="t2t_lite"):
        counter.update(4)
        counter.update(1)
    first, second = caplog.messages
    assert re.fullmatch(r"translated 4/10 lines  [0-9.,]+ lines/s  ETA \d+m\d\ds", first)
    rate = float(re.search(r"  ([0-9.,]+) lines/s", second)[1].replace(",", ""))
    assert second.startswith("translated 5/10 lines") and rate > 0
    assert (duration(59), duration(61), duration(3720)) == ("0m59s", "1m01s", "1h02m")
    unknown = Progress("read", "pairs", stream=io.StringIO())
    unknown.update(3)
    assert re.fullmatch(r"read 3 pairs  [0-9.,]+ pairs/s", unknown.line())  # no total, no ETA


def test_on_a_terminal_one_line_is_redrawn_and_cleared(every_update, caplog):
    terminal = Terminal()
    counter = Progress("translated", "lines", total=3, stream=terminal)
    counter.update(1)
    counter.update(2)
    counter.close()
    drawn = terminal.getvalue().split("\r\033[K")
    assert drawn[0] == "" and drawn[-1] == "" and len(drawn) == 4
    assert drawn[1].startswith("translated 1/3 lines") and drawn[2].startswith("translated 3/3")
    assert "\n" not in terminal.getvalue() and caplog.messages == []  # not in the log


def test_the_decoder_shows_progress_on_stderr_only(tiny_model, tmp_path, capsys, every_update):
    sources = ["1 2 3", "4 5", "", "6 7 1 2", "3", "2 2"]
    source = tmp_path / "in.txt"
    source.write_text("".join(f"{line}\n" for line in sources), encoding="utf-8")
    code, out, err = run_cli(decoder.main, [f"--model_dir={tiny_model}", "--batch_size=2",
                                            f"--decode_from_file={source}"], capsys)
    assert code == 0, err
    assert len(out.splitlines()) == len(sources) and "translated" not in out
    counts = [int(n) for n in re.findall(r"translated (\d+)/6 lines  [0-9.,]+ lines/s  ETA ", err)]
    assert counts == [2, 4, 6]  # after each batch of 2 (the empty line is in a batch too)


def test_datagen_shows_pairs_read_of_the_expected_count(tmp_path, caplog, every_update):
    from test_algorithmic import small

    from t2t_lite.problems.algorithmic import AlgorithmicReverse

    problem = small(AlgorithmicReverse, train=50, dev=20, test=20)
    with caplog.at_level(logging.INFO, logger="t2t_lite"):
        problem.generate_data(str(tmp_path))
    for split, total in (("train", 50), ("dev", 20), ("test", 20)):
        counts = [int(n) for n in re.findall(
            rf"algorithmic_reverse {split}: read (\d+)/{total} pairs  [0-9.,]+ pairs/s  ETA ",
            caplog.text)]
        assert counts == list(range(1, total + 1))


def test_split_decoding_and_averaging_show_progress(model_copy, tmp_path, capsys, every_update):
    """--split translates the whole split (500 dev lines of 1-8 symbols here); averaging counts
    the checkpoints it has read."""
    from t2t_lite.cli import avg_checkpoints

    code, out, err = run_cli(decoder.main, [
        f"--model_dir={model_copy}", "--split=dev", "--batch_size=100", "--beam_size=1",
        "--extra_length=2", f"--decode_to_file={tmp_path / 'dev.out'}"], capsys)
    assert code == 0, err
    counts = [int(n) for n in re.findall(r"translated (\d+)/500 lines  [0-9.,]+ lines/s  ETA ",
                                         err)]
    assert counts[-1] == 500 and counts == sorted(counts) and len(counts) >= 5, err
    assert "translated" not in out

    code, out, err = run_cli(avg_checkpoints.main, [
        f"--model_dir={model_copy}", "--n=2", f"--output_dir={tmp_path / 'avg'}"], capsys)
    assert code == 0, err
    assert re.findall(r"averaged (\d)/2 checkpoints  [0-9.,]+ checkpoints/s", err) == ["1", "2"]
    assert "averaged" not in out
