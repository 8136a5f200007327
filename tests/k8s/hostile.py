#!/usr/bin/python3
"""hostile.py — `tandem manifest k8s` against hostile values, for tests/cli_k8s.sh.

    hostile.py TANDEM CONFIG WORKDIR    prints "ok N" or what is wrong

Renders CONFIG with hostile text in every free-text place a user controls — a string key
by --set (log.tensorboard, data.mixture_file, data.dataset), a --sweep value, the store
URL, the config file's name — where the text holds the characters that YAML 1.1 parsers
(PyYAML here, go-yaml as kubectl uses it) take as line breaks: NEL (U+0085), LINE
SEPARATOR (U+2028), PARAGRAPH SEPARATOR (U+2029), beside a newline, quotes, a backslash,
'---' and text shaped like YAML keys. Each render must either be refused (exit 2) or
parse as exactly the ConfigMap and the Job (no extra document, no extra key in the
ConfigMap, config.yaml a map), with a --set value read back from config.yaml exactly as
given. It imports nothing of tandem's.
"""
import os, subprocess, sys, yaml

BREAKS = ["\u2028", "\u2029", "\u0085"]
PAYLOADS = [f"x{b}---{b}apiVersion: v1{b}kind: Pod{b}metadata: {{name: evil}}" for b in BREAKS] + \
           [f"y{b}binaryData:{b}  evil: AAAA" for b in BREAKS] + \
           ["q\"uo'te\\back\nnewline", "  lead{b}: colon".format(b="\u2028"), "tab\tand\u0085nel"]


def render(tandem, args, env=None):
    r = subprocess.run([tandem, "manifest", "k8s"] + args, capture_output=True, text=True, env=env)
    return r.returncode, r.stdout, r.stderr


def check(out, want=None):
    """None when the text parses as exactly the ConfigMap and the Job, else the problem."""
    try:
        docs = [d for d in yaml.safe_load_all(out) if d is not None]
    except yaml.YAMLError as ex:
        return f"does not parse: {str(ex)[:200]}"
    kinds = sorted(d.get("kind", "?") for d in docs if isinstance(d, dict))
    if kinds != ["ConfigMap", "Job"] or len(docs) != 2:
        return f"documents {kinds} (want ConfigMap, Job)"
    cm = next(d for d in docs if d["kind"] == "ConfigMap")
    if set(cm) != {"apiVersion", "kind", "metadata", "data"} or set(cm["data"]) != {"config.yaml"}:
        return f"the ConfigMap holds {sorted(cm)} / {sorted(cm.get('data') or {})}"
    cfg = yaml.safe_load(cm["data"]["config.yaml"])
    if not isinstance(cfg, dict):
        return "config.yaml is not a map"
    if want:
        section, key, value = want
        got = (cfg.get(section) or {}).get(key)
        if got != value:
            return f"{section}.{key} reads back as {got!r}, not {value!r}"
    return None


def main():
    tandem, config, work = sys.argv[1:4]
    base = ["--set", "cluster.image=registry.example.com/tandem:0.1"]
    n, bad = 0, []
    for i, p in enumerate(PAYLOADS):
        cases = [
            (["--set", f"log.tensorboard={p}"], ("log", "tensorboard", p)),
            (["--set", "data.mixture=file", "--set", f"data.mixture_file=/m/{p}"], ("data", "mixture_file", f"/m/{p}")),
            (["--set", f"data.dataset=/d/{p}"], ("data", "dataset", f"/d/{p}")),
            (["--sweep", f"log.tensorboard=a,{p}"], None),
            (["--store", f"s3://bucket/{p}"], None),
        ]
        # the config file's own name (it is in the "rendered by" comment)
        named = os.path.join(work, f"c{i}{p.replace('/', '_')[:40]}.yaml")
        try:
            with open(config) as src, open(named, "w") as dst:
                dst.write(src.read())
            cases.append(([], None, named))
        except OSError:
            pass
        for case in cases:
            args, want = case[0], case[1]
            cfg = case[2] if len(case) > 2 else config
            rc, out, err = render(tandem, [cfg] + base + args)
            n += 1
            if rc == 2 and err.strip():
                continue  # refused, saying why
            if rc != 0:
                bad.append(f"{args!r}: exit {rc}: {err.strip()[:200]}")
                continue
            problem = check(out, want)
            if problem:
                bad.append(f"{args or cfg!r}: {problem}")
    if bad:
        print(f"{len(bad)} of {n} renders broken: " + " | ".join(bad[:4]))
    else:
        print(f"ok {n}")


if __name__ == "__main__":
    main()
