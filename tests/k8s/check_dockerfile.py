#!/usr/bin/python3
"""check_dockerfile.py — a syntax sanity check of the repository's Dockerfile.

    /usr/bin/python3 tests/k8s/check_dockerfile.py Dockerfile

No container engine runs on the test machines, so the image is never built here. This
checks what can be checked without one: every instruction is a known Dockerfile
instruction (continuation lines joined), the first is FROM (or ARG before FROM), the
runtime stage starts from an nvidia/cuda image, ENTRYPOINT is in exec (JSON array) form
and starts /usr/local/bin/tandem (so tandem is PID 1 and receives SIGTERM itself, as the
rendered Jobs expect), the build runs `make`, and every package of scripts/deps.sh's
build list (the ones the Makefile links) is installed in the build stage, allowing the
Ubuntu names of msgpack. Prints one line per problem; exits 1 if any.
"""
import json
import os
import re
import sys

KNOWN = {"FROM", "RUN", "CMD", "LABEL", "EXPOSE", "ENV", "ADD", "COPY", "ENTRYPOINT",
         "VOLUME", "USER", "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL", "HEALTHCHECK", "SHELL",
         "MAINTAINER"}


def instructions(text):
    out, cur, start = [], "", 0
    for n, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not cur and (not s or s.startswith("#")):
            continue
        if cur and s.startswith("#"):
            continue  # comment lines inside a continuation are dropped by Docker
        if not cur:
            start = n
        if s.endswith("\\"):
            cur += s[:-1] + " "
            continue
        cur += s
        word, _, rest = cur.partition(" ")
        out.append((start, word.upper(), rest.strip(), word))
        cur = ""
    if cur:
        out.append((start, "<unterminated>", cur, ""))
    return out


def main(argv):
    if len(argv) != 2:
        print("usage: check_dockerfile.py Dockerfile", file=sys.stderr)
        return 2
    path = argv[1]
    text = open(path).read()
    ins = instructions(text)
    problems = []
    for n, word, rest, raw in ins:
        if word not in KNOWN:
            problems.append(f"{path}:{n}: unknown instruction '{raw or rest[:20]}'")
    first = [w for _, w, _, _ in ins if w != "ARG"][:1]
    if first != ["FROM"]:
        problems.append(f"{path}: the first instruction (after ARGs) must be FROM")
    froms = [(n, r) for n, w, r, _ in ins if w == "FROM"]
    if not froms or not re.match(r"^nvidia/cuda:\S+", froms[-1][1]):
        problems.append(f"{path}: the runtime stage (last FROM) must be an nvidia/cuda image")
    eps = [(n, r) for n, w, r, _ in ins if w == "ENTRYPOINT"]
    if len(eps) != 1:
        problems.append(f"{path}: expected one ENTRYPOINT, found {len(eps)}")
    else:
        n, r = eps[0]
        try:
            ep = json.loads(r)
        except ValueError:
            ep = None
        if not isinstance(ep, list) or not ep or not all(isinstance(x, str) for x in ep):
            problems.append(f"{path}:{n}: ENTRYPOINT must be in exec form (a JSON array)")
        elif ep[0] != "/usr/local/bin/tandem":
            problems.append(f"{path}:{n}: ENTRYPOINT must start /usr/local/bin/tandem")
    for n, w, r, _ in ins:
        if w == "CMD" and not r.startswith("["):
            problems.append(f"{path}:{n}: CMD must be in exec form (a JSON array)")
    runs = " ".join(r for _, w, r, _ in ins if w == "RUN")
    if not re.search(r"\bmake\b", runs):
        problems.append(f"{path}: no RUN builds tandem with make")
    deps = os.path.join(os.path.dirname(os.path.abspath(path)), "scripts", "deps.sh")
    m = re.search(r"build_pkgs=\(([^)]*)\)", open(deps).read()) if os.path.exists(deps) else None
    if m:
        for pkg in m.group(1).split():
            alts = [pkg] + (["libmsgpack-c-dev"] if pkg == "libmsgpack-dev" else [])
            if not any(re.search(rf"(^|\s){re.escape(a)}(\s|$)", runs) for a in alts):
                problems.append(f"{path}: the build stage does not install {pkg} "
                                "(scripts/deps.sh build list)")
    for p in problems:
        print(p)
    if not problems:
        print(f"{path}: ok ({len(ins)} instructions, {len(froms)} stages, exec-form ENTRYPOINT)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
