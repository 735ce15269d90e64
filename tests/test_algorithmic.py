"""The embedded algorithmic problems: correct targets, disjoint splits, safe datagen."""

import os

import numpy as np
import pytest

from t2t_lite import registry
from t2t_lite.config import EOS_ID
from t2t_lite.data.vocabulary import SymbolVocabulary
from t2t_lite.problems.algorithmic import AlgorithmicReverse


def small(problem_class, **examples):
    class Small(problem_class):
        name = problem_class.name
        num_examples = examples or {"train": 3000, "dev": 200, "test": 200}
        num_shards = {"train": 3, "dev": 1, "test": 1}

    return Small()


def pairs(problem, split):
    return [(s.split(), t.split()) for s, t in problem.text_pairs(split, raw_dir=None)]


def test_targets_are_computed_correctly():
    for source, target in pairs(small(registry.problems.get("algorithmic_reverse")), "dev"):
        assert target == source[::-1]
    for source, target in pairs(small(registry.problems.get("algorithmic_copy")), "dev"):
        assert target == source
    for source, target in pairs(small(registry.problems.get("algorithmic_addition")), "dev"):
        plus = source.index("10")
        first, second = (int("".join(reversed(side))) for side in (source[:plus], source[plus + 1:]))
        assert int("".join(reversed(target))) == first + second


def test_splits_are_disjoint_and_deterministic():
    problem = AlgorithmicReverse()
    train = {tuple(s) for s, _ in pairs(problem, "train")}
    dev = [tuple(s) for s, _ in pairs(problem, "dev")]
    assert len(train) > 50_000 and len(dev) == 1000
    assert not train.intersection(dev)
    assert dev == [tuple(s) for s, _ in pairs(problem, "dev")]


def test_symbol_vocabulary_round_trips_in_python_and_in_graph():
    vocabulary = SymbolVocabulary(10)
    assert vocabulary.encode("3 0 9") == [5, 2, 11]
    assert vocabulary.decode([5, 2, 11, EOS_ID, 7, 0]) == "3 0 9"
    ids = vocabulary.in_graph().encode(np.array(["3 0 9", "", "1"])).to_tensor()
    assert ids.numpy().tolist() == [[5, 2, 11], [0, 0, 0], [3, 0, 0]]
    texts = vocabulary.in_graph().decode(np.array([[5, 2, 11, 1, 4], [1, 5, 5, 0, 0]], "int32"))
    assert [t.decode() for t in texts.numpy()] == ["3 0 9", ""]
    with pytest.raises(Exception, match="not a symbol"):
        vocabulary.encode("3 x")


def test_datagen_is_idempotent_and_never_leaves_a_shard_that_looks_finished(tmp_path):
    problem = small(AlgorithmicReverse)
    (tmp_path / f"{problem.name}-train-00000-of-00003.incomplete").write_text("stale")
    problem.generate_data(str(tmp_path))
    shards = sorted(name for name in os.listdir(tmp_path) if not name.startswith("."))  # locks
    assert shards == sorted(os.path.basename(p) for split in ("train", "dev", "test")
                            for p in problem.shard_paths(split, str(tmp_path))
                            + [problem.stats_path(split, str(tmp_path))])
    stamps = {name: os.stat(tmp_path / name).st_mtime_ns for name in shards}
    problem.generate_data(str(tmp_path))
    assert {name: os.stat(tmp_path / name).st_mtime_ns for name in shards} == stamps

    class Crashing(type(problem)):
        def text_pairs(self, split, raw_dir):
            yield from list(super().text_pairs(split, raw_dir))[:10]
            raise KeyboardInterrupt

    os.remove(tmp_path / os.path.basename(problem.shard_paths("dev", str(tmp_path))[0]))
    with pytest.raises(KeyboardInterrupt):
        Crashing().generate_data(str(tmp_path))
    assert not problem.has_data(str(tmp_path), "dev")
    assert problem.has_data(str(tmp_path), "train")
