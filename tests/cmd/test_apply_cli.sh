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

# ----------------------------------------------------------------- apply --

H=$T/host
mkdir -p "$H/sub" "$H/old"
printf 'keep\n' >"$H/keep.txt"
printf 'line 1\nline 2\nline 3\n' >"$H/edit.txt"
printf 'bye\n' >"$H/sub/gone.txt"
printf 'move me\n' >"$H/move.txt"
printf 'x\n' >"$H/old/x.txt"
printf '#!/bin/sh\n' >"$H/run.sh"
A=apa-$$
run create --name "$A" --mount "$H"
expect 0 "create for apply"
cp -a "$H" "$T/host-orig"
run sh "$A" 'printf "line 1\nline two\nline 3\n" >edit.txt && rm sub/gone.txt && mkdir -p new/deep &&
    printf "fresh\n" >new/deep/f.txt && mv move.txt moved.txt && chmod 755 run.sh &&
    ln -s /etc/passwd link && ln -s ../keep.txt new/rel && rm -r old && printf s >suid && chmod 4755 suid'
expect 0 "the workload changes files"

run apply "$A" --dry-run
expect 0 "apply --dry-run"
out_is 'M  edit.txt\nD  move.txt\nA  moved.txt\nA  new/\nA  new/deep/\nA  new/deep/f.txt\nA  new/rel -> ../keep.txt\nD  old/\nD  old/x.txt\nM  run.sh  (mode 0644 -> 0755)\nD  sub/gone.txt\nA  suid\n!  link -> /etc/passwd  (a symlink out of the host folder; --allow-links-out writes it)\n' \
    "apply --dry-run lists the changes, link targets, mode changes and what is held back"
err_has "dry run, nothing written" "the dry run says so"
check "a dry run writes nothing" diff -r "$T/host-orig" "$H"

cp -a "$T/host-orig" "$T/patched"
(cd "$T/patched" && git init -q . && git add -A && git -c user.email=t@t -c user.name=t commit -qm base)
run apply "$A" --patch
expect 0 "apply --patch"
cp "$T/out" "$T/changes.patch"
check "a dry run and --patch write nothing" diff -r "$T/host-orig" "$H"
check "git apply --check accepts the patch" git -C "$T/patched" apply --check "$T/changes.patch"
check "git apply applies it" git -C "$T/patched" apply "$T/changes.patch"

run apply "$A" --json
expect 0 "apply"
json "apply --json" 'j["ok"] is True and j["applied"] is True and not j["conflicts"] and len(j["changes"]) == 12 and [h["path"] for h in j["held"]] == ["link"] and j["held"][0]["hold"] == "link-out" and j["snapshot"]'
check "no temporary folder left" test -z "$(find "$H" -name '.sandpod-apply*')"
check "edit.txt applied" grep -qx 'line two' "$H/edit.txt"
check "deleted file gone" test ! -e "$H/sub/gone.txt"
check "deleted folder gone" test ! -e "$H/old"
check "rename: old name gone" test ! -e "$H/move.txt"
file_is "$H/moved.txt" 'move me\n' "rename: new name"
file_is "$H/new/deep/f.txt" 'fresh\n' "a file in added folders"
check "a symlink out of the folder is held back" test ! -e "$H/link" -a ! -L "$H/link"
check "a relative symlink as it is" test "$(readlink "$H/new/rel")" = ../keep.txt
check "mode applied" test "$(stat -c %a "$H/run.sh")" = 755
check "set-id bits dropped" test "$(stat -c %a "$H/suid")" = 755
host_tree "$H" >"$T/tree-applied"
host_tree "$T/patched" >"$T/tree-patched"
# git tracks no folders: its apply removes sub/ with its last file.
check "git apply of --patch gives what apply wrote" \
    diff <(grep -v ' d ' "$T/tree-applied") <(grep -v ' d ' "$T/tree-patched")

run apply "$A"
expect 0 "apply again"
check "applying again changes nothing" diff "$T/tree-applied" <(host_tree "$H")
out_has '=  edit.txt' "applying again: already there"

# ------------------------------------------------------------- conflicts --
C=$T/conf
mkdir -p "$C"
for f in a b same keep; do printf '%s\n' "$f" >"$C/$f.txt"; done
mkdir "$C/gone"
printf 'g\n' >"$C/gone/g.txt"
B=apb-$$
run create --name "$B" --mount "$C"
expect 0 "create for conflicts"
run sh "$B" 'echo sandbox >a.txt && echo sandbox >b.txt && echo sandbox >both.txt &&
    echo same >twin.txt && echo only >only.txt && rm -r gone'
expect 0 "the workload changes files"
echo host >"$C/a.txt"
echo mine >"$C/gone/host-new.txt"
rm "$C/b.txt"
echo host >"$C/both.txt"
echo same >"$C/twin.txt"
host_tree "$C" >"$T/conf-before"
run apply "$B"
expect 1 "apply with conflicts"
out_has 'C  a.txt  (changed on the host)' "host edited"
out_has 'C  b.txt  (deleted on the host)' "host deleted"
out_has 'C  both.txt  (added on both sides)' "both added, other content"
out_has '=  twin.txt' "both added, same content: no conflict"
out_lacks 'C  twin.txt' "both added, same content: not listed as a conflict"
out_has 'C  gone/host-new.txt  (added on the host in a folder the sandbox deleted)' \
    "host added a file in a folder the sandbox deleted"
err_has "4 conflicts" "the count of conflicts"
check "conflicts: nothing written" diff "$T/conf-before" <(host_tree "$C")
run apply "$B" --json
expect_rc 1 "apply --json with conflicts"
json "conflicts in JSON" 'j["ok"] is False and j["applied"] is False and sorted(c["path"] for c in j["conflicts"]) == ["a.txt", "b.txt", "both.txt", "gone/host-new.txt"]'
run apply "$B" --force
expect 1 "--force never deletes a file the sandbox did not see"
check "a failed --force writes nothing" diff "$T/conf-before" <(host_tree "$C")
rm "$C/gone/host-new.txt"
run apply "$B" --force
expect 0 "apply --force"
check "--force: the deleted folder is gone" test ! -e "$C/gone"
file_is "$C/a.txt" 'sandbox\n' "--force: the sandbox's side wins (edited)"
file_is "$C/b.txt" 'sandbox\n' "--force: written again (deleted on the host)"
file_is "$C/both.txt" 'sandbox\n' "--force: both added"
file_is "$C/only.txt" 'only\n' "--force: the rest applied"

# ------------------------------------------ host symlinks, never written through --
S=$T/sym
OUT=$T/outside
mkdir -p "$S/dir" "$OUT"
printf 'in\n' >"$S/dir/in.txt"
printf 'first\n' >"$S/a-first.txt"
printf 'del\n' >"$S/z-del.txt"
mkdir "$S/zdir"
printf 'z\n' >"$S/zdir/z.txt"
D=apc-$$
run create --name "$D" --mount "$S"
expect 0 "create for symlinks"
run sh "$D" 'echo evil >dir/in.txt && echo new >dir/new.txt && echo changed >a-first.txt && rm -r z-del.txt zdir'
expect 0 "the workload writes in dir"
mv "$S/dir" "$T/dir-moved"
ln -s "$OUT" "$S/dir"
run apply "$D"
expect 1 "a host symlink where a folder was"
out_has 'not a folder' "the conflict says why"
run apply "$D" --force
expect 1 "--force does not write through a host symlink"
check "nothing written through the symlink" test -z "$(ls -A "$OUT")"
check "the symlink is left" test -L "$S/dir"
# Deletes go first, deepest and last names first: z-del.txt and zdir/ are
# gone before dir/new.txt fails, and must come back.
file_is "$S/a-first.txt" 'first\n' "a failed apply leaves the rest"
file_is "$S/z-del.txt" 'del\n' "a failed apply undoes a deleted file"
file_is "$S/zdir/z.txt" 'z\n' "a failed apply undoes a deleted folder"
check "no temporary folder left after a failure" test -z "$(find "$S" -name '.sandpod-apply*')"

# ------------------------------------------ a mount at dst=, and --from --
M=$T/msrc
mkdir -p "$M"
printf 'm\n' >"$M/m.txt"
E=apd-$$
run create --name "$E" --mount "src=$M,dst=proj"
expect 0 "create with dst="
run sh "$E" 'echo outside >top.txt && echo inside >proj/m.txt'
expect 0 "the workload writes inside and outside the mount"
run snapshot "$E" --tag step
expect 0 "a snapshot after the first change"
run apply "$E"
expect 0 "apply a dst= mount"
out_is 'M  m.txt\n' "only the mount's folder, its paths relative to it"
file_is "$M/m.txt" 'inside\n' "written to the mount's source"
check "nothing from outside the mount" test ! -e "$M/top.txt"
run sh "$E" 'echo later >proj/later.txt'
run apply "$E" --from step --dry-run
expect 0 "apply --from"
out_is 'A  later.txt\n' "--from counts changes from that snapshot"
OTHER=$T/other
mkdir -p "$OTHER"
run apply "$E" --from step --to "$OTHER"
expect 0 "apply --to"
file_is "$OTHER/later.txt" 'later\n' "--to writes there"
run apply "$E" --patch
expect 1 "--patch for a mount at a subfolder"
err_has "workspace root" "--patch says why"

# ------------------------------ a Python and Node project after its tests --
# What the tests leave (caches, node_modules, .pyc) was never hydrated and
# must not come back; the host's own copies of them are no conflict.
J=$T/pyjs
mkdir -p "$J/src" "$J/node_modules/left" "$J/src/__pycache__"
printf 'node_modules/\n__pycache__/\n.pytest_cache/\n*.pyc\n' >"$J/.gitignore"
printf 'def f():\n    return 1\n' >"$J/src/m.py"
printf '{"name": "x"}\n' >"$J/package.json"
printf 'host' >"$J/node_modules/left/index.js"
printf 'host' >"$J/src/__pycache__/m.cpython-311.pyc"
(cd "$J" && git init -q . && git add -A && git -c user.email=t@t -c user.name=t commit -qm base)
cp "$J/.git/index" "$T/pyjs-index"
PJ=apj-$$
run create --name "$PJ" --mount "src=$J,gitignore"
expect 0 "create a Python and Node project with gitignore"
run sh "$PJ" 'printf "def f():\n    return 2\n" >src/m.py && mkdir -p node_modules/dep .pytest_cache src/__pycache__ &&
    printf x >node_modules/dep/index.js && printf x >.pytest_cache/v && printf x >src/__pycache__/m.cpython-311.pyc'
expect 0 "the workload runs its tests"
run apply "$PJ"
expect 0 "apply after the tests: no spurious conflict"
out_is 'M  src/m.py\n' "only the real change comes back"
err_has "left out by the mount's filters" "the caches are counted as filtered"
file_is "$J/node_modules/left/index.js" 'host' "the host's own node_modules untouched"
check "the host's git index untouched" cmp -s "$T/pyjs-index" "$J/.git/index"
run apply "$PJ" --all --dry-run
out_has 'A  node_modules/dep/index.js' "--all brings what the filters left out"

# ------------------------------------------ the winner of an experiment --
X=$T/exp
mkdir -p "$X"
printf 'v0\n' >"$X/model.txt"
printf 'keep\n' >"$X/keep.txt"
G=ape-$$
run create --name "$G" --mount "$X"
expect 0 "create the origin of an experiment"
cp -a "$X" "$T/exp-orig"
run sh "$G" 'printf "prepared\n" >prep.txt'
run snapshot "$G" --tag prepared
expect 0 "the prepared state"
run fork "$G" prepared --name "$G-f"
expect 0 "fork from the prepared state"
run sh "$G-f" 'printf "v1\n" >model.txt'
run diff "$G-f"
out_is 'M  model.txt\nA  prep.txt\n' "a fork's diff counts from what its origin was made from"
run apply "$G-f" --dry-run
expect 0 "apply a fork, dry run"
out_is 'M  model.txt\nA  prep.txt\n' "the fork's whole line of work, against the origin's host folder"
run snapshot "$G-f"
run fork "$G-f" --name "$G-ff"
expect 0 "a fork of a fork"
run sh "$G-ff" 'printf "v2\n" >model.txt'
run apply "$G-ff"
expect 0 "apply the winner, a fork of a fork"
file_is "$X/model.txt" 'v2\n' "the winner's change lands in the origin's host folder"
file_is "$X/prep.txt" 'prepared\n' "with what the origin prepared before the fork"
file_is "$X/keep.txt" 'keep\n' "and nothing else"

# A sandbox made from a template saved from the origin applies the same way.
run template save "$G" "tpl-$$" --snapshot prepared
expect 0 "template save from the origin's prepared state"
run create --template "tpl-$$" --name "$G-t"
expect 0 "create --template"
run sh "$G-t" 'printf "v3\n" >model.txt'
run apply "$G-t" --dry-run
out_has '=  prep.txt' "counted from the origin's baseline, into the origin's host folder (which holds it already)"
run apply "$G-t" --to "$T/exp-orig"
expect 0 "apply a template-made sandbox to a copy of the origin's project as it was"
file_is "$T/exp-orig/model.txt" 'v3\n' "its change"
file_is "$T/exp-orig/prep.txt" 'prepared\n' "and what the origin prepared before the template"
run rm --force "$G-t"
run template rm "tpl-$$"
expect 0 "template rm"

# ------------------------------------------------------------- bad usage --
run apply
expect 2 "apply without NAME"
run apply "$A" extra
expect 2 "apply with an extra operand"
run apply no-such-box-$$
expect 1 "apply on a missing sandbox"
run apply "$N"
expect 1 "apply on a sandbox without a baseline"
err_has "no baseline" "apply says there is no baseline"

finish
