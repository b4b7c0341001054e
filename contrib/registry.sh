#!/usr/bin/env bash
# A private image registry on this machine, for trying `sandpod image pull`
# and `create --pull` without Docker Hub: Debian's docker-registry (the CNCF
# distribution registry), plain HTTP on a loopback address — pull from it
# with `--tls-verify=false`.
#
# usage: contrib/registry.sh start [ADDR [DIR]]
#        contrib/registry.sh stop [DIR]
#   ADDR  host:port to listen on (default 127.0.0.1:5000; loopback only)
#   DIR   its storage, config, log and pid file
#         (default ${XDG_CACHE_HOME:-~/.cache}/sandpod-registry)
# `start` returns once the registry answers (or fails with its log's tail);
# it is a no-op when the registry of DIR already runs.
set -euo pipefail

bin=${SANDPOD_REGISTRY_BIN:-/usr/bin/docker-registry}
cmd=${1:-}
default_dir=${XDG_CACHE_HOME:-$HOME/.cache}/sandpod-registry

die() {
  echo "registry: $*" >&2
  exit 1
}

running() { [ -f "$1/pid" ] && kill -0 "$(cat "$1/pid")" 2>/dev/null; }

case "$cmd" in
start)
  addr=${2:-127.0.0.1:5000}
  dir=${3:-$default_dir}
  case "$addr" in
  127.* | localhost:* | '[::1]':*) ;;
  *) die "refusing to listen on $addr: only loopback addresses (the registry has no authentication)" ;;
  esac
  [ -x "$bin" ] || die "no registry at $bin (apt-get install docker-registry)"
  mkdir -p "$dir/data"
  if running "$dir"; then
    echo "registry: already running at $(cat "$dir/addr") (pid $(cat "$dir/pid"))"
    exit 0
  fi
  cat >"$dir/config.yml" <<CONF
version: 0.1
log:
  level: error
storage:
  filesystem:
    rootdirectory: $dir/data
  delete:
    enabled: true
http:
  addr: $addr
CONF
  # setsid: the registry outlives the shell that started it.
  setsid "$bin" serve "$dir/config.yml" >"$dir/log" 2>&1 </dev/null &
  echo $! >"$dir/pid"
  echo "$addr" >"$dir/addr"
  for _ in $(seq 1 100); do
    if curl -fsS "http://$addr/v2/" >/dev/null 2>&1; then
      echo "registry: http://$addr (storage $dir/data)"
      exit 0
    fi
    running "$dir" || break
    sleep 0.1
  done
  kill "$(cat "$dir/pid")" 2>/dev/null || true
  rm -f "$dir/pid"
  die "the registry did not start at $addr: $(tail -n 3 "$dir/log" 2>/dev/null)"
  ;;
stop)
  dir=${2:-$default_dir}
  if running "$dir"; then
    pid=$(cat "$dir/pid")
    kill "$pid"
    for _ in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
  fi
  rm -f "$dir/pid"
  ;;
-h | --help | '')
  sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
  [ -n "$cmd" ]
  ;;
*) die "unknown command: $cmd (start or stop)" ;;
esac
