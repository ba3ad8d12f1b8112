#!/usr/bin/env python3
"""Finds cycles in the include graph of the repository's C++ sources.

A module is a file's path without its extension (foo.h, foo.cc and foo.cu are one module);
module A depends on module B when a file of A includes a file of B. A cycle between modules
(a.cc includes b.h, b.cc includes a.h) means two files that cannot be understood, tested or
moved apart: the layering is broken below the level BUILD visibility sees. Prints each
cycle and exits 1, or prints "no include cycles among N modules" and exits 0.
"""
import os
import re
import sys

ROOTS = ["util", "device", "ops", "data", "model", "strategy", "tools", "examples", "bench",
         "cudaemu", "tests"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def modules(top):
    graph = {}
    for root in ROOTS:
        for folder, _, files in os.walk(os.path.join(top, root)):
            for name in files:
                if not name.endswith((".h", ".cc", ".cu", ".cuh")):
                    continue
                path = os.path.relpath(os.path.join(folder, name), top)
                module = os.path.splitext(path)[0]
                with open(os.path.join(top, path), encoding="utf-8", errors="replace") as f:
                    text = f.read()
                edges = graph.setdefault(module, set())
                for included in INCLUDE.findall(text):
                    target = os.path.splitext(included)[0]
                    if target != module:
                        edges.add(target)
    return graph


def cycles(graph):
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue  # a system or third-party header
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(100000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def main():
    top = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    graph = modules(top)
    found = cycles(graph)
    for component in found:
        print("include cycle: " + " <-> ".join(component))
    if found:
        return 1
    print("no include cycles among %d modules" % len(graph))
    return 0


if __name__ == "__main__":
    sys.exit(main())
