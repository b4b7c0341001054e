#!/usr/bin/env bash
# End-to-end tests of a sandbox's baseline (the 'base' snapshot every
# create takes), `diff NAME` against it, and `apply` bringing the
# workspace's changes back to a host folder, on a real Podman service.
#
# Usage: test_apply_cli.sh PATH/TO/sandpod
# Exits 77 (skip) when Podman is unavailable, unless CI=true.
set -u

SP=${1:?usage: test_apply_cli.sh PATH/TO/sandpod}

PREFIX=sandpod-apply
. "$(dirname "$0")/podman_lib.sh"

need_image

SRC=$T/src
mkdir -p "$SRC/sub"
printf 'one\n' >"$SRC/keep.txt"
printf 'two\n' >"$SRC/edit.txt"
printf 'three\n' >"$SRC/sub/gone.txt"

# -------------------------------------------------------------- baseline --
N=ap-$$
run create --name "$N" --mount "$SRC"
expect 0 "create"
run snapshots "$N" --json
json "create took a snapshot tagged base" \
    'len(j["snapshots"]) == 1 and j["snapshots"][0]["tag"] == "base"'
run diff "$N"
expect 0 "diff NAME right after create"
out_is '' "nothing changed since the baseline"

run sh "$N" 'printf "changed\n" >edit.txt && rm sub/gone.txt && printf "new\n" >new.txt'
expect 0 "the workload changes files"
run diff "$N"
expect 0 "diff NAME"
out_is 'M  edit.txt\nA  new.txt\nD  sub/gone.txt\n' "diff NAME compares with base"
run diff "$N" --json
json "diff NAME --json" 'j["count"] == 3 and j["added"] == 1 and j["deleted"] == 1'
run diff "$N" --patch
out_has '+changed' "diff NAME --patch"

# A sandbox made before baselines: no 'base' snapshot.
run snapshot rm "$N" base
expect 0 "remove the baseline"
run diff "$N"
expect 1 "diff NAME with no baseline"
err_has "has no baseline snapshot" "the message says there is no baseline"
run diff "$N" --json
expect_rc 1 "diff NAME --json with no baseline"
json "the JSON error" 'j["ok"] is False and "baseline" in j["error"]["message"]'

finish
