"""Pictures people can look at: `trainstep plot` (a --log-dir run's curves),
`inspect --graph` (the optimised step graph, laid out by Graphviz) and
`inspect --memory` (the memory plan as a timeline). Each SVG parses as XML
and holds what it draws, counted against what other commands print; then
headless Chromium renders each to a PNG of the window's size that is not
blank. Bad metrics logs are one line naming the file and line."""
import json
import os
import re
import shutil
import struct
import subprocess
import xml.etree.ElementTree as ET
import zlib
from collections import Counter, namedtuple

import pytest

from conftest import run

pytestmark = [pytest.mark.runtime]

NS = "{http://www.w3.org/2000/svg}"
EPOCHS, BATCHES = 2, 5
SERIES = ["train loss (epoch mean so far)", "train loss (epoch)", "test loss (epoch)",
          "test accuracy (epoch)"]


@pytest.fixture(scope="module")
def run_dir(mnist_adadelta, small_data, tmp_path_factory):
    d = tmp_path_factory.mktemp("svg") / "run"
    run("train", mnist_adadelta, "--data", f"idx:{small_data}", "--threads", 1, "--epochs", EPOCHS,
        "--max-batches", BATCHES, "--log-dir", d)
    return d


def _svg(path):
    root = ET.parse(path).getroot()  # raises on malformed XML
    assert root.tag == NS + "svg"
    return root


def _texts(root):
    return ["".join(t.itertext()) for t in root.iter(NS + "text")]


def _classes(el):
    return el.get("class", "").split()


IrNode = namedtuple("IrNode", "op outs ins attrs")


def _ir_nodes(art):
    """Each node of train_step after the passes, from `inspect --ir`: its op,
    output and input value names ("_" / "None" where absent) and attrs."""
    text = run("inspect", art, "--ir", "train_step").stdout
    nodes = []
    for line in text.splitlines():
        m = re.match(r"\s+(.+?) = ([\w.]+)\(([^)]*)\)(?: (\{.*\}))?$", line)
        if m:
            outs, ins = ([v.lstrip("%") for v in g.split(", ") if v] for g in m.group(1, 3))
            nodes.append(IrNode(m.group(2), outs, ins, json.loads(m.group(4) or "{}")))
    assert nodes, text
    return nodes


# --- plot -------------------------------------------------------------------

def test_curves_draw_every_series_with_axes_and_legend(run_dir, tmp_path):
    out = tmp_path / "curves.svg"
    p = run("plot", run_dir, "--out", out)
    assert f"curves: {out}" in p.stdout
    root = _svg(out)
    series = {g.get("data-series"): g for g in root.iter(NS + "g") if "series" in _classes(g)}
    assert sorted(series) == sorted(SERIES)
    points = {name: len(g.find(NS + "polyline").get("points").split()) for name, g in series.items()}
    # Every batch of a 5-batch epoch is logged; one point per epoch for the rest.
    assert points == {SERIES[0]: EPOCHS * BATCHES, SERIES[1]: EPOCHS, SERIES[2]: EPOCHS,
                      SERIES[3]: EPOCHS}, points
    for name in SERIES[1:]:
        assert len(series[name].findall(NS + "circle")) == EPOCHS
    legends = [g for g in root.iter(NS + "g") if "legend" in _classes(g)]
    assert sorted(t for g in legends for t in _texts(g)) == sorted(SERIES)
    labels = [t for g in root.iter(NS + "g") if "axes" in _classes(g) for t in _texts(g)]
    for label in ("global step", "loss", "test accuracy (%)"):
        assert label in labels
    assert len([t for t in root.iter(NS + "text") if "tick" in _classes(t)]) >= 8


def test_plot_defaults_to_curves_svg_in_the_run_folder(run_dir):
    run("plot", run_dir)
    _svg(run_dir / "curves.svg")


@pytest.mark.parametrize("content, where, message", [
    (None, "", "no such file"),
    ("", "", "empty, nothing to plot"),
    ('{"event":"batch","epoch":1,"step":1,"loss":1.0}\n{"event":"batch","epo', ":2",
     "not a JSON object"),
    ('{"event":"epoch","epoch":1,"step":1,"train_loss":"x","test_loss":1}\n', ":1",
     'no number "train_loss"'),
])
def test_bad_metrics_log_is_one_line_naming_file_and_line(tmp_path, content, where, message):
    if content is not None:
        (tmp_path / "metrics.jsonl").write_text(content)
    p = run("plot", tmp_path, "--out", tmp_path / "c.svg", check=False)
    assert p.returncode == 1 and p.stdout == ""
    assert p.stderr.count("\n") == 1, p.stderr
    assert p.stderr.startswith(f"trainstep: {tmp_path / 'metrics.jsonl'}{where}: "), p.stderr
    assert message in p.stderr
    assert not (tmp_path / "c.svg").exists()


# --- inspect --graph ----------------------------------------------------------

FUSED = "trainstep.fused_elementwise"
XLINK = "{http://www.w3.org/1999/xlink}"


def _ir_edges(ir):
    """The edges the graph should have, from the IR text alone: between nodes,
    or members ("m", node, j) of fused nodes, one per producer and reader."""
    producer, edges = {}, set()
    for i, n in enumerate(ir):
        if n.op != FUSED:
            edges |= {(producer[v], ("n", i)) for v in n.ins if v in producer}
            producer.update((v, ("n", i)) for v in n.outs)
            continue
        for j, m in enumerate(n.attrs["members"]):
            for kind, a in m["args"]:
                tail = ("m", i, a) if kind == "m" else producer.get(n.ins[a])
                if tail:
                    edges.add((tail, ("m", i, j)))
        producer.update((v, ("m", i, j)) for v, j in zip(n.outs, n.attrs["outputs"]))
    return edges


def _bbox(el):
    """(x0, y0, x1, y1) of the first shape under `el` (Graphviz path, polygon or ellipse)."""
    for s in el.iter():
        if s.tag == NS + "ellipse":
            cx, cy, rx, ry = (float(s.get(k)) for k in ("cx", "cy", "rx", "ry"))
            return cx - rx, cy - ry, cx + rx, cy + ry
        if s.tag in (NS + "path", NS + "polygon"):
            v = [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?", s.get("d") or s.get("points"))]
            return min(v[0::2]), min(v[1::2]), max(v[0::2]), max(v[1::2])
    raise AssertionError(f"no shape in {el.get('id')}")


def _inside(a, b):
    return b[0] <= a[0] and b[1] <= a[1] and a[2] <= b[2] and a[3] <= b[3]


def test_graph_draws_each_fused_group_as_a_cluster_of_its_members(mnist_adadelta, tmp_path):
    out = tmp_path / "graph.svg"
    p = run("inspect", mnist_adadelta, "--graph", out)
    ir = _ir_nodes(mnist_adadelta)
    assert f"{len(ir)} nodes" in p.stdout
    root = _svg(out)
    gs = list(root.iter(NS + "g"))
    nodes = [g for g in gs if "node" in _classes(g)]
    titles = [g.find(NS + "title").text for g in nodes]
    assert len(set(titles)) == len(titles)
    # Nodes outside the groups: one box per IR node, its op first.
    boxes = [g for g in nodes if "fused-member" not in _classes(g)]
    assert Counter(_texts(g)[0] for g in boxes) == Counter(n.op for n in ir if n.op != FUSED)
    assert len([g for g in boxes if "fused-post-op" in _classes(g)]) == \
        Counter(n.op for n in ir)["trainstep.conv2d_relu"] > 0
    # A cluster per fused node; each member node lies inside exactly one.
    fused_ir = [i for i, n in enumerate(ir) if n.op == FUSED]
    clusters = [g for g in gs if "cluster" in _classes(g)]
    assert len(clusters) == len(fused_ir) > 1
    assert all("fused-elementwise" in _classes(c) for c in clusters)
    members = [g for g in nodes if "fused-member" in _classes(g)]
    assert len(members) == sum(len(ir[i].attrs["members"]) for i in fused_ir)
    home = {}  # member title -> the cluster it is drawn in
    for g, title in zip(nodes, titles):
        if "fused-member" in _classes(g):
            (home[title],) = [c for c, cl in enumerate(clusters) if _inside(_bbox(g), _bbox(cl))]
    edges = [g.find(NS + "title").text.split("->") for g in gs if "edge" in _classes(g)]
    expected = _ir_edges(ir)
    assert len(edges) == len(expected) > len(ir)

    # Each cluster holds its node's member ops (full names in the tooltips) and
    # the edges of its data flow: inside it, in from producers, out to readers.
    def summary(ops, edges, inside):
        return (tuple(sorted(ops)), sum(inside(t) and inside(h) for t, h in edges),
                sum(not inside(t) and inside(h) for t, h in edges),
                sum(inside(t) and not inside(h) for t, h in edges))

    op_of = {g.find(NS + "title").text: g.find(f".//{NS}a").get(XLINK + "title").split(": ")[-1]
             for g in members}
    got = Counter(summary([op for t, op in op_of.items() if home[t] == c], edges,
                          lambda t, c=c: home.get(t) == c) for c in range(len(clusters)))
    want = Counter(summary([m["op"] for m in ir[i].attrs["members"]], expected,
                           lambda e, i=i: e[:2] == ("m", i)) for i in fused_ir)
    assert got == want
    labels = Counter(t for c in clusters for t in _texts(c))
    assert labels == Counter(f"fused elementwise: {len(ir[i].attrs['members'])} ops" for i in fused_ir)
    legend = " ".join(_texts(root))
    assert f"fused elementwise group: {len(clusters)}" in legend
    assert "oneDNN post-op" in legend


# --- inspect --memory ---------------------------------------------------------

def _arena_mib(art):
    p = run("bench", art, "--steps", 1, "--warmup", 0, "--threads", 1)
    return float(re.search(r"arena ([\d.]+) MiB", p.stdout).group(1))


def test_memory_has_one_rect_per_buffer_and_they_do_not_overlap(mnist_adadelta, tmp_path):
    out = tmp_path / "memory.svg"
    p = run("inspect", mnist_adadelta, "--memory", out)
    count = int(re.search(r"(\d+) buffers", p.stdout).group(1))
    root = _svg(out)
    rects = [r for r in root.iter(NS + "rect") if "buffer" in _classes(r)]
    assert len(rects) == count > 10
    names = {v for node in _ir_nodes(mnist_adadelta) for v in node.outs if v != "_"}
    bufs = []
    for r in rects:
        value = r.get("data-value")
        assert value in names  # a node's output
        title = r.find(NS + "title").text
        b = [int(r.get(k)) for k in ("data-offset", "data-bytes", "data-first", "data-last")]
        assert title.startswith(f"%{value}: ") and f"({b[1]} bytes)" in title
        bufs.append(b)
    # A plan may reuse bytes only between values whose lifetimes do not meet.
    for i, (o1, n1, f1, l1) in enumerate(bufs):
        for o2, n2, f2, l2 in bufs[i + 1:]:
            assert not (o1 < o2 + n2 and o2 < o1 + n1 and f1 <= l2 and f2 <= l1)
    top = max(o + n for o, n, _, _ in bufs)
    assert abs(top / 2**20 - _arena_mib(mnist_adadelta)) < 0.006  # the session's arena
    assert "arena offset (MiB)" in _texts(root) and "node index (schedule order)" in _texts(root)


# --- rendered by a browser ------------------------------------------------------

def _chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    pytest.skip("no chromium on PATH (scripts/install-deps.sh installs Debian's chromium)")


def _png_pixels(path):
    """(width, height, set of distinct pixels) of an 8-bit RGB/RGBA PNG, decoded with zlib."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, b""
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    assert depth == 8 and ctype in (2, 6), (depth, ctype)
    bpp = 3 if ctype == 2 else 4
    raw, stride = zlib.decompress(idat), w * bpp
    prev, colours, i = bytearray(stride), set(), 0
    for _ in range(h):
        f, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):  # undo the row filter (PNG spec, section 9)
            a = line[x - bpp] if x >= bpp else 0
            b, c = prev[x], prev[x - bpp] if x >= bpp else 0
            if f == 1:
                line[x] = (line[x] + a) & 255
            elif f == 2:
                line[x] = (line[x] + b) & 255
            elif f == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        colours.update(bytes(line[x:x + 3]) for x in range(0, stride, bpp * 7))
        prev = line
    return w, h, colours


def render(chromium, svg, png, size=(1200, 800), profile=None):
    """Screenshots `svg` in headless Chromium at a window of `size`."""
    args = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            f"--screenshot={png}", f"--window-size={size[0]},{size[1]}", str(svg)]
    if profile:
        args.insert(1, f"--user-data-dir={profile}")
    p = subprocess.run(args, capture_output=True, text=True, timeout=180)
    assert p.returncode == 0 and os.path.exists(png), p.stderr


@pytest.mark.parametrize("kind", ["curves", "graph", "memory"])
def test_chromium_renders_each_svg(kind, run_dir, mnist_adadelta, tmp_path):
    chromium = _chromium()
    svg = tmp_path / f"{kind}.svg"
    if kind == "curves":
        run("plot", run_dir, "--out", svg)
    else:
        run("inspect", mnist_adadelta, f"--{kind}", svg)
    png = tmp_path / f"{kind}.png"
    render(chromium, svg, png, profile=tmp_path / "chromium")
    w, h, colours = _png_pixels(png)
    assert (w, h) == (1200, 800)
    assert len(colours) > 5, colours  # drawn, not one background colour
