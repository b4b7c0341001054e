#!/usr/bin/env bash
# The Kubernetes path over the Podman-backed fake API server
# (tests/kube/fake_podman.py), on loopback, in one run (bench_kube.c):
# a `sandpod render` Pod created and waited Ready over a watch, the first
# command after Ready, MCP tool round trips through the peer on one open
# pods/exec stream, and a fresh pods/exec `true` of ours beside
# `kubectl exec POD -c workload -- true` against the same fake and the
# `podman exec` the fake runs for each (the floor under both).
#
# Usage: tests/bench/bench_kube.sh [--quick]
#   env BUILD (default build-bench, Release), N (tool calls of each kind,
#   default 200), PODS (Pods created, used and deleted one after another:
#   the create → Ready samples; default 3), EXEC_REPS
#   (fresh execs of each client, default 20); --quick: N=20 PODS=1
#   EXEC_REPS=3. Needs python3, openssl, kubectl and a working Podman.
# Writes tests/bench/results/kube.json (machine, load, every row) and prints
# a markdown table. Removes every Pod, volume and image it made.
set -euo pipefail

bench=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$bench/../.." && pwd)
build=${BUILD:-$repo/build-bench}
n=${N:-200} pods=${PODS:-3} reps=${EXEC_REPS:-20}
if [ "${1:-}" = --quick ]; then
    n=20 pods=1 reps=3
fi
say() { printf '%s\n' "$*" >&2; }
for t in kubectl podman; do
    command -v "$t" >/dev/null || { say "bench_kube: $t is missing"; exit 1; }
done

T=$(mktemp -d /tmp/sandpod-bench-kube-XXXXXX)
prefix=sandpod-kbench-$$-
img=localhost/sandpod:kbench-$$
cleanup() {
    set +e
    stop_fake 2>/dev/null
    # What a killed run left: Pods are named from our own generateName.
    podman pod ls --format '{{.Name}}' | grep "^$prefix" | while read -r p; do
        podman pod rm -f -t 0 "$p" >/dev/null 2>&1
    done
    podman volume ls --quiet | grep "^$prefix" | xargs -r podman volume rm -f >/dev/null 2>&1
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
cmake --build "$build" -j"$(nproc)" --target sandpod_cli sandpod_agent bench_kube >/dev/null
sp=$build/sandpod

say "== the sandpod image ($img)"
if ! podman image exists localhost/sandpod-busybox:latest; then
    "$repo/contrib/image/build-image.sh" >"$T/build.log" 2>&1 ||
        { say "build-image.sh: $(tail -n 3 "$T/build.log")"; exit 1; }
fi
SANDPOD=$sp "$repo/contrib/image/build-sandpod-image.sh" --force "$img" >"$T/build.log" 2>&1 ||
    { say "build-sandpod-image.sh: $(tail -n 3 "$T/build.log")"; exit 1; }

"$sp" render --pull never --sandpod-image "$img" --deadline 3600 >"$T/render.json"
python3 -c '
import json, sys
p = json.load(open(sys.argv[1]))
p["metadata"]["generateName"] = sys.argv[3]
json.dump(p, open(sys.argv[2], "w"))' "$T/render.json" "$T/pod.json" "$prefix"

FAKE=fake_podman.py start_fake
write_kubeconfig token
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
say "== bench_kube (N=$n, PODS=$pods, EXEC_REPS=$reps)"
"$build/tests/bench_kube" "https://127.0.0.1:$PORT" "$T/tokens" "$T/ca.pem" "$T/pod.json" \
    "$T/kubeconfig" "$n" "$pods" "$reps" >"$T/result.json"
load_end=$(cut -d' ' -f1-3 /proc/loadavg)
# bench_kube deleted its Pods through the API: Podman must hold nothing of them.
left=$( (podman pod ls --format '{{.Name}}'; podman ps -a --format '{{.Names}}'
    podman volume ls --quiet) | grep -c "^$prefix" || true)

mkdir -p "$bench/results"
python3 - "$T/result.json" "$bench/results/kube.json" "$load_start" "$load_end" "$left" <<'EOF'
import json, os, platform, subprocess, sys, time
r = json.load(open(sys.argv[1]))
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
            if l.startswith("model name")), "")
ver = lambda *a: subprocess.run(a, capture_output=True, text=True).stdout.strip()
r["machine"] = {"nproc": os.cpu_count(), "cpu": cpu, "kernel": platform.release(),
                "podman": ver("podman", "--version"),
                "kubectl": ver("kubectl", "version", "--client", "-o", "json"),
                "loadavg_start": sys.argv[3], "loadavg_end": sys.argv[4]}
try:
    r["machine"]["kubectl"] = json.loads(r["machine"]["kubectl"])["clientVersion"]["gitVersion"]
except (ValueError, KeyError):
    pass
r["date"] = time.strftime("%Y-%m-%d")
r["left_after_delete"] = int(sys.argv[5])  # Podman pods, containers, volumes
ours, kc = r["exec_ours"]["p50_ms"], r["exec_kubectl"]["p50_ms"]
r["exec_kubectl_over_ours"] = kc / ours
r["kubectl_exec_over_tool_shell"] = kc / r["tool_shell"]["p50_ms"]
r["exec_ours_over_podman_floor"] = ours / r["exec_podman_floor"]["p50_ms"]
r["tool_shell_p50_goal_met"] = r["tool_shell"]["p50_ms"] <= 5
json.dump(r, open(sys.argv[2], "w"), indent=2)
m = r["machine"]
print("machine: %d CPUs, %s, kernel %s, %s, kubectl %s; load %s -> %s\n" % (
    m["nproc"], cpu, m["kernel"], m["podman"], m["kubectl"], m["loadavg_start"],
    m["loadavg_end"]))
print("| row | n | p50 ms | p90 ms | p99 ms |")
print("|---|---:|---:|---:|---:|")
for k, label in (("tool_shell", "tool `shell` `true`, one open stream (peer + agent)"),
                 ("tool_read_file", "tool `read_file`, same stream"),
                 ("first_command", "Ready → first `true` (fresh exec, ours)"),
                 ("exec_ours", "fresh pods/exec `true`, ours"),
                 ("exec_kubectl", "`kubectl exec POD -c workload -- true`"),
                 ("exec_podman_floor", "`podman exec CTR true` (what the fake runs per exec)"),
                 ("create_ready", "Pod create → Ready (watched)"),
                 ("delete", "Pod delete (the API call; nothing left after)")):
    if k not in r:
        continue
    s = r[k]
    print("| %s | %d | %.2f | %.2f | %.2f |" % (label, s["n"], s["p50_ms"], s["p90_ms"],
                                              s["p99_ms"]))
print("\nkubectl exec / our exec: %.2fx; kubectl exec / tool call: %.0fx; our exec / podman "
      "exec: %.2fx; tool p50 <= 5 ms: %s" % (
          r["exec_kubectl_over_ours"], r["kubectl_exec_over_tool_shell"],
          r["exec_ours_over_podman_floor"], "yes" if r["tool_shell_p50_goal_met"] else "no"))
print("left in Podman after the deletes: %d" % r["left_after_delete"])
print("written: %s" % sys.argv[2])
if r["left_after_delete"]:
    sys.exit("bench_kube: the deleted Pods left something in Podman")
EOF
