"""compose/k8s/ passes the offline validator (k8s_validate.py: a schema of
the Kubernetes fields used, the references between the objects, and every
daemon flag against that daemon's --help), and the validator is not a
rubber stamp: a copy with an unknown flag, a misspelled field, a gpud Job
whose size differs from reducerd --workers, or a mount of a missing volume
is refused, each with its own message."""
import os
import shutil
from ddp_it import *

import k8s_validate

K8S = os.path.join(SRC, "compose", "k8s")
errs = k8s_validate.validate(K8S, BIN, SRC)
check(not errs, "compose/k8s does not validate:\n" + "\n".join(errs))
print("compose/k8s validates", flush=True)

wd = workdir("k8s")
MUTATIONS = [
    ("gpud-job.yaml", '"--backend", "cuda"', '"--backend", "cuda", "--no-such-flag", "1"',
     "gpud has no option --no-such-flag"),
    ("coordinator.yaml", '"--linger", "600"', '"--lingr", "600"', "reporterd has no option --lingr"),
    ("coordinator.yaml", "readinessProbe:\n        httpGet", "readinesProbe:\n        httpGet",
     "unknown field 'readinesProbe'"),
    ("gpud-job.yaml", "completions: 8", "completions: 9", "must be equal"),
    ("coordinator.yaml", "        - name: run\n          mountPath", "        - name: runs\n          mountPath",
     "volumeMount 'runs' names no volume"),
    ("service.yaml", "kind: Service", "kind: Servise", "is not one ddpipe ships"),
    ("gpud-job.yaml", '"$(RANK)"', '"$(RANKK)"', "$(RANKK) is not in the container's env"),
]
for i, (f, old, new, want) in enumerate(MUTATIONS):
    d = os.path.join(wd, "m%d" % i)
    shutil.copytree(K8S, d)
    text = read(os.path.join(d, f))
    check(old in text, "%s no longer holds %r: update this test" % (f, old))
    with open(os.path.join(d, f), "w") as fh:
        fh.write(text.replace(old, new, 1))
    errs = k8s_validate.validate(d, BIN, SRC)
    check(any(want in e for e in errs), "%s with %r: want an error saying %r, got %r" % (f, new, want, errs))
    print("refused: %s" % want, flush=True)
print("1 passed, 0 failed")
