#!/usr/bin/python3
"""Offline check of compose/k8s/ (no cluster, no kubectl: Debian's
kubernetes-client needs an API server even for --dry-run=client).

1. Schema: every document's apiVersion/kind is one we ship, and every
   field is in a hand-written schema of the Kubernetes fields these
   manifests use (types, required fields, no unknown keys: a typo such as
   `readinesProbe` would silently do nothing in a cluster).
2. References: volumeMounts name pod volumes, claims name a shipped PVC,
   probes name container ports, the Service selects the coordinator pod
   and exposes ports it listens on, the kustomization lists every file,
   $(VAR) in args is defined in the container's env, the Secret items are
   the files `ddpipe keygen` writes.
3. Commands: /usr/bin/DAEMON exists among the built binaries and every
   --flag given to it is one its `--help` lists (the option tables); gpud's
   endpoints point at the ports reducerd and loaderd bind, and reducerd's
   --workers equals the gpud Job's completions and parallelism.

    k8s_validate.py [DIR [BIN]]   prints each problem, exit 1 if any
"""
import os
import re
import subprocess
import sys

import yaml

STR, INT, BOOL = str, int, bool
NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def req(t):
    """A required field of schema t."""
    return ("required", t)


def list_of(t):
    return ("list", t)


def map_of(t):
    return ("map", t)


def int_or_str(v):
    return isinstance(v, (int, str)) and not isinstance(v, bool)


QUANTITY = ("scalar", lambda v: isinstance(v, (int, str)) and not isinstance(v, bool))
PORT = ("scalar", int_or_str)

METADATA = {"name": req(STR), "labels": map_of(STR), "annotations": map_of(STR),
            "namespace": STR}
PROBE = {"tcpSocket": {"port": req(PORT)},
         "httpGet": {"path": STR, "port": req(PORT), "scheme": STR},
         "exec": {"command": req(list_of(STR))},
         "initialDelaySeconds": INT, "periodSeconds": INT, "timeoutSeconds": INT,
         "failureThreshold": INT, "successThreshold": INT}
ENV = {"name": req(STR), "value": STR,
       "valueFrom": {"fieldRef": {"fieldPath": req(STR), "apiVersion": STR},
                     "secretKeyRef": {"name": req(STR), "key": req(STR)}}}
CONTAINER = {"name": req(STR), "image": req(STR), "imagePullPolicy": STR,
             "command": list_of(STR), "args": list_of(STR), "env": list_of(ENV),
             "ports": list_of({"containerPort": req(INT), "name": STR, "protocol": STR}),
             "readinessProbe": PROBE, "livenessProbe": PROBE, "startupProbe": PROBE,
             "resources": {"requests": map_of(QUANTITY), "limits": map_of(QUANTITY)},
             "volumeMounts": list_of({"name": req(STR), "mountPath": req(STR),
                                      "readOnly": BOOL, "subPath": STR}),
             "workingDir": STR}
VOLUME = {"name": req(STR),
          "secret": {"secretName": req(STR), "defaultMode": INT,
                     "items": list_of({"key": req(STR), "path": req(STR), "mode": INT})},
          "persistentVolumeClaim": {"claimName": req(STR), "readOnly": BOOL},
          "emptyDir": {"medium": STR, "sizeLimit": QUANTITY}}
POD_SPEC = {"containers": req(list_of(CONTAINER)), "restartPolicy": STR,
            "volumes": list_of(VOLUME), "nodeSelector": map_of(STR),
            "serviceAccountName": STR, "terminationGracePeriodSeconds": INT,
            "hostname": STR, "subdomain": STR}
KINDS = {
    ("v1", "Pod"): {"metadata": req(METADATA), "spec": req(POD_SPEC)},
    ("v1", "Service"): {"metadata": req(METADATA), "spec": req({
        "clusterIP": STR, "selector": req(map_of(STR)), "publishNotReadyAddresses": BOOL,
        "ports": req(list_of({"name": STR, "port": req(INT), "targetPort": PORT,
                              "protocol": STR}))})},
    ("v1", "PersistentVolumeClaim"): {"metadata": req(METADATA), "spec": req({
        "accessModes": req(list_of(STR)), "storageClassName": STR, "volumeName": STR,
        "resources": req({"requests": req({"storage": req(QUANTITY)})})})},
    ("batch/v1", "Job"): {"metadata": req(METADATA), "spec": req({
        "completionMode": STR, "completions": INT, "parallelism": INT, "backoffLimit": INT,
        "activeDeadlineSeconds": INT, "ttlSecondsAfterFinished": INT,
        "template": req({"metadata": {"labels": map_of(STR), "annotations": map_of(STR)},
                         "spec": req(POD_SPEC)})})},
    ("kustomize.config.k8s.io/v1beta1", "Kustomization"): {
        "resources": req(list_of(STR)), "namespace": STR},
}
ENUMS = {"restartPolicy": {"Always", "OnFailure", "Never"},
         "completionMode": {"NonIndexed", "Indexed"},
         "accessModes": {"ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"},
         "protocol": {"TCP", "UDP", "SCTP"}, "imagePullPolicy": {"Always", "IfNotPresent", "Never"}}


def check_schema(value, schema, path, errs):
    if isinstance(schema, tuple) and schema[0] == "required":
        schema = schema[1]
    if isinstance(schema, tuple) and schema[0] == "scalar":
        if not schema[1](value):
            errs.append("%s: %r is not a valid value" % (path, value))
    elif isinstance(schema, tuple) and schema[0] == "list":
        if not isinstance(value, list):
            errs.append("%s: want a list" % path)
            return
        for i, v in enumerate(value):
            check_schema(v, schema[1], "%s[%d]" % (path, i), errs)
            leaf = path.rsplit(".", 1)[-1]
            if leaf in ENUMS and v not in ENUMS[leaf]:
                errs.append("%s[%d]: %r is not one of %s" % (path, i, v, sorted(ENUMS[leaf])))
    elif isinstance(schema, tuple) and schema[0] == "map":
        if not isinstance(value, dict):
            errs.append("%s: want a map" % path)
            return
        for k, v in value.items():
            check_schema(v, schema[1], "%s.%s" % (path, k), errs)
    elif isinstance(schema, dict):
        if not isinstance(value, dict):
            errs.append("%s: want a map" % path)
            return
        for k in value:
            if k not in schema:
                errs.append("%s: unknown field '%s'" % (path, k))
        for k, sub in schema.items():
            if k in value:
                check_schema(value[k], sub, "%s.%s" % (path, k), errs)
            elif isinstance(sub, tuple) and sub[0] == "required":
                errs.append("%s: missing required field '%s'" % (path, k))
    else:  # a Python type
        if not isinstance(value, schema) or (schema is INT and isinstance(value, bool)):
            errs.append("%s: %r is not a %s" % (path, value, schema.__name__))
        leaf = path.rsplit(".", 1)[-1]
        if leaf in ENUMS and value not in ENUMS[leaf]:
            errs.append("%s: %r is not one of %s" % (path, value, sorted(ENUMS[leaf])))


_help_cache = {}


def daemon_flags(binary):
    """The --flags that binary's --help lists (its option table)."""
    if binary not in _help_cache:
        out = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=30)
        _help_cache[binary] = set(re.findall(r"^ {2}(--[A-Za-z0-9][\w-]*)", out.stdout + out.stderr,
                                             re.M))
    return _help_cache[binary]


def flag_value(args, flag):
    return args[args.index(flag) + 1] if flag in args and args.index(flag) + 1 < len(args) else None


def endpoint_port(ep):
    m = re.match(r"^tcp://([^:]+):(\d+)$", ep or "")
    return (m.group(1), int(m.group(2))) if m else (None, None)


def keygen_files(src):
    """The files `ddpipe keygen` writes (cli/cmd_keygen.c s_files)."""
    text = open(os.path.join(src, "cli", "cmd_keygen.c")).read()
    block = re.search(r"s_files\[\]\s*=\s*\{(.*?)\};", text, re.S).group(1)
    return re.findall(r'"([^"]+)"', block)


def pod_specs(doc):
    if doc.get("kind") == "Pod":
        return doc.get("spec") or {}, doc.get("metadata", {}).get("labels", {})
    if doc.get("kind") == "Job":
        t = doc.get("spec", {}).get("template", {})
        return t.get("spec") or {}, t.get("metadata", {}).get("labels", {})
    return None, None


def check_container(c, pod_path, volumes, bindir, errs):
    path = "%s.containers[%s]" % (pod_path, c.get("name"))
    cmd = c.get("command") or []
    args = c.get("args") or []
    if not cmd or not cmd[0].startswith("/usr/bin/"):
        errs.append("%s: command must be /usr/bin/DAEMON (the .deb's layout)" % path)
        return None
    daemon = os.path.basename(cmd[0])
    binary = os.path.join(bindir, daemon)
    if not os.access(binary, os.X_OK):
        errs.append("%s: %s is not a ddpipe binary (none at %s)" % (path, cmd[0], binary))
        return None
    known = daemon_flags(binary)
    for a in cmd[1:] + args:
        if a.startswith("--"):
            flag = a.split("=", 1)[0]
            if flag not in known:
                errs.append("%s: %s has no option %s (see %s --help)" % (path, daemon, flag, daemon))
    env = {e.get("name") for e in c.get("env") or []}
    for a in args:
        for var in re.findall(r"\$\((\w+)\)", a):
            if var not in env:
                errs.append("%s: $(%s) is not in the container's env" % (path, var))
    for m in c.get("volumeMounts") or []:
        if m.get("name") not in volumes:
            errs.append("%s: volumeMount '%s' names no volume of the pod" % (path, m.get("name")))
    ports = {p.get("containerPort") for p in c.get("ports") or []}
    names = {p.get("name") for p in c.get("ports") or []}
    probe = c.get("readinessProbe") or {}
    for kind in ("tcpSocket", "httpGet"):
        if kind in probe:
            port = probe[kind].get("port")
            if port not in ports and port not in names:
                errs.append("%s: readiness probe port %r is not a container port" % (path, port))
    return daemon, args


def validate(directory, bindir, src):
    errs = []
    docs = {}
    for f in sorted(os.listdir(directory)):
        if not f.endswith(".yaml"):
            continue
        try:
            loaded = [d for d in yaml.safe_load_all(open(os.path.join(directory, f))) if d]
        except yaml.YAMLError as e:
            errs.append("%s: not YAML: %s" % (f, e))
            continue
        docs[f] = loaded
    all_docs = [(f, d) for f, ds in docs.items() for d in ds]
    for f, d in all_docs:
        key = (d.get("apiVersion"), d.get("kind"))
        if key not in KINDS:
            errs.append("%s: apiVersion/kind %s/%s is not one ddpipe ships" % (f, key[0], key[1]))
            continue
        body = {k: v for k, v in d.items() if k not in ("apiVersion", "kind")}
        check_schema(body, KINDS[key], "%s:%s" % (f, key[1]), errs)
        name = d.get("metadata", {}).get("name", "")
        if key[1] != "Kustomization" and not NAME_RE.match(name or ""):
            errs.append("%s: metadata.name %r is not a DNS-1123 label" % (f, name))
    if errs:
        return errs  # the checks below assume the shapes are right

    kust = [d for f, d in all_docs if d["kind"] == "Kustomization"]
    if len(kust) != 1:
        errs.append("want exactly one Kustomization, found %d" % len(kust))
    else:
        listed = set(kust[0]["resources"])
        for f in docs:
            if f != "kustomization.yaml" and f not in listed:
                errs.append("kustomization.yaml does not list %s" % f)
        for r in listed - set(docs):
            errs.append("kustomization.yaml lists %s, which does not exist" % r)

    claims = {d["metadata"]["name"] for f, d in all_docs if d["kind"] == "PersistentVolumeClaim"}
    key_files = keygen_files(src)
    secret_keys = {k.replace("/", "-") for k in key_files}
    daemons = {}
    for f, d in all_docs:
        spec, labels = pod_specs(d)
        if spec is None:
            continue
        path = "%s:%s/%s" % (f, d["kind"], d["metadata"]["name"])
        volumes = {}
        for v in spec.get("volumes") or []:
            volumes[v["name"]] = v
            pvc = v.get("persistentVolumeClaim")
            if pvc and pvc["claimName"] not in claims:
                errs.append("%s: volume %s claims %s, which no manifest defines" %
                            (path, v["name"], pvc["claimName"]))
            sec = v.get("secret")
            if sec:
                paths = {i["path"] for i in sec.get("items") or []}
                for i in sec.get("items") or []:
                    if i["key"] not in secret_keys:
                        errs.append("%s: secret key %s is not a file of 'ddpipe keygen' (%s)" %
                                    (path, i["key"], ", ".join(sorted(secret_keys))))
                for kf in key_files:
                    if kf not in paths:
                        errs.append("%s: the CURVE volume lacks %s" % (path, kf))
        for c in spec["containers"]:
            got = check_container(c, path, volumes, bindir, errs)
            if got:
                daemons.setdefault(got[0], []).append((d, labels, c, got[1]))

    # the wiring between the daemons
    for name in ("reducerd", "loaderd", "reporterd", "gpud"):
        if name not in daemons:
            errs.append("no container runs %s" % name)
    if errs:
        return errs
    red_doc, red_labels, red_c, red_args = daemons["reducerd"][0]
    _, red_port = endpoint_port(flag_value(red_args, "--bind"))
    _, ld_port = endpoint_port(flag_value(daemons["loaderd"][0][3], "--bind"))
    services = [d for f, d in all_docs if d["kind"] == "Service"]
    svc_names = set()
    for s in services:
        sel = s["spec"]["selector"]
        if any(red_labels.get(k) != v for k, v in sel.items()):
            errs.append("Service %s does not select the pod that runs reducerd" %
                        s["metadata"]["name"])
        svc_names.add(s["metadata"]["name"])
        pod_ports = {p["containerPort"] for c in red_doc["spec"]["containers"]
                     for p in c.get("ports") or []}
        for p in s["spec"]["ports"]:
            if p.get("targetPort", p["port"]) not in pod_ports:
                errs.append("Service %s port %s: no container of the pod listens there" %
                            (s["metadata"]["name"], p["port"]))
    for job, _, c, args in daemons["gpud"]:
        for flag, port in (("--reducer", red_port), ("--loader", ld_port)):
            host, p = endpoint_port(flag_value(args, flag))
            if host not in svc_names or p != port:
                errs.append("gpud %s %s: want tcp://SERVICE:%s with SERVICE one of %s" %
                            (flag, flag_value(args, flag), port, sorted(svc_names)))
        workers = flag_value(red_args, "--workers")
        spec = job["spec"]
        if job["kind"] != "Job" or spec.get("completionMode") != "Indexed":
            errs.append("gpud must run in an indexed Job (completion index = rank)")
        elif not (str(spec.get("completions")) == str(spec.get("parallelism")) == str(workers)):
            errs.append("reducerd --workers %s, gpud Job completions %s, parallelism %s: must "
                        "be equal" % (workers, spec.get("completions"), spec.get("parallelism")))
    return errs


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    src = os.path.join(here, "..", "..")
    directory = sys.argv[1] if len(sys.argv) > 1 else os.path.join(src, "compose", "k8s")
    bindir = sys.argv[2] if len(sys.argv) > 2 else (os.environ.get("DDPIPE_BIN") or
                                                    os.path.join(src, "build", "bin"))
    errs = validate(directory, bindir, src)
    for e in errs:
        print(e)
    print("%s: %s" % (directory, "%d problem(s)" % len(errs) if errs else "ok"))
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main())
