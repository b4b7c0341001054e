#!/usr/bin/env bash
# Benchmark `sandpod apply` against what a user would otherwise do with the
# same change: `cp -a` of the changed folder from the workspace, and
# `git apply` of the same change as a patch, in the same run.
#
# Usage: tests/bench/bench_apply.sh [PATH/TO/sandpod] [ROUNDS]
#   env BENCH_DIR (default /tmp), BENCH_OUT (default
#   tests/bench/results/apply.json), BENCH_APPLY_SIZES (default
#   "10000 20000 40000": files the workload adds to one folder),
#   SANDPOD_URL (default: discovered)
#
# For each size: a host project (a git repository with one file) is made
# into a sandbox whose workload adds SIZE files of 100 bytes to one folder
# (untimed). Then ROUNDS rounds (default 3), each on fresh copies of the
# host project:
#   apply      `sandpod apply NAME --to COPY` (a snapshot of the workspace,
#              the diff, the rules, the writes)
#   cp -a      `cp -a` of the workspace's new folder into a copy
#   git apply  `git apply` of `sandpod apply --patch` (made untimed) in a copy
# Medians are reported, with apply's time per changed file: linear time
# shows as a flat per-file cost across sizes.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
SP=${1:-$repo/build/test/sandpod}
R=${2:-3}
BASE=${BENCH_DIR:-/tmp}
OUT=${BENCH_OUT:-$here/results/apply.json}
SIZES=${BENCH_APPLY_SIZES:-10000 20000 40000}
[ -x "$SP" ] || {
    echo "bench_apply: no sandpod binary at $SP" >&2
    exit 2
}
command -v git >/dev/null || {
    echo "bench_apply: git is needed" >&2
    exit 77
}

W=$(mktemp -d "$BASE/sandpod-bench-apply.XXXXXX")
export SANDPOD_HOME=$W/home
mkdir -p "$SANDPOD_HOME"
cleanup() {
    local d
    for d in "$SANDPOD_HOME"/sandboxes/*/; do
        [ -d "$d" ] && "$SP" rm --force "$(basename "$d")" >/dev/null 2>&1
    done
    rm -rf "$W"
}
trap cleanup EXIT

now_ms() { date +%s%3N; }
# time_ms CMD...: milliseconds the command took (its output dropped).
time_ms() {
    local t0 t1
    sync
    t0=$(now_ms)
    "$@" >/dev/null 2>&1
    t1=$(now_ms)
    echo $((t1 - t0))
}
median() { tr ' ' '\n' | grep . | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

P=$W/project
mkdir -p "$P"
printf 'readme\n' >"$P/README"
git -C "$P" init -q
git -C "$P" add -A
git -C "$P" -c user.email=b@b -c user.name=b commit -qm base

rows=()
for n in $SIZES; do
    name=ba-$n
    "$SP" create --name "$name" --mount "$P" >/dev/null
    "$SP" sh "$name" "mkdir -p many && i=0; while [ \$i -lt $n ]; do printf '%0100d' \$i >many/f\$i.txt; i=\$((i+1)); done" >/dev/null
    ws=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["workspace"])' \
        "$SANDPOD_HOME/sandboxes/$name/sandbox.json")
    "$SP" apply "$name" --patch >"$W/p.patch"
    a=() c=() g=()
    for r in $(seq "$R"); do
        rm -rf "$W/a" "$W/c" "$W/g"
        cp -a "$P" "$W/a"
        cp -a "$P" "$W/c"
        cp -a "$P" "$W/g"
        a+=("$(time_ms "$SP" apply "$name" --to "$W/a" --max-files 1000000)")
        c+=("$(time_ms cp -a "$ws/many" "$W/c/many")")
        g+=("$(time_ms git -C "$W/g" apply "$W/p.patch")")
        [ "$(ls "$W/a/many" | wc -l)" = "$n" ] || {
            echo "bench_apply: apply wrote $(ls "$W/a/many" | wc -l) of $n files" >&2
            exit 1
        }
    done
    am=$(echo "${a[*]}" | median)
    cm=$(echo "${c[*]}" | median)
    gm=$(echo "${g[*]}" | median)
    rows+=("{\"files\": $n, \"apply_ms\": $am, \"cp_ms\": $cm, \"git_apply_ms\": $gm, \"apply_us_per_file\": $((am * 1000 / n)), \"apply_samples\": [$(IFS=,; echo "${a[*]}")]}")
    awk -v n="$n" -v a="$am" -v c="$cm" -v g="$gm" 'BEGIN {
        printf "| %6d files | apply %6d ms (%d us/file) | cp -a %5d ms | git apply %6d ms | apply/cp %.1fx | apply/git apply %.2fx |\n",
            n, a, a * 1000 / n, c, g, a / (c ? c : 1), a / (g ? g : 1) }'
    "$SP" rm --force "$name" >/dev/null
done
mkdir -p "$(dirname "$OUT")"
printf '{"rounds": %d, "rows": [%s]}\n' "$R" "$(IFS=,; echo "${rows[*]}")" >"$OUT"
echo "bench_apply: wrote $OUT"
