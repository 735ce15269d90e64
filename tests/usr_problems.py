"""Problems for the tests, registered in-process by conftest and in trainer subprocesses by
`--usr_dir=tests/usr_problems.py`."""

from t2t_lite.problems.algorithmic import AlgorithmicReverse
from t2t_lite.registry import register_problem


@register_problem(name="test_short_reverse")
class ShortReverse(AlgorithmicReverse):
    max_sequence_length = 8
    num_examples = {"train": 20_000, "dev": 500, "test": 500}
    num_shards = {"train": 2, "dev": 1, "test": 1}


@register_problem(name="test_tiny_reverse")
class TinyReverse(ShortReverse):
    """Generated in a moment, for tests of datagen itself."""

    num_examples = {"train": 2_000, "dev": 100, "test": 100}


@register_problem(name="test_uneven_reverse")
class UnevenReverse(TinyReverse):
    """test_tiny_reverse in three training shards: uneven shares for two processes."""

    num_shards = {"train": 3, "dev": 1, "test": 1}


@register_problem(name="test_micro_reverse")
class MicroReverse(ShortReverse):
    """Small enough that a checkpoint's data position (its shuffle buffer) is small: for the
    committed model_dir of tests/data/make_model_dir_v1.py."""

    num_examples = {"train": 300, "dev": 20, "test": 20}


@register_problem(name="test_short_reverse_12")
class ShortReverse12(ShortReverse):
    """test_short_reverse over 12 symbols, two more than its models know: to fine-tune them
    with a vocabulary update (tests/test_warm_start.py); fewer examples, made in a moment."""

    num_symbols = 12
    num_examples = {"train": 4_000, "dev": 200, "test": 100}


@register_problem(name="test_short_reverse_8")
class ShortReverse8(ShortReverse):
    """test_short_reverse over 8 symbols: a vocabulary that drops two of its models' symbols."""

    num_symbols = 8
