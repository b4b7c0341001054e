#!/usr/bin/env bash
# Run the Python package's pytest suite against the libsandpod.so just built.
# usage: run.sh LIBSANDPOD [TEST_FILE.py] [PYTEST ARGS...]
# (with TEST_FILE.py, that file alone instead of the whole folder)
# Debian's python3 (with python3-pytest) is preferred over any other python3
# on PATH; without pytest the suite is skipped (77), except under CI=true.
set -euo pipefail
lib=$1
shift
target=
case "${1:-}" in
*.py)
  target=$1
  shift
  ;;
esac
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../../.." && pwd)
py=
for c in /usr/bin/python3 python3; do
  if "$c" -c 'import pytest' 2>/dev/null; then
    py=$c
    break
  fi
done
if [ -z "$py" ]; then
  echo "skip: no python3 with pytest (apt-get install python3-pytest)" >&2
  [ "${CI:-}" = true ] && exit 1
  exit 77
fi
export SANDPOD_LIBRARY=$lib
# A library built with ASan+UBSan (contrib/test.sh's build/asan) needs their
# runtimes loaded before the interpreter; CPython's own allocations are not
# leaks of ours.
pre=$(ldd "$lib" 2>/dev/null | awk '/lib(asan|ubsan)\.so/ {print $3}' | paste -sd:)
if [ -n "$pre" ]; then
  # The preload reaches every program the integration tests start (curl,
  # docker-registry, podman, sandpod): under it one hung in CI's ASan
  # stage (registry.sh waiting on the registry). Those tests run against
  # the plain build (CI's normal and rootless stages); here only the
  # unit half, which exercises the library in-process.
  case " $* " in
  *"not podman"*) ;;
  *integration* | *podman*)
    echo "skip: the Python integration tests run against the plain build, not a sanitized one"
    exit 77
    ;;
  esac
  export LD_PRELOAD=$pre${LD_PRELOAD:+:$LD_PRELOAD}
  export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
fi
export PYTHONPATH=$src/contrib/python${PYTHONPATH:+:$PYTHONPATH}
export PYTHONDONTWRITEBYTECODE=1
exec "$py" -m pytest -q -p no:cacheprovider "${target:-$here}" "$@"
