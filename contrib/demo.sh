#!/usr/bin/env bash
# The end-to-end demo: build sandpod, hydrate a real project folder into a
# sandbox, run commands in its hardened container, edit files from the host
# side, snapshot, break things, restore, and clean up. Each step prints the
# command it runs and what came back.
set -euo pipefail
cd "$(dirname "$0")/.."

jobs=$(nproc)
echo "== building sandpod (build/release)"
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DSANDPOD_TESTS=OFF >/dev/null
cmake --build build/release -j"$jobs" >/dev/null
sp=$PWD/build/release/sandpod

echo "== podman service"
contrib/podman-service.sh start

work=$(mktemp -d /tmp/sandpod-demo.XXXXXX)
export SANDPOD_HOME=$work/state
name=demo
cleanup() {
  "$sp" rm --force "$name" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

step() {
  printf '\n$ %s\n' "$*"
  "$@"
}
fails() {
  printf '\n$ %s   # must be refused\n' "$*"
  if "$@"; then
    echo "demo: expected a refusal" >&2
    exit 1
  fi
}

echo
echo "== a project on the host: $work/project"
proj=$work/project
mkdir -p "$proj/src" "$proj/node_modules/left-pad" "$proj/.git"
printf '#!/bin/sh\necho "hello from $(uname -s) as uid $(id -u)"\n' >"$proj/src/hello.sh"
chmod 0755 "$proj/src/hello.sh"
printf 'module.exports = 1\n' >"$proj/node_modules/left-pad/index.js"
printf 'API_KEY=do-not-copy\n' >"$proj/.env"
printf '# demo project\n' >"$proj/README.md"
ln -s /etc/passwd "$proj/passwd-link"

echo
echo "== hydrate it into a sandbox: no node_modules, no .env; the link is copied as a link"
step "$sp" create --name "$name" --mount "src=$proj,exclude=node_modules,exclude=.env"
step "$sp" ls
step "$sp" fs "$name" ls --depth 3

echo
echo "== run commands inside: unprivileged, no network, read-only root"
step "$sp" sh "$name" './src/hello.sh; ls /sys/class/net; touch /etc/x || echo "root is read-only"'
step "$sp" sh --timeout 1000 "$name" 'sleep 30 & sleep 30; echo never printed' || echo "(exit $? : timed out, the whole process group was killed)"
step "$sp" sh "$name" 'ps -o pid,args | grep -c "[s]leep 30" || true'

echo
echo "== edit files from the host side; the container sees the edits at once"
step "$sp" fs "$name" edit src/hello.sh --old 'hello from' --new 'hi from'
printf 'line one\n' | step "$sp" fs "$name" write notes/todo.txt
step "$sp" sh "$name" './src/hello.sh; cat notes/todo.txt; echo "written in the container" >> notes/todo.txt'
step "$sp" fs "$name" read notes/todo.txt
step "$sp" fs "$name" grep -i 'hi|todo'

echo
echo "== containment: no path, .. or symlink leaves the workspace"
fails "$sp" fs "$name" read ../../../etc/passwd
fails "$sp" fs "$name" read passwd-link
fails "$sp" fs "$name" write /etc/evil </dev/null

echo
echo "== snapshot, break things, restore exactly"
step "$sp" snapshot "$name" --tag before
step "$sp" sh "$name" 'rm -rf src; echo junk > junk.txt; chmod 600 README.md'
step "$sp" diff "$name" before
step "$sp" restore "$name" before
step "$sp" sh "$name" 'ls -la; ./src/hello.sh'

echo
echo "== the same sandbox through the model-facing tools (what 'sandpod mcp' serves)"
step "$sp" call "$name" shell '{"command": "echo $((6 * 7))"}'
step "$sp" call "$name" apply_patch '{"input": "*** Begin Patch\n*** Update File: README.md\n@@\n-# demo project\n+# demo project, patched\n*** End Patch\n"}'
step "$sp" call "$name" read_file '{"path": "README.md"}'

echo
echo "== clean up"
step "$sp" rm --force "$name"
step "$sp" ls
echo
echo "== demo finished"
