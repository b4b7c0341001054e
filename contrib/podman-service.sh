#!/usr/bin/env bash
# Start, stop or check a Podman REST service for sandpod.
#
# usage: contrib/podman-service.sh start|stop|status|restart [SOCKET]
#   SOCKET  socket path or unix:// URL. Default: /run/podman/podman.sock as
#           root, else $XDG_RUNTIME_DIR/podman/podman.sock.
# env: PODMAN_RUNTIME (OCI runtime, default runc when installed),
#      PODMAN_SERVICE_LOG (default: <socket dir>/podman-service.log),
#      PODMAN_START_TIMEOUT (seconds to wait for /_ping, default 30)
#
# `start` runs `podman --runtime runc system service --time=0 unix://SOCKET`
# detached (setsid + nohup, output in the log), waits until /_ping answers,
# and prints the socket path. It does nothing when the socket already answers.
set -euo pipefail

usage() {
  sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
}

cmd=${1:-}
[ -n "$cmd" ] || {
  usage >&2
  exit 2
}
sock=${2:-}
if [ -z "$sock" ]; then
  if [ "$(id -u)" = 0 ]; then
    sock=/run/podman/podman.sock
  elif [ -n "${XDG_RUNTIME_DIR:-}" ]; then
    sock=$XDG_RUNTIME_DIR/podman/podman.sock
  else
    echo "podman-service: XDG_RUNTIME_DIR is unset; name a socket path" >&2
    exit 2
  fi
fi
sock=${sock#unix://}
case "$sock" in
/*) ;;
*)
  echo "podman-service: socket must be an absolute path: $sock" >&2
  exit 2
  ;;
esac
dir=$(dirname "$sock")
log=${PODMAN_SERVICE_LOG:-$dir/podman-service.log}
pidfile=$dir/podman-service.pid
timeout=${PODMAN_START_TIMEOUT:-30}

ping() {
  [ -S "$sock" ] &&
    curl -fsS --max-time 2 --unix-socket "$sock" http://d/v4.0.0/libpod/_ping >/dev/null 2>&1
}

start() {
  if ping; then
    echo "$sock"
    return 0
  fi
  if ! command -v podman >/dev/null 2>&1; then
    echo "podman-service: podman is not installed: apt-get install podman runc catatonit" >&2
    return 1
  fi
  if ! command -v curl >/dev/null 2>&1; then
    echo "podman-service: curl is not installed: apt-get install curl" >&2
    return 1
  fi
  local runtime=${PODMAN_RUNTIME:-}
  if [ -z "$runtime" ] && command -v runc >/dev/null 2>&1; then
    runtime=runc
  fi
  local args=()
  [ -n "$runtime" ] && args+=(--runtime "$runtime")
  mkdir -p "$dir"
  rm -f "$sock"
  # The service must not think it is remote or socket-activated. It runs in
  # the socket's folder, not the caller's: conmon leaves files such as `oom`
  # in its working folder.
  cd "$dir"
  env -u CONTAINER_HOST -u CONTAINER_CONNECTION -u LISTEN_FDS -u LISTEN_PID \
    -u LISTEN_FDNAMES -u NOTIFY_SOCKET \
    setsid nohup podman "${args[@]}" system service --time=0 "unix://$sock" \
    </dev/null >>"$log" 2>&1 &
  local pid=$!
  echo "$pid" >"$pidfile"
  local deadline=$((SECONDS + timeout))
  while ! ping; do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "podman-service: podman exited at start; last log lines ($log):" >&2
      tail -n 5 "$log" >&2 || true
      rm -f "$pidfile"
      return 1
    fi
    if ((SECONDS >= deadline)); then
      echo "podman-service: no answer on $sock within ${timeout}s; see $log" >&2
      return 1
    fi
    sleep 0.1
  done
  echo "$sock"
}

stop() {
  local pid=
  [ -f "$pidfile" ] && pid=$(cat "$pidfile")
  if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then
    rm -f "$pidfile"
    if ping; then
      echo "podman-service: $sock answers but was not started by this script (no $pidfile)" >&2
      return 1
    fi
    echo "podman-service: not running"
    return 0
  fi
  kill -TERM "$pid"
  for _ in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$pidfile" "$sock"
  echo "podman-service: stopped"
}

case "$cmd" in
start) start ;;
stop) stop ;;
restart)
  stop
  start
  ;;
status)
  if ping; then
    echo "running: $sock"
  else
    echo "not running: $sock"
    exit 3
  fi
  ;;
-h | --help) usage ;;
*)
  usage >&2
  exit 2
  ;;
esac
