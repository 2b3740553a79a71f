#!/usr/bin/env python3
"""docs/environment.md, generated from the settings table.

    tools/environment_doc.py --hoccl-info build/hoccl-info > docs/environment.md
    tools/environment_doc.py --hoccl-info build/hoccl-info --check   (ctest environment_doc)

The library's settings are declared once, in base/config_table.cc;
`hoccl-info --settings-markdown` prints them as a markdown table, and this
script wraps that table in the page. The variables read outside the table
(by the perf programs, the NCCL plugins, the scripts and the tests) are
declared below, in OUTSIDE.

--check regenerates the page and compares it with docs/environment.md,
naming each setting that is undocumented, stale or documented differently.
It also reads the source tree for environment variables: every HOCCL_*
variable a program, script or test reads, and every variable the library,
the plugins, the tools and the perf programs read with getenv("..."), must
be a row of the table or an entry of OUTSIDE, and every entry of OUTSIDE
must still be read somewhere. Exit 0 when all agree, 1 otherwise.
"""
import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
PAGE = os.path.join(ROOT, "docs", "environment.md")

# Variables read outside the settings table: (group title, [(names, read by, meaning)]).
# Several names in one entry are separated by ", ".
OUTSIDE = [
    ("Read by hoccl's programs and the NCCL plugins, not by the library's table", [
        ("CUDA_DEVICE_MAX_CONNECTIONS", "the device path; the perf programs",
         "the driver's hardware queues, read once when the driver starts (hoccl's init starts it). "
         "Every rank's launch waits for its peers', so with fewer queues than streams a launch can "
         "wait behind a waiting peer's until the timeout: the library warns when it is below twice "
         "the ranks, and the perf programs set 32 (unless set) first thing"),
        ("TMPDIR", "`HOCCL_TOPO_PROBE`; `gloo_perf`",
         "where a job's probe result is kept when `HOCCL_TOPO_PROBE_DIR` is unset (else `/tmp`); "
         "where `gloo_perf` keeps its file store"),
        ("SLURM_JOB_ID, TORCHELASTIC_RUN_ID, OMPI_MCA_ess_base_jobid, PMIX_NAMESPACE", "`HOCCL_TOPO_PROBE`",
         "the job's name, for the per-job probe directory `$TMPDIR/hoccl-probe-<uid>-<job>`"),
        ("NCCL_SOCKET_IFNAME, NCCL_IB_HCA", "the NCCL net plugin",
         "used where `HOCCL_SOCKET_IFNAME` / `HOCCL_IB_HCA` are unset"),
        ("NCCL_DEBUG", "the NCCL plugins",
         "with `HOCCL_DEBUG` unset, hoccl's lines go to NCCL's logger at NCCL's level"),
        ("NCCL_TUNER_CONFIG_FILE", "the NCCL tuner plugin", "the rule file, where `HOCCL_TUNER_RULES` is unset"),
        ("SLURM_JOB_NODELIST", "the NCCL tuner plugin",
         "the job's nodes in NCCL's order, when it names exactly as many nodes as the communicator has"),
        ("RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT", "the perf programs, `hoccl-topo probe`, `gloo_perf`",
         "torchrun's launch: this rank, the job's size and the rendezvous (`MASTER_ADDR:MASTER_PORT` "
         "becomes `HOCCL_COMM_ID`)"),
        ("SLURM_PROCID, SLURM_NTASKS, OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_RANK",
         "the perf programs", "Slurm's and Open MPI's launch (rank and size); under `mpirun` the unique id "
         "goes by `MPI_Bcast`"),
        ("NCCL_TESTS_MIN_BW", "the perf programs", "as in nccl-tests: a row below this bus bandwidth fails the run"),
        ("GLOO_PERF_STORE, GLOO_SOCKET_IFNAME", "`gloo_perf` (the Gloo peer benchmark)",
         "its rendezvous file store and interface"),
    ]),
    ("Read by the scripts and the tests", [
        ("HOCCL_PARO", "`hoccl_torch.paro` (`strategy=\"auto\"`), `results/scripts/paro-recost.py`, the PaRO tests",
         "the `hoccl-paro` program (else on `PATH`, else beside the package)"),
        ("HOCCL_TORCH_PYTHON", "`results/scripts/paro-measure.sh`", "the Python with torch (default `/usr/bin/python3`)"),
        ("HOCCL_CMAKE_ARGS, HOCCL_CTEST_ARGS", "`tools/run-tests.sh`", "more arguments for cmake and for ctest"),
        ("HOCCL_TEST_CASE", "`tests/test_mismatch.cc`",
         "runs only the cases whose description contains this text (debugging one case)"),
        ("HOCCL_CUDA_ARCHS", "`tools/run-gpu-tests.sh`",
         "the CUDA architectures to build (default: the GPU's own, as `nvidia-smi` names it)"),
        ("HOCCL_NCCL_LIBRARY", "`tools/run-gpu-tests.sh`",
         "the libnccl.so.2 that part (b) runs with hoccl's plugins (default: CUDA's prefix, then the system's)"),
        ("HOCCL_FUZZ_BUILD", "`tools/fuzz.sh`", "the fuzzers' build directory (default `build-fuzz`)"),
        ("HOCCL_TRIXIE_ROOT", "`tools/torch2-check.sh`",
         "where the Debian 13 chroot for the torch 2.x check is made and kept (default "
         "`/var/cache/hoccl-torch2/trixie`)"),
        ("HOCCL_NEWCOMER_CACHE, HOCCL_NEWCOMER_MIRROR, HOCCL_NEWCOMER_EXTRA, HOCCL_NEWCOMER_KEEP",
         "`tools/newcomer-check.sh`",
         "where the base chroot and .debs are kept, the Debian mirror, packages to add, `1` keeps the chroot"),
        ("HOCCL_SOFTROCE_CACHE, HOCCL_SOFTROCE_TIMEOUT, HOCCL_SOFTROCE_MEM, HOCCL_SOFTROCE_LOGS",
         "`tests/softroce/run.sh`",
         "the kernel cache (`/var/cache/hoccl-softroce`), the guest's time limit (1200 s), its memory (4G), "
         "where its logs go (`BUILD/softroce-logs`)"),
        ("HOCCL_CLUSTER, HOCCL_CLUSTER_STATE", "`tests/cluster`",
         "the cluster a command applies to (`cluster.sh exec` sets it); where cluster state lives "
         "(`/run/hoccl-cluster`)"),
        ("HOCCL_CLUSTER_TBF_BURST_MS, HOCCL_CLUSTER_TBF_MIN_BURST, HOCCL_CLUSTER_TBF_QUEUE_MS",
         "`tests/cluster`, `results/scripts/emulated-tune.sh`",
         "each link's tbf bucket: that many ms at the link rate (2), at least that many bytes (131072); its "
         "queue: that many ms at the link rate (5)"),
        ("HOCCL_VERIFY_SWEEP", "`test_verify_sweep`", "`full` verifies shapes up to P = 256 (about 16 minutes)"),
        ("HOCCL_UPDATE_GOLDEN", "`test_schedule_golden`", "`1` rewrites the pinned schedule texts"),
        ("HOCCL_TEST_LARGE_COUNT", "the multi-process test worker",
         "elements of its large all-reduces (the sanitizer runs take 2M)"),
        ("HOCCL_TEST_SELF_KILL", "the multi-process test worker",
         "`rank:seconds`: that rank kills itself after that long (the rank-kill tests)"),
        ("HOCCL_TEST_LATE_SEC", "the multi-process test worker",
         "seconds its last rank sleeps before the second call of the `late` scenario (`test_heartbeat`)"),
    ]),
]

HEADER = """<!-- Generated by tools/environment_doc.py from the settings table
     (base/config_table.cc, printed by `hoccl-info --settings-markdown`).
     Do not edit: change the table or the script, then run
     tools/environment_doc.py --hoccl-info build/hoccl-info > docs/environment.md
     ctest -R environment_doc fails while this page and the table disagree. -->

# Environment reference

Every setting the library reads is one row of the settings table
(`base/config_table.cc`), which this page is generated from.
`hoccl-info` prints the same rows with the values this environment gives.

- hoccl reads these variables once per process, at its first call, into
  an immutable snapshot; later changes to the environment are not seen.
- A bad value fails init with a message naming the variable and what it
  expects, in every build: `HOCCL_IB_HCA` is checked even where the IB
  transport is not compiled in, and files to read must be readable.
- A communicator's `hocclConfig_t` overrides `HOCCL_ALGO` (`algorithm`),
  `HOCCL_TIMEOUT` (`timeoutMs` in milliseconds, or `timeoutSec` in whole
  seconds; `timeoutMs` wins when both are set) and `HOCCL_NET` (`netName`:
  `IB`, `Socket` or `auto`) for that communicator.
- The rendezvous checks that every rank runs the same library version and
  the same settings where the table says "same on every rank"; a difference
  fails init on every rank, naming the first one:
  `configuration differs: rank 2 has HOCCL_SLOTS=4 but rank 0 has HOCCL_SLOTS=8`.

## The settings

"""

FOOTER_INTRO = """
## Variables read outside the table

These are not settings of the library: launchers', NCCL's and CUDA's
variables that hoccl's programs honour, and the knobs of the scripts and
tests. `ctest -R environment_doc` also fails when a program, script or test
reads a `HOCCL_*` variable listed nowhere on this page.
"""


def outside_names():
    names = []
    for _, entries in OUTSIDE:
        for names_text, _, _ in entries:
            names += names_text.split(", ")
    return names


def render(table):
    out = [HEADER, table.rstrip("\n") + "\n", FOOTER_INTRO]
    for title, entries in OUTSIDE:
        out.append(f"\n### {title}\n\n| variable | read by | meaning |\n|---|---|---|\n")
        for names_text, reader, meaning in entries:
            names = ", ".join(f"`{n}`" for n in names_text.split(", "))
            out.append(f"| {names} | {reader} | {meaning} |\n")
    return "".join(out)


def table_rows(text):
    """{name: row} of the settings table in `text` (a page or a table)."""
    rows = {}
    for line in text.splitlines():
        m = re.match(r"\| `(HOCCL_[A-Z0-9_]+)` \|", line)
        if m and "| read by |" not in line:
            rows.setdefault(m.group(1), line)
    return rows


# Where the tree reads environment variables.
SCAN_DIRS = ["base", "src", "transport", "algorithms", "plugin", "programs", "tools", "results/scripts", "perf", "bindings",
             "tests", "fuzz", "examples", "cmake", ".ci"]
SCAN_EXT = (".cc", ".h", ".cu", ".py", ".sh", ".cmake", ".txt", "")
HOCCL_READ = [
    re.compile(r'getenv\(\s*"(HOCCL_[A-Z0-9_]+)"'),                       # C, C++
    re.compile(r'environ(?:\.get)?[\[(]\s*["\'](HOCCL_[A-Z0-9_]+)["\']'),  # Python
    re.compile(r'\$ENV\{(HOCCL_[A-Z0-9_]+)\}'),                            # CMake
]
SHELL_READ = re.compile(r'\$\{?(HOCCL_[A-Z0-9_]+)')
# getenv("NAME") of any name, in what users run: the library, plugins, programs, perf programs.
GETENV_DIRS = ["base", "src", "transport", "algorithms", "plugin", "programs", "perf"]
GETENV_ANY = re.compile(r'getenv\(\s*"([A-Za-z_][A-Za-z0-9_]*)"')


def source_files(dirs):
    for d in dirs:
        top = os.path.join(ROOT, d)
        if os.path.isfile(top):
            yield top
            continue
        for base, subdirs, files in os.walk(top):
            subdirs[:] = [s for s in subdirs if s not in ("__pycache__", "data")]
            for f in files:
                if f.endswith(SCAN_EXT) and not f.endswith(".md"):
                    yield os.path.join(base, f)


def is_shell(path, text):
    return path.endswith(".sh") or text.startswith("#!/bin/bash") or text.startswith("#!/usr/bin/env bash") \
        or os.path.basename(path) == "run" and "/.ci/" in path


def env_reads():
    """{variable: [files]} of the variables the tree reads."""
    reads = {}

    def add(name, path):
        reads.setdefault(name, set()).add(os.path.relpath(path, ROOT))

    for path in source_files(SCAN_DIRS):
        try:
            text = open(path, encoding="utf-8", errors="replace").read()
        except OSError:
            continue
        for rx in HOCCL_READ:
            for m in rx.finditer(text):
                add(m.group(1), path)
        if is_shell(path, text):
            for m in SHELL_READ.finditer(text):
                add(m.group(1), path)
    for path in source_files(GETENV_DIRS):
        if not path.endswith((".cc", ".h", ".cu")):
            continue
        for m in GETENV_ANY.finditer(open(path, encoding="utf-8", errors="replace").read()):
            add(m.group(1), path)
    return reads


def mentions():
    """Names the tree quotes or expands: a variable read through a list of
    names (getenv(name) in a loop) still counts as read."""
    found = set()
    rx = re.compile(r'["\']([A-Za-z_][A-Za-z0-9_]*)["\']|\$\{?([A-Za-z_][A-Za-z0-9_]*)')
    for path in source_files(SCAN_DIRS):
        try:
            text = open(path, encoding="utf-8", errors="replace").read()
        except OSError:
            continue
        for m in rx.finditer(text):
            found.add(m.group(1) or m.group(2))
    return found


def check(page_text, table):
    problems = []
    want, have = table_rows(table), table_rows(page_text.split("## Variables read outside the table")[0])
    for name in want:
        if name not in have:
            problems.append(f"{name} is undocumented: docs/environment.md has no row for it")
        elif have[name] != want[name]:
            problems.append(f"{name} is documented differently from the settings table:\n"
                            f"    page:  {have[name]}\n    table: {want[name]}")
    for name in have:
        if name not in want:
            problems.append(f"{name} is stale: docs/environment.md documents it, the settings table has no such row")
    known = set(want) | set(outside_names())
    reads = env_reads()
    for name in sorted(reads):
        if name not in known:
            problems.append(f"{name} is read by {', '.join(sorted(reads[name]))} but documented nowhere: add it "
                            "to the settings table or to OUTSIDE in tools/environment_doc.py")
    mentioned = mentions()
    for name in outside_names():
        if name not in reads and name not in mentioned:
            problems.append(f"{name} is stale: OUTSIDE in tools/environment_doc.py lists it, nothing reads it")
    if not problems and page_text != render(table):
        problems.append("docs/environment.md differs from what the generator writes (outside the settings rows)")
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hoccl-info", required=True, help="the hoccl-info program")
    ap.add_argument("--check", action="store_true", help="compare with docs/environment.md instead of printing")
    args = ap.parse_args()
    table = subprocess.run([args.hoccl_info, "--settings-markdown"], check=True, capture_output=True,
                           text=True).stdout
    if not table_rows(table):
        sys.exit(f"environment_doc: {args.hoccl_info} --settings-markdown printed no settings")
    if not args.check:
        sys.stdout.write(render(table))
        return 0
    page = open(PAGE, encoding="utf-8").read() if os.path.exists(PAGE) else ""
    problems = check(page, table)
    for p in problems:
        print(f"environment_doc: {p}")
    if problems:
        print("environment_doc: regenerate with: tools/environment_doc.py --hoccl-info BUILD/hoccl-info "
              "> docs/environment.md")
        return 1
    print(f"environment_doc: docs/environment.md matches the settings table ({len(table_rows(table))} settings)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
