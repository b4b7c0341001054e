#!/usr/bin/env bash
# Build a toolchain image for sandboxes without any registry: a Debian root
# filesystem made by mmdebstrap from Debian's package archive, with git,
# python3 (+venv), build-essential, make, nodejs and npm, and the user
# `sandbox` (1000:1000, home /workspace) that sandboxes run as; imported
# into Podman. About 4 minutes and 300 MB of downloads here.
#
# usage: contrib/image/toolchain.sh [--force] [--suite SUITE] [--mirror URL]
#                                   [--include PKG,PKG...] [TAG]
#   TAG        default localhost/sandpod-toolchain:SUITE
#   --suite    Debian suite (default bookworm)
#   --mirror   archive URL (default http://deb.debian.org/debian)
#   --include  more packages, comma-separated
#   --force    rebuild even when the image exists
# env: PODMAN (podman binary, default podman). Needs root (or mmdebstrap's
# unshare mode as a user with subuids) and `apt-get install mmdebstrap`.
set -euo pipefail

force=0 suite=bookworm mirror=http://deb.debian.org/debian extra= tag=
while [ $# -gt 0 ]; do
  case "$1" in
  --force) force=1 ;;
  --suite | --mirror | --include)
    [ $# -ge 2 ] || {
      echo "toolchain: $1 needs a value" >&2
      exit 2
    }
    case "$1" in
    --suite) suite=$2 ;;
    --mirror) mirror=$2 ;;
    --include) extra=$2 ;;
    esac
    shift
    ;;
  -h | --help)
    sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
  -*)
    echo "toolchain: unknown option: $1" >&2
    exit 2
    ;;
  *) tag=$1 ;;
  esac
  shift
done
tag=${tag:-localhost/sandpod-toolchain:$suite}
podman=${PODMAN:-podman}

command -v mmdebstrap >/dev/null 2>&1 || {
  echo "toolchain: mmdebstrap is missing (apt-get install mmdebstrap)" >&2
  exit 1
}
if [ "$force" = 0 ] && "$podman" image exists "$tag"; then
  echo "toolchain: $tag exists (use --force to rebuild)"
  exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pkgs=ca-certificates,git,python3,python3-venv,python3-pip,build-essential,make,nodejs,npm
[ -n "$extra" ] && pkgs=$pkgs,$extra
mmdebstrap --variant=apt --include="$pkgs" \
  --customize-hook='chroot "$1" useradd -u 1000 -U -d /workspace -M -s /bin/bash sandbox' \
  --customize-hook='chroot "$1" apt-get clean' \
  --customize-hook='rm -rf "$1"/var/lib/apt/lists/*' \
  "$suite" "$tmp/rootfs.tar" "$mirror"
"$podman" import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' --change 'WORKDIR /workspace' --change 'USER 1000:1000' \
  "$tmp/rootfs.tar" "$tag" >/dev/null
echo "toolchain: $tag"
