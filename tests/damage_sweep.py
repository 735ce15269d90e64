"""Every kind of file a model_dir and a data_dir hold, damaged each way disks, copies and syncs
damage files (cut, emptied, bytes flipped in place, deleted), then read by the commands that
read it, on the Keras backend of this process (issue 47). Each case must end in one of two
outcomes:

- "resumed": exit 0 from the newest intact state. The decoder prints what the undamaged
  model_dir gives, or, where the damage reached the latest checkpoint's weights, what the one
  before it gives with a warning naming the damaged one; the trainer says which checkpoint it
  resumed from (the one before, with a warning, where the latest is damaged) and evaluates.
- "refused": exit 2, one or two error lines naming the damaged file (or its checkpoint),
  nothing on stdout, and the model_dir and data_dir left exactly as they were.

Anything else (a traceback, another output, a fallback without a word) is "wrong". The tests
run it in their process on TensorFlow (test_faults) and as a script on JAX (test_jax_training),
where TensorFlow cannot be imported, on the tiny model's files (`kinds`); and on TensorFlow on
the files a model of the user's own corpus adds (`own_corpus_kinds`: its SentencePiece model
and problem record, best/; test_translate_files); on JAX on what a run derives
(`derived_kinds`: best/, avg/, the CTranslate2 cache; test_jax_training); and on both on the
records a parser's data_dir holds (`data_record_kinds`: its vocabulary, problem record, tag
and label sets; test_parsing):

    KERAS_BACKEND=jax python tests/damage_sweep.py MODEL_DIR DATA_DIR WORK_DIR USR_DIR [SWEEP
        [TRAINER_FLAG ...]]

which prints one JSON object per case.
"""

import contextlib
import glob
import io
import json
import os
import shutil
import sys

from t2t_lite.data.shard_records import sha256

DAMAGES = ("cut", "emptied", "flipped", "deleted")
# Pairs the decoder scores (--score): each token's log-probability shows any weight changed, at
# a fraction of a search's tracing.
PAIRS = "1 2 3\t3 2 1\n4 5 6 7 8\t8 7 6 5 4\n9 0 9 0 1\t1 0 9 0 9\n"
TRAINER_FLAGS = ("--eval_every=0", "--eval_steps=1", "--eval_decode_examples=0",
                 "--random_seed=3")


def damage(path, how):
    """Damages the file `path` as `how` (one of DAMAGES) says: cut to half its size, emptied,
    16 bytes inverted in its middle (the size unchanged), or deleted."""
    size = os.path.getsize(path)
    if how == "deleted":
        os.remove(path)
    elif how == "emptied":
        open(path, "wb").close()
    elif how == "cut":
        os.truncate(path, size // 2)
    else:
        with open(path, "r+b") as f:
            f.seek(size // 2)
            flipped = bytes(byte ^ 0xFF for byte in f.read(16))
            f.seek(size // 2)
            f.write(flipped)


def kinds(model_dir, data_dir):
    """[(where, relative path, command)]: one file of each kind, with the command that reads
    it ("decoder" or "trainer"; both for the model_dir's records, which both read)."""
    from t2t_lite.training.checkpoint_list import checkpoint_paths

    latest = os.path.basename(checkpoint_paths(model_dir)[-1])
    found = [("model", name, command) for name in ("problem.json", "hparams.json")
             for command in ("decoder", "trainer")]
    found += [("model", "checkpoint", "decoder"), ("model", "eval/history.json", "trainer")]
    found += [("model", os.path.basename(path), "decoder")  # and the trainer where unread
              for path in sorted(glob.glob(os.path.join(model_dir, f"{latest}.*")))]
    for split in ("train", "dev"):  # the splits the trainer reads, each checked on its own
        (shard, *_) = sorted(glob.glob(os.path.join(data_dir, f"*-{split}-[0-9]*-of-[0-9]*")))
        found.append(("data", os.path.basename(shard), "trainer"))
    (stats,) = glob.glob(os.path.join(data_dir, "*-train.stats.json"))  # as the dev split's
    return found + [("data", os.path.basename(stats), "trainer")]


def kept_kinds(model_dir, data_dir):
    """[(where, relative path, command)] of the checkpoints the trainer keeps beside its own:
    best/'s and avg/'s (read by the decoder of that directory), and best/info.json (read by the
    trainer, to keep a better one)."""
    found = [("model", os.path.relpath(path, model_dir), part) for part in ("best", "avg")
             for path in sorted(glob.glob(os.path.join(model_dir, part, "ckpt-*")))]
    return found + [("model", os.path.join("best", "info.json"), "trainer")]


def derived_kinds(model_dir, data_dir):
    """kept_kinds and each file of the CTranslate2 cache (read by the decoder's ctranslate2
    engine, which must convert again): all that commands derive from a model_dir's
    checkpoints."""
    found = kept_kinds(model_dir, data_dir)
    (cache,) = glob.glob(os.path.join(model_dir, "ctranslate2", "*"))
    return found + [("model", os.path.relpath(os.path.join(cache, name), model_dir),
                     "ctranslate2") for name in sorted(os.listdir(cache))]


def data_record_kinds(model_dir, data_dir):
    """[(where, relative path, command)] of what the data_dir of a problem made by
    t2t-lite-datagen holds beside its shards and stats: its SentencePiece model, its problem
    record (NAME.problem.json) and, for a parser, its tag and label sets (NAME.symbols.json),
    all read by the decoder."""
    found = sorted(glob.glob(os.path.join(data_dir, "*.sentencepiece.model")))
    found += sorted(glob.glob(os.path.join(data_dir, "*.problem.json")))
    found += sorted(glob.glob(os.path.join(data_dir, "*.symbols.json")))
    assert len(found) >= 2, found  # a vocabulary and a record at least
    return [("data", os.path.basename(path), "decoder") for path in found]


def own_corpus_kinds(model_dir, data_dir):
    """data_record_kinds and kept_kinds: what a model of the user's own corpus adds (its
    CTranslate2 cache is derived_kinds', swept on JAX: the cache is the same on both)."""
    return data_record_kinds(model_dir, data_dir) + kept_kinds(model_dir, data_dir)


def contents(directory):
    """{relative path: SHA-256} of the files under `directory` but its locks."""
    found = {}
    for root, _, names in os.walk(directory):
        for name in names:
            if not name.endswith(".lock"):
                path = os.path.join(root, name)
                found[os.path.relpath(path, directory)] = sha256(path)
    return found


def run(main, argv):
    """(exit status, stdout, stderr) of a console script's main, run as its console script; an
    exception it lets through (a traceback in a console) is exit status "traceback"."""
    import traceback

    from t2t_lite import cli

    out, err, code = io.StringIO(), io.StringIO(), 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            cli.run(main, argv)
        except SystemExit as exit_info:
            code = exit_info.code
        except Exception:  # noqa: BLE001 (what the sweep looks for)
            code = "traceback"
            traceback.print_exc()
    return code, out.getvalue(), err.getvalue()


class Sweep:
    """The cases of one trained model_dir and its data_dir: the files `kinds_of(model_dir,
    data_dir)` lists, in copies of the two made once (so that a cache a command writes, such
    as the CTranslate2 conversion, is there to damage, and the fixtures stay as they were)."""

    def __init__(self, model_dir, data_dir, work_dir, trainer_flags, kinds_of=kinds,
                 decoders=("decoder",), pairs=PAIRS, decoder_flags=("--score",)):
        from t2t_lite.training.checkpoint_list import checkpoint_paths, checkpoint_step

        os.makedirs(work_dir, exist_ok=True)
        base = os.path.join(work_dir, "base")
        self.model_dir, self.data_dir = (os.path.join(base, part) for part in ("model", "data"))
        shutil.copytree(model_dir, self.model_dir, ignore=shutil.ignore_patterns("*.lock"))
        shutil.copytree(data_dir, self.data_dir, ignore=shutil.ignore_patterns("*.lock"))
        self.work_dir, self.trainer_flags = work_dir, trainer_flags
        self.decoder_flags = decoder_flags
        *before, latest = checkpoint_paths(self.model_dir)
        self.latest = os.path.basename(latest)
        self.previous = os.path.basename(before[-1]) if before else None
        self.steps = checkpoint_step(latest), before and checkpoint_step(before[-1])
        self.source = os.path.join(work_dir, "pairs.tsv")
        with open(self.source, "w", encoding="utf-8") as f:
            f.write(pairs)
        self.decoded = {}  # what each of the `decoders` (see command) prints on the intact copies
        for command in decoders:
            code, self.decoded[command], err = self.command(command, self.model_dir,
                                                            self.data_dir)
            assert code == 0, err
        self.kinds = kinds_of(self.model_dir, self.data_dir)  # with the caches now written
        if not any(where == "model" and name.startswith(self.latest + ".")
                   for where, name, _ in self.kinds):
            self.previous = None  # no fallback to see
        if self.previous:
            code, self.decoded[self.previous], err = self.command(
                "decoder", self.model_dir, self.data_dir,
                f"--checkpoint_path={os.path.join(self.model_dir, self.previous)}")
            assert code == 0 and self.decoded[self.previous] != self.decoded["decoder"], (
                "the two states must differ")

    def command(self, name, model_dir, data_dir, *flags):
        """Runs the command `name` reads a file with: the decoder ("decoder"; "best" or "avg",
        of that directory of model_dir; "ctranslate2", its CTranslate2 engine) with
        decoder_flags (by default scoring the given pairs), or the trainer."""
        if name != "trainer":
            from t2t_lite.cli import decoder

            engine = ["--engine=ctranslate2"] if name == "ctranslate2" else []
            where = os.path.join(model_dir, name) if name in ("best", "avg") else model_dir
            return run(decoder.main, [f"--model_dir={where}", f"--data_dir={data_dir}",
                                      f"--decode_from_file={self.source}",
                                      *self.decoder_flags, *engine, *flags])
        from t2t_lite.cli import trainer

        # To the latest step: resumed from there, nothing to train but the final evaluation.
        return run(trainer.main, [f"--model_dir={model_dir}", f"--data_dir={data_dir}",
                                  f"--train_steps={self.steps[0]}", *self.trainer_flags])

    def case(self, where, name, how, command):
        """One damaged copy, one command: {"file", "damage", "command", "exit", "outcome",
        "why"} (see the module's doc)."""
        self.count += 1  # a directory of its own: warnings are given once per directory
        case_dir = os.path.join(self.work_dir, f"case{self.count}")
        model_dir, data_dir = (os.path.join(case_dir, part) for part in ("model", "data"))
        shutil.copytree(self.model_dir, model_dir)
        shutil.copytree(self.data_dir, data_dir)
        path = os.path.join(model_dir if where == "model" else data_dir, name)
        key = os.path.relpath(path, case_dir)
        original = sha256(path)
        damage(path, how)
        before = contents(case_dir)
        code, out, err = self.command(command, model_dir, data_dir)
        after = contents(case_dir)
        shutil.rmtree(case_dir)
        in_latest = where == "model" and name.startswith(self.latest + ".")
        checkpoint = os.path.join(os.path.dirname(path), os.path.basename(path).split(".")[0])
        named = (path in err or os.path.basename(path).startswith("ckpt-") and checkpoint in err
                 or where == "data" and data_dir in err and name in err)
        if code == 2:
            lines = [line for line in err.splitlines() if "error:" in line]
            changed = sorted(file for file in before.keys() | after.keys()
                             if before.get(file) != after.get(file))
            outcome = ("refused" if out == "" and 1 <= len(lines) <= 2 and named and not changed
                       else "wrong")
            why = lines + [f"changed {', '.join(changed)}"] * bool(changed)
        elif code == 0 and command != "trainer":
            fallback = (command == "decoder" and self.previous and in_latest and named
                        and out == self.decoded[self.previous])
            outcome = "resumed" if fallback or out == self.decoded[command] else "wrong"
            why = [f"decoded {self.previous if fallback else self.latest}" if outcome == "resumed"
                   else f"another output: {out}"]
        elif code == 0:
            latest, previous = self.steps
            # From the latest checkpoint, or (with a warning) the newest intact one before it;
            # damaged data named, or written again as it was.
            resumed = (f"final evaluation at step {latest}:" in out and (
                f"(step {latest})" in err and (named or not in_latest)
                or f"(step {previous})" in err and in_latest and named)
                and (where == "model" or named or after.get(key) == original)
                and (named or not name.startswith(("best", "avg"))  # a kept copy: not lost,
                     or after.get(key) == before.get(key)))  # but where not read
            outcome = "resumed" if resumed else "wrong"
            step = latest if f"(step {latest})" in err else previous
            why = [f"resumed at step {step}" if resumed else err[-3000:]]
        else:
            outcome, why = "wrong", [err[-3000:]]
        return {"file": f"{where}_dir/{name}", "damage": how, "command": command, "exit": code,
                "outcome": outcome, "why": why}

    def cases(self):
        self.count = 0
        for where, name, command in self.kinds:
            for how in DAMAGES:
                result = self.case(where, name, how, command)
                yield result
                if result["why"] == [f"decoded {self.latest}"] and name.startswith(self.latest):
                    yield self.case(where, name, how, "trainer")  # what the decoder skips


def check(results, expected_kinds, previous=None):
    """Asserts that the sweep covered every kind of file `expected_kinds` lists, each damaged
    every way, that each case resumed or was refused, as the module's doc says, and that a
    fallback to `previous` (the checkpoint before the latest, where there is one) was seen."""
    wrong = [result for result in results if result["outcome"] == "wrong"]
    assert not wrong, json.dumps(wrong, indent=1)
    assert {(result["file"], result["damage"]) for result in results} == {
        (f"{where}_dir/{name}", how) for where, name, _ in expected_kinds for how in DAMAGES}
    whys = {why for result in results for why in result["why"]}
    assert not previous or f"decoded {previous}" in whys, whys


# For the script: the kinds of files, the decoders to compare, what the decoder reads and how.
PARSER_INPUT = ("the old man sees a small dog .\n", ("--beam_size=1",))
SWEEPS = {"kinds": (kinds, ("decoder",), (PAIRS, ("--score",))),
          "derived_kinds": (derived_kinds, ("decoder", "best", "avg", "ctranslate2"),
                            (PAIRS, ("--score",))),
          "parser_data_record_kinds": (data_record_kinds, ("decoder",), PARSER_INPUT)}


def main(model_dir, data_dir, work_dir, usr_dir, sweep="kinds", *trainer_flags):
    """Prints the cases of SWEEPS[sweep] (the kinds of files, the decoders to compare), the
    trainer run with `trainer_flags` (by default TRAINER_FLAGS), one JSON object a line."""
    sys.modules["tensorflow"] = None  # the JAX side must not need TensorFlow
    kinds_of, decoders, (source, decoder_flags) = SWEEPS[sweep]
    from t2t_lite.registry import import_usr_dir

    import_usr_dir(usr_dir)
    for result in Sweep(model_dir, data_dir, work_dir, trainer_flags or TRAINER_FLAGS, kinds_of,
                        decoders, source, decoder_flags).cases():
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
