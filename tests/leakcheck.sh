#!/usr/bin/env bash
# Leaks of a whole test run, checked rather than assumed: containers made by
# sandpod, scratch folders, and processes (test binaries, sandpod, conmon of
# sandpod containers) that outlive the run.
#   tests/leakcheck.sh before FILE   record what exists now
#   tests/leakcheck.sh after FILE    list what is new since; exit 1 if any
# Processes get a grace period (SANDPOD_LEAK_GRACE seconds, default 30) to
# end on their own, as conmon does once its container is gone.
set -uo pipefail

mode=${1:-}
file=${2:-}
[ -n "$mode" ] && [ -n "$file" ] || {
  echo "usage: $0 before|after FILE" >&2
  exit 2
}

containers() {
  command -v podman >/dev/null || return 0
  podman ps -a --filter label=sandpod=1 --format '{{.ID}} {{.Names}}' 2>/dev/null |
    sed 's/^/container /'
}

scratch() {
  local d
  for d in "${TMPDIR:-/tmp}"/sandpod-test-* "${TMPDIR:-/tmp}"/sandpod-mcp* /tmp/sp-fuzz-* \
    /dev/shm/sp-fuzz-*; do
    [ -e "$d" ] && echo "scratch $d"
  done
  return 0
}

# pid and command of the processes a run may leave: its binaries, the CLI,
# and the conmon of sandpod's containers (named sandpod-*). Podman keeps an
# exec session's conmon for its exit delay (300 s by default) after the
# command ends, even once the container is gone, so a conmon counts only
# when it is older than that (plus a margin): then it is stuck.
processes() {
  ps -eo pid=,etimes=,args= | awk -v delay="${SANDPOD_CONMON_DELAY:-330}" '
    $3 ~ /(^|\/)(test_[a-z_]+|fuzz_[a-z_]+|sandpod|no_openat2)$/ { print "process " $1 " " $3; next }
    $3 ~ /conmon$/ && / -n sandpod-/ && $2 > delay {
      for (i = 4; i <= NF; i++) if ($i == "-n") { print "process " $1 " conmon " $(i + 1); break }
    }'
}

snapshot() {
  containers
  scratch
  processes
}

case $mode in
before)
  snapshot | sort >"$file"
  ;;
after)
  [ -f "$file" ] || {
    echo "leakcheck: no $file (run 'before' first)" >&2
    exit 2
  }
  grace=${SANDPOD_LEAK_GRACE:-30}
  deadline=$((SECONDS + grace))
  while :; do
    new=$(snapshot | sort | comm -13 "$file" - | grep -v "^process $$ ")
    if [ -z "$new" ] || ! grep -q '^process' <<<"$new" || [ $SECONDS -ge $deadline ]; then
      break
    fi
    sleep 2
  done
  if [ -n "$new" ]; then
    echo "leakcheck: the run left these behind:"
    sed 's/^/  /' <<<"$new" | head -50
    n=$(wc -l <<<"$new")
    [ "$n" -gt 50 ] && echo "  ... and $((n - 50)) more"
    exit 1
  fi
  echo "leakcheck: no containers, scratch folders or processes left behind"
  ;;
*)
  echo "usage: $0 before|after FILE" >&2
  exit 2
  ;;
esac
