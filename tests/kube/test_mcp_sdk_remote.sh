#!/usr/bin/env bash
# The official-SDK MCP client run (tests/contrib/mcp_sdk/test.mjs) against
# `sandpod mcp NAME` on a sandbox of the kubernetes engine "fake" (the
# Podman-backed fake API server, fake_podman.py), and the same run against
# a local sandbox beside it: each run checks its own answers; their
# per-tool profiles (SANDPOD_SDK_PROFILE) must then be the same but for
# the differences listed below (contrib/docs/kubernetes.md, "MCP on a
# remote sandbox"). Exits 77 (skip) without node/npm or
# Podman, except under CI=true.
#
# Usage: test_mcp_sdk_remote.sh PATH/TO/sandpod
set -u

SP=${1:?usage: test_mcp_sdk_remote.sh PATH/TO/sandpod}
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
SDK=$SRC/tests/contrib/mcp_sdk

# shellcheck disable=SC2034 # podman_lib.sh names the scratch folder by it
PREFIX=sandpod-mcpsdk
. "$SRC/tests/cmd/podman_lib.sh"
command -v node >/dev/null 2>&1 || skip "node is not installed"
command -v npm >/dev/null 2>&1 || skip "npm is not installed"
if [ ! -d "$SDK/node_modules/@modelcontextprotocol/sdk" ]; then
    (cd "$SDK" && npm ci --no-audit --no-fund >&2) || skip "npm ci failed (no registry?)"
fi
podman info >/dev/null 2>&1 || skip "podman does not work for $(id -un): $(podman info 2>&1 | tail -n 1)"
. "$HERE/fake_lib.sh"
fake_engine "ms$$-"

R=ms$$-r
run create --engine fake --name "$R" --image "$WIMG"
skip_if_play_fails
expect 0 "create --engine fake $R"
L=ms$$-l
run create --name "$L" --image "$WIMG"
expect 0 "create $L (local)"

# sdk NAME WHAT: test.mjs against `sandpod mcp NAME`, its profile in
# $T/WHAT.json; every check of the run passes.
SANITIZED=0
ldd "$SP" 2>/dev/null | grep libasan >/dev/null && SANITIZED=1
sdk() {
    SANDPOD_SDK_SANITIZED=$SANITIZED SANDPOD_SDK_SANDBOX=$1 SANDPOD_SDK_PROFILE=$T/$2.json node "$SDK/test.mjs" "$SP" \
        >"$T/$2.out" 2>"$T/$2.err"
    rc=$?
    ran_ok "the SDK run against the $2 sandbox $1" "$T/$2.out" "$T/$2.err" 40
    check "... ran to its end" grep -q ' 0 failed$' "$T/$2.out"
    sed "s/^/$2: /" "$T/$2.out"
}
sdk "$L" local
sdk "$R" remote

# The two profiles, call by call. Ids, commits and the paths of the store
# and workspace are the engine's own; past those they must be alike: the
# snapshots (both have "base" from create), and reads beside a running
# shell answered at once on both (requests share one peer stream, answers
# come back by id). A command cancelled while it waits behind such a read
# is never run, as locally: test.mjs checks it.
python3 - "$T/local.json" "$T/remote.json" "$SANDPOD_HOME/sandboxes/$L" >"$T/cmp" 2>&1 <<'EOF2'
import json, re, sys
l, r = (json.load(open(f)) for f in sys.argv[1:3])
home = sys.argv[3]
bad = []
def norm(c, store, root):
    c = dict(c)
    ids = re.findall(r'"(?:id|commit)":"([^"]*)"', c.get("value", ""))
    for k in ("value", "text"):
        v = c.get(k, "")
        v = v.replace(f'"root":"{root}"', '"root":"ROOT"').replace(f'"store":"{store}"', '"store":"STORE"')
        v = v.replace(f" in {store};", " in STORE;")
        for i in ids:
            v = v.replace(i, "ID")
        # Rootless Podman on cgroup v1 cannot pause a local container; the
        # snapshot tools say so there (a Pod's peer never pauses).
        v = re.sub(r"note: the container kept running meanwhile.*?\\n", "", v)
        c[k] = v
    return c
def tags(c):
    return re.findall(r'"tag":"([^"]*)"', c["value"])
if l["tools"] != r["tools"]:
    bad.append(f"tools: {l['tools']} vs {r['tools']}")
if len(l["calls"]) != len(r["calls"]):
    bad.append(f"{len(l['calls'])} calls vs {len(r['calls'])}")
# The store and workspace paths, with their digits blurred as test.mjs does.
lstore, lroot = (re.sub("[0-9]+", "N", home + p) for p in ("/snapshots.git", "/workspace"))
for a, b in zip(l["calls"], r["calls"]):
    if a["name"] == "list_snapshots":
        if tags(a) != tags(b):
            bad.append(f"list_snapshots: {tags(a)} vs {tags(b)}")
        continue
    na, nb = norm(a, lstore, lroot), norm(b, "/sandpod/store", "/workspace")
    if na != nb:
        bad.append(f"{a['name']} {a['args']}:\n  local  {na}\n  remote {nb}")
lb, rb = l["beside_shell"], r["beside_shell"]
if not lb["reads_before_shell"] or max(lb["read_ms"]) > 1500:
    bad.append(f"local reads waited for the shell: {lb}")
if not rb["reads_before_shell"] or max(rb["read_ms"]) > 1500:
    bad.append(f"remote reads waited for the shell: {rb}")
print(f"{len(l['calls'])} calls compared; reads beside a 3 s shell: local {lb['read_ms']} ms, remote {rb['read_ms']} ms")
for b in bad:
    print("DIFF", b)
sys.exit(1 if bad else 0)
EOF2
rc=$?
cat "$T/cmp"
: >"$T/err"
expect_rc 0 "local and remote answers alike, reads beside a running shell on both"
finish
