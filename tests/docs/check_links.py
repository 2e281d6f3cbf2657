#!/usr/bin/python3
"""Every link of the documentation resolves inside the repository.

Checks README.md, docs/*.md and bench/RESULTS.md (or the files given as
arguments, relative to the repository root):
  - every relative link and image ([text](path), ![alt](path), also
    path#anchor and #anchor) names a file or folder that exists inside
    the repository;
  - every #anchor into a Markdown file matches one of its headings'
    GitHub slugs (lower case, punctuation dropped, spaces to hyphens,
    -1, -2 ... for repeats; headings inside code blocks do not count);
  - no document points outside the repository: no absolute-path link, no
    link that climbs out of it, and no mention of a path on the machine
    the docs were written on (the words this test refuses are below).
Links to http(s), mailto and the like are not fetched (no network).
Exit 0 when all hold, else 1 with one line per broken link:
FILE:LINE: what is wrong.

Usage: check_links.py [--root DIR] [FILE...]   (default root: two folders up)
"""
import os
import re
import sys

DEFAULT_FILES = ["README.md", "docs/*.md", "bench/RESULTS.md"]
# Paths of the workplace the docs were written in: a doc naming one points
# at something a reader of the repository does not have. Spelled in pieces
# so that this file does not itself name them.
OUTSIDE = [re.compile(p) for p in ("/" + "work/", r"\.\./" + "shared" + r"\b", "shared" + " folder")]
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^\s*(```|~~~)")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def strip_code_spans(line):
    """The line with `code` spans blanked (a link inside one is text)."""
    return re.sub(r"(`+)(.+?)\1", lambda m: " " * len(m.group(0)), line)


def prose_lines(text):
    """(line number, line) of the lines outside fenced code blocks."""
    fenced = False
    for n, line in enumerate(text.split("\n"), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield n, line


def slug(heading):
    """GitHub's anchor for a heading's text."""
    t = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)   # links: their text
    t = re.sub(r"<[^>]+>", "", t)                              # inline HTML tags
    t = t.strip().lower()
    t = "".join(c for c in t if c.isalnum() or c in " -_")
    return t.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        seen, found = {}, set()
        for _, line in prose_lines(text):
            m = re.match(r"^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$", line)
            if not m:
                continue
            s = slug(m.group(1))
            k = seen.get(s, 0)
            seen[s] = k + 1
            found.add(s if k == 0 else "%s-%d" % (s, k))
        cache[path] = found
    return cache[path]


def inside(root, path):
    root = os.path.realpath(root)
    path = os.path.realpath(path)
    return path == root or path.startswith(root + os.sep)


def check_file(root, rel, errors):
    path = os.path.join(root, rel)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for n, line in enumerate(text.split("\n"), 1):
        for pat in OUTSIDE:
            if pat.search(line):
                errors.append("%s:%d: points outside the repository (%r): %s"
                              % (rel, n, pat.pattern, line.strip()[:100]))
    for n, line in prose_lines(text):
        for m in LINK.finditer(strip_code_spans(line)):
            target = m.group(1)
            if SCHEME.match(target):
                continue
            where = "%s:%d: link %s" % (rel, n, target)
            file_part, _, anchor = target.partition("#")
            if file_part.startswith("/"):
                errors.append(where + ": an absolute path (use a path relative to " + rel + ")")
                continue
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            if not inside(root, dest):
                errors.append(where + ": leaves the repository")
                continue
            if not os.path.exists(dest):
                errors.append(where + ": no such file " + os.path.relpath(dest, root))
                continue
            if anchor:
                if not dest.endswith(".md") or os.path.isdir(dest):
                    errors.append(where + ": an anchor into a file that is not Markdown")
                elif anchor not in anchors(dest):
                    errors.append(where + ": no heading with anchor #%s in %s"
                                  % (anchor, os.path.relpath(dest, root)))


def main(argv):
    root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    args = argv[1:]
    if len(args) >= 2 and args[0] == "--root":
        root, args = args[1], args[2:]
    patterns = args or DEFAULT_FILES
    files = []
    for p in patterns:
        if "*" in p:
            d, _, pat = p.rpartition("/")
            rx = re.compile("^" + re.escape(pat).replace(r"\*", ".*") + "$")
            full = os.path.join(root, d)
            files += sorted(os.path.join(d, f) for f in os.listdir(full) if rx.match(f))
        else:
            files.append(p)
    errors = []
    for rel in files:
        if not os.path.isfile(os.path.join(root, rel)):
            errors.append("%s: missing (a documentation file this check expects)" % rel)
            continue
        check_file(root, rel, errors)
    for e in errors:
        print(e)
    print("check_links: %d files, %s" % (len(files), "%d broken" % len(errors) if errors else "all links resolve"))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
