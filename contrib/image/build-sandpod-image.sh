#!/usr/bin/env bash
# Build the sandpod image of a Kubernetes sandbox's init and peer containers
# (`sandpod render`), offline: a rootfs holding the built `sandpod` at
# /sandpod/bin/sandpod with the shared libraries it needs (as ldd lists them,
# at the same paths, and libarchive, which it loads when used), the static `sandpod-agent` beside it, and a `sandbox`
# user (uid/gid 1000), imported into Podman. No registry is needed; push the
# result to one for a real cluster.
#
# usage: contrib/image/build-sandpod-image.sh [--force] [TAG]
#   TAG      defaults to localhost/sandpod:VERSION (what `sandpod render`
#            names by default; VERSION from `sandpod version`)
#   --force  rebuild even when the image exists
# env: SANDPOD (the sandpod binary, default ./build/sandpod, else `sandpod`
#      on PATH), SANDPOD_AGENT (default: sandpod-agent beside SANDPOD),
#      PODMAN (default podman)
set -euo pipefail

force=0
tag=
for a in "$@"; do
  case "$a" in
  --force) force=1 ;;
  -h | --help)
    sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
  -*)
    echo "build-sandpod-image: unknown option: $a" >&2
    exit 2
    ;;
  *) tag=$a ;;
  esac
done
podman=${PODMAN:-podman}
sandpod=${SANDPOD:-}
if [ -z "$sandpod" ]; then
  if [ -x build/sandpod ]; then sandpod=build/sandpod; else sandpod=$(command -v sandpod || true); fi
fi
if [ -z "$sandpod" ] || [ ! -x "$sandpod" ]; then
  echo "build-sandpod-image: no sandpod binary: set SANDPOD=PATH" >&2
  exit 1
fi
agent=${SANDPOD_AGENT:-$(dirname "$sandpod")/sandpod-agent}
if [ ! -x "$agent" ]; then
  echo "build-sandpod-image: no sandpod-agent at $agent: set SANDPOD_AGENT=PATH" >&2
  exit 1
fi
# The agent runs in any user image: it must need no library of its own.
if LC_ALL=C ldd "$agent" 2>&1 | grep '=>' >/dev/null; then
  echo "build-sandpod-image: $agent is dynamically linked (build it static)" >&2
  exit 1
fi
if ! command -v "$podman" >/dev/null 2>&1; then
  echo "build-sandpod-image: podman is not installed" >&2
  exit 1
fi
version=$("$sandpod" version | awk '{print $2}')
tag=${tag:-localhost/sandpod:$version}

if [ "$force" = 0 ] && "$podman" image exists "$tag" 2>/dev/null; then
  echo "build-sandpod-image: $tag exists (use --force to rebuild)"
  exit 0
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/sandpod-image.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
root=$tmp/rootfs
mkdir -p "$root"/{sandpod/bin,etc,tmp,proc,sys,dev,run}
install -m 0755 "$sandpod" "$root/sandpod/bin/sandpod"
install -m 0755 "$agent" "$root/sandpod/bin/sandpod-agent"

# Every library ldd resolves, and the dynamic loader, at the path the
# binary looks for it (the file itself, not a symlink to it).
# libarchive is loaded only when used (overlay/base/lazy.c), which ldd
# cannot see: `peer import` and `peer export` need it, with what it needs.
archive=$(/sbin/ldconfig -p 2>/dev/null | awk '$1 == "libarchive.so.13" && $NF ~ /^\// && !found { print $NF; found = 1 }')
if [ -z "$archive" ]; then
  echo "build-sandpod-image: libarchive.so.13 is missing (apt-get install libarchive13)" >&2
  exit 1
fi
{ LC_ALL=C ldd "$sandpod"; LC_ALL=C ldd "$archive"; echo "$archive"; } | awk '
  $2 == "=>" && $3 ~ /^\// { print $3 }
  $1 ~ /^\// { print $1 }' | sort -u | while read -r lib; do
  mkdir -p "$root$(dirname "$lib")"
  cp -L "$lib" "$root$lib"
done
if LC_ALL=C ldd "$sandpod" | grep 'not found' >/dev/null; then
  echo "build-sandpod-image: $sandpod misses a library:" >&2
  LC_ALL=C ldd "$sandpod" | grep 'not found' >&2
  exit 1
fi

cat >"$root/etc/passwd" <<'PW'
root:x:0:0:root:/:/sandpod/bin/sandpod
sandbox:x:1000:1000:sandbox:/workspace:/sandpod/bin/sandpod
PW
cat >"$root/etc/group" <<'GR'
root:x:0:
sandbox:x:1000:
GR
chmod 1777 "$root/tmp"

# The image runs nothing by itself: `sandpod render` gives each container
# its command. Everything is root's (built rootless too). No /workspace
# and no /sandpod/store: Podman gives a new volume the ownership of the
# image's folder at its mount point, and the container's user when there
# is none (the peer, uid 1000, must write both).
# A sanitized build (tests) keeps ASan's freed-memory quarantine small: its
# default 256 MiB alone fills the peer's memory limit (render.c), and the
# cgroup kills the peer mid-run.
env=()
if LC_ALL=C ldd "$sandpod" | grep libasan >/dev/null; then
  env=(--change 'ENV ASAN_OPTIONS=quarantine_size_mb=16:malloc_context_size=10')
fi
tar --numeric-owner --owner=0 --group=0 -C "$root" -c . |
  "$podman" import --quiet "${env[@]}" \
    --change 'ENTRYPOINT ["/sandpod/bin/sandpod"]' \
    --change 'USER 1000:1000' \
    --change 'WORKDIR /' \
    - "$tag" >/dev/null
echo "build-sandpod-image: built $tag ($(du -sh "$root" | cut -f1) of files)"
