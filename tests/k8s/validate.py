#!/usr/bin/python3
"""validate.py — checks rendered Kubernetes manifests the way the API server would.

    /usr/bin/python3 tests/k8s/validate.py [--schema FILE] MANIFEST.yaml...

Each file is a multi-document YAML stream (what `tandem manifest k8s` writes). Every
batch/v1 Job is validated against the Job schema of Kubernetes' own OpenAPI document
(../shared/k8s/apis__batch__v1_openapi.json, Kubernetes v1.35, see SOURCE.txt) with
python3-jsonschema, made strict: `additionalProperties: false` is injected into every
object schema that lists `properties` (and has no additionalProperties of its own, and is
not marked x-kubernetes-preserve-unknown-fields), so an unknown or misspelled field is an
error, as with `kubectl apply --validate=strict`. The int32/int64 formats are range
checked. Int-or-string and quantity fields keep the schema's oneOf of their types.

The schema cannot express the API server's semantic rules, so they are checked here
(SEMANTIC_RULES lists them; the first three are the ones SOURCE.txt names). Service and
ConfigMap are core/v1 objects, which that document does not cover: they get structural
checks only (known top-level and spec fields, types, names), and the rules that tie them
to the Job (the Indexed Job's subdomain names a headless Service in the file; a configMap
volume names a ConfigMap in the file).

Prints one line per problem ("FILE: KIND NAME: PATH: what") and exits 1 if there is any,
0 if every document passes, 2 on a usage or input error.
"""
import copy
import decimal
import json
import os
import re
import sys

import jsonschema
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_SCHEMA = os.path.normpath(
    os.path.join(HERE, "..", "..", "..", "shared", "k8s", "apis__batch__v1_openapi.json"))
JOB_REF = "#/components/schemas/io.k8s.api.batch.v1.Job"

SEMANTIC_RULES = [
    "podFailurePolicy needs template.spec.restartPolicy Never",
    "backoffLimitPerIndex needs completionMode Indexed",
    "exit code 0 may not appear in an onExitCodes rule with operator In",
    "template.spec.restartPolicy is Never or OnFailure",
    "a podFailurePolicy rule has exactly one of onExitCodes and onPodConditions, a known "
    "action and operator, 1..255 sorted unique exit codes, at most 20 rules, a containerName "
    "that names a container, FailIndex only with backoffLimitPerIndex",
    "podReplacementPolicy is TerminatingOrFailed or Failed, and Failed with a podFailurePolicy",
    "an Indexed Job sets completions; maxFailedIndexes needs backoffLimitPerIndex and is at "
    "most completions",
    "counts and seconds are not negative",
    "the Job name is a DNS label (pod labels hold it) and short enough for Indexed pod "
    "host names",
    "containers have unique DNS-label names and an image; env names are valid; volume mounts "
    "name declared volumes at distinct paths",
    "extended resources (nvidia.com/gpu) are whole numbers with requests equal to limits; "
    "requests do not exceed limits",
    "tolerations: Exists has no value, an empty key needs Exists, a known effect, "
    "tolerationSeconds only with NoExecute",
    "nodeSelector keys and values are valid labels",
    "an Indexed Job whose pods are ranks of one run (TANDEM_WORLD_SIZE) has a subdomain naming "
    "a headless Service of the same file, selecting its pods",
    "configMap volumes name a ConfigMap of the same file",
]

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
QUANTITY = re.compile(r"^([+-]?[0-9.]+)([eE][+-]?[0-9]+|Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E|)$")
SUFFIX = {"": 1, "m": decimal.Decimal("0.001"), "k": 10**3, "M": 10**6, "G": 10**9,
          "T": 10**12, "P": 10**15, "E": 10**18, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30,
          "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}


def strict(schema):
    """The schema with additionalProperties: false in every object schema with properties."""
    if isinstance(schema, dict):
        out = {k: strict(v) for k, v in schema.items()}
        if ("properties" in out and "additionalProperties" not in out
                and not out.get("x-kubernetes-preserve-unknown-fields")):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [strict(v) for v in schema]
    return schema


def format_checker():
    fc = jsonschema.FormatChecker()

    @fc.checks("int32")
    def int32(v):
        return not isinstance(v, int) or isinstance(v, bool) or -2**31 <= v < 2**31

    @fc.checks("int64")
    def int64(v):
        return not isinstance(v, int) or isinstance(v, bool) or -2**63 <= v < 2**63

    return fc


def quantity(v):
    """A Kubernetes quantity as a Decimal, or None when it is not one."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return decimal.Decimal(str(v))
    m = QUANTITY.match(str(v))
    if not m:
        return None
    try:
        num = decimal.Decimal(m.group(1))
    except decimal.InvalidOperation:
        return None
    suf = m.group(2)
    if suf[:1] in ("e", "E"):
        return num * (decimal.Decimal(10) ** int(suf[1:]))
    return num * SUFFIX[suf]


def label_key_ok(k):
    if not isinstance(k, str):
        return False
    prefix, _, name = k.rpartition("/")
    if prefix and (len(prefix) > 253 or not DNS_SUBDOMAIN.match(prefix)):
        return False
    return 0 < len(name) <= 63 and bool(LABEL_NAME.match(name))


def label_value_ok(v):
    return isinstance(v, str) and (v == "" or (len(v) <= 63 and bool(LABEL_NAME.match(v))))


class Report:
    def __init__(self, path):
        self.path = path
        self.problems = []

    def add(self, obj, where, what):
        kind = obj.get("kind", "?") if isinstance(obj, dict) else "?"
        name = ((obj.get("metadata") or {}).get("name", "?")
                if isinstance(obj, dict) and isinstance(obj.get("metadata"), dict) else "?")
        self.problems.append(f"{self.path}: {kind} {name}: {where}: {what}")


def dotted(path):
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (("." if out else "") + str(p))
    return out or "(top)"


def check_job_semantics(job, rep, services, configmaps):
    spec = job.get("spec") or {}
    tmpl = (spec.get("template") or {})
    pod = tmpl.get("spec") or {}
    containers = pod.get("containers") or []
    names = [c.get("name") for c in containers if isinstance(c, dict)]
    restart = pod.get("restartPolicy")
    pfp = spec.get("podFailurePolicy")
    mode = spec.get("completionMode", "NonIndexed")
    add = lambda where, what: rep.add(job, where, what)

    name = (job.get("metadata") or {}).get("name", "")
    if not isinstance(name, str) or not DNS_LABEL.match(name) or len(name) > 63:
        add("metadata.name", f"'{name}' is not a DNS label of at most 63 characters "
            "(the job-name label of its pods holds it)")
    if restart not in ("Never", "OnFailure"):
        add("spec.template.spec.restartPolicy",
            f"'{restart}': a Job's pods need restartPolicy Never or OnFailure")
    if pfp is not None and restart != "Never":
        add("spec.podFailurePolicy",
            f"needs spec.template.spec.restartPolicy Never, not '{restart}'")
    if "backoffLimitPerIndex" in spec and mode != "Indexed":
        add("spec.backoffLimitPerIndex",
            f"needs spec.completionMode Indexed, not '{mode}'")
    if mode not in ("NonIndexed", "Indexed"):
        add("spec.completionMode", f"'{mode}': expected NonIndexed or Indexed")
    if mode == "Indexed" and spec.get("completions") is None:
        add("spec.completions", "an Indexed Job needs completions")
    if "maxFailedIndexes" in spec:
        if "backoffLimitPerIndex" not in spec:
            add("spec.maxFailedIndexes", "needs spec.backoffLimitPerIndex")
        elif (isinstance(spec.get("completions"), int)
              and spec["maxFailedIndexes"] > spec["completions"]):
            add("spec.maxFailedIndexes", "exceeds spec.completions")
    for key in ("backoffLimit", "backoffLimitPerIndex", "maxFailedIndexes", "completions",
                "parallelism", "ttlSecondsAfterFinished"):
        if isinstance(spec.get(key), int) and spec[key] < 0:
            add(f"spec.{key}", f"{spec[key]} is negative")
    if isinstance(spec.get("activeDeadlineSeconds"), int) and spec["activeDeadlineSeconds"] <= 0:
        add("spec.activeDeadlineSeconds", "must be positive")
    tgps = pod.get("terminationGracePeriodSeconds")
    if isinstance(tgps, int) and tgps < 0:
        add("spec.template.spec.terminationGracePeriodSeconds", f"{tgps} is negative")
    if mode == "Indexed" and isinstance(spec.get("completions"), int) and isinstance(name, str):
        longest = f"{name}-{max(spec['completions'] - 1, 0)}"
        if len(longest) > 63:
            add("metadata.name", f"pod host name '{longest}' exceeds 63 characters")

    prp = spec.get("podReplacementPolicy")
    if prp is not None and prp not in ("TerminatingOrFailed", "Failed"):
        add("spec.podReplacementPolicy", f"'{prp}': expected TerminatingOrFailed or Failed")
    if pfp is not None and prp is not None and prp != "Failed":
        add("spec.podReplacementPolicy",
            f"'{prp}': with a podFailurePolicy only Failed is allowed")

    if isinstance(pfp, dict):
        rules = pfp.get("rules") or []
        if len(rules) > 20:
            add("spec.podFailurePolicy.rules", f"{len(rules)} rules: at most 20")
        for i, r in enumerate(rules):
            where = f"spec.podFailurePolicy.rules[{i}]"
            if not isinstance(r, dict):
                continue
            act = r.get("action")
            if act not in ("FailJob", "FailIndex", "Ignore", "Count"):
                add(f"{where}.action", f"'{act}': expected FailJob, FailIndex, Ignore or Count")
            if act == "FailIndex" and "backoffLimitPerIndex" not in spec:
                add(f"{where}.action", "FailIndex needs spec.backoffLimitPerIndex")
            has_codes, has_conds = "onExitCodes" in r, "onPodConditions" in r
            if has_codes == has_conds:
                add(where, "needs exactly one of onExitCodes and onPodConditions")
            codes = r.get("onExitCodes")
            if isinstance(codes, dict):
                op, vals = codes.get("operator"), codes.get("values") or []
                if op not in ("In", "NotIn"):
                    add(f"{where}.onExitCodes.operator", f"'{op}': expected In or NotIn")
                if not 1 <= len(vals) <= 255:
                    add(f"{where}.onExitCodes.values", f"{len(vals)} values: expected 1..255")
                if op == "In" and 0 in vals:
                    add(f"{where}.onExitCodes.values",
                        "exit code 0 may not be used with operator In")
                if any(not isinstance(a, int) for a in vals) or \
                        any(a >= b for a, b in zip(vals, vals[1:])):
                    add(f"{where}.onExitCodes.values",
                        f"{vals}: must be integers, sorted ascending, without duplicates")
                cn = codes.get("containerName")
                if cn is not None and cn not in names:
                    add(f"{where}.onExitCodes.containerName",
                        f"'{cn}' names no container of the pod (have {names})")
            for j, c in enumerate(r.get("onPodConditions") or []):
                if isinstance(c, dict) and c.get("status", "True") not in ("True", "False",
                                                                           "Unknown"):
                    add(f"{where}.onPodConditions[{j}].status",
                        f"'{c.get('status')}': expected True, False or Unknown")

    seen = set()
    volumes = {v.get("name"): v for v in pod.get("volumes") or [] if isinstance(v, dict)}
    for i, c in enumerate(containers):
        if not isinstance(c, dict):
            continue
        where = f"spec.template.spec.containers[{i}]"
        cn = c.get("name")
        if not isinstance(cn, str) or not DNS_LABEL.match(cn):
            add(f"{where}.name", f"'{cn}' is not a DNS label")
        elif cn in seen:
            add(f"{where}.name", f"'{cn}' is not unique")
        seen.add(cn)
        if not c.get("image"):
            add(f"{where}.image", "required")
        for j, env in enumerate(c.get("env") or []):
            en = env.get("name") if isinstance(env, dict) else None
            if not isinstance(en, str) or not ENV_NAME.match(en):
                add(f"{where}.env[{j}].name", f"'{en}' is not a valid variable name")
        paths = set()
        for j, m in enumerate(c.get("volumeMounts") or []):
            if not isinstance(m, dict):
                continue
            if m.get("name") not in volumes:
                add(f"{where}.volumeMounts[{j}].name",
                    f"'{m.get('name')}' names no volume of the pod")
            if m.get("mountPath") in paths:
                add(f"{where}.volumeMounts[{j}].mountPath", f"'{m.get('mountPath')}' twice")
            paths.add(m.get("mountPath"))
        res = c.get("resources") or {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        for r in set(req) | set(lim):
            qr = quantity(req[r]) if r in req else None
            ql = quantity(lim[r]) if r in lim else None
            for which, v, q in (("requests", req.get(r), qr), ("limits", lim.get(r), ql)):
                if v is not None and q is None:
                    add(f"{where}.resources.{which}.{r}", f"'{v}' is not a quantity")
            if "/" in r and "kubernetes.io/" not in r:  # extended resources
                for which, q in (("requests", qr), ("limits", ql)):
                    if q is not None and q != q.to_integral_value():
                        add(f"{where}.resources.{which}.{r}", "must be a whole number")
                if qr is not None and ql is not None and qr != ql:
                    add(f"{where}.resources.requests.{r}",
                        "must equal the limit (extended resources cannot be overcommitted)")
            elif qr is not None and ql is not None and qr > ql:
                add(f"{where}.resources.requests.{r}", "exceeds the limit")

    for i, t in enumerate(pod.get("tolerations") or []):
        if not isinstance(t, dict):
            continue
        where = f"spec.template.spec.tolerations[{i}]"
        op = t.get("operator", "Equal")
        if op not in ("Exists", "Equal", "Lt", "Gt"):
            add(f"{where}.operator", f"'{op}': expected Exists or Equal")
        if op == "Exists" and t.get("value"):
            add(f"{where}.value", "must be empty with operator Exists")
        if not t.get("key") and op != "Exists":
            add(f"{where}.operator", "an empty key needs operator Exists")
        if t.get("key") and not label_key_ok(t["key"]):
            add(f"{where}.key", f"'{t['key']}' is not a valid label key")
        eff = t.get("effect", "")
        if eff not in ("", "NoSchedule", "PreferNoSchedule", "NoExecute"):
            add(f"{where}.effect", f"'{eff}': expected NoSchedule, PreferNoSchedule or NoExecute")
        if "tolerationSeconds" in t and eff != "NoExecute":
            add(f"{where}.tolerationSeconds", "only with effect NoExecute")

    for k, v in (pod.get("nodeSelector") or {}).items():
        if not label_key_ok(k):
            add("spec.template.spec.nodeSelector", f"'{k}' is not a valid label key")
        if not label_value_ok(v):
            add(f"spec.template.spec.nodeSelector.{k}", f"'{v}' is not a valid label value")

    sub = pod.get("subdomain")
    # pods that reach each other (ranks of one run: TANDEM_WORLD_SIZE) need DNS names; the
    # independent pods of a sweep do not
    talks = any(e.get("name") == "TANDEM_WORLD_SIZE"
                for c in pod.get("containers") or [] for e in c.get("env") or [])
    if mode == "Indexed" and (spec.get("completions") or 0) > 1 and (talks or sub):
        if not sub:
            add("spec.template.spec.subdomain",
                "an Indexed Job of several pods needs a subdomain (a headless Service)")
        else:
            svc = services.get(sub)
            if svc is None:
                add("spec.template.spec.subdomain", f"'{sub}' names no Service of this file")
            else:
                sspec = svc.get("spec") or {}
                if sspec.get("clusterIP") != "None":
                    add("spec.template.spec.subdomain", f"Service '{sub}' is not headless")
                sel = sspec.get("selector") or {}
                if sel.get("batch.kubernetes.io/job-name") not in (None, name) or \
                        sel.get("job-name") not in (None, name) or not sel:
                    add("spec.template.spec.subdomain",
                        f"Service '{sub}' does not select the pods of Job '{name}'")
    for name_, v in volumes.items():
        cm = v.get("configMap")
        if isinstance(cm, dict) and cm.get("name") not in configmaps:
            add(f"spec.template.spec.volumes[{name_}]",
                f"configMap '{cm.get('name')}' is not in this file")


def check_metadata(obj, rep):
    md = obj.get("metadata")
    if not isinstance(md, dict):
        rep.add(obj, "metadata", "required map")
        return
    extra = set(md) - {"name", "namespace", "labels", "annotations"}
    if extra:
        rep.add(obj, "metadata", f"unknown or unexpected fields {sorted(extra)}")
    n = md.get("name")
    if not isinstance(n, str) or len(n) > 253 or not DNS_SUBDOMAIN.match(n):
        rep.add(obj, "metadata.name", f"'{n}' is not a DNS subdomain")
    for k, v in (md.get("labels") or {}).items():
        if not label_key_ok(k) or not label_value_ok(v):
            rep.add(obj, f"metadata.labels.{k}", "invalid label")


def check_service(svc, rep):
    """Structural checks only: core/v1 is not in the batch/v1 OpenAPI document."""
    extra = set(svc) - {"apiVersion", "kind", "metadata", "spec"}
    if extra:
        rep.add(svc, "(top)", f"unknown fields {sorted(extra)}")
    if svc.get("apiVersion") != "v1":
        rep.add(svc, "apiVersion", f"'{svc.get('apiVersion')}': expected v1")
    check_metadata(svc, rep)
    n = (svc.get("metadata") or {}).get("name")
    if isinstance(n, str) and not DNS_LABEL.match(n):
        rep.add(svc, "metadata.name", f"'{n}': a Service name is a DNS label")
    spec = svc.get("spec")
    if not isinstance(spec, dict):
        rep.add(svc, "spec", "required map")
        return
    known = {"clusterIP", "clusterIPs", "selector", "ports", "publishNotReadyAddresses", "type",
             "sessionAffinity", "ipFamilies", "ipFamilyPolicy", "internalTrafficPolicy"}
    extra = set(spec) - known
    if extra:
        rep.add(svc, "spec", f"unknown or unexpected fields {sorted(extra)}")
    if not isinstance(spec.get("selector", {}), dict):
        rep.add(svc, "spec.selector", "expected a map")
    for k, v in (spec.get("selector") or {}).items():
        if not label_key_ok(k) or not label_value_ok(v):
            rep.add(svc, f"spec.selector.{k}", "invalid label")
    if not isinstance(spec.get("publishNotReadyAddresses", False), bool):
        rep.add(svc, "spec.publishNotReadyAddresses", "expected a boolean")
    pnames = set()
    ports = spec.get("ports") or []
    if not ports and spec.get("clusterIP") != "None":
        rep.add(svc, "spec.ports", "required unless the Service is headless")
    for i, p in enumerate(ports):
        where = f"spec.ports[{i}]"
        if not isinstance(p, dict):
            rep.add(svc, where, "expected a map")
            continue
        extra = set(p) - {"name", "port", "targetPort", "protocol", "appProtocol", "nodePort"}
        if extra:
            rep.add(svc, where, f"unknown fields {sorted(extra)}")
        if not isinstance(p.get("port"), int) or not 1 <= p["port"] <= 65535:
            rep.add(svc, f"{where}.port", f"'{p.get('port')}': expected 1..65535")
        tp = p.get("targetPort")
        if tp is not None and not ((isinstance(tp, int) and 1 <= tp <= 65535)
                                   or (isinstance(tp, str) and DNS_LABEL.match(tp))):
            rep.add(svc, f"{where}.targetPort", f"'{tp}': a port number or name")
        if p.get("protocol", "TCP") not in ("TCP", "UDP", "SCTP"):
            rep.add(svc, f"{where}.protocol", f"'{p.get('protocol')}': TCP, UDP or SCTP")
        nm = p.get("name")
        if nm is not None and (not isinstance(nm, str) or not DNS_LABEL.match(nm) or nm in pnames):
            rep.add(svc, f"{where}.name", f"'{nm}': a unique DNS label")
        pnames.add(nm)


def check_configmap(cm, rep):
    """Structural checks only: core/v1 is not in the batch/v1 OpenAPI document."""
    extra = set(cm) - {"apiVersion", "kind", "metadata", "data", "binaryData", "immutable"}
    if extra:
        rep.add(cm, "(top)", f"unknown fields {sorted(extra)}")
    if cm.get("apiVersion") != "v1":
        rep.add(cm, "apiVersion", f"'{cm.get('apiVersion')}': expected v1")
    check_metadata(cm, rep)
    data = cm.get("data") or {}
    if not isinstance(data, dict):
        rep.add(cm, "data", "expected a map")
        return
    for k, v in data.items():
        if not isinstance(k, str) or not CONFIG_KEY.match(k) or len(k) > 253:
            rep.add(cm, f"data.{k}", "invalid key")
        if not isinstance(v, str):
            rep.add(cm, f"data.{k}", "values are strings")
        elif k.endswith((".yaml", ".yml")):
            try:
                yaml.safe_load(v)
            except yaml.YAMLError as ex:
                rep.add(cm, f"data.{k}", f"not YAML: {ex}")


def validate_file(path, validator):
    rep = Report(path)
    try:
        with open(path) as f:
            docs = [d for d in yaml.safe_load_all(f) if d is not None]
    except (OSError, yaml.YAMLError) as ex:
        print(f"{path}: cannot read: {ex}", file=sys.stderr)
        return None
    if not docs:
        print(f"{path}: no documents", file=sys.stderr)
        return None
    services = {(d.get("metadata") or {}).get("name"): d for d in docs
                if isinstance(d, dict) and d.get("kind") == "Service"}
    configmaps = {(d.get("metadata") or {}).get("name"): d for d in docs
                  if isinstance(d, dict) and d.get("kind") == "ConfigMap"}
    counts = {}
    for d in docs:
        if not isinstance(d, dict):
            rep.problems.append(f"{path}: a document is not a map")
            continue
        kind = d.get("kind")
        counts[kind] = counts.get(kind, 0) + 1
        if kind == "Job":
            if d.get("apiVersion") != "batch/v1":
                rep.add(d, "apiVersion", f"'{d.get('apiVersion')}': expected batch/v1")
            for err in sorted(validator.iter_errors(d), key=lambda e: list(e.absolute_path)):
                rep.add(d, dotted(err.absolute_path), f"schema: {err.message}")
            check_job_semantics(d, rep, services, configmaps)
        elif kind == "Service":
            check_service(d, rep)
        elif kind == "ConfigMap":
            check_configmap(d, rep)
        else:
            rep.add(d, "kind", f"'{kind}': only Job, Service and ConfigMap are expected")
    if "Job" not in counts:
        rep.problems.append(f"{path}: no Job")
    return rep, counts


def main(argv):
    schema_path = DEFAULT_SCHEMA
    args = argv[1:]
    if args[:1] == ["--schema"] and len(args) >= 2:
        schema_path, args = args[1], args[2:]
    if not args or args[0].startswith("-"):
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    try:
        with open(schema_path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as ex:
        print(f"validate.py: {schema_path}: {ex}", file=sys.stderr)
        return 2
    root = {"components": {"schemas": strict(copy.deepcopy(doc["components"]["schemas"]))}}
    root["$ref"] = JOB_REF
    validator = jsonschema.Draft7Validator(root, format_checker=format_checker())
    bad = 0
    for path in args:
        res = validate_file(path, validator)
        if res is None:
            return 2
        rep, counts = res
        for p in rep.problems:
            print(p)
        if rep.problems:
            bad += 1
            print(f"{path}: {len(rep.problems)} problem(s)")
        else:
            kinds = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
            print(f"{path}: ok ({kinds}; Job: strict batch/v1 schema and "
                  f"{len(SEMANTIC_RULES)} semantic rules; Service, ConfigMap: structural)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
