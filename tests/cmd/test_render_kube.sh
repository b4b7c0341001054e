#!/usr/bin/env bash
# The rendered Pod run for real by `podman kube play`: the offline busybox
# image as the workload, the sandpod image (contrib/image/
# build-sandpod-image.sh, built from this build's binaries) for the init
# and peer containers. Checked from outside: the workload's pid 1 is the
# agent, installed read-only by the init container; no capability, no new
# privileges, uid 1000, read-only root, writable /tmp, no snapshot store in
# sight. An MCP session through `podman exec -i POD-peer sandpod peer
# connect` writes a file the workload sees in /workspace, and snapshot and
# restore through the peer change what the workload sees. `podman kube
# down` leaves no Pod, container or volume.
#
# Usage: test_render_kube.sh PATH/TO/sandpod
set -u

SP=${1:?usage: test_render_kube.sh PATH/TO/sandpod}
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)

skip() {
    if [ "${CI:-}" = true ] && [ "${2:-}" != soft ]; then
        echo "FAIL: $1 (Podman is required under CI=true)"
        exit 1
    fi
    echo "skipping: $1"
    exit 77
}
command -v python3 >/dev/null 2>&1 || skip "python3 is missing"
command -v podman >/dev/null 2>&1 || skip "podman is not installed"
podman info >/dev/null 2>&1 || skip "podman does not work for $(id -un): $(podman info 2>&1 | tail -n 1)"

T=$(mktemp -d "${TMPDIR:-/tmp}/sandpod-kube.XXXXXX")
POD=
cleanup() {
    if [ -n "$POD" ]; then
        podman kube down "$T/pod.json" >/dev/null 2>&1
        podman pod rm -f "$POD" >/dev/null 2>&1
        podman volume ls --quiet | grep "^$POD-" | xargs -r podman volume rm -f >/dev/null 2>&1
    fi
    rm -rf "$T"
}
trap cleanup EXIT
. "$HERE/lib.sh"

# What DESIGN.md says Podman needs on these hosts: runc, and nofile/nproc
# limits the host allows (Podman's own defaults exceed them). kube play
# takes both from containers.conf only.
nofile=$(ulimit -Hn)
nproc=$(ulimit -Hu)
[ "$nofile" = unlimited ] || [ "$nofile" -gt 1024 ] && nofile=1024
[ "$nproc" = unlimited ] || [ "$nproc" -gt 4096 ] && nproc=4096
cat >"$T/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]
[engine]
runtime = "runc"
EOF
export CONTAINERS_CONF=$T/containers.conf

if ! podman image exists localhost/sandpod-busybox:latest; then
    [ -x /bin/busybox ] || skip "the busybox image is missing and /bin/busybox is not there"
    "$SRC/contrib/image/build-image.sh" >"$T/build.log" 2>&1 || skip "build-image.sh: $(tail -n 1 "$T/build.log")"
fi
IMG=localhost/sandpod:kube-test
if ! SANDPOD=$SP "$SRC/contrib/image/build-sandpod-image.sh" --force "$IMG" >"$T/build.log" 2>&1; then
    bad "build-sandpod-image.sh: $(tail -n 3 "$T/build.log")"
    finish
    exit 1
fi
ok

name=kt$$
run render --name "$name" --pull never --sandpod-image "$IMG" --deadline 600
expect 0 "render"
# What a cluster does that kube play does not: the API server turns
# generateName into a name, and a Pod's volumes are its own. Podman 4.3's
# kube play makes each emptyDir a named volume called by the volume's name,
# which every Pod on the host with that name would share: the volumes get
# the Pod's name as a prefix here.
python3 - "$T/out" "$T/pod.json" <<'PY'
import json, random, sys
pod = json.load(open(sys.argv[1]))
md = pod["metadata"]
md["name"] = md.pop("generateName") + "".join(random.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5))
spec = pod["spec"]
for v in spec["volumes"]:
    v["name"] = md["name"] + "-" + v["name"]
for key in ("initContainers", "containers"):
    for c in spec[key]:
        for m in c["volumeMounts"]:
            m["name"] = md["name"] + "-" + m["name"]
json.dump(pod, open(sys.argv[2], "w"))
PY
POD=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["metadata"]["name"])' "$T/pod.json")
vols_before=$(podman volume ls --quiet | sort)

play() {
    timeout 300 podman kube play "$T/pod.json" >"$T/play.log" 2>&1
    played=$?
}
play
if [ "$played" -ne 0 ] && [ "$(id -u)" != 0 ] && grep -q 'cgroup' "$T/play.log"; then
    # Rootless on a host whose cgroups it may not manage (cgroup v1 here):
    # no limit can be set, as the library drops them for local sandboxes.
    echo "rootless: the Pod's resource limits are left out (cgroups not delegated)"
    podman kube down "$T/pod.json" >/dev/null 2>&1
    podman pod rm -f "$POD" >/dev/null 2>&1
    python3 - "$T/pod.json" <<'PY'
import json, sys
pod = json.load(open(sys.argv[1]))
for key in ("initContainers", "containers"):
    for c in pod["spec"][key]:
        c.pop("resources", None)
json.dump(pod, open(sys.argv[1], "w"))
PY
    play
fi
if [ "$played" -ne 0 ]; then
    msg=$(tail -n 2 "$T/play.log")
    if [ "$(id -u)" != 0 ]; then skip "rootless podman kube play fails here: $msg" soft; fi
    bad "podman kube play: $msg"
    finish
    exit 1
fi
ok
W=$POD-workload
P=$POD-peer

# The peer binds its socket shortly after it starts.
for _ in $(seq 100); do
    podman exec "$P" /sandpod/bin/sandpod peer connect --socket /sandpod/run/peer.sock \
        </dev/null >/dev/null 2>&1 && break
    sleep 0.1
done

wx() { podman exec "$W" "$@" >"$T/out" 2>"$T/err" </dev/null; rc=$?; }

wx cat /proc/1/cmdline
check "the workload's pid 1 is the agent" python3 -c '
import sys; sys.exit(open(sys.argv[1], "rb").read() != b"/.sandpod/bin/agent\0/.sandpod/run\0")' "$T/out"
wx grep -E '^(CapEff|CapPrm|NoNewPrivs):' /proc/1/status
out_has "CapEff:	0000000000000000" "no effective capability"
out_has "CapPrm:	0000000000000000" "no permitted capability"
out_has "NoNewPrivs:	1" "no new privileges"
wx id -u
out_is '1000\n' "the workload runs as uid 1000"
wx touch /.sandpod/bin/x
expect_rc 1 "the agent's folder is read-only"
err_has "Read-only file system" "the agent's folder says read-only"
wx touch /x
expect_rc 1 "the root is read-only"
wx touch /tmp/x
expect_rc 0 "/tmp is writable"
wx ls /sandpod
expect_rc 1 "the workload does not see the store"
wx test -S /.sandpod/run/agent.sock
expect_rc 0 "the agent listens on its socket"

session() {
    python3 "$HERE/../kube/peer_session.py" "$1" -- podman exec -i "$P" /sandpod/bin/sandpod \
        peer connect --socket /sandpod/run/peer.sock >"$T/out" 2>"$T/err"
    rc=$?
}
session '[["write_file", {"path": "hello.txt", "content": "from the peer\n"}], ["snapshot", {"tag": "t1"}], ["write_file", {"path": "hello.txt", "content": "changed\n"}], ["write_file", {"path": "later.txt", "content": "x"}]]'
expect 0 "an MCP session through podman exec and peer connect"
json "every call succeeded" 'all(not r["isError"] for r in j["results"])'
json "the store is the peer's" 'j["results"][1]["structuredContent"]["value"]["store"] == "/sandpod/store"'
wx cat /workspace/hello.txt
out_is 'changed\n' "the workload sees the peer's write"
wx stat -c %u /workspace/hello.txt
out_is '1000\n' "the peer's files are the workload's user's"
session '[["restore", {"snapshot": "t1"}]]'
expect 0 "restore through the peer"
wx cat /workspace/hello.txt
out_is 'from the peer\n' "the workload sees the restored file"
wx test -e /workspace/later.txt
expect_rc 1 "restore removed what came after the snapshot"
# The workload writes; the peer's next snapshot has it.
wx sh -c 'echo from-workload >/workspace/w.txt'
session '[["snapshot", {"tag": "t2"}], ["read_file", {"path": "w.txt"}]]'
json "the peer reads what the workload wrote" '"from-workload" in j["results"][1]["content"][0]["text"]'
# A shell call through the peer runs in the workload's container, by its agent.
session '[["shell", {"command": "tr \"\\\\0\" \" \" </proc/1/cmdline; echo; id -u; pwd; test -e /sandpod/store || echo no-store; echo made >by-shell.txt"}]]'
expect 0 "a shell call through the peer"
json "it ran in the workload (pid 1 the agent, uid 1000, in /workspace, no store)" \
    'j["results"][0]["structuredContent"]["value"]["stdout"] == "/.sandpod/bin/agent /.sandpod/run \n1000\n/workspace\nno-store\n"'
wx cat /workspace/by-shell.txt
out_is 'made\n' "the workload has the shell call's file"

if podman kube down "$T/pod.json" >"$T/down.log" 2>&1; then ok; else bad "kube down: $(tail -n 2 "$T/down.log")"; fi
check "no Pod left" sh -c "! podman pod exists '$POD'"
check "no container left" sh -c "[ -z \"\$(podman ps -a --quiet --filter name='$POD')\" ]"
vols_after=$(podman volume ls --quiet | sort)
# Only this Pod's volumes (kube play names them POD-VOLUME): other tests
# make Pods of their own at the same time.
left=$(comm -13 <(echo "$vols_before") <(echo "$vols_after") | grep "^$POD-" || true)
check "no volume left ($left)" [ -z "$left" ]
check "none of the Pod's volumes left" sh -c "! podman volume ls --quiet | grep -q '^$POD-'"
POD=

finish
