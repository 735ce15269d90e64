import pytest

from t2t_lite import registry
from t2t_lite.utils.errors import UserError


def test_snake_case_names_from_class_names():
    assert registry.snake_case("TranslateEndeWmt32k") == "translate_ende_wmt32k"
    assert registry.snake_case("AlgorithmicReverse") == "algorithmic_reverse"
    assert registry.snake_case("transformer_base") == "transformer_base"


def test_builtins_are_registered_on_first_lookup():
    assert {"algorithmic_reverse", "algorithmic_copy", "algorithmic_addition"} <= set(
        registry.problems.names())
    assert {"transformer_base", "transformer_big", "transformer_base_single_gpu",
            "transformer_big_single_gpu", "transformer_small", "transformer_tiny"} <= set(
        registry.hparams_sets.names())


def test_duplicate_name_is_rejected():
    r = registry.Registry("thing", "t2t_lite.hparams")
    r.register(lambda: 1, name="a")
    with pytest.raises(ValueError, match="already registered"):
        r.register(lambda: 2, name="a")


def test_unknown_name_suggests_the_closest():
    with pytest.raises(UserError, match="did you mean algorithmic_reverse"):
        registry.problem("algorithmic_revers")
    with pytest.raises(UserError, match="did you mean transformer_base"):
        registry.hparams("transformer_bsae")


def test_help_lists_every_name():
    text = registry.help_string()
    for name in registry.problems.names() + registry.hparams_sets.names():
        assert f"  {name}\n" in text


def test_usr_dir_registers_user_hparams(tmp_path):
    module = tmp_path / "my_t2t_usr" / "__init__.py"
    module.parent.mkdir()
    module.write_text(
        "from t2t_lite.registry import register_hparams\n"
        "from t2t_lite.hparams.transformer import transformer_tiny\n"
        "@register_hparams\n"
        "def my_user_set():\n"
        "    return transformer_tiny().replace(d_model=64)\n")
    registry.import_usr_dir(str(module.parent))
    assert registry.hparams("my_user_set").d_model == 64
    with pytest.raises(UserError, match="no such module"):
        registry.import_usr_dir(str(tmp_path / "missing"))


@pytest.mark.parametrize("content, what", [
    ('{"problem_class": "TranslateFiles", "vocab',  # cut short
     "not JSON: Unterminated string starting at line 1 column 37"),
    ("", "not JSON: Expecting value at line 1 column 1"),
    ('{"vocab_size": 8000}', "no problem_class"),
    ('{"problem_class": "NoSuchClass"}', "its problem_class 'NoSuchClass' is no registered "
     "problem class"),
    ("[" * 100_000 + "]" * 100_000, "JSON nested deeper than Python reads"),  # RecursionError
    ("[1]", "a list, not an object"),
])
def test_a_damaged_problem_record_of_a_data_dir_is_one_line(content, what, tmp_path):
    """DATA_DIR/NAME.problem.json (what t2t-lite-datagen made of the user's files) cut short,
    emptied or edited ended in a JSONDecodeError or KeyError traceback."""
    path = tmp_path / "my_problem.problem.json"
    path.write_text(content)
    with pytest.raises(UserError) as error:
        registry.problem("my_problem", str(tmp_path))
    assert str(error.value) == (
        f"{path} is damaged ({what}): make it again with the t2t-lite-datagen command that "
        f"wrote {tmp_path} (or restore it from a copy)")
