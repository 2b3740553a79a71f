#!/usr/bin/env python3
"""Checks that the library's folders only point down the layer list.

Prints a table of cross-folder #include lines (from folder \\ to folder) and
exits 1 if any include points up or sideways, naming the file and line.
With --sizes it also prints the line counts of the library's files and fails
when the median is over 150 lines or a file is over 600.

    tools/layers.py            # table + check (run in CI by tools/run-tests.sh)
    tools/layers.py --sizes    # and the file-size rule
    tools/layers.py --markdown # the table as markdown, for docs/architecture.md

The layers, lowest first. A folder may include its own files, anything in a
lower layer, and public headers (include/); nothing beside or above it.
The top-level folders obey the same rule among themselves (TOP, lowest
first): an include from one top-level folder into another must point down
that list, so the tree's first level draws the layers too.
"""
import os
import re
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Library folders by layer (0 = bottom). Transport backends are separate
# folders: each may use transport/ (the neutral interfaces) but not another
# backend. transport/links owns the backends and routes connections to them; it
# is the only library folder above them that may include one. The device
# path's transport (transport/p2p) is such a backend too: the device
# executor sees it only through transport/device_connection.h, and gets it
# from transport/links by way of the communicator.
LAYERS = [
    ["base"],
    ["src/bootstrap", "src/topo", "transport", "transport/shm", "transport/net", "transport/p2p", "algorithms"],
    ["src/tune", "src/exec", "transport/links"],
    ["src/comm"],
    ["src/api"],
]
# Users of the library above the API, and what each may reach into besides
# the public header. Tests may use anything.
USERS = {
    "plugin": {"base", "src/topo", "src/tune", "transport", "transport/net", "algorithms"},
    "perf": {"base", "src/check"},
    # The installed programs. hoccl-info reports the data-op ISA and the
    # network transports too; hoccl-topo probe is launched like the
    # benchmarks and reads the launcher's environment with their reader
    # (perf/common/launcher_env).
    "programs": {"base", "src/topo", "src/tune", "algorithms", "src/bootstrap", "src/exec", "transport/net",
              "perf"},
    "examples": set(),
    # The closed-form values perf and the tests check against: public API only.
    "src/check": set(),
    "bindings": set(),
}
# transport/ itself holds only the interface headers; these sub-folders are
# backends that must not include each other. Of the library folders, only
# BACKEND_OWNER may include a backend: the rest see transport/connection.h
# and transport/links.
BACKENDS = ["transport/shm", "transport/net", "transport/p2p"]
BACKEND_OWNER = "transport/links"

# The top-level folders, lowest first (the library's bottom layer, its
# transports and algorithms, the rest of the library, then what uses it).
TOP = ["include", "base", "transport", "algorithms", "src", "plugin", "perf", "programs", "examples", "bindings",
       "tests", "fuzz"]

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def folder_of(path):
    """The layer folder a repository path belongs to, or None."""
    for b in BACKENDS:
        if path == b or path.startswith(b + "/"):
            return b
    if path == BACKEND_OWNER or path.startswith(BACKEND_OWNER + "/"):
        return BACKEND_OWNER
    if path.startswith("transport/"):
        return "transport"
    for layer in LAYERS:
        for f in layer:
            if path.startswith(f + "/"):
                return f
    if path.startswith("src/check/"):
        return "src/check"
    if path.startswith("perf/micro/"):
        return "tests"  # micro-benchmarks of internals are tests that time
    top = path.split("/", 1)[0]
    if top in USERS or top in ("tests", "fuzz", "include"):
        return top
    return None


def level(folder):
    for i, layer in enumerate(LAYERS):
        if folder in layer:
            return i
    return None


def allowed(src, dst):
    if src == dst or dst == "include":
        return True
    if src in ("tests", "fuzz"):
        return True
    if src in USERS:
        return dst in USERS[src]
    ls, ld = level(src), level(dst)
    if ls is None or ld is None:
        return False
    if src in BACKENDS and dst == "transport":
        return True
    if dst in BACKENDS and src != BACKEND_OWNER:
        return False
    return ld < ls


def source_files():
    for top in dict.fromkeys([f.split("/")[0] for layer in LAYERS for f in layer] + list(USERS) + TOP):
        base = os.path.join(ROOT, top)
        if not os.path.isdir(base):
            continue
        for dirpath, _, names in os.walk(base):
            for n in names:
                if n.endswith((".h", ".cc", ".cu", ".cuh", ".cpp", ".hpp")):
                    yield os.path.relpath(os.path.join(dirpath, n), ROOT)


def resolve(inc, path):
    """The repository path an include names (includes are written from the
    root, e.g. "base/log.h"), else relative to the file, else None."""
    if os.path.exists(os.path.join(ROOT, inc)):
        return inc
    rel = os.path.normpath(os.path.join(os.path.dirname(path), inc))
    if os.path.exists(os.path.join(ROOT, rel)):
        return rel
    return None


def main(argv):
    edges = {}
    bad = []
    top_bad = []
    seen = set()
    for path in sorted(set(source_files())):
        if path in seen:
            continue
        seen.add(path)
        src = folder_of(path)
        if src is None:
            continue
        with open(os.path.join(ROOT, path), encoding="utf-8", errors="replace") as f:
            for lineno, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                target = resolve(m.group(1), path)
                if target is None:
                    continue  # a generated or public header (build_info.h, hoccl.h)
                top_src, top_dst = path.split("/", 1)[0], target.split("/", 1)[0]
                if (top_src != top_dst and top_src in TOP and top_dst in TOP
                        and TOP.index(top_dst) > TOP.index(top_src)):
                    top_bad.append(f"{path}:{lineno}: top-level {top_src}/ includes {target} ({top_dst}/ is above it)")
                dst = folder_of(target)
                if dst is None or dst == src:
                    continue
                edges[(src, dst)] = edges.get((src, dst), 0) + 1
                if not allowed(src, dst):
                    bad.append(f"{path}:{lineno}: {src} includes {target} ({dst}), which it may not")

    rows = [f for layer in LAYERS for f in layer] + list(USERS) + ["tests", "fuzz"]
    cols = [f for layer in LAYERS for f in layer]
    md = "--markdown" in argv
    if md:
        print("| from \\ to | " + " | ".join(cols) + " |")
        print("|---" * (len(cols) + 1) + "|")
        for r in rows:
            print(f"| {r} | " + " | ".join(str(edges.get((r, c), "")) for c in cols) + " |")
    else:
        w = max(len(r) for r in rows)
        short = [c.split("/")[-1] for c in cols]
        print(" " * w + " " + " ".join(f"{s:>9}" for s in short))
        for r in rows:
            print(f"{r:<{w}} " + " ".join(f"{edges.get((r, c), ''):>9}" for c in cols))
    status = 0
    if bad:
        print(f"\nlayers: {len(bad)} include(s) point up or sideways:", file=sys.stderr)
        for b in bad:
            print("  " + b, file=sys.stderr)
        status = 1
    else:
        print("\nlayers: every include points down")
    if top_bad:
        print(f"\nlayers: {len(top_bad)} include(s) point up between top-level folders ({' < '.join(TOP)}):",
              file=sys.stderr)
        for b in top_bad:
            print("  " + b, file=sys.stderr)
        status = 1
    else:
        print("layers: the top-level folders point down too (" + " < ".join(TOP) + ")")

    if "--sizes" in argv:
        lib = [p for p in seen if level(folder_of(p) or "") is not None]
        counts = sorted((sum(1 for _ in open(os.path.join(ROOT, p), encoding="utf-8", errors="replace")), p)
                        for p in lib)
        med = statistics.median(c for c, _ in counts)
        print(f"library files: {len(counts)}, median {med:g} lines, largest:")
        for c, p in counts[-5:][::-1]:
            print(f"  {c:5d} {p}")
        over = [(c, p) for c, p in counts if c > 600]
        if med > 150 or over:
            print(f"sizes: median {med:g} (limit 150); over 600 lines: "
                  + (", ".join(f"{p} ({c})" for c, p in over) or "none"), file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
