#!/usr/bin/python3
"""mutate.py — breaks one rule in a rendered manifest, for the negative tests of
tests/cli_k8s.sh: each mutation must make tests/k8s/validate.py fail, naming the problem.

    /usr/bin/python3 tests/k8s/mutate.py IN.yaml MUTATION OUT.yaml
    /usr/bin/python3 tests/k8s/mutate.py --all JOB.yaml INDEXED.yaml OUTDIR
    /usr/bin/python3 tests/k8s/mutate.py --list

--all writes OUTDIR/<mutation>.yaml for every mutation (from the Job or the Indexed Job
as the mutation needs) and prints "<mutation>.yaml<TAB>expected text" per file.

IN is a multi-document stream from `tandem manifest k8s` (a Job, and for the Indexed
mutations the Indexed Job with its Service). MUTATIONS maps each name to the change and
to the text validate.py's report must contain.
"""
import sys

import yaml


def job(docs):
    return next(d for d in docs if d.get("kind") == "Job")


def pod(docs):
    return job(docs)["spec"]["template"]["spec"]


def rename(d, old, new):
    d[new] = d.pop(old)


def rules(docs):
    return job(docs)["spec"]["podFailurePolicy"]["rules"]


def drop_kind(docs, kind):
    docs[:] = [d for d in docs if d.get("kind") != kind]


# name: (change, expected text in the report)
MUTATIONS = {
    # unknown fields (the strict schema)
    "misspelled-pod-field": (
        lambda ds: rename(pod(ds), "terminationGracePeriodSeconds", "terminationGracePeriodSecond"),
        "'terminationGracePeriodSecond' was unexpected"),
    "misspelled-job-field": (
        lambda ds: rename(job(ds)["spec"], "podReplacementPolicy", "podReplacmentPolicy"),
        "'podReplacmentPolicy' was unexpected"),
    "misspelled-rule-field": (
        lambda ds: rename(rules(ds)[0], "onExitCodes", "onExitCode"),
        "'onExitCode' was unexpected"),
    "misspelled-container-field": (
        lambda ds: rename(pod(ds)["containers"][0], "command", "comand"),
        "'comand' was unexpected"),
    "misspelled-toleration-field": (
        lambda ds: rename(pod(ds)["tolerations"][0], "effect", "efect"),
        "'efect' was unexpected"),
    # types and formats
    "wrong-type": (lambda ds: job(ds)["spec"].__setitem__("backoffLimit", "three"),
                   "'three' is not of type 'integer'"),
    "int32-overflow": (lambda ds: job(ds)["spec"].__setitem__("backoffLimit", 3000000000),
                       "is not a 'int32'"),
    "missing-required": (lambda ds: pod(ds)["containers"][0].pop("name"),
                         "'name' is a required property"),
    # the semantic rules of SOURCE.txt
    "pfp-needs-never": (lambda ds: pod(ds).__setitem__("restartPolicy", "OnFailure"),
                        "needs spec.template.spec.restartPolicy Never"),
    "per-index-needs-indexed": (
        lambda ds: job(ds)["spec"].__setitem__("backoffLimitPerIndex", 2),
        "needs spec.completionMode Indexed"),
    "exit-0-in-in": (lambda ds: rules(ds)[1]["onExitCodes"].__setitem__("values", [0, 75]),
                     "exit code 0 may not be used with operator In"),
    # the rules added here
    "restart-always": (lambda ds: pod(ds).__setitem__("restartPolicy", "Always"),
                       "restartPolicy Never or OnFailure"),
    "rule-both-kinds": (
        lambda ds: rules(ds)[0].__setitem__("onPodConditions", [{"type": "DisruptionTarget"}]),
        "exactly one of onExitCodes and onPodConditions"),
    "rule-bad-action": (lambda ds: rules(ds)[0].__setitem__("action", "Retry"),
                        "'Retry': expected FailJob"),
    "rule-bad-operator": (lambda ds: rules(ds)[0]["onExitCodes"].__setitem__("operator", "Is"),
                          "'Is': expected In or NotIn"),
    "rule-unsorted": (lambda ds: rules(ds)[0]["onExitCodes"].__setitem__("values", [75, 2]),
                      "sorted ascending"),
    "rule-no-values": (lambda ds: rules(ds)[0]["onExitCodes"].__setitem__("values", []),
                       "expected 1..255"),
    "rule-container": (lambda ds: rules(ds)[0]["onExitCodes"].__setitem__("containerName", "x"),
                       "'x' names no container"),
    "rule-fail-index": (lambda ds: rules(ds)[0].__setitem__("action", "FailIndex"),
                        "FailIndex needs spec.backoffLimitPerIndex"),
    "too-many-rules": (lambda ds: rules(ds).extend([dict(rules(ds)[2])] * 18),
                       "at most 20"),
    "condition-status": (lambda ds: rules(ds)[2]["onPodConditions"][0].__setitem__("status", "yes"),
                         "'yes': expected True, False or Unknown"),
    "replacement-policy": (
        lambda ds: job(ds)["spec"].__setitem__("podReplacementPolicy", "TerminatingOrFailed"),
        "only Failed is allowed"),
    "indexed-no-completions": (lambda ds: job(ds)["spec"].pop("completions"),
                               "an Indexed Job needs completions"),
    "max-failed-alone": (lambda ds: job(ds)["spec"].pop("backoffLimitPerIndex"),
                         "needs spec.backoffLimitPerIndex"),
    "negative-backoff": (lambda ds: job(ds)["spec"].__setitem__("backoffLimit", -1),
                         "-1 is negative"),
    "negative-grace": (lambda ds: pod(ds).__setitem__("terminationGracePeriodSeconds", -5),
                       "-5 is negative"),
    "job-name": (lambda ds: job(ds)["metadata"].__setitem__("name", "Tandem_Run"),
                 "is not a DNS label"),
    "indexed-name-length": (lambda ds: job(ds)["metadata"].__setitem__("name", "a" * 62),
                            "exceeds 63 characters"),
    "container-name-twice": (
        lambda ds: pod(ds)["containers"].append(dict(pod(ds)["containers"][0])),
        "is not unique"),
    "env-name": (lambda ds: pod(ds)["containers"][0].setdefault("env", []).append(
        {"name": "1BAD NAME", "value": "x"}), "is not a valid variable name"),
    "mount-without-volume": (lambda ds: pod(ds)["containers"][0]["volumeMounts"].append(
        {"name": "nowhere", "mountPath": "/x"}), "'nowhere' names no volume"),
    "gpu-request-differs": (
        lambda ds: pod(ds)["containers"][0]["resources"].setdefault("requests", {}).__setitem__(
            "nvidia.com/gpu", "4"), "must equal the limit"),
    "gpu-fraction": (
        lambda ds: pod(ds)["containers"][0]["resources"]["limits"].__setitem__(
            "nvidia.com/gpu", "0.5"), "must be a whole number"),
    "request-over-limit": (
        lambda ds: pod(ds)["containers"][0]["resources"]["requests"].__setitem__(
            "memory", "128Gi"), "exceeds the limit"),
    "bad-quantity": (
        lambda ds: pod(ds)["containers"][0]["resources"]["requests"].__setitem__(
            "memory", "64 GB"), "is not a quantity"),
    "toleration-exists-value": (
        lambda ds: pod(ds)["tolerations"][-1].update({"operator": "Exists", "value": "x"}),
        "must be empty with operator Exists"),
    "toleration-effect": (lambda ds: pod(ds)["tolerations"][0].__setitem__("effect", "NoRun"),
                          "'NoRun': expected NoSchedule"),
    "toleration-seconds": (
        lambda ds: pod(ds)["tolerations"][0].update({"effect": "NoSchedule",
                                                     "tolerationSeconds": 30}),
        "only with effect NoExecute"),
    "node-selector-key": (lambda ds: pod(ds)["nodeSelector"].__setitem__("bad key!", "x"),
                          "'bad key!' is not a valid label key"),
    "node-selector-value": (lambda ds: pod(ds)["nodeSelector"].__setitem__("ok", "-bad-"),
                            "'-bad-' is not a valid label value"),
    "indexed-no-service": (lambda ds: drop_kind(ds, "Service"), "names no Service of this file"),
    "service-not-headless": (
        lambda ds: next(d for d in ds if d["kind"] == "Service")["spec"].__setitem__(
            "clusterIP", "10.0.0.1"), "is not headless"),
    "service-unknown-field": (
        lambda ds: next(d for d in ds if d["kind"] == "Service")["spec"].__setitem__(
            "clusterIp", "None"), "unknown or unexpected fields ['clusterIp']"),
    "configmap-missing": (lambda ds: drop_kind(ds, "ConfigMap"), "is not in this file"),
}

# Mutations that need the Indexed Job (the others use the single-node Job).
INDEXED = {"indexed-no-completions", "max-failed-alone", "indexed-name-length",
           "indexed-no-service", "service-not-headless", "service-unknown-field"}


def load(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def main(argv):
    if len(argv) == 5 and argv[1] == "--all":
        for name, (change, expect) in MUTATIONS.items():
            docs = load(argv[3] if name in INDEXED else argv[2])
            change(docs)
            with open(f"{argv[4]}/{name}.yaml", "w") as f:
                yaml.safe_dump_all(docs, f, sort_keys=False)
            print(f"{name}.yaml\t{expect}")
        return 0
    if argv[1:] == ["--list"]:
        for name, (_, expect) in MUTATIONS.items():
            print(f"{name}\t{'indexed' if name in INDEXED else 'single'}\t{expect}")
        return 0
    if len(argv) != 4 or argv[2] not in MUTATIONS:
        print("usage: mutate.py IN.yaml MUTATION OUT.yaml | --all JOB INDEXED DIR | --list",
              file=sys.stderr)
        return 2
    docs = load(argv[1])
    MUTATIONS[argv[2]][0](docs)
    with open(argv[3], "w") as f:
        yaml.safe_dump_all(docs, f, sort_keys=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
