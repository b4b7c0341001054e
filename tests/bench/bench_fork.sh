#!/usr/bin/env bash
# Benchmark `sandpod fork` against `cp -a` of the workspace and against a
# fresh hydration (`sandpod create --mount`), on one generated tree, in the
# same run.
#
# Usage: tests/bench/bench_fork.sh [PATH/TO/sandpod] [N]
#   env BENCH_DIR (default /tmp), BENCH_OUT (default tests/bench/results/fork.json),
#   SANDPOD_URL (default: discovered), BENCH_COMPARE (another sandpod binary,
#   say one built from the previous commit: its fork and create are timed in
#   the same rounds, as rows marked "[compare]", so a before/after comparison
#   sees the same load)
#
# The tree: 10,000 files (0.5-7 KB, about 38 MB) in 300 folders. An origin
# sandbox is created from it with a setup (untimed; create takes its baseline
# snapshot `base`, which the forks start from). Then N rounds
# (default 20), interleaved so that a drift in the machine's load weighs on
# all three alike; in each:
#   fork      `sandpod fork ORIGIN SNAP --name fN`: a new sandbox, started,
#             its workspace restored from the shared store
#   cp -a     `cp -a` of the origin's workspace (a copy only: no container)
#   hydrate   `sandpod create --mount TREE --name hN`: a new sandbox, started,
#             its workspace hydrated from the host tree
#   template  `sandpod create --template TPL --name tN`: a new sandbox from a
#             template saved (untimed) from the origin after its setup
#   setup     `sandpod create --mount TREE --setup SETUP --name sN`: what a
#             template saves, the hydration and the setup run again
# The origin is made with --setup "$SETUP" (env BENCH_SETUP; default: 500
# files written into /workspace/build), so fork and template start from the
# prepared state.
# With BENCH_COMPARE, also its fork and create, in the same round. `sync`
# runs before every timed command; what a round made is removed
# after it, untimed. Medians (and the samples) are reported.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
SP=${1:-$repo/build/test/sandpod}
N=${2:-20}
BASE=${BENCH_DIR:-/tmp}
OUT=${BENCH_OUT:-$here/results/fork.json}
[ -x "$SP" ] || {
    echo "bench_fork: no sandpod binary at $SP" >&2
    exit 2
}
command -v python3 >/dev/null || {
    echo "bench_fork: python3 is needed" >&2
    exit 77
}

BENCH_LOAD_START=$(cat /proc/loadavg)
W=$(mktemp -d "$BASE/sandpod-bench-fork.XXXXXX")
export SANDPOD_HOME=$W/home
mkdir -p "$SANDPOD_HOME"
url=()
[ -n "${SANDPOD_URL:-}" ] && url=(--url "$SANDPOD_URL")
cleanup() {
    local d
    for d in "$SANDPOD_HOME"/sandboxes/*/; do
        [ -d "$d" ] && "$SP" rm --force "${url[@]}" "$(basename "$d")" >/dev/null 2>&1
    done
    rm -rf "$W"
}
trap cleanup EXIT
SRC=$W/tree

echo "== building the tree in $SRC"
python3 - "$SRC" <<'PY'
import os, random, sys
root = sys.argv[1]
rnd = random.Random(42)
for i in range(10000):
    p = f"{root}/d{i % 300:03d}/f{i}.txt"
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "wb") as f:
        f.write(rnd.randbytes(rnd.randint(512, 7 * 1024)))
PY
files=$(find "$SRC" -type f | wc -l)
bytes=$(du -sb "$SRC" | cut -f1)
echo "   $files files, $((bytes / 1000000)) MB"
find "$SRC" -type f -exec cat {} + >/dev/null

SETUP=${BENCH_SETUP:-'mkdir -p /workspace/build && i=0 && while [ $i -lt 500 ]; do echo $i > /workspace/build/o$i; i=$((i+1)); done'}
# create's baseline, tagged base, is the snapshot forked.
echo "== origin: create with setup, template (untimed)"
"$SP" create "${url[@]}" --name origin --mount "$SRC" --setup "$SETUP" >/dev/null 2>&1
"$SP" template save "${url[@]}" origin tpl >/dev/null
WS=$SANDPOD_HOME/sandboxes/origin/workspace

names=("sandpod fork" "cp -a (workspace)" "sandpod create --mount"
    "sandpod create --template" "sandpod create --mount --setup")
CMP=${BENCH_COMPARE:-}
[ -z "$CMP" ] || [ -x "$CMP" ] || {
    echo "bench_fork: BENCH_COMPARE is not an executable: $CMP" >&2
    exit 2
}
[ -z "$CMP" ] || names+=("sandpod fork [compare]" "sandpod create --mount [compare]")
declare -A samples
timed() { # NAME CMD...
    local name=$1
    shift
    sync
    local t0 t1
    t0=$(date +%s.%N)
    "$@" >/dev/null
    t1=$(date +%s.%N)
    samples[$name]+="$(python3 -c "print(f'{$t1 - $t0:.4f}')") "
}
echo "== timing: $N interleaved rounds"
for ((i = 1; i <= N; i++)); do
    timed "sandpod fork" "$SP" fork "${url[@]}" origin base --name "f$i"
    timed "cp -a (workspace)" cp -a "$WS" "$W/copy"
    timed "sandpod create --mount" "$SP" create "${url[@]}" --mount "$SRC" --name "h$i"
    timed "sandpod create --template" "$SP" create "${url[@]}" --template tpl --name "t$i"
    timed "sandpod create --mount --setup" "$SP" create "${url[@]}" --mount "$SRC" \
        --setup "$SETUP" --name "s$i" 2>/dev/null
    "$SP" rm --force "${url[@]}" "f$i" "h$i" "t$i" "s$i" >/dev/null
    if [ -n "$CMP" ]; then
        timed "sandpod fork [compare]" "$CMP" fork "${url[@]}" origin base --name "cf$i"
        timed "sandpod create --mount [compare]" "$CMP" create "${url[@]}" --mount "$SRC" \
            --name "ch$i"
        "$SP" rm --force "${url[@]}" "cf$i" "ch$i" >/dev/null
    fi
    rm -rf "$W/copy"
    printf '   round %d: %s\n' "$i" "$(for n in "${names[@]}"; do
        s=${samples[$n]% }
        printf '%s %s; ' "$n" "${s##* }"
    done)"
done

mkdir -p "$(dirname "$OUT")"
rows=()
for n in "${names[@]}"; do
    rows+=("$n" "${samples[$n]}")
done
python3 - "$OUT" "$files" "$bytes" "$N" "$(uname -r)" "$(nproc)" "$(cat /proc/loadavg)" \
    "${BENCH_LOAD_START:-}" "${rows[@]}" <<'PY'
import json, sys, datetime, statistics
out, files, nbytes, n, kernel, cpus, load, load_start = sys.argv[1:9]
rest = sys.argv[9:]
samples = {rest[i]: [float(x) for x in rest[i + 1].split()] for i in range(0, len(rest), 2)}
med = {k: statistics.median(v) for k, v in samples.items()}
fork = med["sandpod fork"]
ratios = {
    "cp_over_fork": round(med["cp -a (workspace)"] / fork, 3),
    "hydrate_over_fork": round(med["sandpod create --mount"] / fork, 3),
}
if "sandpod create --template" in med:
    ratios["setup_over_template"] = round(
        med["sandpod create --mount --setup"] / med["sandpod create --template"], 3)
if "sandpod fork [compare]" in med:
    ratios["compare_fork_over_fork"] = round(med["sandpod fork [compare]"] / fork, 3)
    ratios["compare_create_over_create"] = round(
        med["sandpod create --mount [compare]"] / med["sandpod create --mount"], 3)
machine = {"kernel": kernel, "cpus": int(cpus), "loadavg_at_end": load}
if load_start:
    machine["loadavg_at_start"] = load_start
res = {
    "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    "machine": machine,
    "tree": {"files": int(files), "bytes": int(nbytes)},
    "method": "%s interleaved rounds, sync before each timed command, median" % n,
    "median_seconds": med,
    "samples_seconds": samples,
    "ratios": ratios,
}
with open(out, "w") as fh:
    json.dump(res, fh, indent=2)
    fh.write("\n")
print()
print("| command | median (s) | vs fork |")
print("|---|---:|---:|")
for k, v in med.items():
    print(f"| `{k}` | {v:.3f} | {v / fork:.2f}x |")
print("results written to", out)
PY
