#!/usr/bin/env python3
"""CI's test stages: the one place that says which test targets each stage runs, and how.

  .ci/stages.py run STAGE      runs the stage's Bazel commands (.ci/run runs every stage)
  .ci/stages.py commands STAGE prints them instead
  .ci/stages.py table          prints docs/CI_TESTS.md: every test target, where it runs
  .ci/stages.py check          fails when docs/CI_TESTS.md is not what `table` prints, or when a
                               test target runs in no stage; ends "ci_tests: N passed, N failed"
  .ci/stages.py slowest MARKER [N]
                               the N (15) slowest test targets whose results under
                               bazel-testlogs are newer than MARKER, and their total

The stages, in .ci/run's order:
  plain       ./bazelw test //... (the README's test command): every test the CPU build has
  cuda        --config=cuda (nvcc and the real CUDA runtime; no GPU here): builds //..., runs
              the device tests, whose answers without a GPU or driver are checked
  cudaemu     --config=cudaemu: every GPU test on the host emulation of CUDA
  shaken      the same GPU tests again, with random stream delays (fresh seeds every run)
  asan_ubsan  ASan+UBSan on every test with native code, the CUDA code on the emulation
  tsan        TSan on the strategy tests, the emulation's own tests and every GPU test

Every stage passes --nocache_test_results (the disk cache in .bazelrc may hold results of
another checkout: a stage runs its tests) and hands each test TOWER_TEST_RUN (the run's id,
which names what a test leaves behind: .ci/leftovers) and TOWER_REQUIRE_ROOT (root-only
tests fail instead of skipping where CI runs them as root).
"""
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TABLE = os.path.join(ROOT, "docs", "CI_TESTS.md")

# Target sets, as Bazel query expressions.
ALL = "tests(//...)"
GPU = 'attr(tags, "\\bgpu\\b", tests(//...))'  # gpu_test (tests/gpu_test.bzl)
# Tagged `cudaemu`: built only under the emulation, not with real CUDA (none at present: the
# cases that need the emulation skip on a card instead, tests/testing/emulation.h).
EMULATION_ONLY = 'attr(tags, "\\bcudaemu\\b", tests(//...))'
EMULATION_OWN = "tests(//tests/cudaemu/...)"  # the emulation's own tests, with their own GPUs
MPI = 'attr(tags, "\\bmpi\\b", tests(//...))'  # run Open MPI: its suppressions under sanitizers
NO_NATIVE = 'attr(tags, "\\bno_native_code\\b", tests(//...))'  # nothing to sanitize
REDUCED = "rdeps(tests(//...), //tests/testing:reduced_round)"  # read TOWER_REDUCED_ROUND
NEEDS_ROOT = 'attr(tags, "\\bneeds_root\\b", tests(//...))'  # skip as another user, saying why
BENCH_ON_GPUS = "//bench:train_bench_smoke_test"  # a CPU test that also runs on the emulation's GPUs
# Tower's NCCL code across processes, with every non-blocking NCCL call returning ncclInProgress
# (cudaemu/nccl/progress.h): the 2 x 2 mpirun test, the deterministic tree path among its cases.
NCCL_IN_PROGRESS = "//tests/strategy/mpi/cuda:mpi_gpu_test + //tests/strategy/cuda:nccl_all_reduce_test"

# Repeats of the shaken stage. Each CI run draws new delays, so runs add up across CI runs; 10
# a run (3 for the two whole-program tests) took 198 s of a 40-minute CI (2026-11-29).
SHAKEN_RUNS = 3
SHAKEN_RUNS_WHOLE_PROGRAM = 1
WHOLE_PROGRAM = ["mpi_gpu_test", "deterministic_on_gpus_test"]

LSAN_MPI = "LSAN_OPTIONS=suppressions=%s/.ci/lsan_mpi.supp:fast_unwind_on_malloc=0" % ROOT
TSAN_MPI = "TSAN_OPTIONS=suppressions=%s/.ci/tsan_mpi.supp" % ROOT

# Cases TSan leaves out, each a repeat of threads and streams other cases run there.
TSAN_LEFT_OUT = {
    "DeterministicOnGpusTest.EveryGpuTopologySavesTheBytesOfOneGpuWithTenVirtualShards":
        "the same threads and streams as the case with 8 virtual shards, on other shard "
        "boundaries (116 s instead of 183 under TSan, 2026-11-26)",
    "MpiGpuTest.DeterministicModeGivesTheBytesOfOneGpuOnEveryGpuTopology":
        "each worker's threads are those of deterministic_on_gpus_test, and TSan sees no "
        "further than a process (47 s)",
}


class Run:
    """One `bazel test` command: `targets` is a target pattern (`pattern`) or a query."""

    def __init__(self, what, targets, flags=(), pattern=False):
        self.what = what
        self.targets = targets
        self.flags = list(flags)
        self.pattern = pattern


class Stage:
    def __init__(self, name, label, config, runs, build=None, note=""):
        self.name = name
        self.label = label  # the table's column
        self.config = config  # Bazel flags of every command
        self.runs = runs
        self.build = build  # a pattern built before the runs (a build check of its own)
        self.note = note


def sanitized_runs(extra, scope, mpi_flags):
    """The runs of a sanitizer stage over `scope` (a query): the GPU tests and the emulation's
    own with the GPUs their BUILD files give them, every other test on no GPU (its BUILD env
    asks for none where it links the emulation, and Bazel 4's --test_env would override a
    test's own env: hence separate commands); the `mpi` ones with Open MPI's suppressions."""
    gpus = "(%s + %s)" % (GPU, EMULATION_OWN)
    base = "(%s) - %s" % (scope, NO_NATIVE)
    return [
        Run("GPU tests", "%s ^ %s - %s" % (base, gpus, MPI), extra),
        Run("other tests, no GPU", "%s - %s - %s" % (base, gpus, MPI),
            extra + ["--test_env=CUDAEMU_GPUS=0"]),
        Run("GPU tests running Open MPI", "%s ^ %s ^ %s" % (base, gpus, MPI), extra + mpi_flags),
        Run("other tests running Open MPI", "(%s - %s) ^ %s" % (base, gpus, MPI),
            extra + mpi_flags + ["--test_env=CUDAEMU_GPUS=0"]),
    ]


def shaken_flags():
    flags = ["--runs_per_test=%d" % SHAKEN_RUNS,
             "--runs_per_test=%s@%d" % (",".join(WHOLE_PROGRAM), SHAKEN_RUNS_WHOLE_PROGRAM)]
    return flags + ["--test_env=CUDAEMU_STREAM_DELAY_US=200", "--test_env=CUDAEMU_SEED=random",
                    "--test_env=CUDAEMU_NCCL_IN_PROGRESS=random"]


# --platform_suffix= (none) for the emulated build: the CPU build's output directory, whose
# objects it shares (third_party/cuda/link_only.bzl keeps the CUDA libraries' include paths
# away from every file that is not CUDA code), so it compiles the CUDA sources and links.
STAGES = [
    Stage("plain", "plain", [], [Run("every test", "//...", pattern=True)],
          note="`./bazelw test //...`, the README's test command; GPU tests are not built "
               "without CUDA"),
    Stage("cuda", "cuda", ["--config=cuda"],
          [Run("device tests", "//tests/device/...", pattern=True)], build="//...",
          note="`--config=cuda` builds everything with nvcc against the real CUDA 13 "
               "runtime, cuBLAS and NCCL, then runs the device tests there; without a GPU, "
               "their GPU cases skip and the platform's answers are checked"),
    Stage("cudaemu", "cudaemu", ["--config=cudaemu", "--platform_suffix="],
          [Run("GPU tests", GPU),
           # train_bench on the emulation's GPUs (the default device there): its GPU path,
           # which the whole suite under --config=cudaemu exercised and CI did not.
           Run("train_bench on emulated GPUs", BENCH_ON_GPUS, pattern=True),
           Run("NCCL across processes, every non-blocking call in progress", NCCL_IN_PROGRESS,
               ["--test_env=CUDAEMU_NCCL_IN_PROGRESS=always"])],
          note="every GPU test on the emulation of CUDA, cuBLAS and NCCL (cudaemu/README.md), "
               "`train_bench`'s smoke test on its GPUs, and the NCCL tests across processes "
               "again with every non-blocking NCCL call returning ncclInProgress"),
    Stage("shaken", "shaken", ["--config=cudaemu", "--platform_suffix="],
          [Run("GPU tests with stream delays", GPU, shaken_flags())],
          note="the GPU tests %d times each (%s once), every stream item delayed a random "
               "0-200 µs from a seed each process draws and prints, and half the non-blocking "
               "NCCL calls returning ncclInProgress at random: missing synchronisation shows "
               "up; each CI run draws new delays" %
               (SHAKEN_RUNS, " and ".join(WHOLE_PROGRAM))),
    Stage("asan_ubsan", "asan+ubsan", ["--config=cudaemu_asan_ubsan", "--build_tests_only"],
          sanitized_runs(["--test_env=TOWER_REDUCED_ROUND=1"], ALL, ["--test_env=" + LSAN_MPI]),
          note="AddressSanitizer and UndefinedBehaviorSanitizer on every test with native "
               "code, the CUDA code built on the emulation; long end-to-end tests in one "
               "reduced round (TOWER_REDUCED_ROUND=1, tests/testing/reduced_round.h)"),
    Stage("tsan", "tsan", ["--config=cudaemu_tsan", "--build_tests_only"],
          sanitized_runs(["--test_env=TOWER_REDUCED_ROUND=1",
                          "--test_filter=-" + ":".join(sorted(TSAN_LEFT_OUT))],
                         "tests(//tests/strategy/...) + %s + %s" % (EMULATION_OWN, GPU),
                         ["--test_env=" + TSAN_MPI]),
          note="ThreadSanitizer on the strategy tests (the threaded collectives), the "
               "emulation's own tests (streams are threads) and every GPU test; long "
               "end-to-end tests in one reduced round"),
]
BY_NAME = {stage.name: stage for stage in STAGES}


def bazel(args, capture=False):
    command = [os.path.join(ROOT, "bazelw")] + args
    if capture:
        return subprocess.run(command, cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True, check=True).stdout
    print("stages: " + " ".join(command[:1] + [a if len(a) < 200 else a[:200] + "…" for a in args]),
          flush=True)
    return subprocess.run(command, cwd=ROOT).returncode


QUERY_CACHE = {}


def query(expression):
    if expression not in QUERY_CACHE:
        out = bazel(["query", "--noshow_progress", expression], capture=True)
        QUERY_CACHE[expression] = sorted(line for line in out.splitlines() if line.startswith("//"))
    return QUERY_CACHE[expression]


def ci_flags():
    return ["--nocache_test_results", "--test_env=TOWER_TEST_RUN", "--test_env=TOWER_REQUIRE_ROOT"]


def commands(stage):
    """The stage's Bazel commands, each a list of arguments (a run with no targets: none)."""
    result = []
    if stage.build:
        result.append(["build"] + stage.config + [stage.build])
    for run in stage.runs:
        targets = [run.targets] if run.pattern else query(run.targets)
        if not targets:
            continue
        result.append(["test"] + stage.config + ci_flags() + run.flags + ["--"] + targets)
    return result


def run_stage(name):
    status = 0
    for args in commands(BY_NAME[name]):
        if bazel(args) != 0:
            status = 1
    return status


# ---- the table ------------------------------------------------------------------------------

def where(label, tags):
    """What each stage does with test target `label`: {stage name: cell text}."""
    gpu = label in query(GPU)
    cells = {}
    if gpu:
        cells["plain"] = "— (CUDA code)"
    else:
        cells["plain"] = "runs (as root)" if label in query(NEEDS_ROOT) else "runs"
    device = label.startswith("//tests/device")
    emulation_only = label in query(EMULATION_ONLY)
    if device and not emulation_only:
        cells["cuda"] = "built, skips (no GPU)" if gpu else "runs"
    elif gpu and not emulation_only:
        cells["cuda"] = "built (no GPU)"
    else:
        cells["cuda"] = "—"
    if gpu:
        cells["cudaemu"] = "runs"
    elif label == BENCH_ON_GPUS:
        cells["cudaemu"] = "runs (on its GPUs)"
    else:
        cells["cudaemu"] = "—"
    whole = label.split(":")[-1] in WHOLE_PROGRAM
    cells["shaken"] = ("%d× with delays" % (SHAKEN_RUNS_WHOLE_PROGRAM if whole else SHAKEN_RUNS)
                       if gpu else "—")
    reduced = label in query(REDUCED)
    for stage in ("asan_ubsan", "tsan"):
        ran = [run for run in BY_NAME[stage].runs if label in query(run.targets)]
        if not ran:
            cells[stage] = ("— (no native code)" if label in query(NO_NATIVE) else
                            "— (not in its scope)")
            continue
        cell = "reduced round" if reduced else "runs"
        if stage == "tsan":
            left = [case for case in TSAN_LEFT_OUT if case.split(".")[0] in tags]
            if left:
                cell += ", less " + ", ".join(case.split(".")[1] for case in left)
        cells[stage] = cell
    return cells


def suites(label):
    """The gtest suite names a target's sources define (for TSan's left-out cases)."""
    package, name = label[2:].split(":")
    found = set()
    for path in (os.path.join(ROOT, package, name + ".cc"),):
        if os.path.exists(path):
            with open(path) as f:
                found.update(re.findall(r"^TEST(?:_F)?\((\w+),", f.read(), re.M))
    return found


def table():
    lines = [
        "# Where every test runs in CI",
        "",
        "Generated by `.ci/stages.py table` from the stages `.ci/run` runs (`.ci/stages.py` "
        "defines them); CI fails when this file is not what it prints (`.ci/stages.py check`).",
        "A test target's cases run in every stage marked here; `—` says why not. "
        "`runs (as root)`: as another user its cases skip, saying why (CI runs as root, "
        "where `TOWER_REQUIRE_ROOT=1` makes a skip a failure).",
        "",
        "| stage | what it is |",
        "|---|---|",
    ]
    for stage in STAGES:
        lines.append("| %s | %s |" % (stage.label, stage.note))
    lines += [
        "",
        "Reduced round: the test reads `TOWER_REDUCED_ROUND` (tests/testing/reduced_round.h): "
        "it keeps every case and code path but repeats a path on fewer topologies, layouts or "
        "rounds; its own comment says which it keeps. TSan leaves out these cases:",
        "",
    ]
    for case, why in sorted(TSAN_LEFT_OUT.items()):
        lines.append("- `%s`: %s." % (case, why))
    lines += [
        "",
        "Besides the test targets: `.ci/cmake_consumer` (Tower installed and used from a CMake "
        "project), `.ci/fuzz` (each libFuzzer target of tests/fuzz for 20 s under ASan+UBSan), "
        "`.ci/layering`, `.ci/without_toolkit` (the build graph without a CUDA toolkit), this "
        "table's check, `.ci/count_tests_test.py`, `.ci/structure_test.py` and `.ci/leftovers`.",
        "",
        "| test target | " + " | ".join(stage.label for stage in STAGES) + " |",
        "|---|" + "---|" * len(STAGES),
    ]
    for label in query(ALL):
        cells = where(label, suites(label))
        lines.append("| `%s` | %s |" % (label, " | ".join(cells[s.name] for s in STAGES)))
    return "\n".join(lines) + "\n"


def check():
    passed = failed = 0
    text = table()
    current = open(TABLE).read() if os.path.exists(TABLE) else ""
    if text == current:
        print("ci_tests: docs/CI_TESTS.md is the table the stages give: passed")
        passed += 1
    else:
        print("ci_tests: docs/CI_TESTS.md differs from the table the stages give: failed "
              "(regenerate it with `.ci/stages.py table > docs/CI_TESTS.md`)")
        import difflib
        sys.stdout.writelines(list(difflib.unified_diff(
            current.splitlines(True), text.splitlines(True), "docs/CI_TESTS.md", "stages"))[:60])
        failed += 1
    nowhere = [line for line in text.splitlines()
               if line.startswith("| `//") and not re.search(r"\| (runs|reduced|\d×)", line)]
    if nowhere:
        print("ci_tests: test targets no stage runs: failed")
        for line in nowhere:
            print("  " + line)
        failed += 1
    else:
        print("ci_tests: every test target runs in some stage: passed")
        passed += 1
    print("ci_tests: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


# ---- timing ---------------------------------------------------------------------------------

def slowest(marker, count=15):
    """Prints the `count` slowest test targets whose test.xml under bazel-testlogs is newer
    than `marker` (every run of a target added up), and the total."""
    since = os.path.getmtime(marker)
    root = os.path.join(ROOT, "bazel-testlogs")
    seconds = {}
    runs = {}
    for dirpath, _, filenames in os.walk(root, followlinks=True):
        if "test.xml" not in filenames:
            continue
        path = os.path.join(dirpath, "test.xml")
        if os.path.getmtime(path) < since:
            continue
        target = re.sub(r"/(run|shard)_\d+_of_\d+", "", os.path.relpath(dirpath, root))
        try:
            tree = ET.parse(path).getroot()
            took = float(tree.get("time") or 0) or sum(
                float(case.get("time") or 0) for case in tree.iter("testcase"))
        except (ET.ParseError, ValueError):
            took = 0.0
        seconds[target] = seconds.get(target, 0.0) + took
        runs[target] = runs.get(target, 0) + 1
    ranked = sorted(seconds.items(), key=lambda item: -item[1])
    for target, took in ranked[:count]:
        label = "//" + target.rsplit("/", 1)[0] + ":" + target.rsplit("/", 1)[1]
        extra = " (%d runs)" % runs[target] if runs[target] > 1 else ""
        print("  %7.1f s  %s%s" % (took, label, extra))
    print("  %7.1f s  in all, %d targets (test time added up: tests run %s at once)" %
          (sum(seconds.values()), len(seconds), "two" if os.cpu_count() == 2 else "several"))


def main(argv):
    if len(argv) >= 2 and argv[0] in ("run", "commands") and argv[1] in BY_NAME:
        if argv[0] == "run":
            return run_stage(argv[1])
        for args in commands(BY_NAME[argv[1]]):
            print("./bazelw " + " ".join(args))
        return 0
    if argv == ["table"]:
        sys.stdout.write(table())
        return 0
    if argv == ["check"]:
        return check()
    if len(argv) in (2, 3) and argv[0] == "slowest":
        slowest(argv[1], int(argv[2]) if len(argv) == 3 else 15)
        return 0
    sys.stderr.write(__doc__)
    sys.stderr.write("stages: %s\n" % ", ".join(BY_NAME))
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
