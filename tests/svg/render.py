#!/usr/bin/python3
"""render.py — renders an SVG file in headless Chromium to a PNG, and checks the PNG.

    tests/svg/render.py FILE.svg OUT.png           render only
    tests/svg/render.py --check FILE.svg OUT.png   render, then check the picture

Used by tests/test_svgplot.c for "renders in a browser and is not blank". The window is
the SVG's own width x height, so the screenshot is the whole document. --check asserts:
  - the PNG has that size and between 0.3% and 60% of it is ink (not near-white): a
    blank page fails, and so does a plot flooded by an unfilled polyline;
  - at least 3 distinct ink colours (several series, axes and text);
  - each series' colour (from its polyline or marker in the SVG) is inside rect.plot-area;
  - rect.legend-box has ink inside, including every series colour (the line samples);
  - there is dark text outside the plot area (tick labels).
Exit status: 0 ok, 1 a check failed, 2 usage, 3 Chromium is missing, 4 Chromium failed.
Standard library only (Debian's /usr/bin/python3), with a minimal PNG decoder for the
8-bit RGB/RGBA non-interlaced images Chromium writes.
"""
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import xml.dom.minidom
import zlib

CHROMIUM = "/usr/bin/chromium"


def fail(msg, code=1):
    print("render.py: " + msg, file=sys.stderr)
    sys.exit(code)


def svg_size(path):
    root = xml.dom.minidom.parse(path).documentElement
    try:
        return int(float(root.getAttribute("width"))), int(float(root.getAttribute("height")))
    except ValueError:
        return 900, 500


def render(svg, png):
    if not os.access(CHROMIUM, os.X_OK):
        fail("%s not found: the render test needs Debian's chromium; run `scripts/deps.sh "
             "test` (or `make test`, which runs it)" % CHROMIUM, 3)
    w, h = svg_size(svg)
    # A fresh profile each time: nothing from an earlier run (or a person's browser)
    # can change the picture, and nothing is left behind.
    profile = tempfile.mkdtemp(prefix="tandem-chromium-")
    try:
        if os.path.exists(png):
            os.unlink(png)
        argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
                "--hide-scrollbars", "--user-data-dir=" + profile,
                "--screenshot=" + os.path.abspath(png), "--window-size=%d,%d" % (w, h),
                "file://" + os.path.abspath(svg)]
        env = dict(os.environ, HOME=profile)  # keeps caches and crash dumps in there too
        try:
            r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               env=env, timeout=90)
        except subprocess.TimeoutExpired:
            fail("chromium did not finish in 90 s", 4)
        if r.returncode != 0 or not os.path.exists(png):
            tail = r.stdout.decode("utf-8", "replace")[-3000:]
            fail("chromium exited %d without a screenshot:\n%s" % (r.returncode, tail), 4)
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def decode_png(path):
    """(width, height, rows): rows[y] is a bytes of R,G,B triples."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail("%s is not a PNG" % path)
    pos, idat, ihdr = 8, [], None
    while pos + 8 <= len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
        pos += 12 + n
    if not ihdr:
        fail("%s has no IHDR" % path)
    w, h, depth, ctype, _, _, interlace = ihdr
    if depth != 8 or ctype not in (2, 6) or interlace:
        fail("%s: unsupported PNG (depth %d, colour type %d, interlace %d)"
             % (path, depth, ctype, interlace))
    bpp = 3 if ctype == 2 else 4
    raw = zlib.decompress(b"".join(idat))
    stride = w * bpp
    prev = bytearray(stride)
    rows = []
    for y in range(h):
        off = y * (stride + 1)
        ft, line = raw[off], bytearray(raw[off + 1:off + 1 + stride])
        if ft == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 255
        elif ft == 2:
            line = bytearray((a + b) & 255 for a, b in zip(line, prev))
        elif ft == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 255
        elif ft == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b = prev[i]
                c = prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        elif ft != 0:
            fail("%s: bad filter type %d in row %d" % (path, ft, y))
        prev = line
        if bpp == 4:  # composite on white: transparent pixels are what a viewer shows white
            rgb = bytearray()
            for i in range(0, stride, 4):
                al = line[i + 3]
                for c in line[i:i + 3]:
                    rgb.append((c * al + 255 * (255 - al)) // 255)
            rows.append(bytes(rgb))
        else:
            rows.append(bytes(line))
    return w, h, rows


def hex_rgb(s):
    s = s.strip().lstrip("#")
    return tuple(int(s[i:i + 2], 16) for i in (0, 2, 4))


def rect_of(el):
    return tuple(float(el.getAttribute(k)) for k in ("x", "y", "width", "height"))


def check(svg, png):
    doc = xml.dom.minidom.parse(svg)
    root = doc.documentElement
    sw, sh = svg_size(svg)
    w, h, rows = decode_png(png)
    if (w, h) != (sw, sh):
        fail("PNG is %dx%d, the SVG %dx%d" % (w, h, sw, sh))

    def has_class(el, c):
        return c in el.getAttribute("class").split()

    plot = legend = None
    for el in root.getElementsByTagName("rect"):
        if has_class(el, "plot-area"):
            plot = rect_of(el)
        if has_class(el, "legend-box"):
            legend = rect_of(el)
    colours = []
    for g in root.getElementsByTagName("g"):
        if has_class(g, "series"):
            for el in g.getElementsByTagName("polyline") + g.getElementsByTagName("circle"):
                c = el.getAttribute("stroke") if el.tagName == "polyline" else el.getAttribute("fill")
                if c:
                    colours.append(hex_rgb(c))
                    break
    if plot is None:
        fail("the SVG has no rect.plot-area")

    ink = 0
    hist = {}
    for row in rows:
        for i in range(0, len(row), 3):
            r, g, b = row[i], row[i + 1], row[i + 2]
            if min(r, g, b) < 200:
                ink += 1
                q = (r >> 4, g >> 4, b >> 4)
                hist[q] = hist.get(q, 0) + 1
    frac = ink / float(w * h)
    distinct = sum(1 for v in hist.values() if v >= 20)

    def count(box, pred, inset=0):
        x0, y0, bw, bh = box
        xa, ya = max(0, int(x0) + inset), max(0, int(y0) + inset)
        xb, yb = min(w, int(x0 + bw) - inset), min(h, int(y0 + bh) - inset)
        n = 0
        for y in range(ya, yb):
            row = rows[y]
            for i in range(3 * xa, 3 * xb, 3):
                if pred(row[i], row[i + 1], row[i + 2]):
                    n += 1
        return n

    def near(c, tol=40):
        return lambda r, g, b: abs(r - c[0]) <= tol and abs(g - c[1]) <= tol and abs(b - c[2]) <= tol

    problems = []
    if not 0.003 <= frac <= 0.60:
        problems.append("ink covers %.2f%% of the picture (want 0.3%%..60%%)" % (100 * frac))
    if distinct < 3:
        problems.append("only %d distinct ink colours (want >= 3)" % distinct)
    for c in sorted(set(colours)):
        n = count(plot, near(c))
        if n < 8:
            problems.append("series colour #%02x%02x%02x: %d pixels in the plot area" % (c + (n,)))
    if colours:
        if legend is None:
            problems.append("series but no rect.legend-box")
        else:
            n = count(legend, lambda r, g, b: min(r, g, b) < 200, inset=3)
            if n < 20:
                problems.append("legend box is empty (%d ink pixels)" % n)
            for c in sorted(set(colours)):
                m = count(legend, near(c), inset=2)
                if m < 3:
                    problems.append("legend lacks colour #%02x%02x%02x" % c)
    dark = lambda r, g, b: max(r, g, b) < 100
    text = count((0, 0, w, h), dark) - count(plot, dark)
    if text < 50:
        problems.append("no dark text outside the plot area (%d pixels)" % text)
    if problems:
        fail("%s does not look like the plot:\n  " % png + "\n  ".join(problems))
    print("render.py: %s %dx%d, ink %.1f%%, %d ink colours, %d series colours in plot and legend"
          % (os.path.basename(png), w, h, 100 * frac, distinct, len(set(colours))))


def main(argv):
    do_check = len(argv) > 1 and argv[1] == "--check"
    args = argv[2:] if do_check else argv[1:]
    if len(args) != 2:
        fail("usage: render.py [--check] FILE.svg OUT.png", 2)
    render(args[0], args[1])
    if do_check:
        check(args[0], args[1])


if __name__ == "__main__":
    main(sys.argv)
