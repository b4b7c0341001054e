#!/usr/bin/env bash
# The Python package's sandbox integration suite
# (tests/contrib/python/test_sandbox_integration.py: lifecycle, commands,
# sessions, snapshots, fork, apply, tools, asyncio) run against the
# kubernetes engine "fake" (the Podman-backed fake API server,
# fake_podman.py): with $SANDPOD_ENGINE and $SANDPOD_TEST_ENGINES set, every
# sandbox the suite makes is a Pod, and what it looked at in the host
# workspace it looks at through the sandbox. Exits 77 (skip) without Podman
# or pytest, except under CI=true.
#
# Usage: test_python_remote.sh PATH/TO/sandpod PATH/TO/libsandpod.so
#   (SANDPOD_CLI and SANDPOD_TOOLS_LIBRARY in the environment, as for
#   test_python_integration)
set -u

SP=${1:?usage: test_python_remote.sh PATH/TO/sandpod PATH/TO/libsandpod.so}
LIB=${2:?usage: test_python_remote.sh PATH/TO/sandpod PATH/TO/libsandpod.so}
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)

# shellcheck disable=SC2034 # podman_lib.sh names the scratch folder by it
PREFIX=sandpod-pyremote
# A sanitized library: the Python integration suites run against the plain
# build (CI's normal and rootless stages), as tests/contrib/python/run.sh
# decides; a skip, also under CI=true.
if ldd "$LIB" 2>/dev/null | grep -q libasan; then
    echo "skip: the Python integration tests run against the plain build, not a sanitized one"
    exit 77
fi
. "$SRC/tests/cmd/podman_lib.sh"
/usr/bin/python3 -c 'import pytest' 2>/dev/null || skip "python3-pytest is missing"
podman info >/dev/null 2>&1 || skip "podman does not work for $(id -un): $(podman info 2>&1 | tail -n 1)"
. "$HERE/fake_lib.sh"
# The suite's sandboxes have fixed names (py-life, ...) or generated ones:
# at exit every Pod the fake still knows is removed (then fake_engine's
# cleanup, whose prefix matches nothing else).
fake_engine "pyr$$-"
fake_pods() { # the Pods the fake knows, one name a line
    curl -sf --cacert "$T/ca.pem" -H 'Authorization: Bearer token-one' \
        "https://127.0.0.1:$PORT/api/v1/namespaces/default/pods" |
        /usr/bin/python3 -c 'import json,sys; [print(p["metadata"]["name"]) for p in json.load(sys.stdin)["items"]]'
}
remove_fake_pods() {
    local p
    if [ -n "${FAKE_PID:-}" ]; then
        fake_pods 2>/dev/null | while read -r p; do
            podman pod rm -f -t 0 "$p" >/dev/null 2>&1
            podman volume ls --quiet | grep "^$p-" | xargs -r podman volume rm -f >/dev/null 2>&1
        done
    fi
    fake_engine_cleanup
}
trap remove_fake_pods EXIT

# Rootless kube play does not work on every host (as test_render_kube).
run create --engine fake --name "pyr$$-probe" --image "$WIMG"
skip_if_play_fails
expect 0 "create --engine fake (probe)"
run rm --force "pyr$$-probe"
expect 0 "rm the probe"

SANDPOD_TEST_ENGINES=$SANDPOD_HOME/engines.json SANDPOD_ENGINE=fake SANDPOD_TEST_IMAGE=$WIMG \
    "$SRC/tests/contrib/python/run.sh" "$LIB" \
    "$SRC/tests/contrib/python/test_sandbox_integration.py" -m integration -rs >"$T/pytest.out" 2>&1
rc=$?
sed 's/^/pytest: /' "$T/pytest.out"
check "the suite passes against the fake engine (rc $rc)" [ "$rc" = 0 ]
check "the suite ran its tests" grep -Eq '^[0-9]+ passed' "$T/pytest.out"
no_pods() { # the fake answers, with no Pod
    local left
    left=$(fake_pods) || return 1
    [ -z "$left" ] || { echo "left: $left"; return 1; }
}
check "the suite left no Pod" no_pods
finish
