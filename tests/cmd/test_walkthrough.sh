#!/usr/bin/env bash
# The README's walk-through (the fenced block after `<!-- walkthrough -->`),
# run as written there from the source tree with this build's sandpod first
# on PATH, a private state root, a registry on a free loopback port (REG)
# and the registry's storage in the scratch folder (XDG_CACHE_HOME). Then
# what it claims is checked from outside: the project got the work back,
# everything it made is gone again.
#
# Usage: test_walkthrough.sh PATH/TO/sandpod SOURCE_DIR
set -u

SP=${1:?usage: test_walkthrough.sh PATH/TO/sandpod SOURCE_DIR}
SRC=${2:?usage: test_walkthrough.sh PATH/TO/sandpod SOURCE_DIR}

PREFIX=sandpod-walk
. "$(dirname "$0")/podman_lib.sh"
. "$(dirname "$0")/registry.sh"

walk_cleanup() {
    "$SP" image rm --force localhost/walk-env:1 "${REG:-none}/base/busybox:1" >/dev/null 2>&1
    XDG_CACHE_HOME=$T/cache "$SRC/contrib/registry.sh" stop >/dev/null 2>&1
    cleanup
}
trap walk_cleanup EXIT

command -v curl >/dev/null 2>&1 || skip "curl is missing"
[ -x "${SANDPOD_REGISTRY_BIN:-/usr/bin/docker-registry}" ] ||
    skip "no registry (apt-get install docker-registry)"
need_image

awk '/^<!-- walkthrough -->$/ { on = 1; next }
     on && /^```sh$/ { inblock = 1; next }
     inblock && /^```$/ { exit }
     inblock { print }' "$SRC/README.md" >"$T/walk.sh"
check "the README has the walk-through block" [ "$(wc -l <"$T/walk.sh")" -gt 20 ]

bindir=$(cd "$(dirname "$SP")" && pwd)
REG=127.0.0.1:$(free_port)
mkdir -p "$T/cache"
(
    cd "$SRC" &&
        PATH=$bindir:$PATH REG=$REG XDG_CACHE_HOME=$T/cache TMPDIR=$T \
            bash -e -o pipefail "$T/walk.sh"
) >"$T/out" 2>"$T/err"
rc=$?
ran_ok "the walk-through" "$T/out" "$T/err"

# The project it made under TMPDIR=$T: the agent's work is there, its
# deletion too, .env and the ignored build.log never left it (nor came back).
proj=$(find "$T" -maxdepth 3 -type d -name project | head -n 1)
check "the project exists" [ -n "$proj" ]
file_is "$proj/README.txt" 'hello, world\n' "apply wrote the edited file"
file_is "$proj/src/notes.md" 'written in the sandbox\n' "apply wrote the new file"
check "apply removed the deleted file" [ ! -e "$proj/build.sh" ]
check "apply kept the mode change" [ "$(stat -c %a "$proj/README.txt")" = 600 ]
file_is "$proj/.env" 'TOKEN=do-not-copy\n' "the project's .env is untouched"
out_has "built with v1" "setup ran in the built image"
check ".env was not hydrated" [ "$(grep -cx .env "$T/out")" = 0 ]
check "five forks were made" grep -qx walk-5 "$T/out"
check "the walk-through's sandboxes are gone" \
    [ -z "$(ls -A "$SANDPOD_HOME/sandboxes" 2>/dev/null)" ]
check "its registry is stopped" [ -z "$(curl -fsS "http://$REG/v2/" 2>/dev/null)" ]

finish
