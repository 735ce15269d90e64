"""The decoder command and the Translator behind it, on the trained reversal model."""

import io
import os
import re
import shutil
import subprocess
import sys

import pytest
from cli_output import error_lines

from t2t_lite import cli
from t2t_lite.cli import decoder

SOURCES = ["1 2 3", "", "7 7 0 5 1 2", "4", "9 8 7 6 5 4 3 2", " ".join(["3"] * 80), "6 2"]


@pytest.fixture(scope="module")
def translator(trained_reverse):
    runner = trained_reverse.runner
    return runner.translator(batch_size=3)


def reverse(text):
    return " ".join(text.split()[::-1])


def test_translations_keep_the_input_order_and_empty_lines(translator):
    """Sorted into batches of similar length, returned in order; each equal to translating
    the line alone."""
    batched = translator.translate(SOURCES)
    assert batched[1] == ("", 0.0)
    # The model learned the task (mostly), so the order is checked on real translations.
    assert sum(t.text == reverse(s) for t, s in zip(batched, SOURCES)) >= 4
    alone = [translator.translate([source])[0] for source in SOURCES]
    assert [t.text for t in batched] == [t.text for t in alone]
    assert [t.score for t in batched] == pytest.approx([t.score for t in alone], rel=1e-5)


def test_an_over_long_input_is_truncated_to_max_length(translator):
    tokens = translator.vocabulary.encode(SOURCES[5])
    assert translator.is_truncated(tokens) and translator.max_input_tokens == 63
    assert translator.translate([SOURCES[5]]) == translator.translate(["3 " * 63])


def run_decoder(argv, capsys):
    code = 0
    try:
        cli.run(decoder.main, argv)
    except SystemExit as exit_info:
        code = exit_info.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def write_lines(path, lines):
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return str(path)


def test_decoder_bleu_equals_sacrebleu_on_the_written_files(trained_reverse, translator, tmp_path,
                                                            capsys):
    references = [reverse(s) for s in SOURCES]
    references[0], references[2] = "3 2", "2 1 5 0 7 7 7"  # so that BLEU is not 100
    source = write_lines(tmp_path / "src.txt", SOURCES)
    reference = write_lines(tmp_path / "ref.txt", references)
    output = tmp_path / "out.txt"
    for flags, sacrebleu_flags in [([], []), (["--bleu_tokenize=intl", "--bleu_lowercase"],
                                              ["-tok", "intl", "-lc"])]:
        code, out, err = run_decoder([
            f"--model_dir={trained_reverse.model_dir}", f"--decode_from_file={source}",
            f"--decode_to_file={output}", f"--decode_reference={reference}",
            "--batch_size=3"] + flags, capsys)
        assert code == 0
        assert f"{source} line 6 has 80 tokens: only its first 63 are translated" in err
        written = output.read_text(encoding="utf-8").split("\n")
        assert written == [t.text for t in translator.translate(SOURCES)] + [""]
        score = float(re.search(r"BLEU = (\S+)", out).group(1))
        expected = subprocess.run(
            [sys.executable, "-m", "sacrebleu", reference, "-i", str(output), "-b", "-w", "2"]
            + sacrebleu_flags, capture_output=True, text=True, check=True).stdout
        assert 0 < score < 100 and score == float(expected)
        assert ("tok:intl" in out and "case:lc" in out) == bool(flags)


def test_decoder_reads_stdin_line_by_line(trained_reverse, translator, monkeypatch, capsys):
    stdin = io.TextIOWrapper(io.BytesIO(b"1 2 3\n\xff\n7 x\n\n4 5\n"), encoding="utf-8")
    monkeypatch.setattr(sys, "stdin", stdin)
    code, out, err = run_decoder([f"--model_dir={trained_reverse.model_dir}"], capsys)
    assert code == 0
    expected = [t.text for t in translator.translate(["1 2 3", "", "", "", "4 5"])]
    assert out.splitlines() == expected and expected[1] == ""  # one output line per input
    assert "stdin, line 2: invalid UTF-8" in err and "stdin line 3: 'x' is not a symbol" in err


@pytest.mark.parametrize("content, flags, message", [
    (b"1 2\n3 \xe9 4\n", [], "line 2: invalid UTF-8"),
    (b"1 2\n3 4 z\n", [], "src.txt line 2: 'z' is not a symbol"),
    (b"1 2\n3 4\n", ["--decode_reference=REF"], "has 1 lines but"),
    (b"1 2\n", ["--decode_reference=MISSING"], "cannot read"),
    (b"1 2\n", ["--checkpoint_path=MODEL/ckpt-1"], "is not a checkpoint"),
    (b"1 2\n", ["--model_dir=EMPTY"], "holds no checkpoint"),
    (b"1 2\n", ["--beam_size=0"], "--beam_size must be at least 1, got 0"),
])
def test_decoder_mistakes_are_one_line_errors(trained_reverse, tmp_path, capsys, content, flags,
                                               message):
    (tmp_path / "src.txt").write_bytes(content)
    (tmp_path / "ref.txt").write_text("2 1\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    for name in ("hparams.json", "problem.json"):
        shutil.copy(f"{trained_reverse.model_dir}/{name}", empty)
    replacements = {"REF": str(tmp_path / "ref.txt"), "MISSING": str(tmp_path / "missing.txt"),
                    "MODEL": trained_reverse.model_dir, "EMPTY": str(empty)}
    flags = [re.sub("|".join(replacements), lambda m: replacements[m.group(0)], f)
             for f in flags]
    code, _, err = run_decoder([f"--model_dir={trained_reverse.model_dir}",
                                f"--decode_from_file={tmp_path / 'src.txt'}",
                                f"--decode_to_file={tmp_path / 'out.txt'}"] + flags, capsys)
    # Progress logs go to stderr too (e.g. "restored ..."); the error is one line of its own.
    errors = error_lines(err)
    assert code == 2 and len(errors) == 1 and message in errors[0], err
    assert not (tmp_path / "out.txt").exists()


@pytest.mark.parametrize("output, message", [
    ("DIR", "--decode_to_file DIR is a directory: pass the path of a file"),
    ("FILE/out.txt", ("--decode_to_file FILE/out.txt cannot be written: FILE is a file, not a "
                      "directory: pass a path you can write to")),
    ("FILE/sub/out.txt", ("--decode_to_file FILE/sub/out.txt cannot be written: its directory "
                          "cannot be created (Not a directory): pass a path you can write to")),
    ("/proc/t2t_lite_out.txt", ("--decode_to_file /proc/t2t_lite_out.txt cannot be written (No "
                                "such file or directory): pass a path in a directory you can "
                                "write to")),
])
def test_the_output_file_is_checked_before_the_model_is_loaded(output, message, trained_reverse,
                                                               tmp_path, capsys):
    """It was written only after translating everything, and the error named a temporary
    .tmp-XXXX file beside it."""
    (tmp_path / "DIR").mkdir()
    source = write_lines(tmp_path / "FILE", ["1 2 3"])
    replace = {"DIR": str(tmp_path / "DIR"), "FILE": source}
    output, message = (re.sub("DIR|FILE", lambda m: replace[m.group(0)], text)
                       for text in (output, message))
    code, out, err = run_decoder([f"--model_dir={trained_reverse.model_dir}",
                                  f"--decode_from_file={source}", f"--decode_to_file={output}"],
                                 capsys)
    assert code == 2 and out == "" and error_lines(err) == [f"t2t-lite: error: {message}"], err
    assert "restored" not in err and "translated" not in err
    assert sorted(os.listdir(tmp_path)) == ["DIR", "FILE"] and not os.listdir(tmp_path / "DIR")


def test_a_byte_order_mark_opening_the_input_file_is_dropped(trained_reverse, translator,
                                                            tmp_path, capsys):
    """A file saved by Notepad starts with U+FEFF; it was refused as "'\ufeff1' is not a
    symbol", invisibly. The own-files reader of datagen already dropped it."""
    source = tmp_path / "bom.txt"
    source.write_bytes("\ufeff1 2 3\n6 2\n".encode("utf-8"))
    output = tmp_path / "out.txt"
    code, _, err = run_decoder([f"--model_dir={trained_reverse.model_dir}",
                                f"--decode_from_file={source}", f"--decode_to_file={output}"],
                               capsys)
    assert code == 0, err
    expected = [t.text for t in translator.translate(["1 2 3", "6 2"])]
    assert output.read_text(encoding="utf-8").splitlines() == expected


def test_a_piped_decoder_writes_one_line_per_input_line(trained_reverse, translator):
    """Logs go to stderr, and a line that cannot be translated gives an empty line, so that
    `decoder < in > out` keeps out aligned with in. A byte order mark opening stdin is no
    part of line 1."""
    result = subprocess.run(
        [sys.executable, "-c", "from t2t_lite.cli.decoder import run; run()",
         f"--model_dir={trained_reverse.model_dir}",
         f"--usr_dir={os.path.join(os.path.dirname(__file__), 'usr_problems.py')}"],
        input=b"\xef\xbb\xbf1 2 3\n4 \xff 5\n7 x\n6 2\n", capture_output=True, timeout=300)
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    expected = [t.text for t in translator.translate(["1 2 3", "", "", "6 2"])]
    assert result.stdout.decode().split("\n") == expected + [""]
    err = result.stderr.decode()
    assert "restored" in err and "stdin, line 2: invalid UTF-8" in err
    assert "stdin line 3: 'x' is not a symbol" in err
