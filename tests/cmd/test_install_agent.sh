#!/usr/bin/env bash
# The in-container agent is found wherever sandpod is installed (issue 23).
# Install the build to a prefix and move the prefix; then, with nothing set:
#   - the installed sandpod gives a new sandbox the moved tree's agent:
#     inspect says so, and commands take the fast path;
#   - a program that loads the moved libsandpod.so (python3, whose own
#     folder holds no agent) finds it beside the library;
#   - an agent under a folder others may write, through a symlink or not,
#     is refused, and create says why;
#   - with no agent anywhere, create warns once that commands take the slow
#     REST path and how to fix it, and inspect says rest and why;
#   - SANDPOD_AGENT=none and SANDPOD_EXEC_PATH=rest are shown as the reason.
# The mean round trip of 20 execs on each path is printed (not checked).
#
# Usage: test_install_agent.sh BUILD_DIR
# Exits 77 (skip) when Podman is unavailable, unless CI=true.
set -u

build=${1:?usage: test_install_agent.sh BUILD_DIR}
build=$(cd "$build" && pwd)
SP=/nonexistent # the installed one, once installed
PREFIX=sandpod-agentpath
. "$(dirname "$0")/podman_lib.sh"
# CTest hands every test the build's agent; this one looks by itself.
unset SANDPOD_AGENT SANDPOD_EXEC_PATH

# The lookup refuses a tree below a folder others may write or own (a
# sticky one such as /tmp excepted): T must not be below one.
d=$(cd "$T" && pwd -P)
while [ "$d" != / ]; do
    d=$(dirname "$d")
    m=$((8#$(stat -c %a "$d")))
    u=$(stat -c %u "$d")
    if { [ $((m & 8#22)) != 0 ] && [ $((m & 8#1000)) = 0 ]; } || { [ "$u" != 0 ] && [ "$u" != "$(id -u)" ]; }; then
        skip "$d (mode $(stat -c %a "$d"), uid $u) may be changed by others: set TMPDIR to a private folder"
    fi
done

cmake --install "$build" --prefix "$T/made" >"$T/install.log" 2>&1 || {
    cat "$T/install.log"
    echo "FAIL: cmake --install"
    exit 1
}
mv "$T/made" "$T/moved"
P=$T/moved
SP=$P/bin/sandpod
AGENT=$P/libexec/sandpod/sandpod-agent
check "the agent is installed in libexec/sandpod" test -x "$AGENT"
need_image

# mean_ms NAME: the mean wall time of 20 `sandpod exec NAME true`, in ms.
mean_ms() {
    local t0 t1
    t0=$(date +%s%N)
    for _ in $(seq 20); do "$SP" exec "$1" true >/dev/null 2>&1; done
    t1=$(date +%s%N)
    echo $(((t1 - t0) / 20000000))
}

# ------------------------------------------------ the moved tree's agent --
run create --name fast
expect 0 "create from the moved prefix"
if grep -q 'warning: .*sandpod-agent' "$T/err"; then bad "create warned: $(cat "$T/err")"; else ok; fi
run inspect fast
expect 0 "inspect"
out_has "exec path:  fast (agent $AGENT)" "inspect shows the fast path and the moved agent"
run inspect --json fast
json "inspect --json shows the exec path" \
    "j['exec_path'] == 'fast' and j['exec_path_reason'] == 'agent $AGENT'"
# Forced: an error instead of a silent fall back to REST.
SANDPOD_EXEC_PATH=fast run exec fast echo hi
expect 0 "exec through the agent"
out_is 'hi\n' "exec through the agent prints"
SANDPOD_EXEC_PATH=rest run inspect fast
out_has "exec path:  rest (SANDPOD_EXEC_PATH=rest)" "inspect names SANDPOD_EXEC_PATH=rest"
fast_ms=$(mean_ms fast)
rest_ms=$(SANDPOD_EXEC_PATH=rest mean_ms fast)
echo "round trip of 'sandpod exec fast true' (a whole CLI run) from the moved prefix, mean of 20:" \
    "fast ${fast_ms} ms, rest ${rest_ms} ms"
run rm --force fast

# ------------------------------ another program loading the moved library --
site=$(sed -n 's/^SANDPOD_PYTHON_SITEDIR:STRING=//p' "$build/CMakeCache.txt")
if grep -q '^SANDPOD_PYTHON:BOOL=ON' "$build/CMakeCache.txt" && [ -d "$P/$site/sandpod" ]; then
    # A sanitized build's library loads in python with its runtime first.
    san=$(ldd "$P/lib/libsandpod.so.0" 2>/dev/null |
        awk '/lib(asan|ubsan)\.so/ {print $3}' | sort -u | paste -sd:)
    (cd / && env -u SANDPOD_LIBRARY -u SANDPOD_TOOLS_LIBRARY -u PYTHONPATH \
        ${san:+LD_PRELOAD=$san ASAN_OPTIONS=detect_leaks=0} \
        PYTHONPATH="$P/$site" PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 -c '
import sys, time
import sandpod
with sandpod.Sandbox.create(name="py") as sb:
    e = sb.exec_path()
    print(e.path, e.reason)
    print(sb.exec(["echo", "hi"]).stdout.strip())
    ms = []
    for h in (sb, sandpod.Sandbox.open("py", exec_path="rest")):
        h.exec(["true"])
        t = time.monotonic()
        for _ in range(20):
            h.exec(["true"])
        ms.append((time.monotonic() - t) / 20 * 1000)
    print("round trip of Sandbox.exec([\"true\"]) from the moved prefix, mean of 20:"
          " fast %.1f ms, rest %.1f ms" % tuple(ms), file=sys.stderr)' >"$T/out" 2>"$T/err")
    rc=$?
    expect 0 "python3 makes a sandbox with the moved library"
    out_is "fast agent $AGENT\nhi\n" "python3 finds the agent beside the moved library"
    grep '^round trip' "$T/err"
else
    echo "the Python package is not installed: its check is left out"
fi

# -------------------------------------------------- an agent others may change --
chmod g+w "$P/libexec"
run create --name open
expect 0 "create with a group-writable libexec"
err_has "sandpod: warning: no usable sandpod-agent ($AGENT is not used: $P/libexec is writable by group or others): commands in sandbox open take the slow REST path" \
    "create says why the agent is not used"
run inspect open
out_has "exec path:  rest (no usable sandpod-agent when the container was made: $AGENT is not used: $P/libexec is writable by group or others)" \
    "inspect says rest and why"
chmod g-w "$P/libexec"
run rm --force open

# The same behind a symlink: what counts is the folder it leads to.
mkdir "$T/drop"
chmod 0777 "$T/drop"
cp "$AGENT" "$T/drop/sandpod-agent"
mv "$P/libexec/sandpod" "$P/libexec/sandpod.real"
ln -s "$T/drop" "$P/libexec/sandpod"
run create --name linked
expect 0 "create with libexec/sandpod a link to a world-writable folder"
err_has "$AGENT is not used: $(cd "$T" && pwd -P)/drop is writable by group or others" \
    "create names the folder the link leads to"
run rm --force linked
rm "$P/libexec/sandpod"
mv "$P/libexec/sandpod.real" "$P/libexec/sandpod"

if [ "$(id -u)" = 0 ]; then
    chown 65534 "$AGENT"
    run create --name owned
    err_has "$AGENT is owned by uid 65534, not by root" "create refuses an agent another user owns"
    chown 0 "$AGENT"
    run rm --force owned
fi

# ------------------------------------------------------ no agent at all --
SANDPOD_AGENT=none run create --name off
expect 0 "create with SANDPOD_AGENT=none"
if grep -q 'warning: .*sandpod-agent' "$T/err"; then bad "SANDPOD_AGENT=none warned"; else ok; fi
run inspect off
out_has "exec path:  rest (SANDPOD_AGENT=none when the container was made)" "inspect names SANDPOD_AGENT=none"
run rm --force off

prefix=$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' "$build/CMakeCache.txt")
if [ -e "$prefix/libexec/sandpod/sandpod-agent" ]; then
    echo "an agent is installed at the configured $prefix: the no-agent checks are left out"
else
    rm "$AGENT"
    run create --name slow
    expect 0 "create without an agent"
    err_has "sandpod: warning: no sandpod-agent was found: commands in sandbox slow take the slow REST path" \
        "create warns that commands take the slow path"
    err_has "set SANDPOD_AGENT=/path/to/sandpod-agent or install it at $AGENT" "the warning says how to fix it"
    if [ "$(grep -c 'sandpod-agent' "$T/err")" = 1 ]; then ok; else bad "the warning is not one line: $(cat "$T/err")"; fi
    run inspect slow
    out_has "exec path:  rest (no sandpod-agent was found when the container was made)" "inspect says rest and why"
    run inspect --json slow
    json "inspect --json says rest and why" \
        "j['exec_path'] == 'rest' and j['exec_path_reason'] == 'no sandpod-agent was found when the container was made'"
    run exec slow echo hi
    expect 0 "exec through Podman"
    out_is 'hi\n' "exec through Podman prints"
    echo "round trip without an agent, mean of 20: $(mean_ms slow) ms"
    run rm --force slow
fi

finish
