#!/usr/bin/env bash
# The sandbox integration suite of `sandpod mcp --create`
# (tests/contrib/test_mcp_sandbox.py: shell, sessions, cancellation,
# snapshots and restore, events, .env filtering of the mounts, --rm/keep,
# `mcp NAME`) and the hostile apply suite (tests/cmd/test_apply_hostile.sh)
# run unchanged against the kubernetes engine "fake" (the
# Podman-backed fake API server, fake_podman.py): $SANDPOD_ENGINE names it
# the default, so every `sandpod create` of the suite makes a Pod.
# Exits 77 (skip) without Podman, except under CI=true.
#
# Usage: test_suites_remote.sh PATH/TO/sandpod
set -u

SP=${1:?usage: test_suites_remote.sh PATH/TO/sandpod}
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)

# shellcheck disable=SC2034 # podman_lib.sh names the scratch folder by it
PREFIX=sandpod-suites
. "$SRC/tests/cmd/podman_lib.sh"
command -v python3 >/dev/null 2>&1 || skip "python3 is missing"
podman info >/dev/null 2>&1 || skip "podman does not work for $(id -un): $(podman info 2>&1 | tail -n 1)"
. "$HERE/fake_lib.sh"
# test_mcp_sandbox.py names its sandboxes mcp-test-PID(-k).
fake_engine "mcp-test-"

# Rootless kube play does not work on every host (as test_render_kube).
run create --engine fake --name "st$$-probe" --image "$WIMG"
skip_if_play_fails
expect 0 "create --engine fake (probe)"
run rm --force "st$$-probe"
expect 0 "rm the probe"

suite() { # suite NAME CMD...: one suite against the fake engine; its checks all pass.
    local name=$1
    shift
    SANDPOD_TEST_ENGINES=$SANDPOD_HOME/engines.json SANDPOD_ENGINE=fake "$@" \
        >"$T/$name.out" 2>"$T/$name.err"
    rc=$?
    sed "s/^/$name: /" "$T/$name.out"
    check "$name passes against the fake engine (rc $rc)" [ "$rc" = 0 ]
    check "$name ran its checks" grep -Eq '^[1-9][0-9]* passed, 0 failed$' "$T/$name.out"
    [ "$rc" = 0 ] || tail -n 20 "$T/$name.err" | sed "s/^/$name stderr: /"
}
suite mcp_sandbox python3 "$SRC/tests/contrib/test_mcp_sandbox.py" "$SP"
# The way back, attacked from a Pod: the same hostile workload, review,
# apply, --branch and git checks as locally.
suite apply_hostile "$SRC/tests/cmd/test_apply_hostile.sh" "$SP"
check "the suite left no Pod" sh -c "! podman pod ls --format '{{.Name}}' | grep -q '^sp-mcp-test-'"
finish
