#!/usr/bin/env bash
# The end-to-end demo: build sandpod, then drive a workspace the way an agent
# would. Each step prints the command it runs and what came back.
set -euo pipefail
cd "$(dirname "$0")/.."

jobs=$(nproc)
echo "== building sandpod (build/release)"
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DSANDPOD_TESTS=OFF >/dev/null
cmake --build build/release -j"$jobs" >/dev/null
sp=$PWD/build/release/sandpod

work=$(mktemp -d /tmp/sandpod-demo.XXXXXX)
trap 'rm -rf "$work"' EXIT
ws=$work/workspace
mkdir -p "$ws"

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

echo "== a workspace at $ws"
printf 'int main(void) { return 0; }\n' | step "$sp" fs --root "$ws" write src/main.c
printf '# demo\nhello\n' | step "$sp" fs --root "$ws" write README.md
step "$sp" fs --root "$ws" ls --depth 2
step "$sp" fs --root "$ws" edit src/main.c --old 'return 0;' --new 'return 42;'
printf '#include <stdio.h>\n' | step "$sp" fs --root "$ws" insert src/main.c --line 0
step "$sp" fs --root "$ws" read src/main.c
step "$sp" fs --root "$ws" grep 'return [0-9]+'
step "$sp" fs --root "$ws" glob '**/*.{c,md}'
step "$sp" fs --root "$ws" --json stat src/main.c

echo
echo "== containment: nothing names its way out"
ln -s /etc "$ws/etc-link"
fails "$sp" fs --root "$ws" read ../../etc/passwd
fails "$sp" fs --root "$ws" read /etc/passwd
fails "$sp" fs --root "$ws" read etc-link/passwd
step "$sp" fs --root "$ws" ls

step "$sp" fs --root "$ws" rm -r src
echo
echo "== demo finished"
