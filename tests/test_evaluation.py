"""The Evaluator: a representative dev sample, decoding on every replica, early stopping,
averaging, BLEU by the target language, and the decoder's --split and --n_best."""

import json
import os

import numpy as np
import pytest
import sacrebleu
import tensorflow as tf

from t2t_lite import registry
from t2t_lite.cli import decoder
from t2t_lite.config import TrainConfig
from t2t_lite.data.problem import Problem
from t2t_lite.backends.tensorflow.distribution import of_strategy
from t2t_lite.backends.tensorflow.replicated import ReplicatedTranslation
from t2t_lite.evaluation.evaluator import Evaluator, read_sample
from t2t_lite.evaluation.monitor import Monitor
from t2t_lite.problems.translate import TranslationProblem
from t2t_lite.runner import Runner
from t2t_lite.backends.tensorflow.checkpoints import checkpoint_writer
from t2t_lite.training.model_dir_copy import save_model_dir

TINY = "num_encoder_layers=1,num_decoder_layers=1,d_model=16,d_ff=32,num_heads=2"


@registry.register_problem(name="test_reverse_scored_by_bleu")
class ReverseScoredByBleu(registry.problem("test_short_reverse").__class__, TranslationProblem):
    """test_short_reverse's task with its own small data, scored as translation (BLEU, chrF);
    longer than trained_reverse learned, so that its BLEU is not 100."""

    max_sequence_length = 12
    num_examples = {"train": 10, "dev": 10, "test": 60}
    build_vocabulary = Problem.build_vocabulary  # the symbols, not a SentencePiece model


def lengths(texts):
    return np.array([len(text.split()) for text in texts])


def test_the_dev_sample_is_the_whole_set_or_a_sample_like_it_not_the_short_bucket_prefix(
        short_reverse_data):
    problem = registry.problem("test_short_reverse")
    vocabulary = problem.vocabulary(short_reverse_data)
    pairs = list(problem.text_pairs("dev", None))
    whole = read_sample(problem, vocabulary, short_reverse_data, "dev", 1000)
    assert whole.description == "all 500 dev examples"
    assert list(zip(whole.sources, whole.references)) == pairs  # in the file's order

    sample = read_sample(problem, vocabulary, short_reverse_data, "dev", 100)
    assert "100 of the 500 dev examples" in sample.description
    remaining = iter(pairs)  # the sample is a subsequence of the set, in its order
    assert len(sample.sources) == 100 and all(
        pair in remaining for pair in zip(sample.sources, sample.references))
    # What the trainer used to decode: the first examples in the order of the length buckets.
    hparams = registry.hparams("transformer_tiny")
    prefix = [vocabulary.decode(ids) for features, _ in
              problem.dataset("dev", short_reverse_data, hparams, training=False)
              for ids in features["inputs"].numpy()][:100]
    everything = lengths(whole.sources)

    def distance(texts):  # Kolmogorov-Smirnov: the largest gap between the two length CDFs
        return max(abs(np.mean(lengths(texts) <= n) - np.mean(everything <= n))
                   for n in range(1, 9))

    assert distance(sample.sources) < 0.1 < 0.2 < distance(prefix)
    assert abs(lengths(sample.sources).mean() - everything.mean()) < 0.5


def test_evaluation_decodes_on_every_replica_with_one_traced_search(trained_reverse,
                                                                   two_cpu_strategy):
    runner = trained_reverse.runner
    alone = Evaluator(runner.problem, runner.translator(batch_size=8), runner.data_dir,
                      decode_examples=16).decode()
    trainer = runner.trainer(of_strategy(two_cpu_strategy))  # see conftest: one per process
    translator = runner.translator(trainer.model, batch_size=8)
    evaluator = Evaluator(runner.problem, translator, runner.data_dir, trainer=trainer,
                          decode_examples=16,
                          translate=ReplicatedTranslation(translator, two_cpu_strategy))
    assert evaluator.decode() == alone  # 2 batches of 8: one on each replica
    traced = evaluator._translate._step.experimental_get_tracing_count()
    evaluator.decode()
    assert evaluator._translate._step.experimental_get_tracing_count() == traced == 1


@pytest.mark.parametrize("values, lower, min_delta, expected", [
    ([1, 2, 2, 1.5], False, 0, 2),
    ([1, 2, 2.05, 2.08, 2.2], False, 0.1, 0),  # 2.2 is more than 0.1 above 2
    ([1, 2, 2.05, 2.08], False, 0.1, 2),
    ([3, 2, 2.5, 1], True, 0, 0),
])
def test_evaluations_without_improvement(values, lower, min_delta, expected):
    assert Monitor("metric", lower, min_delta).evaluations_without_improvement(values) == expected


def checkpoint_weights(path):
    reader = tf.train.load_checkpoint(path)
    return {key: reader.get_tensor(key) for key in reader.get_variable_to_shape_map()
            # The model's weights, under model/ or, found first, the optimizer's variables.
            if key.startswith(("model/", "optimizer/_trainable_variables/"))
            and "seed_generator" not in key and key.endswith("VARIABLE_VALUE")}


@pytest.mark.slow  # trains and evaluates: ~15 s
def test_early_stopping_after_n_flat_evaluations_and_the_average_of_the_best(
        short_reverse_data, tmp_path, caplog):
    runner = Runner.create_or_resume(str(tmp_path), "test_short_reverse", "transformer_tiny",
                                     TINY, short_reverse_data)
    scripted = [0.1, 0.3, 0.2, 0.4, 0.5, 0.4, 0.45]  # no improvement after step 5
    real = runner.problem.decode_metrics
    runner.problem.decode_metrics = lambda hypotheses, references, **options: (
        {"sequence_accuracy": scripted.pop(0)} if scripted
        else real(hypotheses, references, **options))
    config = TrainConfig(train_steps=20, eval_every=1, eval_steps=1, eval_decode_examples=8,
                         keep_best_by="sequence_accuracy", early_stopping=2, average_best=2)
    with caplog.at_level("INFO", logger="t2t_lite"):
        metrics = runner.train(config)
    assert [r.getMessage() for r in caplog.records if "early stopping" in r.getMessage()] == [
        "early stopping: sequence_accuracy has not improved by more than 0 in 2 evaluations "
        "(best 0.5 at step 5)"]
    assert tf.train.latest_checkpoint(runner.model_dir).endswith("ckpt-7")
    assert metrics["sequence_accuracy"] == 0.45  # the last evaluation, not another one
    with open(f"{runner.model_dir}/best/info.json") as f:
        assert json.load(f)["step"] == 5

    # avg/ holds the mean of the two best checkpoints (steps 5 and 7)...
    avg_dir = f"{runner.model_dir}/avg"
    averaged = checkpoint_weights(tf.train.latest_checkpoint(avg_dir))
    best = [checkpoint_weights(f"{runner.model_dir}/ckpt-{step}") for step in (5, 7)]
    assert len(averaged) > 10
    for key, value in averaged.items():
        np.testing.assert_allclose(value, (best[0][key] + best[1][key]) / 2, rtol=1e-6,
                                   atol=1e-7, err_msg=key)
    # ... and its reported metrics are those of a separate evaluation of that model_dir.
    with open(f"{avg_dir}/info.json") as f:
        reported = json.load(f)["metrics"]
    avg = Runner.from_model_dir(avg_dir)
    separate = Evaluator(avg.problem, avg.translator(), avg.data_dir, trainer=avg.trainer(),
                         eval_steps=1, decode_examples=8).evaluate()
    assert reported == pytest.approx(separate, rel=1e-5)
    assert set(reported) == {"loss", "perplexity", "accuracy", "padding_fraction",
                             "sequence_accuracy"}
    # Seven updates of the real model get fewer sequences right than the scripted best (0.5):
    # the log says so, and that best/ was the highest of the seven evaluations.
    assert reported["sequence_accuracy"] < 0.5
    assert (f"avg/ is worse than best/ by sequence_accuracy on dev "
            f"({reported['sequence_accuracy']:.4g} against 0.5), but best/ is the highest of 7 "
            "evaluations on that same sample: compare both on data neither was chosen on before "
            "choosing (both are kept)") in caplog.text

    # A resumed run remembers that it stopped.
    caplog.clear()
    with caplog.at_level("INFO", logger="t2t_lite"):
        runner.train(config.replace(average_best=0))
    assert tf.train.latest_checkpoint(runner.model_dir).endswith("ckpt-7")
    assert not [r for r in caplog.records if r.getMessage().startswith("step ")]


def test_sacrebleus_advice_is_logged_once_and_the_score_is_sacrebleus(caplog, monkeypatch):
    """Tokenized hypotheses (100 lines ending in " .") make sacreBLEU advise detokenizing, three
    lines at every corpus score, that is every evaluation of a run: logged the first time only,
    and the score is sacreBLEU's own all the same."""
    from t2t_lite.evaluation import metrics

    monkeypatch.setattr(metrics._SACREBLEU_ADVICE_ONCE, "seen", set())
    hypotheses = [f"the cat sat on mat {i} ." for i in range(120)]
    references = [f"the cat sat on the mat {i} ." for i in range(120)]
    scores = []
    for _ in range(2):
        caplog.clear()
        with caplog.at_level("WARNING", logger="sacrebleu"):
            scores.append(metrics.bleu(hypotheses, references)[0].score)
        scores.append([r.getMessage() for r in caplog.records if r.name == "sacrebleu"])
    assert len(scores[1]) == 3 and "forgot to detokenize" in scores[1][1]
    assert scores[3] == []
    expected = sacrebleu.corpus_bleu(hypotheses, [references]).score
    assert scores[0] == scores[2] == expected and 0 < expected < 100


def test_a_chinese_target_is_scored_with_sacrebleus_zh_tokenizer():
    class ToyChinese(TranslationProblem):
        target_language = "zh"

    hypotheses = ["我喜欢吃苹果。", "今天天气很好。"]
    references = ["我喜欢吃香蕉。", "今天天气不错。"]
    metrics = ToyChinese().decode_metrics(hypotheses, references)
    zh = sacrebleu.corpus_bleu(hypotheses, [references], tokenize="zh").score
    assert metrics["bleu"] == pytest.approx(zh)
    assert zh > 10 > sacrebleu.corpus_bleu(hypotheses, [references], tokenize="13a").score
    chosen = ToyChinese().decode_metrics(hypotheses, references, bleu_tokenize="char")
    assert chosen["bleu"] == pytest.approx(
        sacrebleu.corpus_bleu(hypotheses, [references], tokenize="char").score)


@pytest.fixture
def bleu_model_dir(trained_reverse, tmp_path):
    """trained_reverse's model for test_reverse_scored_by_bleu, with that problem's data."""
    data_dir = str(tmp_path / "data")
    ReverseScoredByBleu().generate_data(data_dir)
    model_dir = str(tmp_path / "model")
    model = trained_reverse.runner.restored_model()
    save_model_dir(checkpoint_writer(tf.train.Checkpoint(model=model)), 800,
                   trained_reverse.model_dir, model_dir, {})
    with open(os.path.join(model_dir, "problem.json"), "w") as f:
        json.dump({"problem": "test_reverse_scored_by_bleu", "hparams_set": "transformer_tiny",
                   "data_dir": data_dir}, f)
    return model_dir


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


def test_scoring_the_test_split_equals_sacrebleu_on_the_written_files(bleu_model_dir, tmp_path,
                                                                      capsys):
    out = str(tmp_path / "test.out")
    metrics = decoder.main([f"--model_dir={bleu_model_dir}", "--split=test",
                            f"--decode_to_file={out}"])
    hypotheses, references = read(out), read(out + ".ref")
    assert len(hypotheses) == 60
    assert list(zip(read(out + ".src"), references)) == list(
        ReverseScoredByBleu().text_pairs("test", None))
    assert metrics["bleu"] == pytest.approx(
        sacrebleu.corpus_bleu(hypotheses, [references]).score)
    assert metrics["chrf"] == pytest.approx(
        sacrebleu.corpus_chrf(hypotheses, [references]).score)
    assert 0 < metrics["bleu"] < 100  # the model is good, not perfect: a real comparison
    table = read(out + ".tsv")
    assert table[0] == "source\treference\thypothesis\tscore" and len(table) == 61
    assert [row.split("\t")[2] for row in table[1:]] == hypotheses
    printed = capsys.readouterr().out
    assert "test (all 60 test examples, " in printed and "sacreBLEU tokenize=13a): " in printed


def test_n_best_lists_k_hypotheses_with_non_increasing_scores_the_first_the_1_best(
        trained_reverse, tmp_path):
    sources = tmp_path / "sources.txt"
    sources.write_text("".join(f"{s}\n" for s in read_sample(
        trained_reverse.runner.problem, trained_reverse.runner.vocabulary,
        trained_reverse.runner.data_dir, "dev", 20).sources))
    flags = [f"--model_dir={trained_reverse.model_dir}", f"--decode_from_file={sources}",
             "--beam_size=4"]
    decoder.main(flags + [f"--decode_to_file={tmp_path}/one_best"])
    decoder.main(flags + [f"--decode_to_file={tmp_path}/n_best", "--n_best=3"])
    rows = [line.split("\t") for line in read(f"{tmp_path}/n_best")]
    assert len(rows) == 3 * 20
    for i, best in enumerate(read(f"{tmp_path}/one_best")):
        texts, scores = zip(*rows[3 * i: 3 * i + 3])
        assert texts[0] == best and len(set(texts)) == 3
        assert list(map(float, scores)) == sorted(map(float, scores), reverse=True)
