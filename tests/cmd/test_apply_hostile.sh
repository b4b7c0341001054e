#!/usr/bin/env bash
# The way back as a boundary: a hostile workload in a sandbox hydrated from
# a real git project writes everything git (and other host tools) would run
# or follow, then the user reviews and applies the work the way
# contrib/docs/apply.md says and keeps using git in the project. Nothing the workload wrote may
# ever run on the host: every payload touches a canary file, and none may
# appear. On a real Podman service, rootful or rootless.
#
# Usage: test_apply_hostile.sh PATH/TO/sandpod
# Exits 77 (skip) when Podman is unavailable, unless CI=true.
set -u

SP=${1:?usage: test_apply_hostile.sh PATH/TO/sandpod}

PREFIX=sandpod-apply-hostile
. "$(dirname "$0")/podman_lib.sh"

command -v git >/dev/null 2>&1 || skip "git is missing"
need_image
# Run by tests/kube/test_suites_remote.sh with SANDPOD_ENGINE=fake: every
# sandbox is then a Pod on the kubernetes engine (the Podman-backed fake).
if [ -n "${SANDPOD_TEST_ENGINES:-}" ]; then
    cp "$SANDPOD_TEST_ENGINES" "$SANDPOD_HOME/engines.json"
fi
remote=${SANDPOD_ENGINE:+yes}

CAN=$T/canary
mkdir -p "$CAN"
# The user's own git, as they would run it in their project.
g() { git -c user.email=u@example.com -c user.name=u -c init.defaultBranch=main "$@"; }
canaries() { ls -A "$CAN"; }

P=$T/project
mkdir -p "$P/src" "$P/vendor/lib"
printf 'print(1)\n' >"$P/src/app.py"
printf 'lib\n' >"$P/vendor/lib/lib.txt"
printf '*.pyc\n__pycache__/\n' >"$P/.gitignore"
g -C "$P" init -q
g -C "$P" add -A
g -C "$P" commit -qm base
g -C "$P" remote add origin "https://user:tok-$$-secret@git.example.com/p.git"
g -C "$P" config "http.https://git.example.com/.extraHeader" "Authorization: Bearer hdr-$$-secret"
head_before=$(g -C "$P" rev-parse HEAD)
cp "$P/.git/config" "$T/config-before"

N=aph-$$
run create --name "$N" --mount "src=$P,gitignore"
expect 0 "create from a git project"
err_has "credentials" "create says what it took out"
run sh "$N" 'cat .git/config; grep -r secret . 2>/dev/null; true'
out_lacks "tok-$$-secret" "the remote URL's token never reaches the workload"
out_lacks "hdr-$$-secret" "the extra header never reaches the workload"
out_has "git.example.com/p.git" "the remote itself does"

# Every payload runs `touch $CAN/<what>` on the host if anything ever runs it.
pay() { printf 'touch %s/%s' "$CAN" "$1"; }
run sh "$N" "
set -e
# The project's own .git: config that runs commands, hooks, a hooks path.
printf '[core]\n\tfsmonitor = \"$(pay fsmonitor)\"\n\thooksPath = hooks2\n\tsshCommand = \"$(pay ssh)\"\n[alias]\n\tst = !$(pay alias)\n[filter \"x\"]\n\tclean = $(pay filter)\n\tsmudge = $(pay smudge)\n[diff \"x\"]\n\ttextconv = $(pay textconv)\n[include]\n\tpath = ../evil.cfg\n[includeIf \"gitdir:/\"]\n\tpath = ../evil.cfg\n' >>.git/config
mkdir -p .git/hooks hooks2
for h in post-checkout pre-commit post-commit; do printf '#!/bin/sh\n$(pay hook-)\$0\n' >.git/hooks/\$h; chmod 755 .git/hooks/\$h; done
printf '#!/bin/sh\n$(pay hookspath)\n' >hooks2/pre-commit; chmod 755 hooks2/pre-commit
printf '[core]\n\tfsmonitor = \"$(pay include)\"\n' >evil.cfg
printf '* filter=x diff=x\n' >.gitattributes
printf '[submodule \"s\"]\n\tpath = s\n\turl = ./s\n\tupdate = !$(pay submodule)\n' >.gitmodules
printf 'touch $CAN/direnv\n' >.envrc
mkdir -p .vscode && printf '{\"terminal.integrated.shellArgs.linux\": [\"$CAN\"]}\n' >.vscode/settings.json
# The host's refs and index: an amended HEAD would hide the real change.
printf '0000000000000000000000000000000000000001\n' >.git/refs/heads/main
printf 'junk' >.git/index
# A .git file naming a gitdir the workload made, and a bare-looking folder.
mkdir -p sub evilgit/objects evilgit/refs/heads
printf 'gitdir: ../evilgit\n' >sub/.git
printf 'ref: refs/heads/main\n' >evilgit/HEAD
printf '[core]\n\tbare = true\n\tfsmonitor = \"$(pay bare)\"\n' >evilgit/config
# A nested repository, and one in another case.
mkdir -p vendor/lib/.git/objects vendor/lib/.git/refs .GIT
printf 'ref: refs/heads/main\n' >vendor/lib/.git/HEAD
printf '[core]\n\tfsmonitor = \"$(pay nested)\"\n' >vendor/lib/.git/config
printf '[core]\n\tfsmonitor = \"$(pay upper)\"\n' >.GIT/config
# Links out, special files, set-id and world-writable modes.
ln -s /etc/shadow shadow-link
ln -s ../../../etc/passwd src/up
ln -s ../src/app.py src/inside
mkfifo pipe
printf 'x' >suid && chmod 4755 suid
printf 'x' >open && chmod 666 open
# Names that would hide or fake a line.
touch \"\$(printf 'evil\nA  fake.txt')\" \"\$(printf '\033[2Jclear')\" \"\$(printf 'x\342\200\256txt.exe')\"
# Content that would erase a line on the screen of whoever reviews it.
printf 'ok\033[2K\rfake\n' >src/term.txt
# The real work, and what the mount's gitignore left out on the way in.
printf 'print(2)\n' >src/app.py
mkdir -p src/__pycache__ && printf 'pyc' >src/__pycache__/app.cpython-311.pyc && printf 'pyc' >src/app.pyc
"
expect 0 "the workload writes its payloads"

# ----------------------------------------------------------- review --
run diff "$N"
expect 0 "diff NAME"
out_has 'M  src/app.py' "the real change is listed"
out_has '!  .git  (version-control data' "diff says .git is held back"
out_has '?  .gitattributes' "diff lists .gitattributes to review"
out_lacks "$(printf '\033')" "no raw escape in diff's listing"
out_has 'evil\x0aA  fake.txt' "a newline in a name is escaped"
out_has 'x\u202etxt.exe' "a right-to-left override in a name is escaped"

run_tty diff "$N" --patch
expect_rc 0 "diff --patch to a terminal"
out_has 'ok\x1b[2K' "diff --patch to a terminal shows an escape as text"
out_lacks "$(printf '\033[2K')" "diff --patch to a terminal writes no raw escape"
run_tty apply "$N" --patch
out_has 'ok\x1b[2K' "apply --patch to a terminal shows an escape as text"
out_lacks "$(printf '\033[2K')" "apply --patch to a terminal writes no raw escape"
run apply "$N" --patch
out_has "$(printf 'ok\033[2K')" "apply --patch to a pipe is exact, for git apply"

run apply "$N" --dry-run
expect 0 "apply --dry-run"
out_has 'M  src/app.py' "dry run: the real change"
out_has '!  .git  (version-control data' "dry run: .git held back"
out_has '!  .GIT  (version-control data' "dry run: .GIT held back (any case)"
out_has '!  sub/.git  (version-control data' "dry run: a .git file held back"
out_has '!  evilgit  (version-control data' "dry run: a folder made to look like a git repository"
out_has '!  vendor/lib/.git  (version-control data' "dry run: a nested repository"
out_has '?  .gitattributes  (configuration' "dry run: review group"
out_has '?  .vscode  (configuration' "dry run: .vscode/ to review"
out_has '!  shadow-link -> /etc/shadow' "dry run: an absolute link out"
out_has '!  src/up -> ../../../etc/passwd' "dry run: a relative link out"
out_has 'A  src/inside -> ../src/app.py' "dry run: a link that stays inside is applied"
out_has '!  pipe  (a fifo' "dry run: a fifo"
out_lacks 'pyc' "dry run: the mount's gitignore leaves the .pyc files out"
err_has "left out by the mount's filters" "dry run: says what the filters left out"

run apply "$N" --json
expect 0 "apply"
json "apply --json: applied, held back listed" 'j["applied"] and {h["path"] for h in j["held"]} >= {".git", ".GIT", "sub/.git", "evilgit", "vendor/lib/.git", ".gitattributes", ".gitmodules", ".envrc", ".vscode", "shadow-link", "src/up", "pipe"} and j["filtered"] >= 2'

# -------------------------------------------------- the host afterwards --
check "the host's .git/config is untouched" cmp -s "$T/config-before" "$P/.git/config"
check "no hook was written" test ! -e "$P/.git/hooks/post-checkout"
check "HEAD did not move" test "$(g -C "$P" rev-parse HEAD)" = "$head_before"
check "the real change landed" grep -qx 'print(2)' "$P/src/app.py"
check "no .gitattributes" test ! -e "$P/.gitattributes"
check "no .GIT" test ! -e "$P/.GIT"
check "no sub/.git" test ! -e "$P/sub/.git"
check "no evilgit" test ! -e "$P/evilgit"
check "no nested .git config" test ! -e "$P/vendor/lib/.git"
check "no link out" test ! -L "$P/shadow-link" -a ! -L "$P/src/up"
check "the link inside" test "$(readlink "$P/src/inside")" = ../src/app.py
check "no fifo" test ! -e "$P/pipe"
check "no .pyc came back" test -z "$(find "$P" -name '*.pyc')"
um=$(umask)
check "set-id dropped, umask applied" test "$(stat -c %a "$P/suid")" = "$(printf '%o' $((0755 & ~um)))"
check "never world-writable" test "$(stat -c %a "$P/open")" = "$(printf '%o' $((0666 & ~um)))"
file_is "$P/evil.cfg" "[core]\n\tfsmonitor = \"touch $CAN/include\"\n" "an inert file is just a file"

# The user keeps using git.
g -C "$P" status --porcelain >"$T/status" 2>&1
check "git status shows the real change" grep -q '^ M src/app.py' "$T/status"
g -C "$P" diff --stat >/dev/null 2>&1
g -C "$P" add -A >/dev/null 2>&1
g -C "$P" commit -qm work >/dev/null 2>&1
g -C "$P" checkout -q -b other >/dev/null 2>&1
g -C "$P" checkout -q main >/dev/null 2>&1
g -C "$P/sub" status >/dev/null 2>&1
g -C "$P/vendor/lib" status >/dev/null 2>&1
g -C "$P" st >/dev/null 2>&1
g -C "$P" log -p >/dev/null 2>&1
check "nothing the workload wrote ran on the host: $(canaries | tr '\n' ' ')" test -z "$(canaries)"

# ------------------------------------------------- as a branch --
B=$T/branchy
mkdir -p "$B/src"
printf 'one\n' >"$B/src/a.txt"
printf 'gone\n' >"$B/old.txt"
g -C "$B" init -q
g -C "$B" add -A
g -C "$B" commit -qm base
bhead=$(g -C "$B" rev-parse HEAD)
cp "$B/.git/config" "$T/bconfig"
cp "$B/.git/index" "$T/bindex"
K=apk-$$
run create --name "$K" --mount "$B"
expect 0 "create for --branch"
run sh "$K" "printf 'two\n' >src/a.txt && rm old.txt && printf '#!/bin/sh\n' >run.sh && chmod 755 run.sh &&
    printf '[core]\n\tfsmonitor = \"$(pay branch-fsmonitor)\"\n' >>.git/config && printf x >.gitattributes"
expect 0 "the workload works and writes payloads"
run apply "$K" --branch sandbox-work -m 'work from the sandbox' --json
expect 0 "apply --branch"
json "apply --branch --json" 'j["applied"] and len(j["commit"]) == 40 and {h["path"] for h in j["held"]} == {".git", ".gitattributes"}'
check "HEAD did not move" test "$(g -C "$B" rev-parse HEAD)" = "$bhead"
check "the index is untouched" cmp -s "$T/bindex" "$B/.git/index"
check "the config is untouched" cmp -s "$T/bconfig" "$B/.git/config"
file_is "$B/src/a.txt" 'one\n' "the work tree is untouched"
check "the branch's parent is HEAD" test "$(g -C "$B" rev-parse sandbox-work^)" = "$bhead"
g -C "$B" show --name-status --format=%s sandbox-work >"$T/show"
check "the commit holds the work" grep -qx 'M	src/a.txt' "$T/show"
check "the commit holds the deletion" grep -qx 'D	old.txt' "$T/show"
check "the commit holds the new file" grep -qx 'A	run.sh' "$T/show"
check "the commit holds no held-back path" test -z "$(grep -E 'gitattributes|\.git/' "$T/show")"
check "the message" grep -qx 'work from the sandbox' "$T/show"
check "the executable bit" test "$(g -C "$B" ls-tree sandbox-work run.sh | cut -c1-6)" = 100755
g -C "$B" merge -q sandbox-work >/dev/null 2>&1
file_is "$B/src/a.txt" 'two\n' "the user merges it with their own git"
run apply "$K" --branch sandbox-work
expect 1 "an existing branch"
err_has "already exists" "the message says so"
run apply "$K" --branch 'bad..name'
expect 1 "a bad branch name"
run apply "$K" --branch x --force
expect 2 "--branch with --force is bad usage"
run apply "$K" -m lonely
expect 2 "--message without --branch is bad usage"
check "no payload ran: $(canaries | tr '\n' ' ')" test -z "$(canaries)"

# ------------------------------------------------- opened by name --
run apply "$N" --allow-path .gitattributes --allow-links-out --dry-run
expect 0 "apply --allow-path --allow-links-out --dry-run"
out_has 'A  .gitattributes' "--allow-path lets the named path through"
out_has '?  .gitmodules' "others stay to review"
out_has 'A  shadow-link -> /etc/shadow' "--allow-links-out lets links out through"
out_has '!  .git  (version-control data' "version-control data is never applied"
run apply "$N" --allow-path '.git' --allow-path '.git/**' --dry-run
out_has '!  .git  (version-control data' "--allow-path cannot open .git"

# ------------------------------------------------- conflicts --
Q=$T/conf
mkdir -p "$Q"
printf 'a\n' >"$Q/a.txt"
g -C "$Q" init -q
g -C "$Q" add -A
g -C "$Q" commit -qm base
Z=apz-$$
run create --name "$Z" --mount "$Q"
expect 0 "create for conflicts"
run sh "$Z" "printf 'sandbox\n' >a.txt && mkdir -p .git/hooks && printf '#!/bin/sh\n$(pay conflict-hook)\n' >.git/hooks/pre-commit && chmod 755 .git/hooks/pre-commit"
expect 0 "the workload edits a file and writes a hook"
printf 'host\n' >"$Q/a.txt"
run apply "$Z"
expect 1 "a conflict"
err_has "held-back paths stay held back" "the advice says what --force does not do"
run apply "$Z" --force
expect 0 "apply --force"
file_is "$Q/a.txt" 'sandbox\n' "--force wrote the conflicting file"
check "--force never writes a hook" test ! -e "$Q/.git/hooks/pre-commit"
g -C "$Q" commit -qam x >/dev/null 2>&1
check "no hook ran after --force" test -z "$(canaries)"

# ------------------------------------- review = what is applied --
R=$T/race
mkdir -p "$R"
printf 'v0\n' >"$R/f.txt"
Y=apr-$$
run create --name "$Y" --mount "$R"
expect 0 "create for the review race"
run sh "$Y" 'printf "reviewed\n" >f.txt'
run diff "$Y" --json
expect 0 "diff --json names its snapshot"
rid=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["snapshot"])' <"$T/out")
run diff "$Y"
err_has "apply $Y --snapshot" "diff says how to apply exactly what it showed"
rid=$(sed -n "s/.*--snapshot \([0-9a-f-]*\)'.*/\1/p" "$T/err")
# The workload swaps the file (and adds a hook) after the review.
run sh "$Y" 'printf "swapped\n" >f.txt && printf x >late.txt'
run apply "$Y" --snapshot "$rid"
expect 0 "apply --snapshot ID"
file_is "$R/f.txt" 'reviewed\n' "what was reviewed is what was written"
check "what came after the review is not written" test ! -e "$R/late.txt"
run apply "$Y" --snapshot no-such-snapshot
expect 1 "apply --snapshot with a bad id"
err_has "no-such-snapshot" "the bad id is named"
run apply "$Y" --max-files 1 --dry-run
expect 1 "over --max-files"
err_has "over the limit of 1 (--max-files)" "--max-files says so"
run apply "$Y" --max-bytes 3 --dry-run
expect 1 "over --max-bytes"
err_has "(--max-bytes)" "--max-bytes says so"
run apply "$Y" --max-files 0
expect 2 "--max-files 0 is bad usage"

# Memory is one piece of one file, not the sum of the files: three files of
# 64 MiB (random, so nothing compresses) are applied by a process whose
# peak RSS stays under one file's size. (Locally: on the kubernetes engine
# both states cross as archives, which this does not measure.)
if [ -z "$remote" ]; then
    run sh "$Y" 'for i in 1 2 3; do head -c 67108864 /dev/urandom >big$i; done'
    expect 0 "the workload writes 192 MiB"
    peak=$(python3 - "$SP" "$Y" "$rid" <<'PY'
import resource, subprocess, sys
r = subprocess.run([sys.argv[1], "apply", sys.argv[2], "--from", sys.argv[3]], capture_output=True)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024 if r.returncode == 0 else -1)
PY
    )
    check "apply of 3 x 64 MiB succeeds" test "$peak" -ge 0
    # A sanitized build's RSS holds ASan's shadow and quarantine: the bound
    # is checked on the plain builds (CI's normal and rootless stages).
    if ! ldd "$SP" 2>/dev/null | grep -q libasan; then
        check "apply of 3 x 64 MiB peaks under 64 MiB of RSS (it was ${peak} MiB)" test "$peak" -lt 64
    fi
    check "the big files landed whole" test "$(stat -c %s "$R/big3")" = 67108864
fi

# ------------------------- a project root made to look like a repository --
# A project with no .git of its own: the workload writes HEAD, objects/ and
# config at its root, which would make git open the project as a bare
# repository and run that config.
NG=$T/nogit
mkdir -p "$NG"
printf 'x\n' >"$NG/x.txt"
V=apv-$$
run create --name "$V" --mount "$NG"
expect 0 "create from a folder that is no repository"
run sh "$V" "mkdir -p objects refs/heads && printf 'ref: refs/heads/main\n' >HEAD &&
    printf '[core]\n\tbare = true\n\tfsmonitor = \"$(pay root-bare)\"\n' >config && printf y >x.txt"
expect 0 "the workload makes the root look like a bare repository"
run apply "$V"
expect 0 "apply"
out_is 'M  x.txt\n!  HEAD  (version-control data: git runs what its config and hooks say; never applied)\n!  config  (version-control data: git runs what its config and hooks say; never applied)\n!  objects  (version-control data: git runs what its config and hooks say; never applied)\n!  refs  (version-control data: git runs what its config and hooks say; never applied; 2 changes)\n' \
    "HEAD, config, objects and refs at the root are held back"
g -C "$NG" status >/dev/null 2>&1
check "no payload ran from a root made a repository" test -z "$(canaries)"

# -------------------------------------------------- owner --
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null 2>&1; then
    # Root applies into the project of another user (uid 65534), who then
    # runs git there: nothing the workload wrote may run as that user.
    C2=$(mktemp -d /tmp/sandpod-canary.XXXXXX)
    chmod 0777 "$C2"
    O=$C2/owned
    mkdir -p "$O"
    printf 'o\n' >"$O/o.txt"
    g -C "$O" init -q
    g -C "$O" add -A
    g -C "$O" commit -qm base
    chown -R 65534:65534 "$O"
    W=apo-$$
    run create --name "$W" --mount "$O"
    expect 0 "create from another user's project"
    run sh "$W" "mkdir -p d && printf n >d/new.txt && printf m >o.txt && ln -s o.txt l &&
        printf '[core]\n\tfsmonitor = \"touch $C2/other-fsmonitor\"\n' >>.git/config &&
        mkdir -p .git/hooks && printf '#!/bin/sh\ntouch $C2/other-hook\n' >.git/hooks/pre-commit &&
        chmod 755 .git/hooks/pre-commit"
    expect 0 "the workload writes"
    run apply "$W"
    expect 0 "root applies into another user's project"
    check "a new folder takes the project's owner" test "$(stat -c %u:%g "$O/d")" = 65534:65534
    check "a new file takes its folder's owner" test "$(stat -c %u:%g "$O/d/new.txt")" = 65534:65534
    check "a replaced file keeps its owner" test "$(stat -c %u:%g "$O/o.txt")" = 65534:65534
    check "a new symlink takes its folder's owner" test "$(stat -c %u:%g "$O/l")" = 65534:65534
    as_other() { setpriv --reuid=65534 --regid=65534 --clear-groups env HOME="$C2" \
        git -c user.email=o@example.com -c user.name=o "$@" >/dev/null 2>&1; }
    as_other -C "$O" status
    as_other -C "$O" add -A
    as_other -C "$O" commit -qm work
    check "the other user can write there (the canary is meaningful)" \
        setpriv --reuid=65534 --regid=65534 --clear-groups touch "$C2/probe"
    check "nothing ran as the other user: $(ls "$C2" | grep -v -e owned -e probe | tr '\n' ' ')" \
        test -z "$(ls "$C2" | grep -v -e owned -e probe)"
    rm -rf "$C2"
fi

finish
