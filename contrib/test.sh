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
# Each stage's header says when it began: seconds since the start.
stage() { echo "== $* [at ${SECONDS}s]"; }

stage "format check"
# In batches, both cores at once (one clang-format per file took over a
# minute); the names of the files at fault only when a batch fails.
files=$(git ls-files '*.c' '*.h' 2>/dev/null || find . -name '*.[ch]' -not -path './build*')
if ! printf '%s\n' $files | xargs -n 32 -P "$jobs" clang-format --dry-run --Werror >/dev/null 2>&1; then
  echo "not formatted with .clang-format:"
  for f in $files; do clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || echo "$f"; done
  exit 1
fi

# The integration tests share one Podman service (started when none
# answers on the default socket), so they do not each start their own.
if [ "$(id -u)" = 0 ] || [ -n "${XDG_RUNTIME_DIR:-}" ]; then
  stage "podman service"
  contrib/podman-service.sh start
fi

# What a run leaves behind (containers, scratch folders, processes) is a
# failure too: tests/leakcheck.sh compares with what existed before.
mkdir -p build
leaks_before=build/leakcheck.before
tests/leakcheck.sh before "$leaks_before"

run_suite() {
  local dir=$1; shift
  stage "build $dir ($*)"
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Debug -DSANDPOD_WERROR=ON "$@" >/dev/null
  cmake --build "$dir" -j"$jobs" >/dev/null
  # Orphans of earlier, interrupted runs would eat Podman's container locks.
  "$dir"/sandpod gc >/dev/null 2>&1 || true
  stage "test $dir"
  ctest --test-dir "$dir" -j"$jobs" --output-on-failure --timeout 900
  stage "leaks after $dir"
  tests/leakcheck.sh after "$leaks_before"
}

run_suite build/test
if [ $quick = 0 ]; then
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    run_suite build/asan -DSANDPOD_SANITIZE=ON
fi

# The README's Build command (Release, gcc -O3, warnings as errors) and a
# clang build compile everything, tests included: warnings that only -O3 or
# clang see fail here, not on a user's machine.
build_only() {
  local dir=$1
  shift
  stage "build $dir ($*)"
  mkdir -p "$dir"
  if ! { cmake -S . -B "$dir" -DSANDPOD_WERROR=ON "$@" && cmake --build "$dir" -j"$jobs"; } \
    >"$dir.log" 2>&1; then
    grep -E 'error|warning' -A3 "$dir.log" | head -40
    echo "build $dir failed; see $dir.log"
    exit 1
  fi
}
if [ $quick = 0 ]; then
  build_only build/release -DCMAKE_BUILD_TYPE=Release
  if command -v clang >/dev/null; then
    CC=clang build_only build/clang -DCMAKE_BUILD_TYPE=Release
  fi
fi

# Rootless: the integration suites again as a non-root user with subuids,
# against that user's own rootless Podman service (user namespaces with
# keep-id), from a copy of the tree the user owns. Root only (it makes the
# user); SANDPOD_ROOTLESS=0 skips it.
rootless_suite() {
  local user=${SANDPOD_ROOTLESS_USER:-sandpod-ci}
  stage "rootless: integration suites as $user"
  id "$user" >/dev/null 2>&1 || useradd -m -s /bin/bash "$user"
  grep -q "^$user:" /etc/subuid || usermod --add-subuids 300000-365535 "$user"
  grep -q "^$user:" /etc/subgid || usermod --add-subgids 300000-365535 "$user"
  local uid home rt src
  uid=$(id -u "$user")
  home=$(getent passwd "$user" | cut -d: -f6)
  rt=/run/user/$uid
  mkdir -p "$rt"
  chown "$user:" "$rt"
  chmod 700 "$rt"
  # Rootless --network default runs slirp4netns, which opens /dev/net/tun:
  # Debian's udev makes it 0666; a machine without udev leaves it 0600.
  [ -c /dev/net/tun ] && chmod 0666 /dev/net/tun
  src=$home/sandpod-ci
  rm -rf "$src"
  mkdir -p "$src"
  git ls-files -z | tar --null -T - -cf - | tar -xf - -C "$src"
  # The agent clients test's npm packages (~900 MB of native binaries, put
  # there by its run.sh in the root run above) come along: the user's run
  # needs no registry and does not download them again.
  local nm=tests/contrib/agent_clients/node_modules
  [ -d "$nm" ] && cp -a "$nm" "$src/$nm"
  chown -R "$user:" "$src"
  runuser -u "$user" -- env -i HOME="$home" USER="$user" PATH="$PATH" XDG_RUNTIME_DIR="$rt" \
    CI="${CI:-}" JOBS="$jobs" bash -c '
      set -euo pipefail
      cd ~/sandpod-ci
      contrib/podman-service.sh start >/dev/null
      cmake -S . -B build/rootless -DCMAKE_BUILD_TYPE=Debug -DSANDPOD_WERROR=ON >/dev/null
      cmake --build build/rootless -j"$JOBS" >/dev/null
      build/rootless/sandpod gc >/dev/null 2>&1 || true
      rc=0
      ctest --test-dir build/rootless -L integration -j"$JOBS" --output-on-failure --timeout 900 || rc=$?
      build/rootless/sandpod gc >/dev/null 2>&1 || true
      contrib/podman-service.sh stop >/dev/null || true
      exit $rc'
}

if [ $quick = 0 ] && [ "$(id -u)" = 0 ] && [ "${SANDPOD_ROOTLESS:-1}" != 0 ]; then
  rootless_suite
fi

# Fuzzing, bounded: the libFuzzer targets of tests/fuzz built with clang, each
# run for SANDPOD_FUZZ_SECONDS (default 20) from its seed corpus, $jobs at a
# time (the whole stage stays under 5 minutes). New inputs go to a scratch
# corpus in the build folder, never into the tree; a crash fails the run and
# its input must be fixed and kept in tests/fuzz/regressions/<target>/.
fuzz_secs=${SANDPOD_FUZZ_SECONDS:-20}
if [ $quick = 0 ] && [ "$fuzz_secs" != 0 ]; then
  if ! command -v clang >/dev/null; then
    stage "fuzz: skipped (no clang)"
  else
    stage "build build/fuzz (clang, -DSANDPOD_FUZZ=ON)"
    CC=clang cmake -S . -B build/fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSANDPOD_WERROR=ON \
      -DSANDPOD_FUZZ=ON >/dev/null
    cmake --build build/fuzz -j"$jobs" --target sandpod_fuzzers >/dev/null
    stage "fuzz (${fuzz_secs}s per target)"
    fuzz_one() {
      local t=$1 work=build/fuzz/fuzz-work/$1 art=build/fuzz/fuzz-artifacts/$1
      local tmp=$PWD/build/fuzz/fuzz-tmp/$1
      rm -rf "$work" "$tmp"; mkdir -p "$work" "$art" "$tmp"
      cp tests/fuzz/corpus/"$t"/* "$work"/
      # libFuzzer ends a timed run without atexit handlers: scratch trees
      # go to a folder of our own, removed below.
      if SP_FUZZ_TMPDIR=$tmp build/fuzz/tests/fuzz/fuzz_"$t" -max_total_time="$fuzz_secs" -timeout=10 \
           -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$art"/ \
           "$work" $([ -d tests/fuzz/regressions/"$t" ] && echo tests/fuzz/regressions/"$t") \
           >build/fuzz/fuzz-"$t".log 2>&1; then
        echo "fuzz_$t: $(grep -h 'stat::number_of_executed_units' build/fuzz/fuzz-"$t".log |
          awk '{print $2}') runs, $(grep -h 'stat::average_exec_per_sec' build/fuzz/fuzz-"$t".log |
          awk '{print $2}') exec/s"
      else
        echo "fuzz_$t FAILED: see build/fuzz/fuzz-$t.log; input in $art/"
        tail -40 build/fuzz/fuzz-"$t".log
        return 1
      fi
    }
    fuzz_failed=0
    running=0
    for t in $(ls tests/fuzz/corpus); do
      fuzz_one "$t" &
      running=$((running + 1))
      if [ $running -ge "$jobs" ]; then
        wait -n || fuzz_failed=1
        running=$((running - 1))
      fi
    done
    while [ $running -gt 0 ]; do
      wait -n || fuzz_failed=1
      running=$((running - 1))
    done
    rm -rf build/fuzz/fuzz-tmp
    [ $fuzz_failed = 0 ] || { echo "fuzzing found a crash"; exit 1; }
  fi
fi
stage "all suites passed"
