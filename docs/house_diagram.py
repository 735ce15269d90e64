"""The design page's picture of the house (docs/design.md): t2t_lite's parts in the layers that
tests/test_architecture.py keeps, lowest at the bottom, with an arrow from each part to each
part it imports, found in the code as that test finds them. Written as SVG text at each build
(docs/hooks.py), never drawn by hand, so that it cannot drift from the code; no graph-layout
library is needed for six rows of boxes."""

import html
import importlib.util

from reference_code import ROOT

ROW_HEIGHT, BOX_HEIGHT, WIDTH, MARGIN, CHAR_WIDTH = 92, 30, 1100, 12, 7.2
ROOT_PACKAGE = "t2t_lite"


def architecture():
    """tests/test_architecture.py as a module (it imports only the standard library): its
    LAYERS, and its way of finding the package's modules and their imports."""
    spec = importlib.util.spec_from_file_location(
        "t2t_lite_architecture_rules", ROOT / "tests" / "test_architecture.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def part_of(name, layers):
    """(layer, part) of module `name`: its most specific LAYERS prefix, as
    test_architecture.layer finds it, and that prefix's subpackage the module is in, if any (so
    that the backends' wings show as two parts)."""
    level, prefix = max(((level, prefix) for level, prefixes in enumerate(layers)
                         for prefix in prefixes
                         if name == prefix or name.startswith(prefix + ".")),
                        key=lambda found: len(found[1]))
    rest = name[len(prefix) + 1:].split(".")
    subpackage = f"{prefix}.{rest[0]}"
    if rest[0] and (ROOT / subpackage.replace(".", "/") / "__init__.py").exists():
        return level, subpackage
    return level, prefix


def house():
    """(rows, lowest first: the parts of each layer; the set of (importer, imported) parts)."""
    rules = architecture()
    known = rules.modules()
    parts = {name: part_of(name, rules.LAYERS) for name in known}
    order = {prefix: i for prefixes in rules.LAYERS for i, prefix in enumerate(prefixes)}
    rows = [sorted({part for level, part in parts.values()
                    if level == row and part != ROOT_PACKAGE},
                   key=lambda part: (order.get(part, order.get(part.rpartition(".")[0])), part))
            for row in range(len(rules.LAYERS))]
    edges = set()
    for name, path in known.items():
        for imported in rules.internal_imports(path, known):
            edge = (parts[name][1], parts[imported][1])
            if edge[0] != edge[1] and ROOT_PACKAGE not in edge:
                edges.add(edge)
    return rows, edges


def label(part):
    return part.removeprefix(ROOT_PACKAGE + ".")


def house_svg():
    """The picture as SVG text: a box per part (data-part), an arrow per import (data-from,
    data-to), the highest layer (the console scripts) at the top."""
    rows, edges = house()
    boxes = {}  # part: (x, y, width)
    for level, parts in enumerate(rows):
        y = MARGIN + (len(rows) - 1 - level) * ROW_HEIGHT
        widths = [len(label(part)) * CHAR_WIDTH + 16 for part in parts]
        gap = (WIDTH - 2 * MARGIN - sum(widths)) / (len(parts) + 1)
        x = MARGIN + gap
        for part, width in zip(parts, widths):
            boxes[part] = (x, y, width)
            x += width + gap
    height = 2 * MARGIN + (len(rows) - 1) * ROW_HEIGHT + BOX_HEIGHT
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
           f'viewBox="0 0 {WIDTH} {height}" font-family="monospace" font-size="12">',
           "<title>t2t_lite's parts by layer: each imports only from its layer or below</title>",
           '<defs><marker id="arrow" viewBox="0 0 8 8" refX="8" refY="4" markerWidth="6" '
           'markerHeight="6" orient="auto-start-reverse"><path d="M0,0 L8,4 L0,8 z" '
           'fill="#5b7fa6"/></marker></defs>']
    for source, target in sorted(edges):
        (x1, y1, w1), (x2, y2, w2) = boxes[source], boxes[target]
        if y1 == y2:  # sideways, within a layer: an arc above the row, over the boxes between
            a, b = x1 + w1 / 2, x2 + w2 / 2
            top = y1 - 12 - abs(b - a) * 0.12
            path = f"M{a:.1f},{y1:.1f} Q{(a + b) / 2:.1f},{top:.1f} {b:.1f},{y2:.1f}"
        else:  # down, from the bottom of the importer to the top of what it imports
            path = (f"M{x1 + w1 / 2:.1f},{y1 + BOX_HEIGHT:.1f} "
                    f"L{x2 + w2 / 2:.1f},{y2:.1f}")
        out.append(f'<path data-from="{html.escape(source)}" data-to="{html.escape(target)}" '
                   f'd="{path}" fill="none" stroke="#5b7fa6" stroke-opacity="0.45" '
                   'marker-end="url(#arrow)"/>')
    for part, (x, y, width) in boxes.items():
        out.append(f'<g data-part="{html.escape(part)}"><rect x="{x:.1f}" y="{y:.1f}" '
                   f'width="{width:.1f}" height="{BOX_HEIGHT}" rx="4" fill="#eef3f8" '
                   f'stroke="#2d4a6b"/><text x="{x + width / 2:.1f}" y="{y + 19:.1f}" '
                   f'text-anchor="middle">{html.escape(label(part))}</text></g>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
