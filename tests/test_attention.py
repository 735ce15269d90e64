"""Attention weights (t2t_lite.decoding.attention), their pictures (t2t_lite.decoding.attention_plot) and the
decoder's --attention_dir."""

import html.parser
import io
import json
import sys

import numpy as np
import pytest

from t2t_lite.config import EOS_ID, HParams
from t2t_lite.data.vocabulary import SymbolVocabulary
from t2t_lite.decoding.attention import attention_weights
from t2t_lite.backends.tensorflow.translator import TensorFlowTranslator
from t2t_lite.models.transformer import create_model
from t2t_lite.utils.errors import UserError

VOCABULARY = SymbolVocabulary(10)
SOURCES = [[3, 4, 5, 6, 7, 8, 9], [5, 6], [11, 10, 9, 8, 7]]
TARGETS = [[9, 8, 7, 6, 5, 4, 3], [6, 5, 4, 3], [7]]


@pytest.fixture(scope="module")
def translator():
    """A random post-norm model, 2 + 2 layers of 4 heads, that batches 2 pairs at a time."""
    hparams = HParams(num_encoder_layers=2, num_decoder_layers=2, d_model=32, d_ff=64,
                      num_heads=4, dropout=0.0)
    return TensorFlowTranslator(create_model(hparams, VOCABULARY.size), VOCABULARY, hparams,
                                batch_size=2)


@pytest.fixture(scope="module")
def records(translator):
    return attention_weights(translator, SOURCES, TARGETS)


def test_rows_are_distributions_over_the_pair_and_decoder_self_attention_is_causal(records):
    for record, source, target in zip(records, SOURCES, TARGETS):
        s, t = len(source) + 1, len(target) + 1  # and EOS
        assert record.source_pieces == VOCABULARY.pieces(source) + ["</s>"]
        assert record.target_pieces == VOCABULARY.pieces(target) + ["</s>"]
        assert record.encoder_self.shape == (2, 4, s, s)
        assert record.decoder_self.shape == (2, 4, t, t)
        assert record.encoder_decoder.shape == (2, 4, t, s)
        for weights in (record.encoder_self, record.decoder_self, record.encoder_decoder):
            assert (weights >= 0).all()
            np.testing.assert_allclose(weights.sum(axis=-1), 1.0, atol=1e-5)
        above_diagonal = np.triu(np.ones((t, t), bool), k=1)
        assert (record.decoder_self[..., above_diagonal] == 0).all()
        assert (record.decoder_self[..., ~above_diagonal] > 0).all()


def test_padded_keys_get_zero_weight_and_extra_padding_changes_nothing(translator, records):
    """Pairs batched with longer ones (padded) have the weights they have alone; in the model's
    padded output, keys that are padding get exactly zero."""
    model = translator.model
    for i, (source, target) in enumerate(zip(SOURCES, TARGETS)):
        alone = attention_weights(translator, [source], [target])[0]
        for kind in ("encoder_self", "decoder_self", "encoder_decoder"):
            np.testing.assert_allclose(getattr(alone, kind), getattr(records[i], kind),
                                       atol=1e-6)
    inputs = np.array([[4, 5, EOS_ID, 0, 0, 0]], "int32")
    memory, mask, encoder_self = model.encode(inputs, return_attention_scores=True)
    targets = np.array([[6, 7, 8, EOS_ID, 0]], "int32")
    _, _, encoder_decoder = model.decode(targets, memory, mask, return_attention_scores=True)
    for weights in encoder_self + encoder_decoder:
        assert (np.asarray(weights)[..., 3:] == 0).all()
        assert (np.asarray(weights)[..., :3] > 0).all()


def test_weights_equal_softmax_of_scaled_query_key_products_from_the_kernels(translator,
                                                                             records):
    """Encoder layer 1, head 2, recomputed in numpy from its input and its own kernels."""
    model, head, depth = translator.model, 2, 8
    ids = np.array([SOURCES[0] + [EOS_ID]], "int32")
    mask = ids[:, None, None, :] != 0
    layer_input = model.encoder_layers[0](model._embed(ids, training=False), mask)
    x = np.asarray(layer_input)[0].astype("float64")
    attention = model.encoder_layers[1].self_attention
    columns = slice(head * depth, (head + 1) * depth)
    queries = x @ attention.query.kernel.numpy()[:, columns]
    keys = x @ attention.key.kernel.numpy()[:, columns]
    logits = queries @ keys.T / np.sqrt(depth)
    expected = np.exp(logits - logits.max(axis=-1, keepdims=True))
    expected /= expected.sum(axis=-1, keepdims=True)
    np.testing.assert_allclose(records[0].encoder_self[1, head], expected, atol=1e-5)
    assert np.abs(expected - 1 / len(expected)).max() > 0.01  # not uniform: the test can fail


def test_the_demo_model_looks_at_the_mirrored_source_position(trained_reverse):
    """The reversal model, explaining its own beam-search translations, puts the last layer's
    head-averaged encoder-decoder attention of most target positions on the source position it
    must copy (target i is source n - 1 - i)."""
    rng = np.random.default_rng(0)
    sources = [" ".join(map(str, rng.integers(0, 10, rng.integers(4, 9)))) for _ in range(8)]
    records = trained_reverse.runner.attention(sources)
    hits = positions = 0
    for source, record in zip(sources, records):
        words = source.split()
        assert record.target_pieces == words[::-1] + ["</s>"]  # it learned to reverse
        n = len(words)
        looked_at = record.encoder_decoder[-1].mean(axis=0).argmax(axis=-1)[:n]
        hits += int((looked_at == np.arange(n)[::-1]).sum())
        positions += n
    assert hits / positions >= 0.9, (hits, positions)  # 53 of 54 seen; layer 0: 41


def test_the_png_grid_and_the_html_page_hold_the_pieces(records, tmp_path):
    from t2t_lite.decoding.attention_plot import attention_html, plot_attention

    record = records[0]
    figure = plot_attention(record, path=str(tmp_path / "grid.png"))
    assert (tmp_path / "grid.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    heatmaps = [axes for axes in figure.axes if axes.images]
    assert len(heatmaps) == 2 * 4  # layers x heads
    assert [t.get_text() for t in heatmaps[0].get_xticklabels()] == record.source_pieces
    assert [t.get_text() for t in heatmaps[0].get_yticklabels()] == record.target_pieces
    one = plot_attention(record, "decoder_self", layer=1, head=3)
    assert len([axes for axes in one.axes if axes.images]) == 1
    np.testing.assert_array_equal(one.axes[0].images[0].get_array(), record.decoder_self[1, 3])

    page = attention_html(records, path=str(tmp_path / "attention.html"))
    assert (tmp_path / "attention.html").read_text(encoding="utf-8") == page
    parser = _PageParser()
    parser.feed(page)
    parser.close()
    assert not parser.external, parser.external  # no CDN: works offline
    data = json.loads(parser.data)
    assert [d["source_pieces"] for d in data] == [r.source_pieces for r in records]
    np.testing.assert_allclose(data[2]["encoder_decoder"], records[2].encoder_decoder, atol=1e-4)
    assert parser.scripts == 1


class _PageParser(html.parser.HTMLParser):
    """The embedded JSON data, the number of inline scripts, and any external resource."""

    def __init__(self):
        super().__init__()
        self.data, self.scripts, self.external, self._in_data = None, 0, [], False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.external += [v for k, v in attrs.items() if k in ("src", "href")]
        self._in_data = tag == "script" and attrs.get("type") == "application/json"
        self.scripts += tag == "script" and not self._in_data

    def handle_data(self, data):
        if self._in_data:
            self.data = data
            self._in_data = False


def test_without_matplotlib_plotting_says_what_to_install(records, monkeypatch):
    from t2t_lite.decoding.attention_plot import plot_attention

    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # makes the import fail
    with pytest.raises(UserError, match=r'pip install -e "\.\[viz\]"'):
        plot_attention(records[0])


def test_decoder_writes_each_lines_attention_plot_and_weights(trained_reverse, tmp_path):
    from t2t_lite.cli import decoder

    sources = ["1 2 3", "", "4 5 6 7 8"]
    (tmp_path / "src.txt").write_text("".join(f"{s}\n" for s in sources))
    decoder.main([f"--model_dir={trained_reverse.model_dir}", "--beam_size=2",
                  f"--decode_from_file={tmp_path / 'src.txt'}",
                  f"--decode_to_file={tmp_path / 'out.txt'}",
                  f"--attention_dir={tmp_path / 'attention'}"])
    translations = (tmp_path / "out.txt").read_text().splitlines()
    runner = trained_reverse.runner
    expected = runner.attention(sources, translations)
    for number, record in enumerate(expected, 1):
        assert (tmp_path / "attention" / f"{number}.png").read_bytes()[:4] == b"\x89PNG"
        with np.load(tmp_path / "attention" / f"{number}.npz") as saved:
            assert list(saved["source_pieces"]) == record.source_pieces
            assert list(saved["target_pieces"]) == record.target_pieces
            for kind in ("encoder_self", "decoder_self", "encoder_decoder"):
                np.testing.assert_allclose(saved[kind], getattr(record, kind), atol=1e-6)
    assert sorted(p.name for p in (tmp_path / "attention").iterdir()) == [
        "1.npz", "1.png", "2.npz", "2.png", "3.npz", "3.png"]


def test_lines_typed_or_piped_on_stdin_get_their_attention_numbered_by_input_line(
        trained_reverse, tmp_path, monkeypatch, capsys):
    """As for a file: N.png and N.npz for input line N and its translation; a line that cannot
    be translated gets an empty output line and no files, and the numbers of the others stay
    those of their input lines. (It used to refuse: "needs --decode_from_file".)"""
    from t2t_lite import cli
    from t2t_lite.cli import decoder

    stdin = io.TextIOWrapper(io.BytesIO(b"1 2 3\n7 x\n\n4 5 6 7 8\n"), encoding="utf-8")
    monkeypatch.setattr(sys, "stdin", stdin)
    directory = tmp_path / "attention"
    cli.run(decoder.main, [f"--model_dir={trained_reverse.model_dir}", "--beam_size=2",
                           f"--attention_dir={directory}"])  # exits only on an error
    captured = capsys.readouterr()
    outputs = captured.out.split("\n")
    assert len(outputs) == 5 and outputs[1] == outputs[2] == outputs[4] == "", outputs
    assert "stdin line 2: 'x' is not a symbol" in captured.err
    assert "its output line is empty, and it has no attention files" in captured.err
    assert sorted(p.name for p in directory.iterdir()) == [
        "1.npz", "1.png", "3.npz", "3.png", "4.npz", "4.png"]
    expected = trained_reverse.runner.attention(["1 2 3", "", "4 5 6 7 8"],
                                                [outputs[0], outputs[2], outputs[3]])
    assert expected[0].target_pieces == ["3", "2", "1", "</s>"]  # the model's translation
    for number, record in zip((1, 3, 4), expected):
        assert (directory / f"{number}.png").read_bytes()[:4] == b"\x89PNG"
        with np.load(directory / f"{number}.npz") as saved:
            assert list(saved["source_pieces"]) == record.source_pieces
            assert list(saved["target_pieces"]) == record.target_pieces
            for kind in ("encoder_self", "decoder_self", "encoder_decoder"):
                np.testing.assert_allclose(saved[kind], getattr(record, kind), atol=1e-6)


def test_attention_dir_with_split_is_refused(tmp_path, capsys):
    """--split scores the data_dir's split, which has no input lines to number."""
    from t2t_lite.cli import decoder

    with pytest.raises(SystemExit) as exit_info:
        decoder.parse_args([f"--model_dir={tmp_path}", "--split=dev",
                            "--attention_dir=attention"])
    assert exit_info.value.code == 2
    assert "--attention_dir is for the lines of --decode_from_file or stdin" in (
        capsys.readouterr().err)
