"""Pictures of attention weights (t2t_lite.decoding.attention.Attention): a heatmap grid as a PNG
or a matplotlib figure, and a self-contained interactive HTML page.

matplotlib is the optional extra `viz`, imported only here and only when a plot is drawn. The
HTML page needs nothing: its data is embedded as JSON and its script and style are inline, so
it works offline and in Colab (`IPython.display.HTML(attention_html(records))`).
"""

import html
import io
import json
import os
import uuid

import numpy as np

from t2t_lite.utils.errors import UserError
from t2t_lite.utils.files import write_bytes_atomically, write_text_atomically

KINDS = ("encoder_decoder", "encoder_self", "decoder_self")


def weights_and_labels(record, kind):
    """(weights [layers, heads, query, key], query pieces, key pieces) of one kind."""
    if kind not in KINDS:
        raise UserError(f"unknown attention '{kind}': use one of {', '.join(KINDS)}")
    queries = record.source_pieces if kind == "encoder_self" else record.target_pieces
    keys = record.target_pieces if kind == "decoder_self" else record.source_pieces
    return getattr(record, kind), queries, keys


def plot_attention(record, kind="encoder_decoder", layer=None, head=None, path=None):
    """A grid of heatmaps of `kind` attention, queries down and keys across, labeled with the
    pieces: every layer (rows) x head (columns), or one layer's heads, or one head. Written as
    a PNG to `path` if given; returns the matplotlib Figure (a notebook shows it)."""
    figure_class = require_matplotlib()
    weights, queries, keys = weights_and_labels(record, kind)
    layers = range(weights.shape[0]) if layer is None else [layer]
    heads = range(weights.shape[1]) if head is None else [head]
    cell = max(1.5, 0.22 * max(len(queries), len(keys)))
    figure = figure_class(figsize=(cell * len(heads) + 1, cell * len(layers) + 0.6),
                          layout="constrained")
    grid = figure.subplots(len(layers), len(heads), squeeze=False)
    for row, layer_index in enumerate(layers):
        for column, head_index in enumerate(heads):
            axes = grid[row, column]
            image = axes.imshow(weights[layer_index, head_index], vmin=0.0, vmax=1.0,
                                cmap="viridis", aspect="auto")
            axes.set_title(f"layer {layer_index} head {head_index}", fontsize=8)
            axes.set_xticks(range(len(keys)), keys, rotation=90, fontsize=7)
            axes.set_yticks(range(len(queries)), queries, fontsize=7)
    figure.colorbar(image, ax=grid, shrink=0.6)
    figure.suptitle(kind.replace("_", "-") + " attention")
    if path:
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", dpi=100)
        write_bytes_atomically(path, buffer.getvalue())
    return figure


def require_matplotlib():
    """matplotlib's Figure, or a UserError saying how to install it."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise UserError('plotting attention needs matplotlib: pip install -e ".[viz]" '
                        '(or pip install "t2t_lite[viz]")') from None
    return Figure  # not pyplot: no GUI backend and no global figure state


def save_attention(records, directory, kind="encoder_decoder", numbers=None):
    """Writes N.png (the `kind` heatmaps of every layer and head) and N.npz (every weight and
    the pieces, as the fields of Attention) for each record, N its number in `numbers`
    (default: its position, from 1; the decoder's stdin gives the input line's)."""
    numbers = range(1, len(records) + 1) if numbers is None else numbers
    for number, record in zip(numbers, records, strict=True):
        buffer = io.BytesIO()
        np.savez(buffer, **{field: np.asarray(getattr(record, field))
                            for field in ("source_pieces", "target_pieces", *KINDS)})
        write_bytes_atomically(os.path.join(directory, f"{number}.npz"), buffer.getvalue())
        plot_attention(record, kind, path=os.path.join(directory, f"{number}.png"))


def attention_html(records, path=None):
    """A self-contained HTML page where a user picks the pair, the attention, the layer and the
    head (or the mean over heads) and sees the weights as a table shaded by weight, with the
    pieces as labels. Written to `path` if given; returns the page."""
    data = [{"source_pieces": list(r.source_pieces), "target_pieces": list(r.target_pieces),
             **{kind: np.round(getattr(r, kind).astype(float), 4).tolist() for kind in KINDS}}
            for r in records]
    # Unique ids, so that several pages in one notebook do not share their controls.
    page = _PAGE.replace("t2t-", f"t2t-{uuid.uuid4().hex[:8]}-")
    page = page.replace("@TITLE@", html.escape(f"attention of {len(data)} pair(s)"))
    # "</" inside a <script> would end it early: JSON allows the escaped "<\/".
    page = page.replace("@DATA@", json.dumps(data, ensure_ascii=False).replace("</", "<\\/"))
    if path:
        write_text_atomically(path, page)
    return page


_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>@TITLE@</title>
<style>
.t2t-attention { font-family: sans-serif; font-size: 13px; }
.t2t-attention select { margin-right: 1em; }
.t2t-attention table { border-collapse: collapse; margin-top: 0.6em; }
.t2t-attention td { width: 2.2em; height: 1.6em; text-align: center; font-size: 10px; }
.t2t-attention th { font-weight: normal; padding: 0 0.3em; white-space: nowrap; }
.t2t-attention th.key { writing-mode: vertical-rl; transform: rotate(180deg); }
</style></head>
<body><div class="t2t-attention">
<label>pair <select id="t2t-pair"></select></label>
<label>attention <select id="t2t-kind">
<option value="encoder_decoder">encoder-decoder</option>
<option value="encoder_self">encoder self</option>
<option value="decoder_self">decoder self</option></select></label>
<label>layer <select id="t2t-layer"></select></label>
<label>head <select id="t2t-head"></select></label>
<div>rows: queries, columns: keys; shade and number: weight</div>
<table id="t2t-table"></table>
</div>
<script type="application/json" id="t2t-data">@DATA@</script>
<script>
(function () {
  var data = JSON.parse(document.getElementById("t2t-data").textContent);
  function element(id) { return document.getElementById(id); }
  function fill(select, count, extra) {
    var kept = select.value;
    select.innerHTML = "";
    var values = Array.from({length: count}, function (_, i) { return String(i); });
    (extra ? [extra] : []).concat(values).forEach(function (value) {
      var option = document.createElement("option");
      option.value = value; option.textContent = value; select.appendChild(option);
    });
    var keep = Array.from(select.options).some(function (o) { return o.value === kept; });
    if (keep) select.value = kept;
  }
  function cell(tag, text, className) {
    var node = document.createElement(tag);
    node.textContent = text;
    if (className) node.className = className;
    return node;
  }
  function draw() {
    var pair = data[Number(element("t2t-pair").value)], kind = element("t2t-kind").value;
    var weights = pair[kind];
    fill(element("t2t-layer"), weights.length);
    fill(element("t2t-head"), weights[0].length, "mean");
    var layer = weights[Number(element("t2t-layer").value)], head = element("t2t-head").value;
    var queries = kind === "encoder_self" ? pair.source_pieces : pair.target_pieces;
    var keys = kind === "decoder_self" ? pair.target_pieces : pair.source_pieces;
    var table = element("t2t-table");
    table.innerHTML = "";
    var header = document.createElement("tr");
    header.appendChild(cell("th", ""));
    keys.forEach(function (piece) { header.appendChild(cell("th", piece, "key")); });
    table.appendChild(header);
    queries.forEach(function (piece, q) {
      var row = document.createElement("tr");
      row.appendChild(cell("th", piece));
      keys.forEach(function (_, k) {
        var w = head === "mean"
          ? layer.reduce(function (sum, h) { return sum + h[q][k]; }, 0) / layer.length
          : layer[Number(head)][q][k];
        var td = cell("td", w >= 0.005 ? w.toFixed(2) : "");
        td.style.background = "rgba(20, 90, 200, " + w + ")";
        td.style.color = w > 0.5 ? "white" : "black";
        td.title = piece + " -> " + keys[k] + ": " + w;
        row.appendChild(td);
      });
      table.appendChild(row);
    });
  }
  fill(element("t2t-pair"), data.length);
  ["t2t-pair", "t2t-kind", "t2t-layer", "t2t-head"].forEach(function (id) {
    element(id).addEventListener("change", draw);
  });
  draw();
})();
</script></body></html>
"""
