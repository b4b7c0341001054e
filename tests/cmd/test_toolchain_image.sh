#!/usr/bin/env bash
# contrib/image/toolchain.sh end to end: the image is built from Debian's
# archive, and a sandbox from it compiles and runs C, makes a Python venv,
# runs node and git, as the unprivileged `sandbox` user. Opt-in
# (SANDPOD_TOOLCHAIN_TEST=1): it downloads about 300 MB and takes minutes.
#
# Usage: test_toolchain_image.sh PATH/TO/sandpod SOURCE_DIR
set -u

SP=${1:?usage: test_toolchain_image.sh PATH/TO/sandpod SOURCE_DIR}
SRC=${2:?usage: test_toolchain_image.sh PATH/TO/sandpod SOURCE_DIR}

if [ "${SANDPOD_TOOLCHAIN_TEST:-}" != 1 ]; then
    echo "skipping: opt-in (SANDPOD_TOOLCHAIN_TEST=1; downloads ~300 MB from Debian's archive)"
    exit 77
fi

PREFIX=sandpod-toolchain
. "$(dirname "$0")/podman_lib.sh"
command -v mmdebstrap >/dev/null 2>&1 || skip "mmdebstrap is missing (apt-get install mmdebstrap)"
[ "$(id -u)" = 0 ] || skip "mmdebstrap runs as root here"

TAG=localhost/sandpod-toolchain:test-$$
tc_cleanup() {
    "$SP" image rm --force "$TAG" >/dev/null 2>&1
    cleanup
}
trap tc_cleanup EXIT

"$SRC/contrib/image/toolchain.sh" "$TAG" >"$T/build.log" 2>&1
rc=$?
if [ "$rc" = 0 ]; then ok; else bad "toolchain.sh exits $rc: $(tail -n 5 "$T/build.log")"; fi

mkdir -p "$T/src"
printf '#include <stdio.h>\nint main(void) { puts("c ok"); return 0; }\n' >"$T/src/hello.c"
run create --name tc --image "$TAG" --mount "src=$T/src"
expect 0 "create from the toolchain image"
run sh tc 'id -un; gcc -Wall -o /tmp/hello hello.c && /tmp/hello'
out_is 'sandbox\nc ok\n' "gcc compiles and the program runs, as user sandbox"
run sh tc 'python3 -m venv /tmp/v && /tmp/v/bin/python -c "import sys; print(sys.prefix)"'
out_is '/tmp/v\n' "python3 makes a venv"
run sh tc 'node -e "console.log(6 * 7)"; git --version | cut -d" " -f1-2; make --version | head -n 1 | cut -d" " -f1-2'
out_is '42\ngit version\nGNU Make\n' "node, git and make run"
run rm --force tc

finish
