#!/usr/bin/env python3
"""Splits a callgrind dump (positions: line, events: Ir) per request:
the total, self cost per object (the program, libc, the dynamic linker,
libustack_preload.so), the inclusive cost of named functions, and the
heaviest functions by self cost.

    callgrind-split.py DUMP REQUESTS [FUNCTION ...]
"""
import re
import sys
from collections import defaultdict


def parse(path):
    names = {"fn": {}, "ob": {}, "fl": {}}
    self_cost = defaultdict(int)
    incl_calls = defaultdict(int)
    fn_obj = {}
    total = 0
    ob = fn = cfn = None
    pending_call = False

    def name(kind, rest):
        m = re.match(r"\((\d+)\)(?:\s+(.*))?", rest)
        if not m:
            return rest
        if m.group(2) is not None:
            names[kind][m.group(1)] = m.group(2)
        return names[kind].get(m.group(1), m.group(1))

    for line in open(path, errors="replace"):
        line = line.rstrip("\n")
        if not line:
            continue
        c = line[0]
        if c.isdigit() or c in "+-*":
            parts = line.split()
            v = int(parts[1]) if len(parts) > 1 else 0
            if pending_call:
                incl_calls[fn] += v
                pending_call = False
            else:
                self_cost[fn] += v
                total += v
            continue
        key, _, rest = line.partition("=")
        if key == "ob":
            ob = name("ob", rest)
        elif key == "fn":
            fn = name("fn", rest)
            fn_obj[fn] = ob
        elif key == "cob":
            name("ob", rest)
        elif key == "cfn":
            cfn = name("fn", rest)
        elif key == "calls":
            pending_call = True
        elif key in ("fl", "fi", "fe", "cfi", "cfl"):
            name("fl", rest)
    return total, self_cost, incl_calls, fn_obj


def main():
    path, reqs = sys.argv[1], int(sys.argv[2])
    wanted = sys.argv[3:]
    total, self_cost, incl_calls, fn_obj = parse(path)
    print(f"requests {reqs}, instructions per request {total / reqs:,.0f}")
    by_obj = defaultdict(int)
    for f, v in self_cost.items():
        by_obj[(fn_obj.get(f) or "?").rsplit("/", 1)[-1]] += v
    print("self cost per object, per request:")
    for o, v in sorted(by_obj.items(), key=lambda x: -x[1])[:8]:
        print(f"  {v / reqs:8,.0f}  {o}")
    for w in wanted:
        inc = sum(self_cost[f] + incl_calls[f] for f in self_cost if f == w)
        print(f"inclusive {w}: {inc / reqs:,.0f} per request")
    print("heaviest functions (self, per request):")
    for f, v in sorted(self_cost.items(), key=lambda x: -x[1])[:45]:
        print(f"  {v / reqs:8,.0f}  {f[:110]}  [{(fn_obj.get(f) or '?').rsplit('/', 1)[-1]}]")


main()
