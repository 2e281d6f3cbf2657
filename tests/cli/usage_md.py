"""docs/USAGE.md is what the option tables give: regenerated in the build
tree by the ddpipe just built, it must equal the committed file, and every
option of every table (as each program's usage lists it, `ddpipe __docs
--usage`) must be listed in its program's section.

usage: usage_md.py DDPIPE SOURCE_DIR WORK_DIR"""
import difflib
import os
import re
import subprocess
import sys

REGEN = "scripts/gen-usage.sh BUILD_DIR (or: cmake --build BUILD_DIR --target usage_md)"


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def sections(text):
    """{'## heading' title: its text} of a Markdown file."""
    out, title = {}, None
    for line in text.splitlines():
        if line.startswith("## "):
            title = line[3:].strip()
            out[title] = ""
        elif title:
            out[title] += line + "\n"
    return out


def usages(text):
    """{program: [flag names]} from `ddpipe __docs --usage`."""
    out, prog = {}, None
    for line in text.splitlines():
        if line.startswith("== "):
            prog = line[3:].strip()
            out[prog] = []
        else:
            m = re.match(r"  --([A-Za-z0-9][A-Za-z0-9-]*)", line)
            if m and prog:
                out[prog].append(m.group(1))
    return out


def main():
    ddpipe, src, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    fresh_path = os.path.join(work, "USAGE.md")
    r = subprocess.run([ddpipe, "__docs", "--markdown", fresh_path], capture_output=True,
                       text=True, timeout=60)
    if r.returncode != 0:
        fail("ddpipe __docs --markdown failed: " + r.stderr.strip())
    with open(fresh_path, encoding="utf-8") as f:
        fresh = f.read()
    committed_path = os.path.join(src, "docs", "USAGE.md")
    if not os.path.exists(committed_path):
        fail("docs/USAGE.md is missing: run " + REGEN + " and commit it")
    with open(committed_path, encoding="utf-8") as f:
        committed = f.read()

    # every option of every table, in its program's section of the fresh file
    # and of the committed one
    r = subprocess.run([ddpipe, "__docs", "--usage"], capture_output=True, text=True,
                       timeout=60)
    if r.returncode != 0:
        fail("ddpipe __docs --usage failed: " + r.stderr.strip())
    tables = usages(r.stdout)
    if len(tables) < 9 or sum(len(v) for v in tables.values()) < 50:
        fail("ddpipe __docs --usage listed too little: %r" % tables)
    for name, text in (("the generated file", fresh), ("docs/USAGE.md", committed)):
        secs = sections(text)
        for prog, flags in tables.items():
            if prog not in secs:
                fail("%s has no section '## %s'; run %s" % (name, prog, REGEN))
            missing = [f for f in flags if not re.search(r"^- `--%s[ `]" % re.escape(f),
                                                          secs[prog], re.M)]
            if missing:
                fail("%s lacks %s of %s; run %s" % (
                    name, ", ".join("--" + m for m in missing), prog, REGEN))

    if fresh != committed:
        diff = difflib.unified_diff(committed.splitlines(), fresh.splitlines(),
                                    "docs/USAGE.md (committed)", "generated", lineterm="", n=1)
        print("\n".join(list(diff)[:60]))
        fail("docs/USAGE.md is stale: run " + REGEN + " and commit it")
    print("docs/USAGE.md: up to date, %d programs, %d options" % (
        len(tables), sum(len(v) for v in tables.values())))


if __name__ == "__main__":
    main()
