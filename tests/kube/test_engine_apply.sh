#!/usr/bin/env bash
# `sandpod apply` of a sandbox on a kubernetes engine, through the
# Podman-backed fake: the baseline and the workspace as it is now come from
# the peer as archives (the workspace's through a snapshot the peer does
# not keep) into a private store in the state folder, and the changes
# between them reach the host folder exactly as a local apply writes them:
# the same list, the same files, modes, links and dropped set-id bits, a
# patch git applies, conflicts refused with nothing written, --from, a bad
# ref refused, nothing left behind (no temp folder, no extra snapshot in
# the peer's store).
#
# Usage: test_engine_apply.sh PATH/TO/sandpod
set -u

SP=${1:?usage: test_engine_apply.sh PATH/TO/sandpod}
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
PREFIX=sandpod-rapply
. "$SRC/tests/cmd/podman_lib.sh"
podman info >/dev/null 2>&1 || skip "podman does not work for $(id -un): $(podman info 2>&1 | tail -n 1)"
. "$HERE/fake_lib.sh"
fake_engine "ap$$-"
pods() { podman pod ls --format '{{.Name}}' | grep -c "^sp-ap$$-"; }


H=$T/host
mkdir -p "$H/sub" "$H/old"
printf 'keep\n' >"$H/keep.txt"
printf 'line 1\nline 2\nline 3\n' >"$H/edit.txt"
printf 'bye\n' >"$H/sub/gone.txt"
printf 'move me\n' >"$H/move.txt"
printf 'x\n' >"$H/old/x.txt"
printf '#!/bin/sh\n' >"$H/run.sh"
printf 'SECRET=1\n' >"$H/.env"
A=ap$$-a
run create --engine fake --name "$A" --image "$WIMG" --mount "src=$H,exclude=.env"
skip_if_play_fails
expect 0 "create --engine fake --mount"
cp -a "$H" "$T/host-orig"
run sh "$A" 'cd /workspace && test ! -e .env &&
    printf "line 1\nline two\nline 3\n" >edit.txt && rm sub/gone.txt && mkdir -p new/deep &&
    printf "fresh\n" >new/deep/f.txt && mv move.txt moved.txt && chmod 755 run.sh &&
    ln -s /etc/passwd link && ln -s ../keep.txt new/rel && rm -r old && printf s >suid &&
    chmod 4755 suid && mkdir -p .git/hooks && printf "#!/bin/sh\ntouch /tmp/pwned\n" >.git/hooks/pre-commit &&
    printf "[core]\n\tfsmonitor = touch /tmp/pwned\n" >.git/config && printf "* filter=x\n" >.gitattributes'
expect 0 "the workload changes files, writes git payloads (and never saw .env)"
run snapshots "$A" --json
SNAPS_BEFORE=$(cat "$T/out")
BASE_ID=$(python3 -c 'import json,sys; print([s["id"] for s in json.load(sys.stdin)["snapshots"] if s["tag"] == "base"][0])' <"$T/out")

run apply "$A" --dry-run
expect 0 "apply --dry-run"
out_is 'M  edit.txt\nD  move.txt\nA  moved.txt\nA  new/\nA  new/deep/\nA  new/deep/f.txt\nA  new/rel -> ../keep.txt\nD  old/\nD  old/x.txt\nM  run.sh  (mode 0644 -> 0755)\nD  sub/gone.txt\nA  suid\n?  .gitattributes  (configuration host tools act on; review it, then --allow-path PATTERN)\n!  .git  (version-control data: git runs what its config and hooks say; never applied; 4 changes)\n!  link -> /etc/passwd  (a symlink out of the host folder; --allow-links-out writes it)\n' \
    "apply --dry-run lists the changes and what it holds back as a local apply does"
check "a dry run writes nothing" diff -r "$T/host-orig" "$H"

cp -a "$T/host-orig" "$T/patched"
(cd "$T/patched" && git init -q . && git add -A && git -c user.email=t@t -c user.name=t commit -qm base)
run apply "$A" --patch
expect 0 "apply --patch"
cp "$T/out" "$T/changes.patch"
check "--patch writes nothing" diff -r "$T/host-orig" "$H"
check "git apply applies the patch" git -C "$T/patched" apply "$T/changes.patch"

run apply "$A" --json
expect 0 "apply"
json "apply --json" 'j["ok"] is True and j["applied"] is True and not j["conflicts"] and len(j["changes"]) == 12 and j["from"] == "'"$BASE_ID"'" and sorted(h["path"] for h in j["held"]) == [".git", ".gitattributes", "link"]'
check "edit.txt applied" grep -qx 'line two' "$H/edit.txt"
check "deleted file gone" test ! -e "$H/sub/gone.txt"
check "deleted folder gone" test ! -e "$H/old"
file_is "$H/moved.txt" 'move me\n' "rename: new name"
file_is "$H/new/deep/f.txt" 'fresh\n' "a file in added folders"
check "a symlink out of the folder is held back" test ! -L "$H/link"
check "no .git was written" test ! -e "$H/.git"
check "no .gitattributes was written" test ! -e "$H/.gitattributes"
check "mode applied" test "$(stat -c %a "$H/run.sh")" = 755
check "set-id bits dropped" test "$(stat -c %a "$H/suid")" = 755
file_is "$H/.env" 'SECRET=1\n' ".env (never in the sandbox) untouched"
host_tree "$H" | grep -v '^\./\.env ' >"$T/tree-applied"
host_tree "$T/patched" | grep -v '^\./\.env ' >"$T/tree-patched"
check "git apply of --patch gives what apply wrote" \
    diff <(grep -v ' d ' "$T/tree-applied") <(grep -v ' d ' "$T/tree-patched")
check "no private store left in the state folder" \
    test -z "$(find "$SANDPOD_HOME/sandboxes/$A" -maxdepth 1 -name 'apply-*')"
run snapshots "$A" --json
check "the peer's store keeps no snapshot of the applies" [ "$(cat "$T/out")" = "$SNAPS_BEFORE" ]
run diff "$A"
expect 0 "diff NAME on the engine: a review"
out_has '!  .git  (version-control data' "diff lists what apply holds back, on the engine too"
out_has '?  .gitattributes' "and what to review"
err_has "apply $A --snapshot" "diff names the snapshot it showed"
run diff "$A" --json
json "diff --json on the engine: its snapshot and the held paths" 'j["snapshot"] and {h["path"] for h in j["held"]} == {".git", ".gitattributes", "link"}'
run snapshots "$A" --json
json "one review snapshot, replaced by each diff" 'sum(1 for s in j["snapshots"] if s["tag"] == "review") == 1'

run apply "$A"
expect 0 "apply again"
out_has '=  edit.txt' "applying again: already there"

# A conflict: the host changed a file the sandbox changed too.
run sh "$A" 'cd /workspace && echo sandbox >keep.txt'
echo host >"$H/keep.txt"
host_tree "$H" >"$T/tree-before-conflict"
run apply "$A"
expect 1 "apply with a conflict"
out_has 'keep.txt' "the conflict is named"
check "a refused apply writes nothing" diff "$T/tree-before-conflict" <(host_tree "$H")

# --from: the changes since a named snapshot only.
run snapshot "$A" --tag mid
expect 0 "snapshot --tag mid"
run sh "$A" 'cd /workspace && echo later >later.txt'
run apply "$A" --from mid --dry-run
expect 0 "apply --from mid --dry-run"
out_is 'A  later.txt\n' "--from: only what changed since that snapshot"
run apply "$A" --from no-such-snapshot
expect 1 "apply --from a snapshot that does not exist"
err_has "no-such-snapshot" "... names it"
check "... one line on stderr" [ "$(wc -l <"$T/err")" = 1 ]
check "... and leaves no private store" \
    test -z "$(find "$SANDPOD_HOME/sandboxes/$A" -maxdepth 1 -name 'apply-*')"

run rm --force "$A"
expect 0 "rm"
check "no Pod of the test is left" [ "$(pods)" = 0 ]
finish
