#!/usr/bin/env bash
# End-to-end tests of `sandpod fork` and `sandpod create --from` on a real
# Podman service: the fork's workspace is the snapshot (not the origin's
# later changes, nor what the origin's live workspace holds), the
# configuration is the origin's, the fork runs commands as the container's
# user, origin and fork are independent afterwards (removing the origin
# keeps the fork's snapshots whole), five forks of one snapshot, and the
# errors leave nothing half-made.
#
# Usage: test_fork_cli.sh PATH/TO/sandpod
# Exits 77 (skip) when Podman is unavailable, unless CI=true.
set -u

SP=${1:?usage: test_fork_cli.sh PATH/TO/sandpod}

PREFIX=sandpod-fork
. "$(dirname "$0")/podman_lib.sh"
SRC=$T/src
mkdir -p "$SRC/sub" "$SRC/empty"
printf 'version one\n' >"$SRC/a.txt"
printf 'nested\n' >"$SRC/sub/b.txt"
printf '#!/bin/sh\necho ran\n' >"$SRC/run.sh"
chmod 0755 "$SRC/run.sh"
ln -s sub/b.txt "$SRC/link"

need_image

boxes() { ls "$SANDPOD_HOME/sandboxes" | sort | tr '\n' ' '; }

O=orig-$$
run create --name "$O" --mount "$SRC" -e GREETING=hi --memory 300M --pids 100
expect 0 "create the origin"

# ------------------------------------------------------------ errors --
# A new sandbox has one snapshot, its baseline (tagged base): a fork
# without SNAP takes it, and gets the workspace as hydrated.
printf 'after create\n' >"$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["workspace"])' \
    "$SANDPOD_HOME/sandboxes/$O/sandbox.json")/late.txt"
run fork "$O" --name f-base
expect 0 "fork of a new sandbox takes its baseline"
run exec f-base -- cat /workspace/a.txt
out_is 'version one\n' "the baseline fork has the hydrated files"
run exec f-base -- test -e /workspace/late.txt
expect_rc 1 "the baseline fork has nothing written after create"
run rm -f f-base
expect 0 "rm the baseline fork"

run snapshot "$O" -t first
expect 0 "snapshot the origin"
# Later changes, and a hostile live workspace: a symlink out to the host
# where a file was. The fork must not see any of it.
run exec "$O" -- sh -c 'echo version two > /workspace/a.txt; echo new > /workspace/c.txt; rm /workspace/sub/b.txt; ln -s /etc /workspace/sub/b.txt'
expect 0 "change the origin after the snapshot"

run fork "$O" no-such-snap --name f-missing
expect 1 "fork of a missing snapshot"
err_has "no-such-snap" "the error names the snapshot"
check "no half-made fork (missing snapshot)" test ! -e "$SANDPOD_HOME/sandboxes/f-missing"
run fork no-such-box --name f-x
expect 1 "fork of a missing sandbox"
check "no half-made fork (missing origin)" test ! -e "$SANDPOD_HOME/sandboxes/f-x"
run fork "$O" first --name "$O"
expect 1 "fork onto a taken name"
err_has "already exists" "fork says the name is taken"
run exec "$O" -- cat /workspace/c.txt
out_is 'new\n' "a refused fork onto the origin's name left the origin alone"
run fork "$O" first --name 'bad/name'
expect 2 "fork with a bad name"
run fork
expect 2 "fork without NAME"
run fork "$O" first extra --name f-y
expect 2 "fork with too many operands"
run create --from "$O:first" --mount "$SRC" --name f-z
expect 2 "create --from with --mount"
check "nothing made by refused forks" test "$(boxes)" = "$O "

# -------------------------------------------------------------- fork --
F=fork-$$
run fork "$O" first --name "$F"
expect 0 "fork"
out_is "$F\n" "fork prints the new name"
run exec "$F" -- cat /workspace/a.txt
out_is 'version one\n' "the fork holds the snapshot's a.txt, not the origin's later one"
run exec "$F" -- cat /workspace/sub/b.txt
out_is 'nested\n' "the fork's sub/b.txt is the snapshot's file, not the origin's symlink"
run exec "$F" -- sh -c 'test -e /workspace/c.txt && echo yes || echo no'
out_is 'no\n' "a file made after the snapshot is not in the fork"
run exec "$F" -- sh -c 'readlink /workspace/link; test -d /workspace/empty && echo dir; /workspace/run.sh'
out_is 'sub/b.txt\ndir\nran\n' "symlink, empty folder and exec bit come through"
run diff "$F" first
expect 0 "diff the fork against the snapshot"
out_is '' "the fork's workspace equals the snapshot"
run diff "$F" base
expect 0 "diff the fork against its own baseline"
out_is '' "the fork's diff against its own baseline (taken trusting the restore) is empty"
run diff "$F"
expect 0 "diff the fork"
out_is 'A  late.txt\n' "a fork's diff counts from what its origin was made from (origin-base)"
run diff "$F" first base
out_is '' "the fork's baseline is the forked snapshot"
run exec "$F" -- sh -c 'printf "version ONE\n" > /workspace/a.txt'
run diff "$F"
out_has 'a.txt' "a same-size change in the fork after the fork shows up against the baseline"
run exec "$F" -- sh -c 'printf "version one\n" > /workspace/a.txt'
run exec "$F" -- sh -c 'id -u; echo "$GREETING"; echo w > /workspace/written && echo wrote'
out_is '1000\nhi\nwrote\n' "the fork runs commands as the origin's user, with its env, and may write"
run inspect --json "$F"
json "the fork has the origin's configuration" "j['config']['memory_bytes'] == 300 << 20 and j['config']['pids_limit'] == 100 and j['config']['env'] == ['GREETING=***'] and j['config']['network'] == 'none'"
json "the fork keeps the record of the origin's mounts" "len(j.get('mounts', [])) == 1"
run inspect --json "$O"
cont_o=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["container"])' <"$T/out")
run inspect --json "$F"
json "the fork has a container of its own" "j['container'] and j['container'] != '$cont_o'"
run snapshots --json "$F"
json "the fork's store has the snapshot under its tag" "any(s['tag'] == 'first' for s in j['snapshots'])"

# ------------------------------------------------- independent after --
run exec "$F" -- sh -c 'echo fork side > /workspace/a.txt'
run exec "$O" -- cat /workspace/a.txt
out_is 'version two\n' "a write in the fork does not reach the origin"
run exec "$O" -- sh -c 'echo origin side > /workspace/sub/new.txt'
run exec "$F" -- sh -c 'test -e /workspace/sub/new.txt && echo yes || echo no'
out_is 'no\n' "a write in the origin does not reach the fork"
run snapshot "$F" -t forked
expect 0 "snapshot in the fork"
run snapshots --json "$O"
json "the fork's snapshot is not in the origin's store" "all(s['tag'] != 'forked' for s in j['snapshots'])"

# ----------------------------------------------- create --from, newest --
run snapshot "$O" -t second
expect 0 "a newer origin snapshot"
C=from-$$
run create --from "$O" --name "$C" --memory 200M --json
expect 0 "create --from NAME (newest snapshot)"
json "create --from prints the sandbox" "j['ok'] and j['name'] == '$C'"
run exec "$C" -- sh -c 'cat /workspace/a.txt /workspace/sub/new.txt'
out_is 'version two\norigin side\n' "create --from NAME takes the newest snapshot"
run inspect --json "$C"
json "create --from: a given option replaces the origin's, the rest is kept" "j['config']['memory_bytes'] == 200 << 20 and j['config']['pids_limit'] == 100"
run create --from "$O:first" --name "$C-2"
expect 0 "create --from NAME:SNAP"
run exec "$C-2" -- cat /workspace/a.txt
out_is 'version one\n' "create --from NAME:SNAP takes that snapshot"

# --------------------------------------------- five forks of one snap --
for i in 1 2 3 4 5; do
    run fork "$O" first --name "five-$i-$$"
    expect 0 "fork $i of five"
done
for i in 1 2 3 4 5; do
    run exec "five-$i-$$" -- sh -c "cat /workspace/a.txt; echo $i > /workspace/mine"
    out_is 'version one\n' "fork $i of five holds the snapshot"
done
for i in 1 2 3 4 5; do
    run exec "five-$i-$$" -- cat /workspace/mine
    out_is "$i\n" "fork $i of five kept its own write"
done

# ---------------------------- removing the origin leaves the fork whole --
run rm --force "$O"
expect 0 "remove the origin"
run restore "$F" first
expect 0 "restore the fork's shared snapshot after the origin is gone"
run exec "$F" -- cat /workspace/a.txt /workspace/sub/b.txt
out_is 'version one\nnested\n' "the fork's objects outlived the origin"
run fork "$F" forked --name "$F-2"
expect 0 "fork of a fork"
run exec "$F-2" -- cat /workspace/a.txt /workspace/written
out_is 'fork side\nw\n' "a fork of a fork holds the fork's snapshot"

finish
