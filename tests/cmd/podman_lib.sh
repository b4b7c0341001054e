# Shared start of the CLI test scripts that need a real Podman service:
# skip() (77, but a failure under CI=true), the prerequisites, a scratch
# folder T with a private state root SANDPOD_HOME, and a cleanup at exit
# that removes every sandbox made there and the private Podman service the
# library started for it, if it had to. Then lib.sh.
#
# The sourcing script sets SP and PREFIX (the scratch folder's name) first.
# shellcheck shell=bash

skip() {
    if [ "${CI:-}" = true ]; then
        echo "FAIL: $* (Podman is required under CI=true)"
        exit 1
    fi
    echo "skipping: $*"
    exit 77
}

command -v python3 >/dev/null 2>&1 || skip "python3 is missing"
command -v podman >/dev/null 2>&1 || skip "podman is not installed (apt-get install podman runc catatonit)"

T=$(mktemp -d "${TMPDIR:-/tmp}/$PREFIX.XXXXXX")
export SANDPOD_HOME=$T/home
mkdir -p "$SANDPOD_HOME"

cleanup() {
    local d
    for d in "$SANDPOD_HOME"/sandboxes/*/; do
        [ -d "$d" ] && "$SP" rm --force "$(basename "$d")" >/dev/null 2>&1
    done
    if [ -f "$SANDPOD_HOME/podman.pid" ]; then
        local pid
        pid=$(cat "$SANDPOD_HOME/podman.pid")
        case "$pid" in
        '' | *[!0-9]*) ;;
        *) kill "$pid" 2>/dev/null ;;
        esac
    fi
    [ -n "${KEEP_T:-}" ] || rm -rf "$T"
}
trap cleanup EXIT

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# need_image: skip when Podman cannot be reached; build the default image
# from /bin/busybox when it is missing.
need_image() {
    run image exists
    if [ "$rc" -gt 1 ] || { [ "$rc" -eq 1 ] && ! grep -qx false "$T/out"; }; then
        skip "podman cannot be reached or started: $(head -n 1 "$T/err")"
    fi
    if [ "$rc" -eq 1 ]; then
        [ -x /bin/busybox ] || skip "the image is missing and /bin/busybox is not there (apt-get install busybox-static)"
        run image build
        expect 0 "image build"
    fi
}

# host_tree DIR: every entry with its type, mode and content or target
# (.git left out), for comparing host folders.
host_tree() {
    (cd "$1" && find . -mindepth 1 ! -path './.git' ! -path './.git/*' | LC_ALL=C sort |
        while IFS= read -r p; do
            if [ -L "$p" ]; then
                printf '%s l %s\n' "$p" "$(readlink "$p")"
            elif [ -d "$p" ]; then
                printf '%s d %s\n' "$p" "$(stat -c %a "$p")"
            else
                printf '%s f %s %s\n' "$p" "$(stat -c %a "$p")" "$(md5sum <"$p" | cut -c1-32)"
            fi
        done)
}
