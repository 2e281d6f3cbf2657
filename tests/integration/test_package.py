"""The .deb as a user gets it: cpack builds it in this build tree, dpkg-deb
unpacks it into a temporary root, and the programs run from there with PATH
pointing only at ROOT/usr/bin (no DDPIPE_BIN): --version everywhere, the man
pages and bash completion in their places, Depends computed from the linked
libraries (no CUDA), and a tiny eval whose summary.json counts every sample.
Exits 77 (skipped) when cpack or dpkg-deb is missing."""
import json
import os
import re
import shutil
import subprocess
import sys
from ddp_it import *

BUILD = os.path.abspath(os.path.join(BIN, ".."))
tools = {t: shutil.which(t) for t in ("cpack", "dpkg-deb", "dpkg-shlibdeps")}
missing = [t for t, path in tools.items() if not path]
if missing:
    print("SKIP: %s not installed (apt-get install cmake dpkg-dev)" % ", ".join(missing))
    sys.exit(77)
check(os.path.exists(os.path.join(BUILD, "CPackConfig.cmake")),
      "%s has no CPackConfig.cmake: is it a configured build tree?" % BUILD)

wd = workdir("package")
pkgdir = os.path.join(wd, "pkg")
p = subprocess.run([tools["cpack"], "-G", "DEB", "-B", pkgdir], cwd=BUILD, stdout=subprocess.PIPE,
                   stderr=subprocess.STDOUT, text=True, timeout=540)
check(p.returncode == 0, "cpack failed (exit %d):\n%s" % (p.returncode, p.stdout[-3000:]))
debs = [f for f in os.listdir(pkgdir) if f.endswith(".deb")]
check(len(debs) == 1, "cpack made %r, want one .deb" % debs)
deb = os.path.join(pkgdir, debs[0])


def field(name):
    return subprocess.run([tools["dpkg-deb"], "-f", deb, name], stdout=subprocess.PIPE, text=True,
                          check=True).stdout.strip()


check(field("Package") == "ddpipe", "Package: %r" % field("Package"))
depends = field("Depends")
for lib in ("libzmq5", "libczmq4", "libjansson4", "libturbojpeg0", "libsodium23", "libc6"):
    check(lib in depends, "Depends lacks %s (dpkg-shlibdeps): %s" % (lib, depends))
check("cuda" not in depends.lower() and "cudnn" not in depends.lower(),
      "the package must not need CUDA: Depends %s" % depends)
print("%s: Depends: %s" % (debs[0], depends), flush=True)

root = os.path.join(wd, "root")
subprocess.run([tools["dpkg-deb"], "-x", deb, root], check=True)
usr = os.path.join(root, "usr")
for rel in ["bin/" + b for b in ("ddpipe",) + DAEMONS] + [
        "share/man/man1/%s.1.gz" % m for m in ("ddpipe", "ddpipe-eval", "ddpipe-train", "ddpipe-tap",
                                               "ddpipe-keygen", "ddpipe-models") + DAEMONS] + [
        "share/bash-completion/completions/ddpipe", "share/ddpipe/compose/supervisord.conf",
        "share/ddpipe/compose/run-supervised.sh", "share/ddpipe/demo/wrn-fmnist.safetensors"]:
    check(os.path.exists(os.path.join(usr, rel)), "the package lacks /usr/" + rel)

# oneDNN 3 is no Debian 12 package: unless Depends names a system libdnnl3,
# the package carries the library, and the installed gpud finds it there
# (its RUNPATH) with no LD_LIBRARY_PATH, not in the build's oneDNN prefix
if "libdnnl3" not in depends:
    carried = [os.path.join(d, f) for d, _, fs in os.walk(os.path.join(usr, "lib")) for f in fs
               if f == "libdnnl.so.3"]
    check(len(carried) == 1, "the package neither carries libdnnl.so.3 nor depends on libdnnl3: "
          "carried %r, Depends %s" % (carried, depends))
    gpud = os.path.join(usr, "bin", "gpud")
    ld = subprocess.run(["ldd", gpud], env={"PATH": "/usr/bin:/bin"}, stdout=subprocess.PIPE,
                        text=True).stdout
    line = [l for l in ld.splitlines() if "libdnnl.so.3" in l]
    check(line and os.path.realpath(line[0].split("=>")[1].split("(")[0].strip())
          == os.path.realpath(carried[0]),
          "the installed gpud does not load the carried libdnnl.so.3: %r" % line)
    print("carries %s" % os.path.relpath(carried[0], root), flush=True)

# only the unpacked tree: ddpipe must find its daemons next to itself
env = {k: v for k, v in os.environ.items() if k.startswith(("ASAN_", "UBSAN_", "TSAN_", "LSAN_"))}
env.update(PATH=os.path.join(usr, "bin"), HOME=wd, LC_ALL="C")


def run(args, **kw):
    return subprocess.run(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=kw.pop("timeout", 60), **kw)


for prog in ("ddpipe",) + DAEMONS:
    p = run([prog, "--version"])
    want = r"^ddpipe \d+\.\d+\.\d+" if prog == "ddpipe" else r"^%s \(ddpipe\) \d+\.\d+\.\d+" % prog
    check(p.returncode == 0 and re.match(want, p.stdout),
          "%s --version: exit %d, %r %r" % (prog, p.returncode, p.stdout, p.stderr))
print(run(["ddpipe", "--version"]).stdout.strip(), flush=True)

# the installed completion completes a flag of the installed ddpipe
comp = os.path.join(usr, "share/bash-completion/completions/ddpipe")
p = run(["/bin/bash", "-c", 'source "$0"; COMP_WORDS=(ddpipe eval --mo); COMP_CWORD=2; _ddpipe; '
         'echo "${COMPREPLY[@]}"', comp])
check(p.returncode == 0 and p.stdout.split() == ["--model"],
      "completion of 'ddpipe eval --mo': %r %r" % (p.stdout, p.stderr))

# a tiny eval from the installed tree, with the installed demo weights
out = os.path.join(wd, "run")
weights = os.path.join(usr, "share/ddpipe/demo/wrn-fmnist.safetensors")
p = run(["ddpipe", "eval", "--data", "idx:%s/t10k" % FMNIST, "--limit", "64", "--model", "wideresnet",
         "--channels", "16,32,64,128", "--weights", weights, "--workers", "1", "--threads", "1",
         "--batch-size", "32", "--out", out, "--quiet"], timeout=300)
check(p.returncode == 0, "installed ddpipe eval: exit %d\n%s%s" % (p.returncode, p.stdout, p.stderr))
summary = os.path.join(out, "summary.json")
check(os.path.exists(summary), "installed ddpipe eval wrote no summary.json")
s = json.load(open(summary))
check(s["samples"] == 64 and s["failed"] == 0, "summary.json: %d samples, %d failed, want 64, 0"
      % (s["samples"], s["failed"]))
print("installed ddpipe eval: 64 samples, top1 %.4f" % s["top1"], flush=True)
shutil.rmtree(wd, ignore_errors=True)
print("1 passed, 0 failed")
