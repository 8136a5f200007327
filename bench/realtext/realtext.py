#!/usr/bin/python3
"""realtext.py — a multi-domain corpus of real text from Debian packages, offline.

Called by build.sh (which installs the packages first); run with Debian's /usr/bin/python3
and nothing but its standard library.

  realtext.py packages --train SPEC        the Debian packages the named domains need
  realtext.py build --out DIR --train SPEC --val SIZES --test SIZES [--seed S]
  realtext.py list                          the domains, their sources and licences
  realtext.py stats [--domains a,b]         the most clean text each domain can give

Every domain reads only files that `dpkg-query -L` lists for its own packages (never a
directory walk of /usr), so what else a machine has installed cannot leak in, and the
text carries no path of this machine: documents are joined with a blank line, nothing
else is added. Same package versions and options, same bytes on any bookworm machine.

Splits, per domain: documents are ordered by SHA-256(seed, domain, document id), where
the id is the file's path inside its package (or "Genesis 1", "cookie#12"), so a changed
package version only moves the documents whose text changed. Test is filled first, then
val, then train, each walking that order and taking a document when it still fits under
the split's byte target (see fill()); a document goes to at most one split, so val and
test never share a document with train, and val/test do not depend on the train size.
"""

import argparse
import gzip
import hashlib
import os
import re
import struct
import subprocess
import sys
import tarfile
import tempfile
import time

SHARD_MAGIC = 20240520  # llm.c's shard header: 256 x int32 LE, [0] magic, [1] version, [2] count
SHARD_VERSION = 1
HEADER_INTS = 256
FILL_TOL = 0.002  # a split is done once within 0.2 % under its target ...
FILL_SLACK = 0.02  # ... and is an error if it ends more than 2 % under it
MARKER = ".realtext-corpus"  # marks an --out directory as ours, so a rebuild may replace it


def die(msg):
    sys.stderr.write("realtext: %s\n" % msg)
    sys.exit(2)


# ---------------------------------------------------------------------------------------
# Reading package files

def dpkg_files(packages):
    """The regular files (not symlinks) that dpkg lists for the packages, sorted."""
    out = subprocess.run(["dpkg-query", "-L"] + packages, check=True, capture_output=True,
                         text=True).stdout
    files = set()
    for line in out.splitlines():
        # dpkg-query -L also prints "diverted by" notes; keep absolute paths only
        if line.startswith("/") and os.path.isfile(line) and not os.path.islink(line):
            files.add(line)
    return sorted(files)


def pkg_versions(packages):
    out = subprocess.run(["dpkg-query", "-W", "-f", "${Package}\t${Version}\n"] + packages,
                         check=True, capture_output=True, text=True).stdout
    return dict(line.split("\t") for line in out.splitlines())


def read_file(path):
    with open(path, "rb") as f:
        data = f.read()
    return gzip.decompress(data) if path.endswith(".gz") else data


CTRL = re.compile("[\x00-\x08\x0b\x0e-\x1f\x7f]")


def clean(data):
    """Bytes of one document -> normalised text, or None if it is not clean text.

    Strict UTF-8 (a latin-1 file is dropped, not guessed), LF line ends, no control
    characters but tab (form feeds, page breaks in old sources, are removed), trailing
    blanks stripped from each line and blank lines from both ends; ends with one "\\n".
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    text = text.lstrip("\ufeff").replace("\r\n", "\n").replace("\f", "")
    if "\r" in text or CTRL.search(text):
        return None
    lines = [ln.rstrip() for ln in text.split("\n")]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines) + "\n" if lines else None


def rel(path, prefix):
    return path[len(prefix):] if path.startswith(prefix) else path


# ---------------------------------------------------------------------------------------
# Domains: each yields (document id, loader) in any order; loader() -> raw bytes or None.
# Loaders run lazily, in split order, so only the documents a build needs are rendered.

def docs_kjv():
    """The King James Bible, one document per chapter (1,189), via the `bible` program
    (bible-kjv-text stores the text compressed; -l 10000 turns its line wrapping off, so
    COLUMNS does not matter). Verse lines lose their indent: "3 And God said, ..."."""
    out = subprocess.run(["bible", "-l", "10000", "gen1:1-rev22:21"], check=True,
                         stdin=subprocess.DEVNULL, capture_output=True,
                         env={"PATH": "/usr/bin:/bin", "LC_ALL": "C", "HOME": "/nonexistent"}
                         ).stdout.decode("ascii")
    chapters, cur = [], None
    for line in out.split("\n"):
        if line and not line[0].isspace():  # "Genesis 1", "1 Kings 2": a chapter title
            cur = [line, ""]
            chapters.append(cur)
        elif line.strip() and cur is not None:
            cur.append(line.strip())
    if len(chapters) != 1189:
        die("prose: expected 1189 chapters from `bible`, got %d" % len(chapters))
    for ch in chapters:
        yield ch[0], (lambda ch=ch: ("\n".join(ch) + "\n").encode())


MAN_ALIAS = re.compile(rb"^(?:(?:\.|')\\\".*\n|\s*\n)*\.so\s+\S+\s*$")
OVERSTRIKE = re.compile("[^\n]\b")


def docs_man():
    """man pages of manpages and manpages-dev (English, sections 1-8), rendered by mandoc
    to 78 columns; bold/underline overstrikes (X\\bX, _\\bX) and no-break spaces removed.
    Symlinks and `.so` alias pages are skipped (they repeat another page)."""
    for path in dpkg_files(["manpages", "manpages-dev"]):
        m = re.match(r"/usr/share/man/(man\d)/[^/]+$", path)
        if not m:
            continue
        raw = read_file(path)
        if MAN_ALIAS.match(raw):
            continue

        def load(path=path):
            # -I os=Linux: mandoc would otherwise put uname's name in pages without one
            r = subprocess.run(["mandoc", "-T", "utf8", "-O", "width=78", "-I", "os=Linux",
                                path], stdin=subprocess.DEVNULL, capture_output=True,
                               env={"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8",
                                    "TZ": "UTC"})
            if r.returncode > 2:  # 1, 2: warnings/errors about the source, still rendered
                return None
            try:
                text = r.stdout.decode("utf-8")
            except UnicodeDecodeError:
                return None
            return OVERSTRIKE.sub("", text).replace("\u00a0", " ").encode()

        yield rel(path, "/usr/share/man/").removesuffix(".gz"), load


DIGITS = b"0123456789"
LETTERS = bytes(range(65, 91)) + bytes(range(97, 123))


def digit_heavy(data):
    """True for generated tables (character sets, constants): mostly digits."""
    digits = len(data) - len(data.translate(None, DIGITS))
    letters = len(data) - len(data.translate(None, LETTERS))
    return digits + letters > 0 and digits / (digits + letters) > 0.35


def file_docs(packages, keep, prefix, generated=None):
    """The files of `packages` for which keep(path), as documents named by their path
    under `prefix`; with `generated`, a file whose bytes match it is dropped too."""
    def load(path):
        data = read_file(path)
        return None if generated is not None and generated(data) else data

    for path in dpkg_files(packages):
        if keep(path):
            yield rel(path, prefix).removesuffix(".gz"), (lambda p=path: load(p))


LONG_LINE = re.compile(rb"[^\n]{1001}")


def machine_made(data):
    """Generated code rather than written code: a 'Code generated ... DO NOT EDIT' or
    gencodec header, embedded data (a line over 1000 bytes), or mostly digits (tables)."""
    head = data[:4096]
    return (re.search(rb"(?m)^// Code generated .* DO NOT EDIT\.$", head) is not None
            or b"Python Character Mapping Codec" in head
            or LONG_LINE.search(data) is not None or digit_heavy(data))


# tests, and the generated pydoc topics (a 750 kB dict) and build-time sysconfig data
PY_SKIP = re.compile(r"/(test|tests|idle_test|site-packages|dist-packages|pydoc_data)/"
                     r"|/_sysconfigdata_")


def docs_py():
    """Python 3.11 standard library modules (*.py of libpython3.11-minimal and -stdlib),
    without the test suites and generated modules (the encodings/ codec tables, ...)."""
    return file_docs(["libpython3.11-minimal", "libpython3.11-stdlib"],
                     lambda p: p.endswith(".py") and not PY_SKIP.search(p),
                     "/usr/lib/python3.11/", machine_made)


PERL_SKIP = {"perltoc.pod", "perluniprops.pod"}  # generated: a table of contents, a table


def docs_perl():
    """Perl's documentation as POD source (perl-doc: perlfunc, perlre, perlguts, the
    perl5*delta release notes, ...), without the two generated indexes."""
    return file_docs(["perl-doc"],
                     lambda p: p.endswith(".pod") and "/pod/" in p
                     and os.path.basename(p) not in PERL_SKIP,
                     "/usr/share/perl/")


def docs_kern():
    """Linux kernel documentation, reStructuredText sources (linux-doc-6.1
    Documentation/**/*.rst), English only (translations/ left out)."""
    prefix = "/usr/share/doc/linux-doc-6.1/Documentation/"
    return file_docs(["linux-doc-6.1"],
                     lambda p: p.startswith(prefix) and p.endswith(".rst.gz")
                     and not p.startswith(prefix + "translations/"),
                     prefix)


def docs_go():
    """Go 1.19 standard library and toolchain sources (golang-1.19-src src/**/*.go),
    without tests (*_test.go), testdata/, vendored third-party code and generated files
    (the compiler's SSA rewrite rules, tables, the embedded tz database: 13 MB)."""
    prefix = "/usr/share/go-1.19/src/"
    return file_docs(["golang-1.19-src"],
                     lambda p: p.startswith(prefix) and p.endswith(".go")
                     and not p.endswith("_test.go")
                     and "/testdata/" not in p and "/vendor/" not in p,
                     prefix, machine_made)


C_SKIP = re.compile(r"(^|/)(\.pc|iconvdata|ccs|testsuite)/")


def docs_code():
    """C sources of newlib (libc, libm, libgloss: newlib-source's upstream tarball), the
    *.c files, without quilt's .pc/ copies, the testsuite and the iconv code tables."""
    tars = [p for p in dpkg_files(["newlib-source"]) if re.search(r"/newlib-[\d.]+\.tar\.xz$", p)]
    if len(tars) != 1:
        die("code: expected one newlib-*.tar.xz in newlib-source, found %r" % tars)
    with tarfile.open(tars[0]) as tf:
        members = [(m.name.split("/", 1)[1], tf.extractfile(m).read())
                   for m in tf.getmembers()
                   if m.isfile() and m.name.endswith(".c") and "/" in m.name]
    for name, data in sorted(members):
        if C_SKIP.search(name) or machine_made(data):
            continue
        yield name, (lambda d=data: d)


def docs_fortune():
    """Fortune cookies (fortunes, fortunes-min): quotations, jokes, verse; one document
    per fortune, without the ASCII-art files."""
    prefix = "/usr/share/games/fortunes/"
    skip = {"art", "ascii-art", "translate-me"}
    for path in dpkg_files(["fortunes", "fortunes-min"]):
        name = rel(path, prefix)
        if not path.startswith(prefix) or "." in name or "/" in name or name in skip:
            continue
        text = read_file(path)
        for i, cookie in enumerate(re.split(rb"(?m)^%\n", text)):
            if cookie.strip():
                yield "%s#%d" % (name, i), (lambda c=cookie: c)


# name -> packages (all installed by build.sh), what it is, licence, document generator
DOMAINS = {
    "prose": (["bible-kjv", "bible-kjv-text"], "English prose: King James Bible, chapters",
              "public domain (1611 text)", docs_kjv),
    "man": (["manpages", "manpages-dev", "mandoc"], "man pages rendered to text (mandoc)",
            "per page: GPL-2+, Linux-man-pages-copyleft, BSD, Expat", docs_man),
    "code": (["newlib-source"], "C source: newlib libc/libm *.c",
             "per file: mostly BSD-like, some (L)GPL", docs_code),
    "py": (["libpython3.11-minimal", "libpython3.11-stdlib"], "Python 3.11 stdlib *.py",
           "PSF-2.0 (and per-file permissive)", docs_py),
    "perl": (["perl-doc"], "Perl documentation, POD source", "GPL-1+ or Artistic",
             docs_perl),
    "kern": (["linux-doc-6.1"], "Linux kernel docs, reStructuredText", "GPL-2",
             docs_kern),
    "go": (["golang-1.19-src"], "Go 1.19 sources *.go", "BSD-3-clause (Go)", docs_go),
    "fortune": (["fortunes", "fortunes-min"], "fortune cookies: quotes, jokes, verse",
                "BSD (fortune), per-file notes", docs_fortune),
}


# ---------------------------------------------------------------------------------------
# Options

def parse_size(s, what):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kKM]?)", s.strip())
    if not m:
        die("%s: %r is not a byte count (digits with an optional k = 1000 or M = 1e6)"
            % (what, s))
    v = float(m.group(1)) * {"": 1, "k": 1e3, "K": 1e3, "M": 1e6}[m.group(2)]
    return int(round(v))


def parse_train(spec):
    """"prose=2400k,code=1200k" -> [(name, bytes)] in the given order."""
    out = []
    for item in spec.split(","):
        if "=" not in item:
            die("--train: %r is not NAME=SIZE" % item)
        name, size = item.split("=", 1)
        name = name.strip()
        if name not in DOMAINS:
            die("--train: unknown domain %r (known: %s)" % (name, ", ".join(DOMAINS)))
        if name in (n for n, _ in out):
            die("--train: domain %r given twice" % name)
        out.append((name, parse_size(size, "--train " + name)))
        if out[-1][1] <= 0:
            die("--train %s: the size must be > 0" % name)
    return out


def parse_per_domain(spec, names, what):
    """"40k" (every domain) or "prose=40k,code=20k" (the rest: error) -> {name: bytes}."""
    if "=" not in spec:
        v = parse_size(spec, what)
        return {n: v for n in names}
    out = {}
    for item in spec.split(","):
        name, size = item.split("=", 1)
        if name.strip() not in names:
            die("%s: %r is not a domain of --train" % (what, name))
        out[name.strip()] = parse_size(size, "%s %s" % (what, name))
    missing = [n for n in names if n not in out]
    if missing:
        die("%s: no size for %s" % (what, ", ".join(missing)))
    return out


# ---------------------------------------------------------------------------------------
# Splitting

def order_key(seed, domain, doc_id):
    return hashlib.sha256(("%d\0%s\0%s" % (seed, domain, doc_id)).encode()).digest()


class Pool:
    """A domain's documents in split order, loaded and cleaned on first use."""

    def __init__(self, domain, seed, gen):
        self.domain = domain
        self.items = sorted((order_key(seed, domain, i), i, load) for i, load in gen)
        self.ids = [i for _, i, _ in self.items]
        if len(set(self.ids)) != len(self.ids):
            die("%s: duplicate document ids" % domain)
        self.text = {}  # id -> cleaned bytes (None: rejected)
        self.seen = set()  # SHA-256 of the texts loaded so far
        self.used = set()
        self.cut = {}  # k -> bytes kept of a document cut to fit its split (see fill)
        self.rejected = 0
        self.taken = 0  # bytes given to the splits filled so far

    def get(self, k):
        """Document k's text plus the blank line that separates it from the next, or None
        (not clean text, or the same text as a document earlier in the order: the perl
        docs' perldelta is perl5360delta, per-architecture copies in newlib and Go, a
        cookie in two fortune files). Documents are always loaded in order, as a prefix
        of it, so of identical ones the first in the order is kept, whatever the targets."""
        _, doc_id, load = self.items[k]
        if doc_id not in self.text:
            raw = load()
            t = clean(raw) if raw is not None else None
            t = t.encode() + b"\n" if t else None
            if t is not None:
                digest = hashlib.sha256(t).digest()
                t = None if digest in self.seen else t
                self.seen.add(digest)
            self.text[doc_id] = t
            self.rejected += t is None
        return self.text[doc_id]

    def piece(self, k):
        """What a split holds of document k: all of it, or the prefix fill() cut."""
        t = self.get(k)
        return t[:self.cut[k]] if k in self.cut else t

    def fill(self, target, split):
        """Documents for one split: walk the order, take each unused document that still
        fits under `target` bytes, stop once within FILL_TOL of it. If that ends more than
        FILL_SLACK short (only documents too big are left), take the next unused document
        cut at its last line break within the bytes still wanted (so a small split is not
        one large document that overshoots it many times), and more such until the target
        is met; if the text runs out first, fail."""
        got, size = [], 0
        for k in range(len(self.items)):
            if target - size <= target * FILL_TOL:
                break
            if k in self.used:
                continue
            t = self.get(k)
            if t is not None and size + len(t) <= target:
                got.append(k), self.used.add(k)
                size += len(t)
        for k in range(len(self.items)):
            if size >= target * (1 - FILL_SLACK):
                break
            t = self.get(k) if k not in self.used else None
            if t is None:
                continue
            want = target - size
            if len(t) > want:
                nl = t.rfind(b"\n", 0, want)
                if nl < 0:
                    continue  # no whole line fits: try the next document
                self.cut[k] = nl + 1
            got.append(k), self.used.add(k)
            size += len(self.piece(k))
        if size < target * (1 - FILL_SLACK):
            total = sum(len(self.get(k) or b"") for k in range(len(self.items)))
            die("domain %r (%s): too little text for %s = %d bytes: the source has %d "
                "bytes of clean text, the splits filled before it (test, then val, then "
                "train) took %d, and %s could get only %d; ask for less"
                % (self.domain, ", ".join(DOMAINS[self.domain][0]), split, target, total,
                   self.taken, split, size))
        self.taken += size
        return sorted(got)  # a split holds its documents in the seeded order


# ---------------------------------------------------------------------------------------
# Output

def write_atomic(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def shard_bytes(text):
    """llm.c shard of byte-level tokens: each byte of the text is one uint16 token."""
    header = struct.pack("<%di" % HEADER_INTS, SHARD_MAGIC, SHARD_VERSION, len(text),
                         *([0] * (HEADER_INTS - 3)))
    tokens = bytearray(2 * len(text))
    tokens[0::2] = text  # little-endian uint16: low byte = the byte, high byte = 0
    return header + bytes(tokens)


# The versions this script was tested with (Debian bookworm, November 2025). Another
# version may ship different text (a security update of Python, a kernel point release),
# and then that domain's bytes differ from a corpus built with these.
TESTED = {
    "bible-kjv": "4.38", "bible-kjv-text": "4.38", "fortunes": "1:1.99.1-7.3",
    "fortunes-min": "1:1.99.1-7.3", "golang-1.19-src": "1.19.8-2",
    "libpython3.11-minimal": "3.11.2-6+deb12u6", "libpython3.11-stdlib": "3.11.2-6+deb12u6",
    "linux-doc-6.1": "6.1.192-2", "mandoc": "1.14.6-1+b1", "manpages": "6.03-2",
    "manpages-dev": "6.03-2", "newlib-source": "3.3.0-1.3+deb12u1",
    "perl-doc": "5.36.0-7+deb12u4",
}


def cmd_build(a):
    t0 = time.time()
    train = dict(parse_train(a.train))
    names = list(train)
    if "raw" in names:
        die("a domain may not be called raw")
    val = parse_per_domain(a.val, names, "--val")
    test = parse_per_domain(a.test, names, "--test")
    for n in names:
        if val[n] <= 0:
            die("--val %s: the size must be > 0 (tandem needs a val split)" % n)
    out = os.path.abspath(a.out)
    if os.path.exists(out) and os.listdir(out) and not os.path.exists(
            os.path.join(out, MARKER)):
        die("--out %s exists, is not empty and was not made by this script; "
            "give a new or empty directory" % out)
    packages = sorted({p for n in names for p in DOMAINS[n][0]})
    versions = pkg_versions(packages)

    # 1. Choose every split's documents; a domain with too little text stops the build
    #    here, before anything is written.
    plans = []
    for name in names:
        pool = Pool(name, a.seed, DOMAINS[name][3]())
        picked = {}
        for split, target in (("test", test[name]), ("val", val[name]),
                              ("train", train[name])):
            picked[split] = pool.fill(target, split) if target > 0 else []
        plans.append((name, pool, picked))
        sys.stderr.write("realtext: %-8s chosen (%.1fs)\n" % (name, time.time() - t0))

    # 2. Write it all into a temporary directory beside --out, then swap that in, so
    #    --out is always either the old corpus or the complete new one.
    parent = os.path.dirname(out)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=os.path.basename(out) + ".tmp-", dir=parent)
    try:
        os.chmod(tmp, 0o755)
        rows, yaml, sums = [], ["vocab: 256", "domains:"], []
        for name, pool, picked in plans:
            row = {"name": name, "pool": len(pool.items)}
            manifest = []
            for split in ("train", "val", "test"):
                if not picked[split]:
                    continue
                text = b"".join(pool.piece(k) for k in picked[split])
                files = {"raw/%s/%s.txt" % (name, split): text,
                         "%s/%s_000.bin" % (name, split): shard_bytes(text)}
                for path, data in files.items():
                    write_atomic(os.path.join(tmp, path), data)
                    sums.append("%s  %s" % (hashlib.sha256(data).hexdigest(), path))
                row[split] = (len(picked[split]), len(text))
                manifest += ["%s\t%d\t%s" % (split, len(pool.piece(k)), pool.ids[k])
                             for k in picked[split]]
            write_atomic(os.path.join(tmp, "raw", name, "documents.tsv"),
                         ("split\tbytes\tdocument\n" + "\n".join(manifest) + "\n").encode())
            rows.append(row)
            yaml += ["  - name: %s" % name,
                     '    train: ["%s/train_*.bin"]' % name,
                     '    val: ["%s/val_*.bin"]' % name]
            if picked["test"]:
                yaml.append('    test: ["%s/test_*.bin"]' % name)
        write_atomic(os.path.join(tmp, "dataset.yaml"), ("\n".join(yaml) + "\n").encode())
        write_atomic(os.path.join(tmp, "packages.txt"), "".join(
            "%s\t%s\n" % (p, versions.get(p, "?")) for p in packages).encode())
        write_atomic(os.path.join(tmp, "command.txt"), (
            "--train %s --val %s --test %s --seed %d\n"
            % (a.train, a.val, a.test, a.seed)).encode())
        sums_text = ("\n".join(sorted(sums, key=lambda l: l[66:])) + "\n").encode()
        write_atomic(os.path.join(tmp, "SHA256SUMS"), sums_text)
        write_atomic(os.path.join(tmp, MARKER), b"")
        if os.path.exists(out):  # ours (checked above) or empty: replace it whole
            old = tempfile.mkdtemp(prefix=os.path.basename(out) + ".old-", dir=parent)
            os.rename(out, os.path.join(old, "x"))
            os.rename(tmp, out)
            subprocess.run(["rm", "-rf", "--", old], check=True)
        else:
            os.rename(tmp, out)
    except BaseException:
        subprocess.run(["rm", "-rf", "--", tmp])
        raise

    print("packages (version here; * = not the version this script was tested with):")
    for p in packages:
        v = versions.get(p, "?")
        print("  %-24s %s%s" % (p, v, "" if TESTED.get(p) == v else
                                "   * tested: %s, this domain's text may differ"
                                % TESTED.get(p, "-")))
    print()
    fmt = "%-8s %6s %6s %5s %5s %10s %8s %8s  %s"
    print(fmt % ("domain", "docs", "train", "val", "test", "train B", "val B", "test B",
                 "source packages"))
    for r in rows:
        g = lambda s, i: r[s][i] if s in r else 0
        print(fmt % (r["name"], r["pool"], g("train", 0), g("val", 0), g("test", 0),
                     g("train", 1), g("val", 1), g("test", 1), " ".join(DOMAINS[r["name"]][0])))
    print("(docs: the domain's candidate documents; train/val/test: documents and bytes "
          "taken)")
    print("\ncorpus digest (sha256 of SHA256SUMS): %s"
          % hashlib.sha256(sums_text).hexdigest())
    print("wrote %s/dataset.yaml (byte-level, vocab 256), raw text in %s/raw, in %.1fs"
          % (out, out, time.time() - t0))


def cmd_packages(a):
    names = [n for n, _ in parse_train(a.train)]
    print(" ".join(sorted({p for n in names for p in DOMAINS[n][0]})))


def cmd_list(_a):
    for n, (pkgs, desc, lic, gen) in DOMAINS.items():
        print("%-8s %-44s %s [%s]" % (n, desc, " ".join(pkgs), lic))


def cmd_stats(a):
    """Clean bytes and documents each domain can give at most (all packages installed)."""
    for n in (a.domains.split(",") if a.domains else DOMAINS):
        t0 = time.time()
        pool = Pool(n, 1, DOMAINS[n][3]())
        sizes = [len(pool.get(k) or b"") for k in range(len(pool.items))]
        sizes = [s for s in sizes if s]
        print("%-8s docs %6d (rejected %4d)  clean %8.2f MB  median doc %7d B  "
              "largest %8d B  %.1fs" % (n, len(sizes), pool.rejected, sum(sizes) / 1e6,
                                        sorted(sizes)[len(sizes) // 2], max(sizes),
                                        time.time() - t0))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--out", required=True)
    b.add_argument("--train", required=True)
    b.add_argument("--val", default="40k")
    b.add_argument("--test", default="60k")
    b.add_argument("--seed", type=int, default=1)
    p = sub.add_parser("packages")
    p.add_argument("--train", required=True)
    sub.add_parser("list")
    s = sub.add_parser("stats")
    s.add_argument("--domains", default="")
    a = ap.parse_args()
    {"build": cmd_build, "packages": cmd_packages, "list": cmd_list,
     "stats": cmd_stats}[a.cmd](a)


if __name__ == "__main__":
    main()
