#!/usr/bin/env bash
# End-to-end tests of `sandpod hydrate`: SPEC parsing, filters, caps,
# containment, overlaps, JSON output, exit codes and error lines.
#
# Usage: test_hydrate_cli.sh PATH/TO/sandpod
set -u

SP=${1:?usage: test_hydrate_cli.sh PATH/TO/sandpod}
if ! command -v python3 >/dev/null 2>&1; then
    echo "python3 is missing: skipping"
    exit 77
fi

T=$(mktemp -d "${TMPDIR:-/tmp}/sandpod-hydrate-cli.XXXXXX")
trap 'rm -rf "$T"' EXIT
P=$T/project # a host folder to mount
O=$T/outside # what must never be copied
mkdir -p "$P/src/sub" "$P/node_modules/pkg" "$P/docs" "$P/emptydir" "$O"
printf 'int main(void) { return 0; }\n' >"$P/src/main.c"
printf '#define X 1\n' >"$P/src/main.h"
printf 'obj\n' >"$P/src/main.o"
printf 'deep\n' >"$P/src/sub/deep.c"
printf 'module.exports = 1;\n' >"$P/node_modules/pkg/index.js"
printf '# readme\n' >"$P/README.md"
printf 'guide\n' >"$P/docs/guide.md"
chmod 0755 "$P/src/main.c"
printf 'TOPSECRET\n' >"$O/secret"
: >"$T/empty"

. "$(dirname "$0")/lib.sh"

# jq_ok DESC PYEXPR: PYEXPR (over `j`, the JSON on stdout) is true.
jq_ok() {
    local desc=$1 expr=$2
    if python3 -c "import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if ($expr) else 1)" \
        "$T/out" 2>/dev/null; then
        ok
    else
        bad "$desc: $(head -c 400 "$T/out")"
    fi
}

tree() {
    (cd "$1" && find . -printf '%p %y %m %s\n' | LC_ALL=C sort)
}

# ---------------------------------------------------------------- usage --
run hydrate --help
expect 0 "hydrate --help"
check "help shows the SPEC syntax" grep -q 'src=PATH\[,dst=DIR\]' "$T/out"
run help hydrate
expect 0 "help hydrate"
run hydrate --mount "$P"
expect 2 "no --root"
run hydrate --root "$T/ws"
expect 2 "no --mount"
run hydrate --root "$T/ws" --name x --mount "$P"
expect 2 "--root and --name"
run hydrate --root "$T/ws" --mount "src=$P,color=red"
expect 2 "unknown SPEC key"
err_has "unknown mount spec key 'color'" "unknown key named"
run hydrate --root "$T/ws" --mount "src=$P,max-bytes=lots"
expect 2 "bad SIZE"
run hydrate --root "$T/ws" --mount "dst=x"
expect 2 "SPEC without src"
run hydrate --root "$T/ws" --mount "$P" --bogus
expect 2 "unknown option"
run hydrate --root "$T/ws" --mount "$P" extra
expect 2 "stray operand"
check "usage errors create nothing" test ! -e "$T/ws"

# ---------------------------------------------------------- plain path --
run hydrate --root "$T/ws" --mount "$P"
expect 0 "plain path mount"
check "summary line" grep -q '^hydrated .*: 7 files' "$T/out"
check "no progress when stderr is not a terminal" test ! -s "$T/err"
check "tree copied exactly" [ "$(tree "$P")" = "$(tree "$T/ws")" ]
check "content" cmp -s "$P/src/main.c" "$T/ws/src/main.c"
check "mode kept" [ "$(stat -c %a "$T/ws/src/main.c")" = 755 ]
check "mtime kept" [ "$(stat -c %Y "$P/src/main.c")" = "$(stat -c %Y "$T/ws/src/main.c")" ]
check "empty folder kept" test -d "$T/ws/emptydir"
check "no staging folder left" [ -z "$(find "$T" -name '.sandpod-hydrate-*')" ]

# ------------------------------------------------------------- filters --
run hydrate --root "$T/f1" --json --list \
    --mount "src=$P,dst=code,include=*.{c,h},include=docs,exclude=node_modules,exclude=sub"
expect 0 "include/exclude"
jq_ok "json ok first" 'list(j)[0] == "ok" and j["ok"] is True'
jq_ok "json counts" 'j["files"] == 3 and j["excluded"] >= 2'
jq_ok "json entries" '[e["path"] for e in j["entries"] if e["type"]=="file"] == ["code/docs/guide.md","code/src/main.c","code/src/main.h"]'
jq_ok "json mounts" 'j["mounts"][0]["mount_path"] == "code" and j["mounts"][0]["files"] == 3'
check "excluded folder absent" test ! -e "$T/f1/code/node_modules"
check "excluded file absent" test ! -e "$T/f1/code/src/main.o"
check "brace include" test -f "$T/f1/code/src/main.h"
check "pruned folder absent" test ! -e "$T/f1/code/src/sub"

run hydrate --root "$T/f2" --list --mount "src=$P,exclude=**/node_modules,exclude=*.o"
expect 0 "--list"
check "--list prints paths" grep -qx 'src/main.c' "$T/out"
check "--list marks folders" grep -qx 'src/' "$T/out"

# ---------------------------------------------------------------- caps --
mkdir -p "$T/keep"
printf 'already here\n' >"$T/keep/old.txt"
before=$(tree "$T/keep")
run hydrate --root "$T/keep" --mount "src=$P,max-bytes=64"
expect 1 "over max-bytes"
err_has "the selected files total" "total given"
err_has "max-bytes of 64 bytes" "cap given"
check "workspace untouched after cap" [ "$before" = "$(tree "$T/keep")" ]
run hydrate --root "$T/keep" --mount "src=$P,max-bytes=1K,exclude=node_modules"
expect 0 "under max-bytes with the big folder excluded"
check "old file kept" test -f "$T/keep/old.txt"

# --------------------------------------------------------- containment --
before=$(tree "$T/keep")
run hydrate --root "$T/keep" --mount "src=$P,dst=../escaped"
expect 1 "dst=../x"
err_has "escapes the workspace" "escape named"
check "nothing escaped" test ! -e "$T/escaped"
run hydrate --root "$T/keep" --mount "src=$P,dst=/etc"
expect 1 "dst=/etc"
run hydrate --root "$T/keep" --mount "$O" --allowed-root "$P"
expect 1 "mount outside the allowed roots"
err_has "outside the allowed roots" "outside named"
ln -s "$T" "$P/up"
run hydrate --root "$T/keep" --mount "$P/up/outside" --allowed-root "$P"
expect 1 "mount outside via a symlinked parent"
err_has "resolves to" "resolution shown"
rm "$P/up"
run hydrate --root "$T/keep" --mount "$T/missing"
expect 1 "missing mount"
err_has "not found" "missing named"
check "workspace untouched after refusals" [ "$before" = "$(tree "$T/keep")" ]

run hydrate --root "$T/j/deep/ws" --json --mount "src=$P,dst=../x"
expect 1 "--json error"
jq_ok "--json error object" 'j["ok"] is False and j["error"]["code"] == "escape"'
check "failed hydrate removes the folders it created" test ! -e "$T/j"

# -------------------------------------------------------------- symlinks --
mkdir -p "$T/lp"
printf 'inside\n' >"$T/lp/real.txt"
ln -s "$O/secret" "$T/lp/to-secret"
ln -s real.txt "$T/lp/to-real"
run hydrate --root "$T/l1" --mount "$T/lp"
expect 0 "symlinks verbatim"
check "outside link kept as a link" [ "$(readlink "$T/l1/to-secret")" = "$O/secret" ]
check "inside link kept as a link" [ "$(readlink "$T/l1/to-real")" = real.txt ]
run hydrate --root "$T/l2" --json --mount "src=$T/lp,follow-symlinks"
expect 0 "follow-symlinks"
jq_ok "outside link reported" '[s["reason"] for s in j["skipped"] if s["path"]=="to-secret"] == ["outside"]'
check "outside target not copied" test ! -e "$T/l2/to-secret"
check "inside target copied as a file" test -f "$T/l2/to-real" -a ! -L "$T/l2/to-real"
check "no secret anywhere" sh -c "! grep -rq TOPSECRET '$T/l2'"
run hydrate --root "$T/l3" --mount "src=$T/lp,follow-symlinks" --allowed-root "$T/lp" \
    --allowed-root "$O"
expect 0 "follow-symlinks with the target's root allowed"
check "allowed target copied" grep -q TOPSECRET "$T/l3/to-secret"

# ------------------------------------------------------------- overlaps --
mkdir -p "$T/a" "$T/b/src"
printf 'from a\n' >"$T/a/README.md"
printf 'only a\n' >"$T/a/a.txt"
printf 'from b\n' >"$T/b/README.md"
printf 'b src\n' >"$T/b/src/b.c"
run hydrate --root "$T/o" --json --mount "$T/a" --mount "$T/b"
expect 0 "overlapping mounts"
check "later mount wins" grep -q 'from b' "$T/o/README.md"
check "both merged" test -f "$T/o/a.txt" -a -f "$T/o/src/b.c"
jq_ok "override reported" 'j["overridden"] == [{"path":"README.md","mount":1,"previous":0}]'
run hydrate --root "$T/o" --mount "$T/a"
expect 0 "hydrate onto an existing workspace"
check "replaced what was there" grep -q 'from a' "$T/o/README.md"
check "kept what was not" test -f "$T/o/src/b.c"
check "human output tells" grep -q 'replaced what the workspace held' "$T/out"

# -------------------------------------------------------------- secrets --
# Nothing secret flows in by default: left out, rewritten, reported.
S=$T/secrets
mkdir -p "$S/.git" "$S/.ssh"
printf '[remote "origin"]\n\turl = https://user:CLITOKEN1@host/x.git\n' >"$S/.git/config"
printf 'KEY=CLITOKEN2\n' >"$S/.env"
printf 'KEY=changeme\n' >"$S/.env.example"
printf 'CLITOKEN3\n' >"$S/.ssh/id_ed25519"
printf '//registry.npmjs.org/:_authToken=CLITOKEN4\n' >"$S/.npmrc"
run hydrate --root "$T/s1" --mount "$S"
expect 0 "hydrate a project with credentials"
check "no token reached the workspace" sh -c "! grep -r CLITOKEN '$T/s1'"
check ".env.example copied" test -f "$T/s1/.env.example"
check "the config copied without its token" grep -qx '	url = https://host/x.git' "$T/s1/.git/config"
check "hydrate names what it left out" grep -q '^  .env: holds credentials (.env file)$' "$T/out"
check "... and the key" grep -q '^  .ssh/id_ed25519: holds credentials (private key)$' "$T/out"
check "... and what it rewrote" \
    grep -q '^  .git/config: credentials removed from .git/config$' "$T/out"
run hydrate --root "$T/s2" --json --mount "$S"
expect 0 "hydrate --json a project with credentials"
jq_ok "secret skips in the JSON" \
    'sorted((s["path"], s["reason"]) for s in j["skipped"]) == [(".env", "secret"), (".ssh/id_ed25519", "secret")]'
jq_ok "rewrites in the JSON" \
    '[w["path"] for w in j["rewritten"]] == [".git/config", ".npmrc"]'
run hydrate --root "$T/s3" --mount "src=$S,secrets=keep"
expect 0 "secrets=keep"
check "secrets=keep copies everything" diff -r "$S" "$T/s3"
run hydrate --root "$T/s4" --mount "src=$S,secrets=maybe"
expect 2 "secrets=maybe"
err_has "secrets takes strip" "a bad secrets= value is named"
check "nothing made for a bad spec" test ! -e "$T/s4"

# ------------------------------------------------------------------ --name --
export SANDPOD_HOME=$T/state
run hydrate --name demo-1 --mount "$T/a"
expect 0 "--name"
check "workspace under the state root" test -f "$T/state/sandboxes/demo-1/workspace/a.txt"
run hydrate --name '../evil' --mount "$T/a"
expect 1 "bad sandbox name"
err_has "bad sandbox name" "bad name named"
unset SANDPOD_HOME

finish
