#!/usr/bin/env bash
# `sandpod fork` of a sandbox on a kubernetes engine, through the
# Podman-backed fake: the fork is a new Pod on the same engine whose
# workspace is the origin's snapshot (default its newest; streamed from the origin's peer
# export into the new peer's import): the same files (a symlink, an empty
# folder, modes), independent of the origin both ways, `diff` empty right
# after, -n 2 style repeated forks, a named snapshot, a taken name refused
# with nothing made, an export cut mid-stream leaving nothing behind, rm of
# the forks leaving no Pod, the origin unchanged.
#
# Usage: test_engine_fork.sh PATH/TO/sandpod
set -u

SP=${1:?usage: test_engine_fork.sh PATH/TO/sandpod}
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
PREFIX=sandpod-fork
. "$SRC/tests/cmd/podman_lib.sh"
podman info >/dev/null 2>&1 || skip "podman does not work for $(id -un): $(podman info 2>&1 | tail -n 1)"
. "$HERE/fake_lib.sh"
fake_engine "fk$$-"
O=fk$$-o
pods() { podman pod ls --format '{{.Name}}' | grep -c "^sp-fk$$-"; }

run create --engine fake --name "$O" --image "$WIMG" -e GREETING=hi
skip_if_play_fails
expect 0 "create --engine fake (the origin)"
run sh "$O" 'cd /workspace && mkdir -p src empty && printf "one\n" >src/a.txt &&
    printf "#!/bin/sh\necho run\n" >run.sh && chmod 0755 run.sh && chmod 0640 src/a.txt &&
    ln -s src/a.txt link && head -c 3000000 /dev/urandom >big.bin'
expect 0 "files in the origin"
LIST='cd /workspace && find . | sort | while read -r f; do
    if [ -L "$f" ]; then echo "$f -> $(readlink "$f")"; else echo "$f $(stat -c %a "$f") $( [ -f "$f" ] && md5sum <"$f" | cut -c1-8)"; fi; done'
run sh "$O" "$LIST"
expect 0 "list the origin"
ORIG=$(cat "$T/out")
# As a local fork: the origin's newest snapshot, never one taken for you.
run snapshot "$O" --tag ready
expect 0 "snapshot the origin"
run snapshots "$O" --json
SNAPS_BEFORE=$(cat "$T/out")

run fork --name "$O-f1" "$O"
expect 0 "fork a remote sandbox"
out_is "$O-f1\n" "fork prints the new name"
json_file() { python3 -c "import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if ($2) else 1)" "$1"; }
check "the fork runs on the same engine, with the origin's image and env" json_file \
    "$SANDPOD_HOME/sandboxes/$O-f1/sandbox.json" \
    "j['engine'] == 'fake' and j['image'] == '$WIMG' and 'GREETING=hi' in j['env'] and 'workspace' not in j"
run snapshots "$O" --json
check "the fork left the origin's snapshots as they were" [ "$(cat "$T/out")" = "$SNAPS_BEFORE" ]
run sh "$O-f1" "$LIST"
expect 0 "list the fork"
check "the fork's files are the origin's (symlink, empty folder, modes, content)" \
    [ "$(cat "$T/out")" = "$ORIG" ]
run diff "$O-f1" base
expect 0 "diff FORK base"
out_is "" "diff FORK against its own base is empty right after the fork"
run diff "$O-f1"
expect 0 "diff FORK"
out_is 'A  big.bin\nA  empty/\nA  link\nA  run.sh\nA  src/\nA  src/a.txt\n' \
    "diff FORK counts from what the origin was made from (origin-base)"
run snapshots "$O-f1" --json
json "the fork's baseline is tagged base, after origin-base (diff NAME added a review)" '[s["tag"] for s in j["snapshots"]][-3:] == ["origin-base", "base", "review"]'
run sh "$O-f1" 'cd /workspace && echo fork >src/a.txt && echo new >fork-only'
run sh "$O" 'cd /workspace && cat src/a.txt && test ! -e fork-only && echo origin-only >origin-only'
out_is 'one\n' "an edit in the fork does not reach the origin"
run sh "$O-f1" 'cd /workspace && cat src/a.txt && test ! -e origin-only && echo ok'
out_is 'fork\nok\n' "an edit in the origin does not reach the fork"
run diff "$O-f1" base
out_is 'A  fork-only\nM  src/a.txt\n' "diff FORK base: what changed in the fork"
run sh "$O" 'cd /workspace && rm origin-only'

# A named snapshot of the origin, forked twice.
run snapshot "$O" --tag t1
expect 0 "snapshot --tag t1"
run sh "$O" 'cd /workspace && echo after >src/a.txt'
for i in 1 2; do
    run fork --name "$O-s$i" "$O" t1
    expect 0 "fork NAME t1 ($i)"
    run sh "$O-s$i" 'cat /workspace/src/a.txt'
    out_is 'one\n' "fork of t1 ($i): the snapshot's state, not the workspace's"
done

# A name already taken: refused, nothing made.
N=$(pods)
run fork --name "$O-s1" "$O"
expect 1 "fork onto a taken name"
err_has "already exists" "... says so"
check "... and makes no Pod" [ "$(pods)" = "$N" ]

# Across engines. A local origin onto the engine: its snapshot leaves the
# local store as a tar, piped into the new peer's import.
run create --name "fk$$-local" --image "$WIMG"
expect 0 "create a local sandbox"
run sh "fk$$-local" 'mkdir -p d && printf "from local\n" >d/l.txt && chmod 0751 d/l.txt && ln -s d/l.txt ll'
run snapshot "fk$$-local"
run create --from "fk$$-local" --engine fake --name "$O-x"
expect 0 "create --from LOCAL --engine fake"
run sh "$O-x" 'cd /workspace && cat d/l.txt && stat -c %a d/l.txt && readlink ll'
out_is 'from local\n751\nd/l.txt\n' "... the local snapshot's files, modes and link, in the Pod"
check "... a sandbox of the engine" json_file "$SANDPOD_HOME/sandboxes/$O-x/sandbox.json" "j['engine'] == 'fake'"
run diff "$O-x" base
out_is "" "... diff against its own base empty right after"
run diff "$O-x"
out_is 'A  d/\nA  d/l.txt\nA  ll\n' "... its origin's baseline came along (origin-base)"
run rm --force "$O-x"
run rm --force "fk$$-local"
# The engine's sandbox onto the local engine: the peer's export into the
# new local store, restored.
run create --from "$O:t1" --engine local --name "fk$$-back"
expect 0 "create --from REMOTE:SNAP --engine local"
run sh "fk$$-back" 'cat src/a.txt && stat -c %a run.sh && readlink link'
out_is 'one\n755\nsrc/a.txt\n' "... the remote snapshot's files, modes and link, locally"
check "... a local sandbox" json_file "$SANDPOD_HOME/sandboxes/fk$$-back/sandbox.json" "'engine' not in j"
run diff "fk$$-back" base
out_is "" "... diff against its own base empty right after"
run diff "fk$$-back"
out_has 'A  src/a.txt' "... its origin's baseline came along (origin-base)"
run rm --force "fk$$-back"
expect 0 "rm the local fork"

# A template of the engine's sandbox: its snapshot kept here, in the
# template's own store; sandboxes made from it run on the engine by default.
run template save "$O" "fk$$-tpl" --snapshot t1 --json
expect 0 "template save of a sandbox of the engine"
json "... it records the origin, no image id (the engine pulls its own)" 'j["origin"] == "'"$O"'" and j["image_id"] == ""'
check "... and no Pod record" json_file "$SANDPOD_HOME/templates/fk$$-tpl/template.json" \
    "j['engine'] == 'fake' and 'remote' not in j and 'engine_kind' not in j"
run create --template "fk$$-tpl" --name "$O-t"
expect 0 "create --template (on the origin's engine)"
run sh "$O-t" 'cat /workspace/src/a.txt'
out_is 'one\n' "... the template's snapshot, in a new Pod"
check "... on the engine" json_file "$SANDPOD_HOME/sandboxes/$O-t/sandbox.json" "j['engine'] == 'fake'"
run rm --force "$O-t"
run template save "$O" "fk$$-tpl"
expect 1 "template save onto a taken name"
err_has "already exists" "... says so"
run template save "$O" "fk$$-tpl2" --snapshot no-such-snap
expect 1 "template save of a snapshot that does not exist"
err_has "no-such-snap" "... names it"
check "... no template left" [ ! -e "$SANDPOD_HOME/templates/fk$$-tpl2" ]
check "... nor a temporary folder" [ -z "$(find "$SANDPOD_HOME/templates" -maxdepth 1 -name '.tmp-*')" ]
run template rm "fk$$-tpl"
expect 0 "template rm"
# Without --snapshot: the workspace as it is now, through a snapshot the
# peer does not keep; made into a local sandbox.
run sh "$O" 'echo now >/workspace/now.txt'
run snapshots "$O" --json
SNAPS_T=$(cat "$T/out")
run template save "$O" "fk$$-tpl3"
expect 0 "template save (the workspace now)"
run snapshots "$O" --json
check "... leaves the peer's snapshots as they were" [ "$(cat "$T/out")" = "$SNAPS_T" ]
run create --template "fk$$-tpl3" --engine local --name "fk$$-tl"
expect 0 "create --template --engine local from the engine's template"
run sh "fk$$-tl" 'cat now.txt'
out_is 'now\n' "... the workspace as it was saved"
run rm --force "fk$$-tl"
run template rm "fk$$-tpl3"
run sh "$O" 'rm /workspace/now.txt'

# The export cut mid-stream: the fork fails, nothing is left.
fault '{"drop_export_at_stdout": 2}'
run fork --name "$O-cut" "$O"
expect 1 "fork with the export cut mid-stream"
check "... one line on stderr" [ "$(wc -l <"$T/err")" = 1 ]
check "... no sandbox record" [ ! -e "$SANDPOD_HOME/sandboxes/$O-cut" ]
check "... no Pod" [ "$(pods)" = "$N" ]

# The origin is unchanged by all this (the forks took its snapshots only).
run sh "$O" 'cat /workspace/src/a.txt'
out_is 'after\n' "the origin's workspace is its own"

for f in f1 s1 s2; do
    run rm --force "$O-$f"
    expect 0 "rm $f"
done
check "rm of the forks leaves only the origin's Pod" [ "$(pods)" = 1 ]
run rm --force "$O"
check "no Pod of the test is left" [ "$(pods)" = 0 ]
finish
