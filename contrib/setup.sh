#!/usr/bin/env bash
# Install the Debian packages sandpod needs to build, test and run its demo —
# only those missing. Debian 12, as root (or with sudo).
set -euo pipefail

# clang and libclang-rt: the fuzzers; gdb: tests print every thread's stack
# when they crash (tu_crash_reports), the only trace a CI run keeps; zsh,
# fish and groff-base: the completion and man page tests; man-db: the
# `man -l` of contrib/docs/cli.md (tests/cmd/test_readme_blocks.sh); ripgrep: grep is
# compared with rg (test_search_ref; bash globstar is the glob reference);
# docker-registry: the image tests pull from a registry on 127.0.0.1;
# python3-pytest/-setuptools/-pip/-venv: the Python package and its tests;
# libssl-dev: OpenSSL's static libraries, linked into sandpod-agent (the
# egress proxy terminates TLS for brokered secrets);
# python3-websockets: an independent RFC 6455 server the WebSocket client is
# tested against (test_ws_live); openssl: that test's TLS certificate;
# iproute2: the egress tests' network namespaces (ip netns, veth), iptables
# also keeps --network default sandboxes off the host (iptables-restore).
pkgs=(
  gcc make cmake pkg-config git python3 clang-format
  libcurl4-openssl-dev libcjson-dev libgit2-dev libarchive-dev libpcre2-dev
  libcmocka-dev zlib1g-dev libssl-dev
  podman runc catatonit busybox-static uidmap slirp4netns iptables iproute2 curl
  clang libclang-rt-14-dev
  gdb
  zsh fish groff-base man-db
  ripgrep
  docker-registry
  python3-pytest python3-setuptools python3-pip python3-venv
  python3-websockets openssl
)
# The MCP test through the official TypeScript SDK (tests/contrib/mcp_sdk)
# needs Node.js 18 or later with npm; a Node.js from elsewhere (NodeSource,
# which bundles npm) is used as it is.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  pkgs+=(nodejs npm)
fi

# Rootful sandboxes run in user namespaces of their own (userns=auto): Podman
# takes their id ranges from the `containers` entries of /etc/subuid and
# /etc/subgid, which Debian does not ship. The range starts past any account.
subids() {
  local f
  for f in /etc/subuid /etc/subgid; do
    if ! grep -q '^containers:' "$f" 2>/dev/null; then
      echo "setup: adding containers:2147483647:2147483647 to $f"
      echo 'containers:2147483647:2147483647' | "${sudo[@]}" tee -a "$f" >/dev/null
    fi
  done
}

sudo=()
if [ "$(id -u)" != 0 ]; then
  sudo=(sudo)
fi

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep 'ok installed' >/dev/null; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#pkgs[@]} packages present"
  subids
  exit 0
fi

echo "setup: installing ${missing[*]}"
"${sudo[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends \
  "${missing[@]}" >/dev/null
subids
echo "setup: done"
