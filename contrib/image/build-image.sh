#!/usr/bin/env bash
# Build sandpod's offline test image: a rootfs holding Debian's busybox-static
# (the binary plus its applet links), root and an unprivileged `sandbox` user
# (uid/gid 1000, home /workspace), imported into Podman. No registry is needed.
#
# usage: contrib/image/build-image.sh [--force] [TAG]
#   TAG      defaults to localhost/sandpod-busybox:latest
#   --force  rebuild even when the image exists
# env: BUSYBOX (path of a static busybox, default /bin/busybox),
#      PODMAN (podman binary, default podman)
set -euo pipefail

force=0
tag=
for a in "$@"; do
  case "$a" in
  --force) force=1 ;;
  -h | --help)
    sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
  -*)
    echo "build-image: unknown option: $a" >&2
    exit 2
    ;;
  *) tag=$a ;;
  esac
done
tag=${tag:-localhost/sandpod-busybox:latest}
busybox=${BUSYBOX:-/bin/busybox}
podman=${PODMAN:-podman}

if ! command -v "$podman" >/dev/null 2>&1; then
  echo "build-image: podman is not installed: apt-get install podman runc catatonit" >&2
  exit 1
fi
if [ ! -x "$busybox" ]; then
  echo "build-image: $busybox is missing: apt-get install busybox-static" >&2
  exit 1
fi
if [ "$(head -c 4 "$busybox" | od -An -tx1 | tr -d ' \n')" != 7f454c46 ]; then
  echo "build-image: $busybox is not an ELF binary" >&2
  exit 1
fi
# A dynamically linked busybox would not run in an image without libc.
if LC_ALL=C ldd "$busybox" 2>&1 | grep '=>' >/dev/null; then
  echo "build-image: $busybox is dynamically linked: apt-get install busybox-static" >&2
  exit 1
fi

if [ "$force" = 0 ] && "$podman" image exists "$tag" 2>/dev/null; then
  echo "build-image: $tag exists (use --force to rebuild)"
  exit 0
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/sandpod-image.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
root=$tmp/rootfs
mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,etc,root,tmp,workspace,proc,sys,dev,run,var/tmp}
install -m 0755 "$busybox" "$root/bin/busybox"

# The same links `busybox --install -s` would make, created from the host
# side so nothing of the image has to run here.
"$busybox" --list-full | while read -r applet; do
  [ -n "$applet" ] || continue
  [ "$applet" = bin/busybox ] && continue
  dir=$(dirname "$applet")
  mkdir -p "$root/$dir"
  if [ ! -e "$root/$applet" ] && [ ! -L "$root/$applet" ]; then
    ln -s /bin/busybox "$root/$applet"
  fi
done

cat >"$root/etc/passwd" <<'PW'
root:x:0:0:root:/root:/bin/sh
sandbox:x:1000:1000:sandbox:/workspace:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
PW
cat >"$root/etc/group" <<'GR'
root:x:0:
sandbox:x:1000:
nogroup:x:65534:
GR
printf 'hosts: files dns\n' >"$root/etc/nsswitch.conf"
: >"$root/etc/hosts"
: >"$root/etc/resolv.conf"
chmod 1777 "$root/tmp" "$root/var/tmp"
chmod 0700 "$root/root"
chmod 0755 "$root/workspace"
# The workspace belongs to the sandbox user. A non-root caller cannot chown
# it here, so both the chown and the tar that reads the owners run in the
# caller's rootless user namespace, where the caller is root and uid 1000
# is one of its subordinate ids (the archive then says 0 and 1000 as it
# does when root builds it).
ns=()
[ "$(id -u)" = 0 ] || ns=("$podman" unshare)
"${ns[@]}" chown 1000:1000 "$root/workspace"

"${ns[@]}" tar --numeric-owner -C "$root" -c . |
  "$podman" import --quiet \
    --change 'CMD ["/bin/sh"]' \
    --change 'ENV PATH=/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'WORKDIR /workspace' \
    - "$tag" >/dev/null
echo "build-image: built $tag"
