#!/usr/bin/env bash
# Build sandpod with warnings as errors, check formatting, and run the whole
# suite twice: a normal build and an ASan+UBSan build.
#   contrib/test.sh            both runs
#   contrib/test.sh --quick    the normal run only
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
[ "${1:-}" = "--quick" ] && quick=1
jobs=$(nproc)

echo "== format check"
files=$(git ls-files '*.c' '*.h' 2>/dev/null || find . -name '*.[ch]' -not -path './build*')
bad=$(for f in $files; do clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || echo "$f"; done)
if [ -n "$bad" ]; then
  echo "not formatted with .clang-format:"; echo "$bad"; exit 1
fi

# The integration tests share one Podman service (started when none
# answers on the default socket), so they do not each start their own.
if [ "$(id -u)" = 0 ] || [ -n "${XDG_RUNTIME_DIR:-}" ]; then
  echo "== podman service"
  contrib/podman-service.sh start
fi

run_suite() {
  local dir=$1; shift
  echo "== build $dir ($*)"
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Debug -DSANDPOD_WERROR=ON "$@" >/dev/null
  cmake --build "$dir" -j"$jobs" >/dev/null
  echo "== test $dir"
  ctest --test-dir "$dir" -j"$jobs" --output-on-failure --timeout 900
}

run_suite build/test
if [ $quick = 0 ]; then
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    run_suite build/asan -DSANDPOD_SANITIZE=ON
fi
echo "== all suites passed"
