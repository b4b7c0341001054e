#!/usr/bin/env bash
# Benchmark `sandpod hydrate` against `cp -a` (and `rsync -a --exclude` when
# rsync is installed) on one generated tree, in the same run.
#
# Usage: tests/bench/bench_hydrate.sh [PATH/TO/sandpod] [REPS]
#   env BENCH_DIR (default /tmp), BENCH_OUT (default tests/bench/results/hydrate.json)
#
# The tree: 10,000 files, about 200 MB: a project part (3,000 files) and a
# node_modules-like folder (7,000 files, about 3/4 of the bytes). Every
# command copies within one filesystem (BENCH_DIR). Method: the tree is read
# once before timing (warm page cache for every contender); one untimed
# warm-up round, then REPS rounds (default 5) in which every command runs
# once, interleaved, each into a fresh destination; the previous
# destination is removed and `sync` runs before every timed run so that no
# writeback of an earlier copy is charged to the next. The median wall time
# of each command is reported.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
SP=${1:-$repo/build-hydrate/sandpod}
REPS=${2:-5}
BASE=${BENCH_DIR:-/tmp}
OUT=${BENCH_OUT:-$here/results/hydrate.json}
[ -x "$SP" ] || {
    echo "bench_hydrate: no sandpod binary at $SP" >&2
    exit 2
}
command -v python3 >/dev/null || {
    echo "bench_hydrate: python3 is needed" >&2
    exit 77
}

W=$(mktemp -d "$BASE/sandpod-bench.XXXXXX")
trap 'rm -rf "$W"' EXIT
SRC=$W/tree

echo "== building the tree in $SRC"
python3 - "$SRC" <<'EOF'
import os, random, sys
root = sys.argv[1]
rnd = random.Random(42)
def put(path, size):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(rnd.randbytes(size))
# Project: 2,900 small files in 58 folders, 100 medium ones (~400 KB).
for i in range(2900):
    put(f"{root}/src/m{i % 58:02d}/f{i}.c", rnd.randint(512, 7 * 1024))
for i in range(100):
    put(f"{root}/assets/a{i}.bin", 400 * 1024)
# node_modules: 6,900 small files in 230 packages, 100 big ones (~1.2 MB).
for i in range(6900):
    put(f"{root}/node_modules/pkg{i % 230:03d}/lib/f{i}.js", rnd.randint(512, 7 * 1024))
for i in range(100):
    put(f"{root}/node_modules/big{i:03d}/dist/bundle.js", 1200 * 1024)
EOF
files=$(find "$SRC" -type f | wc -l)
bytes=$(du -sb "$SRC" | cut -f1)
nm_bytes=$(du -sb "$SRC/node_modules" | cut -f1)
echo "   $files files, $((bytes / 1000000)) MB ($((nm_bytes / 1000000)) MB in node_modules)"
# Warm the page cache: every contender then reads from memory.
find "$SRC" -type f -exec cat {} + >/dev/null

have_rsync=false
command -v rsync >/dev/null && have_rsync=true

# The contenders, each a shell command line that copies $SRC into $D. They
# run interleaved (one round = every contender once), so that a drift in the
# machine's load weighs on all of them alike.
D=$W/dst
names=("cp -a (full tree)" "sandpod hydrate (full tree)")
cmds=("cp -a '$SRC' '$D'" "mkdir '$D' && exec '$SP' hydrate --root '$D' --mount '$SRC'")
if $have_rsync; then
    names+=("rsync -a --exclude node_modules")
    cmds+=("rsync -a --exclude node_modules '$SRC/' '$D/'")
fi
names+=("sandpod hydrate (exclude node_modules)")
cmds+=("mkdir '$D' && exec '$SP' hydrate --root '$D' --mount 'src=$SRC,exclude=node_modules'")

declare -A median
declare -A samples
echo "== timing: a warm-up round, then $REPS interleaved rounds; median"
for ((round = 0; round <= REPS; round++)); do
    for k in "${!names[@]}"; do
        rm -rf "$D"
        sync
        t0=$(date +%s.%N)
        sh -c "${cmds[$k]}" >/dev/null
        t1=$(date +%s.%N)
        rm -rf "$D"
        if ((round > 0)); then
            samples[${names[$k]}]+="$(python3 -c "print(f'{$t1 - $t0:.4f}')") "
        fi
    done
done
for name in "${names[@]}"; do
    median[$name]=$(printf '%s\n' ${samples[$name]} | python3 -c "
import sys
v = sorted(float(x) for x in sys.stdin if x.strip())
n = len(v)
print(f'{(v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2):.4f}')")
    printf '   %-40s median %7.3f s   (%s)\n' "$name" "${median[$name]}" "${samples[$name]% }"
done

cp_full=${median["cp -a (full tree)"]}
sp_full=${median["sandpod hydrate (full tree)"]}
sp_excl=${median["sandpod hydrate (exclude node_modules)"]}
rs_excl=${median["rsync -a --exclude node_modules"]:-}

mkdir -p "$(dirname "$OUT")"
python3 - "$OUT" "$files" "$bytes" "$nm_bytes" "$REPS" "$cp_full" "$sp_full" "$sp_excl" \
    "${rs_excl:-}" "${samples["cp -a (full tree)"]}" "${samples["sandpod hydrate (full tree)"]}" \
    "${samples["sandpod hydrate (exclude node_modules)"]}" \
    "${samples["rsync -a --exclude node_modules"]:-}" "$(uname -r)" \
    "$(df -T "$BASE" | awk 'NR==2 {print $2}')" "$(nproc)" <<'EOF'
import json, sys, datetime
(out, files, nbytes, nm, reps, cp_full, sp_full, sp_excl, rs_excl, s_cp, s_sp, s_spx, s_rs,
 kernel, fstype, cpus) = sys.argv[1:]
f = float
res = {
    "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    "machine": {"kernel": kernel, "filesystem": fstype, "cpus": int(cpus)},
    "tree": {"files": int(files), "bytes": int(nbytes), "node_modules_bytes": int(nm)},
    "method": "page cache warm (tree read once), one untimed warm-up round, then %s "
              "interleaved rounds (every command once per round), sync before each timed run, "
              "median" % reps,
    "median_seconds": {
        "cp -a (full tree)": f(cp_full),
        "sandpod hydrate (full tree)": f(sp_full),
        "sandpod hydrate (exclude node_modules)": f(sp_excl),
    },
    "samples_seconds": {
        "cp -a (full tree)": [f(x) for x in s_cp.split()],
        "sandpod hydrate (full tree)": [f(x) for x in s_sp.split()],
        "sandpod hydrate (exclude node_modules)": [f(x) for x in s_spx.split()],
    },
    "ratios": {
        "hydrate_full_over_cp_full": round(f(sp_full) / f(cp_full), 3),
        "hydrate_excluded_over_cp_full": round(f(sp_excl) / f(cp_full), 3),
    },
}
if rs_excl:
    res["median_seconds"]["rsync -a --exclude node_modules"] = f(rs_excl)
    res["samples_seconds"]["rsync -a --exclude node_modules"] = [f(x) for x in s_rs.split()]
    res["ratios"]["hydrate_excluded_over_rsync_excluded"] = round(f(sp_excl) / f(rs_excl), 3)
with open(out, "w") as fh:
    json.dump(res, fh, indent=2)
    fh.write("\n")
print()
print("| command | median (s) | vs cp -a (full) |")
print("|---|---:|---:|")
for k, v in res["median_seconds"].items():
    print(f"| `{k}` | {v:.3f} | {v / f(cp_full):.2f}x |")
print()
print("results written to", out)
EOF
