#!/usr/bin/env bash
# End-to-end tests of `sandpod create --setup` on a real Podman service:
# commands run once, in order, as the sandbox's user in its workdir, output
# on stderr; a failing or timed-out command leaves no sandbox behind;
# --setup-network gives setup a network the sandbox does not keep.
#
# Usage: test_setup_cli.sh PATH/TO/sandpod
# Exits 77 (skip) when Podman is unavailable, unless CI=true.
set -u

SP=${1:?usage: test_setup_cli.sh PATH/TO/sandpod}

PREFIX=sandpod-setup
. "$(dirname "$0")/podman_lib.sh"
SRC=$T/src
mkdir -p "$SRC"
printf 'from the host\n' >"$SRC/host.txt"

need_image

# nothing_left NAME DESC: no sandbox, state folder or container by that name.
nothing_left() {
    local n=$1 desc=$2
    run ls
    if grep -qE "^$n " "$T/out"; then bad "$desc: ls still lists $n"; else ok; fi
    check "$desc: no state folder" test ! -e "$SANDPOD_HOME/sandboxes/$n"
    if podman ps -a --format '{{.Names}}' 2>/dev/null | grep -q "^sandpod-$n-"; then
        bad "$desc: a container of $n is left"
    else
        ok
    fi
}

# ------------------------------------------------------------- success --
N=setup-$$
run create --name "$N" --mount "$SRC" --setup 'echo hi > made.txt' \
    --setup 'echo out-line; echo err-line >&2; id -u > uid.txt; pwd > pwd.txt; cat host.txt' \
    --setup 'echo 2 >> order.txt' --setup 'echo 3 >> order.txt'
expect 0 "create --setup"
out_is "$N\n" "stdout is the sandbox's name alone"
err_has "out-line" "setup stdout is shown on stderr"
err_has "err-line" "setup stderr is shown on stderr"
err_has "from the host" "setup runs after hydration"
err_has "setup 2/4" "each command is announced"
WS=$SANDPOD_HOME/sandboxes/$N/workspace
check "the first command made its file" grep -qx hi "$WS/made.txt"
check "setup runs as the sandbox's user" grep -qx 1000 "$WS/uid.txt"
check "setup runs in the workdir" grep -qx /workspace "$WS/pwd.txt"
if [ "$(cat "$WS/order.txt" 2>/dev/null)" = "$(printf '2\n3')" ]; then ok; else bad "setup runs in order, once"; fi
run sh "$N" 'cat made.txt'
expect 0 "the sandbox runs after setup"
out_is "hi\n" "the setup's file is seen inside"

run create --json --name "$N-j" --setup 'echo to-stderr'
expect 0 "create --json --setup"
json "stdout stays JSON" "j['ok'] and j['name'] == '$N-j'"
err_has "to-stderr" "setup output on stderr with --json"

# ------------------------------------------- a mount with gitignore --
mkdir -p "$SRC/build" "$SRC/lib"
printf 'build/\n*.log\n' >"$SRC/.gitignore"
printf '!keep.log\n' >"$SRC/lib/.gitignore"
touch "$SRC/build/out.o" "$SRC/a.log" "$SRC/lib/keep.log" "$SRC/lib/x.log"
G=gitignore-$$
run create --name "$G" --mount "src=$SRC,gitignore" --setup 'find . -type f | sort'
expect 0 "create --mount src=...,gitignore"
err_has "./lib/keep.log" "a negated file comes"
if grep -qE 'out\.o|a\.log|x\.log' "$T/err"; then bad "ignored files stay out: $(cat "$T/err")"; else ok; fi
run inspect --json "$G"
json "inspect records gitignore" "j['mounts'][0]['gitignore'] is True"
rm -rf "$SRC/build" "$SRC/lib" "$SRC/a.log" "$SRC/.gitignore"

# ------------------------------------------------------------- failure --
F=setupfail-$$
run create --name "$F" --mount "$SRC" --setup 'echo one > one.txt' \
    --setup 'echo partial > p.txt; echo boom-out; echo boom-err >&2; exit 3' --setup 'echo never > never.txt'
expect_rc 1 "a failing setup command fails create"
err_has "setup command 2" "the error names the command"
err_has "exited with code 3" "the error gives the exit code"
err_has "boom-err" "the error holds the command's output"
if grep -qF "setup 3/3" "$T/err"; then bad "later commands do not run"; else ok; fi
nothing_left "$F" "failed setup"
run create --name "$F" --setup true
expect 0 "the name is free again after a failed setup"

run create --name "$F-t" --setup 'sleep 30' --setup-timeout 1
expect_rc 1 "a setup command past its deadline fails create"
err_has "timed out" "the error says it timed out"
nothing_left "$F-t" "timed-out setup"

run create --name "$F-u" --setup-timeout 0
expect 2 "--setup-timeout 0 is refused"

# ------------------------------------------------------- setup network --
S=setupnet-$$
run create --name "$S" --setup-network --setup 'ls /sys/class/net > nets.txt'
expect 0 "create --setup-network"
WS=$SANDPOD_HOME/sandboxes/$S/workspace
if grep -qvx lo "$WS/nets.txt" 2>/dev/null; then ok; else bad "setup had a network: $(cat "$WS/nets.txt" 2>/dev/null)"; fi
run sh "$S" 'ls /sys/class/net'
expect 0 "sh after --setup-network"
out_is "lo\n" "the sandbox itself has loopback only"
run inspect --json "$S"
json "the sandbox is recorded without network" "j['config']['network'] == 'none'"

finish
