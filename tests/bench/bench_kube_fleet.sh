#!/usr/bin/env bash
# A fleet of sandboxes on a kubernetes engine, over the Podman-backed fake
# API server (tests/kube/fake_podman.py), in one run: FLEET sandboxes, PAR
# at a time, each `sandpod create --engine fake`, one `sandpod sh NAME
# true`, one `sandpod call NAME read_file`, `sandpod rm --force` — beside
# the same count done by hand with kubectl at the same parallelism
# (`kubectl create -f` of the `sandpod render` Pod, `kubectl wait
# --for=condition=Ready`, `kubectl exec ... -- true`, `kubectl delete`). Then nothing may be left: no Podman pod, container or volume of
# the run, no sandbox folder, `gc --engine --dry-run` empty, the fake's Pod
# list empty, its open fds back where they were.
#
# Usage: tests/bench/bench_kube_fleet.sh [--quick]
#   env BUILD (default build-bench, Release), FLEET (default 50), PAR
#   (default 4); --quick: FLEET=4 PAR=2. Needs python3, openssl, kubectl
#   and a working Podman. Writes tests/bench/results/kube_fleet.json and
#   prints a table.
set -euo pipefail

bench=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$bench/../.." && pwd)
build=${BUILD:-$repo/build-bench}
fleet=${FLEET:-50} par=${PAR:-4}
if [ "${1:-}" = --quick ]; then
    fleet=4 par=2
fi
say() { printf '%s\n' "$*" >&2; }
for t in kubectl podman python3; do
    command -v "$t" >/dev/null || { say "bench_kube_fleet: $t is missing"; exit 1; }
done

T=$(mktemp -d /tmp/sandpod-bench-fleet-XXXXXX)
run=fl$$
img=localhost/sandpod:fleet-$$
export SANDPOD_HOME=$T/home
mkdir -p "$SANDPOD_HOME"
cleanup() {
    set +e
    for d in "$SANDPOD_HOME"/sandboxes/*/; do
        [ -d "$d" ] && "$sp" rm --force "$(basename "$d")" >/dev/null 2>&1
    done
    stop_fake 2>/dev/null
    podman pod ls --format '{{.Name}}' | grep -E "^(sp-$run|$run)" | while read -r p; do
        podman pod rm -f -t 0 "$p" >/dev/null 2>&1
    done
    podman volume ls --quiet | grep -E "^(sp-$run|$run)" | xargs -r podman volume rm -f >/dev/null 2>&1
    podman rmi "$img" >/dev/null 2>&1
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# shellcheck source-path=SCRIPTDIR source=../kube/fake_lib.sh
. "$repo/tests/kube/fake_lib.sh"

say "== building ($build)"
if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build "$build" -j"$(nproc)" --target sandpod_cli sandpod_agent >/dev/null
sp=$build/sandpod
if ! podman image exists localhost/sandpod-busybox:latest; then
    "$repo/contrib/image/build-image.sh" >"$T/build.log" 2>&1 ||
        { say "build-image.sh: $(tail -n 3 "$T/build.log")"; exit 1; }
fi
SANDPOD=$sp "$repo/contrib/image/build-sandpod-image.sh" --force "$img" >"$T/build.log" 2>&1 ||
    { say "build-sandpod-image.sh: $(tail -n 3 "$T/build.log")"; exit 1; }

FAKE=fake_podman.py start_fake
write_kubeconfig token
cat >"$SANDPOD_HOME/engines.json" <<EOF
{"engines": {"fake": {"kind": "kubernetes", "kubeconfig": "$T/kubeconfig",
                      "image": "$img", "namespace": "default", "accept": "userns,seccomp"}}}
EOF
fds() { find "/proc/$FAKE_PID/fd" -mindepth 1 -maxdepth 1 | wc -l; }
fd_start=$(fds)
load_start=$(cut -d' ' -f1-3 /proc/loadavg)

# t NAME STEP CMD...: time one step into $T/times (step ms ok).
t() {
    local step=$1
    shift
    local s e rc=0
    s=$(date +%s%N)
    "$@" >/dev/null 2>>"$T/errors" || rc=$?
    e=$(date +%s%N)
    echo "$step $(((e - s) / 1000000)) $rc" >>"$T/times"
}
export -f t
export T sp

one_sandpod() {
    local name=$1
    t create "$sp" create --engine fake --name "$name" --image localhost/sandpod-busybox:latest
    t sh "$sp" sh "$name" true
    t call "$sp" call "$name" list_dir '{"path": "."}'
    t rm "$sp" rm --force "$name"
}
one_kubectl() {
    local i=$1 pod
    local k="kubectl --kubeconfig $T/kubeconfig"
    t kcreate sh -c "$k create --validate=false -f $T/pod-$i.json -o name > $T/kpod-$i"
    pod=$(sed 's|^pod/||' "$T/kpod-$i")
    t kwait $k wait --for=condition=Ready "pod/$pod" --timeout=300s
    t kexec $k exec "$pod" -c workload -- true
    t kdelete $k delete pod "$pod"
}
export -f one_sandpod one_kubectl

say "== $fleet sandboxes, $par at a time (sandpod)"
s=$(date +%s%N)
seq "$fleet" | xargs -P "$par" -I{} bash -c "one_sandpod $run-{}"
wall_sandpod=$((($(date +%s%N) - s) / 1000000))

# The same Pods by hand: sandpod's rendered spec, one name each.
"$sp" render --pull never --image localhost/sandpod-busybox:latest --sandpod-image "$img" \
    --deadline 3600 >"$T/render.json"
for i in $(seq "$fleet"); do
    python3 -c '
import json, sys
p = json.load(open(sys.argv[1]))
p["metadata"]["generateName"] = sys.argv[3]
json.dump(p, open(sys.argv[2], "w"))' "$T/render.json" "$T/pod-$i.json" "$run-k$i-"
done
say "== $fleet Pods, $par at a time (kubectl)"
s=$(date +%s%N)
seq "$fleet" | xargs -P "$par" -I{} bash -c "one_kubectl {}"
wall_kubectl=$((($(date +%s%N) - s) / 1000000))
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

sleep 1
fd_end=$(fds)
left_podman=$( (podman pod ls --format '{{.Name}}'; podman ps -a --format '{{.Names}}'
    podman volume ls --quiet) | grep -cE "^(sp-$run|$run)" || true)
left_dirs=$(find "$SANDPOD_HOME/sandboxes" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
left_gc=$("$sp" gc --engine fake --dry-run | wc -l)
left_pods=$(kubectl --kubeconfig "$T/kubeconfig" get pods -o name 2>/dev/null | wc -l)

mkdir -p "$bench/results"
python3 - "$T/times" "$bench/results/kube_fleet.json" "$fleet" "$par" "$wall_sandpod" \
    "$wall_kubectl" "$load_start" "$load_end" "$left_podman" "$left_dirs" "$left_gc" \
    "$left_pods" "$fd_start" "$fd_end" <<'EOF'
import json, os, sys, time
times, out = sys.argv[1], sys.argv[2]
fleet, par, wall_sp, wall_k = (int(x) for x in sys.argv[3:7])
steps = {}
failed = 0
for line in open(times):
    step, ms, rc = line.split()
    steps.setdefault(step, []).append(int(ms))
    failed += rc != "0"
def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]
r = {"date": time.strftime("%Y-%m-%d"), "fleet": fleet, "parallel": par,
     "nproc": os.cpu_count(), "loadavg_start": sys.argv[7], "loadavg_end": sys.argv[8],
     "wall_ms_sandpod": wall_sp, "wall_ms_kubectl": wall_k, "failed_steps": failed,
     "left": {"podman": int(sys.argv[9]), "sandbox_dirs": int(sys.argv[10]),
              "gc_dry_run_lines": int(sys.argv[11]), "fake_pods": int(sys.argv[12])},
     "fake_fds": {"start": int(sys.argv[13]), "end": int(sys.argv[14])},
     "steps": {k: {"n": len(v), "p50_ms": pct(v, 50), "p90_ms": pct(v, 90)}
               for k, v in steps.items()}}
json.dump(r, open(out, "w"), indent=2)
print("%d sandboxes, %d at a time, %d CPUs, load %s -> %s\n" % (
    fleet, par, r["nproc"], r["loadavg_start"], r["loadavg_end"]))
print("| step | sandpod p50 / p90 ms | by hand with kubectl p50 / p90 ms |")
print("|---|---:|---:|")
s = r["steps"]
for a, b, label in (("create", "kcreate", "create (sandpod: to Ready; kubectl: the POST)"),
                    (None, "kwait", "wait for Ready (kubectl)"),
                    ("sh", "kexec", "a command (`sandpod sh NAME true` / `kubectl exec`)"),
                    ("call", None, "a tool call (`sandpod call NAME list_dir`)"),
                    ("rm", "kdelete", "remove")):
    fa = "%d / %d" % (s[a]["p50_ms"], s[a]["p90_ms"]) if a in s else "-"
    fb = "%d / %d" % (s[b]["p50_ms"], s[b]["p90_ms"]) if b in s else "-"
    print("| %s | %s | %s |" % (label, fa, fb))
print("\nwhole fleet: sandpod %.1f s, kubectl %.1f s (%.2fx); failed steps: %d" % (
    wall_sp / 1000, wall_k / 1000, wall_k / wall_sp, failed))
print("left: %s; fake fds %d -> %d" % (r["left"], r["fake_fds"]["start"], r["fake_fds"]["end"]))
print("written: %s" % out)
if failed or any(r["left"].values()):
    sys.exit("bench_kube_fleet: a step failed or something was left")
EOF
