#!/usr/bin/env bash
# Benchmark `sandpod fs grep` against ripgrep with both at their defaults
# (Unicode classes, ignore files read, hidden entries skipped) on one tree,
# pattern by pattern, interleaved in the same run.
#
# Usage: tests/bench/bench_grep.sh [PATH/TO/sandpod] [REPS]
#   env GREP_ROOT (default /usr/include), BENCH_OUT (default
#   tests/bench/results/grep.json), RG (default rg)
#
# Method: the tree is read once before timing (warm page cache); then REPS
# rounds (default 15), in which every pattern runs once with sandpod and once
# with rg, one after the other. For each command: the median wall time, the
# minimum, and the median user+sys CPU time (from wait4's rusage; rg counts
# all its threads). The ratio is sandpod's median wall time over rg's (below
# 1: sandpod is faster). The match sets (path:line of every matching line,
# taken from a run outside the timing) must be identical.
#
# Fairness: rg reads .gitignore only inside a git repository, sandpod in any
# folder; on a tree without ignore files (as /usr/include) both search the
# same files, which the equal match sets confirm. Neither follows symlinks.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
SP=$(realpath "${1:-$repo/build-bench/sandpod}")
REPS=${2:-15}
ROOT=${GREP_ROOT:-/usr/include}
OUT=${BENCH_OUT:-$here/results/grep.json}
RG=${RG:-rg}
[ -x "$SP" ] || {
    echo "bench_grep: no sandpod binary at $SP" >&2
    exit 2
}
command -v "$RG" >/dev/null || {
    echo "bench_grep: ripgrep is missing (apt-get install ripgrep)" >&2
    exit 77
}
command -v python3 >/dev/null || {
    echo "bench_grep: python3 is needed" >&2
    exit 77
}

python3 - "$SP" "$REPS" "$ROOT" "$OUT" "$RG" <<'EOF'
import json, os, platform, resource, statistics, subprocess, sys, tempfile, time

sp, reps, root, out, rg = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]

# (label, pattern, case-insensitive)
PATTERNS = [
    ("regex with a literal", r"fcntl\s*\(", False),
    ("literal", "PTHREAD_MUTEX_INITIALIZER", False),
    ("Unicode class", r"\w+_t\b", False),
    ("case-insensitive", "sockaddr_in6", True),
]

def sp_cmd(pat, ci):
    return [sp, "fs", "--root", root, "grep", pat, "--max", "100000000"] + (["-i"] if ci else [])

def rg_cmd(pat, ci):
    return [rg, "-n", "--no-heading", "--color", "never", "--no-messages"] + \
        (["-i"] if ci else []) + ["-e", pat, "."]

def run(cmd, stdout):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=stdout, stderr=subprocess.DEVNULL,
                   cwd=root)
    t1 = time.perf_counter()
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ((t1 - t0) * 1000, (r1.ru_utime - r0.ru_utime) * 1000,
            (r1.ru_stime - r0.ru_stime) * 1000)

def match_set(cmd):
    with tempfile.TemporaryFile() as f:
        subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.DEVNULL,
                       cwd=root)
        f.seek(0)
        lines = f.read().decode("utf-8", "replace").splitlines()
    # rg, given ".", prints ./path; sandpod paths relative to its root.
    return set(":".join(l.split(":", 2)[:2]).removeprefix("./") for l in lines if l)

# Warm the page cache and both binaries.
subprocess.run(["find", root, "-type", "f", "-exec", "cat", "{}", "+"],
               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
rows = []
samples = {label: {"sandpod": [], "rg": []} for label, _, _ in PATTERNS}
for label, pat, ci in PATTERNS:
    s, r = match_set(sp_cmd(pat, ci)), match_set(rg_cmd(pat, ci))
    files = lambda m: len(set(x.split(":")[0] for x in m))
    rows.append({"label": label, "pattern": pat, "case_insensitive": ci,
                 "matching_lines": {"sandpod": len(s), "rg": len(r)},
                 "matching_files": {"sandpod": files(s), "rg": files(r)},
                 "same_matches": s == r,
                 "only_sandpod": sorted(s - r)[:5], "only_rg": sorted(r - s)[:5]})
for _ in range(reps):
    for label, pat, ci in PATTERNS:
        samples[label]["sandpod"].append(run(sp_cmd(pat, ci), subprocess.DEVNULL))
        samples[label]["rg"].append(run(rg_cmd(pat, ci), subprocess.DEVNULL))

med = statistics.median
for row in rows:
    for tool in ("sandpod", "rg"):
        v = samples[row["label"]][tool]
        row[tool] = {"median_ms": med([x[0] for x in v]), "min_ms": min(x[0] for x in v),
                     "cpu_ms": med([x[1] + x[2] for x in v]),
                     "user_ms": med([x[1] for x in v]), "sys_ms": med([x[2] for x in v]),
                     "samples_ms": [round(x[0], 2) for x in v]}
    row["ratio"] = row["sandpod"]["median_ms"] / row["rg"]["median_ms"]
    row["cpu_ratio"] = row["sandpod"]["cpu_ms"] / row["rg"]["cpu_ms"]

try:
    load = open("/proc/loadavg").read().split()[:3]
except OSError:
    load = []
res = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
       "machine": {"kernel": platform.release(), "cpus": os.cpu_count(), "loadavg": load},
       "root": root, "reps": reps,
       "rg": subprocess.run([rg, "--version"], capture_output=True,
                            text=True).stdout.split("\n")[0],
       "method": "page cache warm; REPS interleaved rounds (each pattern: sandpod then rg); "
                 "median wall, min wall, median user+sys CPU; ratio = sandpod/rg median wall",
       "rows": rows}
os.makedirs(os.path.dirname(out), exist_ok=True)
with open(out, "w") as f:
    json.dump(res, f, indent=2)

print("| pattern | sandpod ms (min) | sandpod CPU ms | rg ms (min) | rg CPU ms | "
      "sandpod/rg wall | sandpod/rg CPU | same matches |")
print("|---|---:|---:|---:|---:|---:|---:|---|")
for row in rows:
    s, r = row["sandpod"], row["rg"]
    print("| %s `%s`%s | %.1f (%.1f) | %.1f | %.1f (%.1f) | %.1f | %.2fx | %.2fx | %s |" % (
        row["label"], row["pattern"], " -i" if row["case_insensitive"] else "",
        s["median_ms"], s["min_ms"], s["cpu_ms"], r["median_ms"], r["min_ms"], r["cpu_ms"],
        row["ratio"], row["cpu_ratio"],
        "yes (%d lines)" % row["matching_lines"]["rg"] if row["same_matches"] else
        "**no** (sandpod %d, rg %d)" % (row["matching_lines"]["sandpod"],
                                        row["matching_lines"]["rg"])))
print("\n%s, %d rounds, load average at the end %s; written: %s" % (
    root, reps, " ".join(load), out))
bad = [r["label"] for r in rows if not r["same_matches"]]
if bad:
    for r in rows:
        if not r["same_matches"]:
            print("different matches for %s: only sandpod %s, only rg %s" % (
                r["label"], r["only_sandpod"], r["only_rg"]))
    sys.exit(1)
EOF
