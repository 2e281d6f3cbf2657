#!/usr/bin/python3
"""cu2cc — a .cu file as C++ for the kernel emulator (tests/gpud/cuemu):
every launch `k<<<grid, block, smem, stream>>>(args);` becomes
`cuemu_launch_named("k", grid, block, stream, [=] { k(args); });` (the
arguments' values are captured, as a launch's are: a recorded graph
replays them; the name for CUEMU_TRACE), nothing else changes.

    cu2cc.py IN.cu OUT.cc
"""
import sys


def top_level_split(text):
    """text's comma-separated parts, commas inside parentheses kept."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def convert(src):
    out, i = [], 0
    while True:
        j = src.find("<<<", i)
        if j < 0:
            out.append(src[i:])
            return "".join(out)
        k = j
        while k > 0 and (src[k - 1].isalnum() or src[k - 1] == "_"):
            k -= 1
        name = src[k:j]
        e = src.find(">>>", j)
        cfg = [c.strip() for c in top_level_split(src[j + 3:e])]
        if (src[e + 3] != "(" or len(cfg) < 2 or not name or
                any(c.count("(") != c.count(")") for c in cfg)):
            sys.exit("cu2cc: cannot read the launch at offset %d" % j)
        depth, p = 0, e + 3
        while True:   # the argument list, parentheses balanced
            depth += {"(": 1, ")": -1}.get(src[p], 0)
            p += 1
            if depth == 0:
                break
        out.append(src[i:k])
        stream = cfg[3] if len(cfg) > 3 else "0"
        out.append("cuemu_launch_named(\"%s\", %s, %s, %s, [=] { %s%s; })" %
                   (name, cfg[0], cfg[1], stream, name, src[e + 3:p]))
        i = p


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    text = open(sys.argv[1]).read()
    open(sys.argv[2], "w").write('#include "cuemu.h"\n#line 1 "%s"\n' % sys.argv[1] +
                                 convert(text))
