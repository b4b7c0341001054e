#!/usr/bin/env bash
# Benchmark sandpod snapshots against the reference implementation's git
# commands on the same tree, in the same run.
#
# Usage: tests/bench/bench_snapshot.sh [PATH/TO/sandpod] [REPS] [PATH/TO/bench_snapshot_tracked]
#   env BENCH_DIR (default /tmp), BENCH_OUT (default tests/bench/results/snapshot.json)
#
# The tree: 10,000 files (100 B to 4 KiB) in 100 folders, src/dXX/sY/fZZZ.txt,
# copied three times (identical content) so that no contender sees another's
# changes: one for the git CLI, one for the sandpod CLI, one for a
# long-lived process with change tracking (bench_snapshot_tracked).
#
# Cases, each timed as wall time of the whole command (process start
# included) with $EPOCHREALTIME, median of REPS (default 7):
#   first      first snapshot into an empty store
#   nochange   a snapshot with nothing changed
#   ten        a snapshot after 10 files changed (appended to)
#   restore10  a restore of the first snapshot after 10 files changed
# git:     git add -A && git commit -q --allow-empty -m s    (snapshot)
#          git reset -q --hard FIRST && git clean -xfdq        (restore)
#          (--git-dir/--work-tree, gc.auto=0, as the reference does)
# sandpod: sandpod snapshot|restore --root TREE --store STORE
# tracked: sp_snapshot_create/sp_snapshot_restore in one process that
#          opened the store with track_changes (the first snapshot includes
#          the open, which walks and reads the whole tree).
# oneshot: the same library calls as the CLI, one operation per process,
#          from bench_snapshot_tracked --oneshot: a binary that links only
#          what the snapshot module needs, to show what the CLI's own
#          startup costs (since libcurl and libarchive load on first use,
#          about nothing).
# Also reported: a bare stat walk of the tree (find -printf %s).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
SP=${1:-$repo/build-snap/sandpod}
REPS=${2:-7}
TRACKED=${3:-$(dirname "$SP")/tests/bench_snapshot_tracked}
BASE=${BENCH_DIR:-/tmp}
OUT=${BENCH_OUT:-$here/results/snapshot.json}
[ -x "$SP" ] || {
    echo "bench_snapshot: no sandpod binary at $SP" >&2
    exit 2
}
command -v git >/dev/null || {
    echo "bench_snapshot: git is needed for the reference" >&2
    exit 77
}
command -v python3 >/dev/null || {
    echo "bench_snapshot: python3 is needed" >&2
    exit 77
}
[ -n "${EPOCHREALTIME:-}" ] || {
    echo "bench_snapshot: bash 5 (EPOCHREALTIME) is needed" >&2
    exit 77
}

W=$(mktemp -d "$BASE/sandpod-snapbench.XXXXXX")
trap 'rm -rf "$W"' EXIT

echo "== building the tree in $W/tree-git"
python3 - "$W/tree-git" <<'EOF'
import os, random, sys
root = sys.argv[1]
rnd = random.Random(42)
for i in range(10000):
    d = f"{root}/src/d{i // 500:02d}/s{i // 100 % 5}"
    os.makedirs(d, exist_ok=True)
    with open(f"{d}/f{i % 100:03d}.txt", "wb") as f:
        f.write(rnd.randbytes(rnd.randint(100, 4096)))
EOF
cp -a "$W/tree-git" "$W/tree-sp"
cp -a "$W/tree-git" "$W/tree-tr"
cp -a "$W/tree-git" "$W/tree-os"
sleep 1 # older than any clock tick a first walk starts in

G=(git -c user.name=bench -c user.email=bench@localhost -c gc.auto=0 -c commit.gpgsign=false
    -c core.fsmonitor=false --git-dir="$W/git.git" --work-tree="$W/tree-git")

# ms since t0 (EPOCHREALTIME is seconds with microseconds).
t0=0
start() { t0=$EPOCHREALTIME; }
elapsed() {
    local t1=$EPOCHREALTIME
    local a=${t0/./} b=${t1/./}
    echo $(((10#$b - 10#$a) / 1000)).$(printf '%03d' $(((10#$b - 10#$a) % 1000)))
}

# change_ten TREE ROUND TAG: the same ten files bench_snapshot_tracked changes.
change_ten() {
    local tree=$1 round=$2 tag=$3 k i
    for k in 0 1 2 3 4 5 6 7 8 9; do
        i=$(((round * 10 + k) * 97 % 10000))
        printf '%s change %d %d\n' "$tag" "$round" "$k" >>"$(printf '%s/src/d%02d/s%d/f%03d.txt' \
            "$tree" $((i / 500)) $((i / 100 % 5)) $((i % 100)))"
    done
}

declare -A S # samples, space-separated, per key

add() { S[$1]="${S[$1]:-} $2"; }

echo "== first snapshot ($REPS rounds each, fresh store every time)"
for r in $(seq "$REPS"); do
    rm -rf "$W/git.git" "$W/store-sp"
    git init -q --bare "$W/git.git"
    git --git-dir="$W/git.git" config core.bare false
    sync
    start
    "${G[@]}" add -A && "${G[@]}" commit -q --allow-empty -m s
    add git_first "$(elapsed)"
    sync
    start
    "$SP" snapshot --root "$W/tree-sp" --store "$W/store-sp" >/dev/null
    add sp_first "$(elapsed)"
done
HAVE_OS=0
[ -x "$TRACKED" ] && HAVE_OS=1
OS=("$TRACKED" --oneshot)
if [ $HAVE_OS = 1 ]; then
    "${OS[@]}" snapshot "$W/tree-os" "$W/store-os"
    FIRST_OS=$("$SP" snapshots --root "$W/tree-os" --store "$W/store-os" --json |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["snapshots"][0]["id"])')
fi
FIRST_GIT=$("${G[@]}" rev-parse HEAD)
FIRST_SP=$("$SP" snapshots --root "$W/tree-sp" --store "$W/store-sp" --json |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["snapshots"][0]["id"])')

echo "== stat walk, no-change snapshot, 10 changed, restore of 10 changed"
for r in $(seq "$REPS"); do
    start
    find "$W/tree-sp" -printf '%s\n' >/dev/null
    add stat_walk "$(elapsed)"

    start
    "${G[@]}" add -A && "${G[@]}" commit -q --allow-empty -m s
    add git_nochange "$(elapsed)"
    start
    "$SP" snapshot --root "$W/tree-sp" --store "$W/store-sp" >/dev/null
    add sp_nochange "$(elapsed)"
    if [ $HAVE_OS = 1 ]; then
        start
        "${OS[@]}" snapshot "$W/tree-os" "$W/store-os"
        add os_nochange "$(elapsed)"
    fi

    change_ten "$W/tree-git" "$r" snap
    change_ten "$W/tree-sp" "$r" snap
    change_ten "$W/tree-os" "$r" snap
    start
    "${G[@]}" add -A && "${G[@]}" commit -q --allow-empty -m s
    add git_ten "$(elapsed)"
    start
    "$SP" snapshot --root "$W/tree-sp" --store "$W/store-sp" >/dev/null
    add sp_ten "$(elapsed)"
    if [ $HAVE_OS = 1 ]; then
        start
        "${OS[@]}" snapshot "$W/tree-os" "$W/store-os"
        add os_ten "$(elapsed)"
    fi

    change_ten "$W/tree-git" $((r + 1000)) restore
    change_ten "$W/tree-sp" $((r + 1000)) restore
    change_ten "$W/tree-os" $((r + 1000)) restore
    start
    "${G[@]}" reset -q --hard "$FIRST_GIT" && "${G[@]}" clean -xfdq
    add git_restore10 "$(elapsed)"
    start
    "$SP" restore --root "$W/tree-sp" --store "$W/store-sp" "$FIRST_SP" >/dev/null
    add sp_restore10 "$(elapsed)"
    if [ $HAVE_OS = 1 ]; then
        start
        "${OS[@]}" restore "$W/tree-os" "$W/store-os" "$FIRST_OS"
        add os_restore10 "$(elapsed)"
    fi
done

# The trees must agree after all that: both were restored to the first state.
for t in tree-sp tree-os; do
    if [ -d "$W/$t" ] && [ $t != tree-os -o $HAVE_OS = 1 ] && ! diff -r "$W/tree-git" "$W/$t" >/dev/null; then
        echo "bench_snapshot: the git tree and $t differ after the restores" >&2
        exit 1
    fi
done

TR_JSON="{}"
if [ -x "$TRACKED" ]; then
    echo "== long-lived process with change tracking"
    TR_JSON=$("$TRACKED" "$W/tree-tr" "$W/store-tr" "$REPS")
else
    echo "bench_snapshot: no $TRACKED; skipping the tracked numbers" >&2
fi

fs=$(df --output=fstype "$W" 2>/dev/null | tail -n 1 || stat -f -c %T "$W")
python3 - "$OUT" "$REPS" "$fs" "$TR_JSON" \
    "${S[stat_walk]}" "${S[git_first]}" "${S[sp_first]}" "${S[git_nochange]}" "${S[sp_nochange]}" \
    "${S[git_ten]}" "${S[sp_ten]}" "${S[git_restore10]}" "${S[sp_restore10]}" \
    "${S[os_nochange]:-}" "${S[os_ten]:-}" "${S[os_restore10]:-}" <<'EOF'
import json, os, platform, statistics, sys, time
out, reps, fs, tr = sys.argv[1], int(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4])
keys = ["stat_walk", "git_first", "sp_first", "git_nochange", "sp_nochange", "git_ten", "sp_ten",
        "git_restore10", "sp_restore10", "os_nochange", "os_ten", "os_restore10"]
samples = {k: [float(x) for x in v.split()] for k, v in zip(keys, sys.argv[5:]) if v.split()}
med = {k: round(statistics.median(v), 3) for k, v in samples.items()}
tracked = {}
if tr:
    tracked = {"first": round(tr["first_ms"], 3), "nochange": tr["nochange"]["median_ms"],
               "ten": tr["ten_changed"]["median_ms"], "restore10": tr["restore_ten"]["median_ms"]}
def ratio(a, b):
    return round(a / b, 2) if b else None
rows = [("first snapshot", "first"), ("snapshot, nothing changed", "nochange"),
        ("snapshot, 10 files changed", "ten"), ("restore, 10 files changed", "restore10")]
print()
print(f"{'case':28} {'git CLI':>9} {'sandpod CLI':>11} {'one-shot':>9} {'tracked':>9} "
      f"{'git/CLI':>8} {'git/1shot':>9} {'git/tracked':>11}")
result_rows = []
def fmt(v, w):
    return f"{('%.1fms' % v) if v is not None else '-':>{w}}"
def fx(v, w):
    return f"{(str(v) + 'x') if v else '-':>{w}}"
for label, k in rows:
    g, s, t, o = med[f"git_{k}"], med[f"sp_{k}"], tracked.get(k), med.get(f"os_{k}")
    r1, r2, r3 = ratio(g, s), (ratio(g, t) if t else None), (ratio(g, o) if o else None)
    print(f"{label:28} {fmt(g, 9)} {fmt(s, 11)} {fmt(o, 9)} {fmt(t, 9)} {fx(r1, 8)} {fx(r3, 9)} "
          f"{fx(r2, 11)}")
    result_rows.append({"case": label, "git_cli_ms": g, "sandpod_cli_ms": s, "oneshot_ms": o,
                        "tracked_ms": t, "speedup_cli": r1, "speedup_oneshot": r3,
                        "speedup_tracked": r2})
print(f"{'bare stat walk (find)':28} {fmt(med['stat_walk'], 9)}")
doc = {
    "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    "machine": {"kernel": platform.release(), "filesystem": fs, "cpus": os.cpu_count()},
    "tree": {"files": 10000, "folders": 100, "file_bytes": "100..4096 random"},
    "method": f"wall time of each whole command ($EPOCHREALTIME), median of {reps} rounds, "
              "contenders interleaved within each round; page cache warm; git with "
              "--git-dir/--work-tree and gc.auto=0; one-shot = the library calls the CLI makes, "
              "one per process, in a binary without the CLI's other dependencies; tracked = one "
              "process with track_changes (bench_snapshot_tracked)",
    "results": result_rows,
    "bare_stat_walk_ms": med["stat_walk"],
    "goals": {"cli_vs_git_incremental": 2.0, "tracked_vs_git_incremental": 10.0},
    "median_ms": med,
    "samples_ms": samples,
    "tracked": tr,
}
os.makedirs(os.path.dirname(out), exist_ok=True)
with open(out, "w") as f:
    json.dump(doc, f, indent=2)
    f.write("\n")
print(f"\nwrote {out}")
EOF
