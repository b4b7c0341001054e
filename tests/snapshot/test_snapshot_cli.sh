#!/usr/bin/env bash
# End-to-end tests of the snapshot commands (snapshot, snapshots, restore,
# diff, export, snapshot rm/gc/import) on a bare folder: --root DIR --store
# DIR. Exit codes, output, JSON, exactness of a restore, containment.
#
# Usage: test_snapshot_cli.sh PATH/TO/sandpod
set -u

SP=${1:?usage: test_snapshot_cli.sh PATH/TO/sandpod}
if ! command -v python3 >/dev/null 2>&1; then
    echo "python3 is missing: skipping"
    exit 77
fi

T=$(mktemp -d "${TMPDIR:-/tmp}/sandpod-snapcli.XXXXXX")
trap 'chmod -R u+rwx "$T" 2>/dev/null; rm -rf "$T"' EXIT
W=$T/ws
S=$T/store.git
O=$T/outside
mkdir -p "$W" "$O"
printf 'TOPSECRET\n' >"$O/secret"
: >"$T/empty"

pass=0
fail=0
rc=0

ok() { pass=$((pass + 1)); }
bad() {
    fail=$((fail + 1))
    echo "FAIL: $*"
    if [ -s "$T/err" ]; then
        head -n 5 "$T/err" | sed 's/^/    stderr: /'
    fi
}

run() {
    "$SP" "$@" <"$T/empty" >"$T/out" 2>"$T/err"
    rc=$?
}
snap() { run "$@" --root "$W" --store "$S"; }

expect_rc() { # WANT LABEL
    if [ "$rc" -eq "$1" ]; then ok; else bad "$2: exit $rc, want $1"; fi
}
expect_out() { # PATTERN LABEL
    if grep -q -- "$1" "$T/out"; then ok; else bad "$2: stdout lacks '$1': $(head -c 300 "$T/out")"; fi
}
expect_err() { # PATTERN LABEL
    if grep -q -- "$1" "$T/err"; then ok; else bad "$2: stderr lacks '$1': $(head -c 300 "$T/err")"; fi
}
json() { # EXPR: evaluate a python expression on the JSON in $T/out (as j)
    python3 -c "import json,sys; j=json.load(open('$T/out')); print($1)" 2>/dev/null
}
expect_json() { # EXPR WANT LABEL
    local got
    got=$(json "$1")
    if [ "$got" = "$2" ]; then ok; else bad "$3: $1 = '$got', want '$2'"; fi
}

# manifest DIR: every entry with type, mode, size, link target, content hash.
manifest() {
    (cd "$1" && find . -mindepth 1 -printf '%p %y %m %s %l\n' | LC_ALL=C sort &&
        find . -type f -exec sha1sum {} + | LC_ALL=C sort -k2)
}

# ---------------------------------------------------------------- usage --
for c in snapshot snapshots restore diff export; do
    run "$c" --help
    expect_rc 0 "$c --help"
    expect_out "Usage: sandpod $c" "$c --help"
done
run help snapshot
expect_rc 0 "help snapshot"
run snapshot
expect_rc 2 "snapshot without NAME"
expect_err "missing sandbox NAME" "snapshot without NAME"
run snapshot --root "$W"
expect_rc 2 "--root without --store"
expect_err "go together" "--root without --store"
run snapshot --bogus x
expect_rc 2 "bad option"
snap restore
expect_rc 2 "restore without SNAP"
snap export x
expect_rc 2 "export without -o"
snap diff
expect_rc 2 "diff without SNAP"
snap snapshots first extra
expect_rc 2 "snapshots with an extra argument"

# Nothing yet.
# A listing of nothing is empty and no error (the store is not made).
snap snapshots
expect_rc 0 "snapshots before any store"
[ ! -s "$T/out" ] && [ ! -s "$T/err" ] && ok || bad "snapshots before any store printed something"
snap snapshots --json
expect_rc 0 "snapshots --json before any store"
expect_json "j['ok'] and j['snapshots'] == [] and j['count'] == 0" True "snapshots --json lists nothing"
[ ! -e "$S" ] && ok || bad "listing made a store"
snap restore x
expect_rc 1 "restore before any store"
expect_err "no snapshots yet" "restore before any store"
run snapshot --root "$W" --store "$W/inside.git"
expect_rc 1 "store inside the workspace"
expect_err "outside the workspace" "store inside the workspace"
[ ! -e "$W/inside.git" ] && ok || bad "a store inside the workspace was created"

# ------------------------------------------------------------- snapshot --
mkdir -p "$W/src" "$W/empty/deeper" "$W/.git/objects" "$W/sub/.git" "$W/build"
printf 'int main(void) { return 0; }\n' >"$W/src/main.c"
printf 'line one\nline two\n' >"$W/notes.txt"
printf 'secret\n' >"$W/key"
chmod 600 "$W/key"
printf '#!/bin/sh\n' >"$W/run.sh"
chmod 755 "$W/run.sh"
printf '*.o\nbuild/\n' >"$W/.gitignore"
printf 'ignored object\n' >"$W/build/x.o"
printf 'ref: refs/heads/main\n' >"$W/.git/HEAD"
printf 'nested\n' >"$W/sub/.git/HEAD"
ln -s ../outside/secret "$W/leak"
ln -s nowhere "$W/dangling"
chmod 2750 "$W/src"
M0=$(manifest "$W")

snap snapshot --tag first
expect_rc 0 "snapshot"
expect_out "^snapshot [0-9a-f-]\{36\} (first)" "snapshot prints the record"
ID1=$(sed -n 's/^snapshot \([0-9a-f-]\{36\}\).*/\1/p' "$T/out")

snap snapshot --json
expect_rc 0 "snapshot --json"
expect_json "j['ok']" "True" "snapshot --json ok"
expect_json "j['files']" "8" "snapshot --json files"
expect_json "len(j['commit'])" "40" "snapshot --json commit"
expect_json "j['tag']" "None" "snapshot --json tag"
expect_json "j['stats']['full_walk']" "True" "snapshot --json stats"
ID2=$(json "j['id']")

snap snapshots
expect_rc 0 "snapshots"
expect_out "$ID1" "snapshots lists the first"
expect_out "first" "snapshots shows the tag"
snap snapshots --json
expect_json "j['count']" "2" "snapshots --json count"
expect_json "j['snapshots'][0]['id']" "$ID1" "snapshots oldest first"
# snapshots SNAP: that one record (how a remote sandbox's peer is asked).
snap snapshots --json first
expect_rc 0 "snapshots --json SNAP"
expect_json "(j['ok'], j['id'], j['tag'], j['files'])" "(True, '$ID1', 'first', 8)" "snapshots SNAP gives its record"
snap snapshots "${ID2:0:8}"
expect_rc 0 "snapshots SNAP (an id prefix)"
expect_out "^$ID2 " "snapshots SNAP prints its row"
[ "$(grep -c . "$T/out")" = 2 ] && ok || bad "snapshots SNAP prints a header and one row"
snap snapshots --json no-such-snap
expect_rc 1 "snapshots SNAP that is none"
expect_json "(j['ok'], j['error']['code'])" "(False, 'not_found')" "snapshots SNAP that is none: not_found"
expect_err "no-such-snap" "snapshots SNAP that is none names it"

if command -v git >/dev/null 2>&1; then
    if git --git-dir="$S" fsck --strict --no-dangling >/dev/null 2>&1; then ok; else bad "git fsck"; fi
fi

# ---------------------------------------------------- mutate, diff, restore --
printf 'line one\nline 2\n' >"$W/notes.txt"
chmod 644 "$W/key"
rm -rf "$W/empty" "$W/.git" "$W/build"
printf 'new\n' >"$W/added.txt"
rm "$W/run.sh"
mkdir "$W/run.sh"
rm -rf "$W/sub"
ln -s "$O" "$W/sub" # a symlink out where a folder was

snap diff first
expect_rc 0 "diff against the workspace"
expect_out "^M  notes.txt" "diff: modified"
expect_out "^M  key" "diff: mode change"
expect_out "^A  added.txt" "diff: added"
expect_out "^D  empty/$" "diff: deleted folder"
expect_out "^D  empty/deeper/$" "diff: deleted folder contents"
expect_out "^D  build/x.o" "diff: ignored file deleted"
expect_out "^T  run.sh/$" "diff: type change"
expect_out "^T  sub$" "diff: folder became a symlink"
snap diff first --patch
expect_out "^-line two" "diff --patch: old line"
expect_out "^+line 2" "diff --patch: new line"
expect_out "^old mode 100600" "diff --patch: mode"
snap diff first --json
expect_json "j['added']" "1" "diff --json added"
expect_json "j['to']" "workspace" "diff --json to"

snap restore first
expect_rc 0 "restore"
expect_out "restored $ID1 (first)" "restore prints what"
M1=$(manifest "$W")
if [ "$M0" = "$M1" ]; then ok; else
    bad "restore is not exact"
    diff <(echo "$M0") <(echo "$M1") | head -10
fi
[ "$(cat "$O/secret")" = "TOPSECRET" ] && [ "$(ls "$O")" = "secret" ] && ok ||
    bad "the folder outside changed"

snap restore first --json
expect_json "j['stats']['paths_changed']" "0" "a second restore changes nothing"
snap diff first
expect_rc 0 "diff after restore"
[ ! -s "$T/out" ] && ok || bad "diff after restore is not empty: $(head -3 "$T/out")"

# -------------------------------------------------------- refs, ambiguity --
printf 'changed\n' >"$W/notes.txt"
snap snapshot --tag first
expect_rc 0 "a second snapshot with the same tag"
snap restore first
expect_rc 1 "restore of an ambiguous tag"
expect_err "snapshots" "ambiguity lists candidates"
snap restore "${ID1:0:8}"
expect_rc 0 "restore by id prefix"
snap restore nosuchsnapshot
expect_rc 1 "restore of an unknown snapshot"
expect_err "no snapshot" "unknown snapshot message"
snap restore --json nosuchsnapshot
expect_json "j['error']['code']" "not_found" "--json error code"

# ------------------------------------------------------- export, import --
snap export "$ID1" -o "$T/x.tar.gz"
expect_rc 0 "export tar.gz"
if tar -tzf "$T/x.tar.gz" | grep -q '^\./$' && tar -tzf "$T/x.tar.gz" | grep -q '^key$'; then ok; else
    bad "tar.gz lists the tree"
fi
tar -tvzf "$T/x.tar.gz" | grep -q '^-rw------- .* key$' && ok || bad "tar keeps 0600"
tar -tvzf "$T/x.tar.gz" | grep -q 'leak -> ../outside/secret' && ok || bad "tar keeps symlinks"
snap export "$ID1" -o "$T/x.tar" --json
expect_json "j['format']" "tar" "export --json format"
"$SP" export --root "$W" --store "$S" "$ID1" -o - >"$T/stdout.tar" 2>"$T/err"
[ -s "$T/stdout.tar" ] && tar -tf "$T/stdout.tar" >/dev/null 2>&1 && ok || bad "export to stdout"
snap snapshot import "$T/x.tar.gz" --tag imported --json
expect_rc 0 "import"
IMP=$(json "j['id']")
snap diff "$ID1" "$IMP"
expect_rc 0 "diff import"
[ ! -s "$T/out" ] && ok || bad "import differs: $(head -3 "$T/out")"
mkdir -p "$T/evil/a"
printf 'x' >"$T/evil/a/f"
(cd "$T/evil" && tar -cf "$T/evil.tar" --absolute-names a/f /etc/hostname 2>/dev/null)
snap snapshot import "$T/evil.tar"
expect_rc 1 "import refuses an absolute path"
# A corrupted .tar.gz is refused, whatever libarchive would have made of
# it (its gzip reader leaves a member's CRC-32 and length unchecked), and
# makes no snapshot.
python3 - "$T/x.tar.gz" "$T" <<'PY'
import sys
d = open(sys.argv[1], "rb").read()
def put(name, b): open(sys.argv[2] + "/" + name, "wb").write(b)
put("crc.tar.gz", d[:-8] + bytes([d[-8] ^ 0xFF]) + d[-7:])  # the CRC-32
put("len.tar.gz", d[:-1] + bytes([d[-1] ^ 0x01]))            # the length
put("notrailer.tar.gz", d[:-8])                              # no trailer at all
put("two.tar.gz", d + d)                                     # two members: fine
put("padded.tar.gz", d + bytes(70000))                      # zero padding: fine
put("junk.tar.gz", d + b"junk")                              # trailing junk: refused
PY
snap snapshots --json
before=$(json "len(j['snapshots'])")
for c in "crc:incorrect data check" "len:incorrect length check" "notrailer:truncated gzip input"; do
    snap snapshot import "$T/${c%%:*}.tar.gz"
    expect_rc 1 "import of a .tar.gz with a bad ${c%%:*}"
    expect_err "import: gzip: ${c#*:}\|import: ${c#*:}" "...says what: ${c#*:}"
done
snap snapshots --json
expect_json "len(j['snapshots'])" "$before" "the refused imports made no snapshot"
snap snapshot import "$T/two.tar.gz" --tag two --json
expect_rc 0 "import of a gzip with two members"
snap snapshot import "$T/padded.tar.gz"
expect_rc 0 "import of a gzip padded with zeros"
snap snapshot import "$T/junk.tar.gz"
expect_rc 1 "import of a gzip followed by junk"
expect_err "import: gzip:" "...says so"
snap diff "$ID1" two
[ ! -s "$T/out" ] && ok || bad "the two-member import differs: $(head -3 "$T/out")"

# --------------------------------------------------------------- set-id --
printf '#!/bin/sh\n' >"$W/suid"
chmod 4755 "$W/suid"
snap snapshot --tag setid
expect_rc 0 "snapshot with a setuid file"
snap export setid -o "$T/s.tar"
tar -tvf "$T/s.tar" | grep -q '^-rwxr-xr-x nobody/nogroup .* suid$' && ok ||
    bad "export drops the setuid bit and names owner nobody: $(tar -tvf "$T/s.tar" | grep suid)"
tar -tvf "$T/s.tar" | grep -q '^drwxr-s--- nobody/nogroup .* src/$' && ok ||
    bad "export keeps a folder's setgid bit"
snap export setid -o "$T/s-kept.tar" --keep-setid
tar -tvf "$T/s-kept.tar" | grep -q '^-rwsr-xr-x nobody/nogroup .* suid$' && ok ||
    bad "export --keep-setid keeps it"
chmod 644 "$W/suid"
snap restore setid
expect_rc 0 "restore of a setuid file"
[ "$(stat -c %a "$W/suid")" = 755 ] && ok || bad "restore drops setuid: $(stat -c %a "$W/suid")"
snap restore setid --keep-setid
[ "$(stat -c %a "$W/suid")" = 4755 ] && ok || bad "restore --keep-setid: $(stat -c %a "$W/suid")"
snap snapshot import "$T/s-kept.tar" --tag imp-dropped --json
IMPD=$(json "j['id']")
snap diff --json setid "$IMPD"
expect_json "[c['path'] for c in j['changes']]" "['suid']" "import drops setuid"
snap snapshot import "$T/s-kept.tar" --keep-setid --tag imp-kept --json
IMPK=$(json "j['id']")
snap diff setid "$IMPK"
[ ! -s "$T/out" ] && ok || bad "import --keep-setid differs: $(head -3 "$T/out")"
snap snapshot --keep-setid
expect_rc 2 "--keep-setid is not for taking a snapshot"
rm -f "$W/suid"

# ------------------------------------------------- budget, large files --
head -c 3000 /dev/zero | tr '\0' x >"$W/budget.bin"
snap snapshot --max-data 2K
expect_rc 1 "snapshot over --max-data"
expect_err "budget.bin: 2.9 KiB of file data would exceed the budget of 2.0 KiB" "budget message"
snap snapshot --max-data lots
expect_rc 2 "--max-data needs a size"
snap snapshot --max-data none --tag budget
expect_rc 0 "--max-data none"
printf 'y' >>"$W/budget.bin"
snap restore budget --max-data 2K
expect_rc 1 "restore over --max-data"
[ "$(wc -c <"$W/budget.bin")" = 3001 ] && ok || bad "a refused restore changed a file"
snap diff budget --max-data 1K
expect_rc 1 "live diff over --max-data"
snap restore budget
expect_rc 0 "restore within the default budget"
head -c 9437185 /dev/zero >"$W/budget.bin"
snap diff budget --patch
expect_out "^Large files a/budget.bin and b/budget.bin differ" "a patch names a large file"
rm -f "$W/budget.bin"

# ----------------------------------------------------------------- rm, gc --
snap snapshot rm "$IMP"
expect_rc 0 "snapshot rm"
expect_out "deleted snapshot $IMP" "snapshot rm says what"
snap snapshot rm "$IMP"
expect_rc 1 "snapshot rm twice"
snap snapshot gc --json
expect_rc 0 "snapshot gc"
expect_json "j['ok']" "True" "gc --json"
snap restore "$ID2"
expect_rc 0 "restore after gc"

# The workspace root comes back no more open than 0755, with no set-id or
# sticky bit, whatever the workload made of it (restore and export).
chmod 7777 "$W"
snap snapshot --json
expect_rc 0 "snapshot of a 07777 root"
OPEN=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$T/out")
chmod 0700 "$W"
snap restore "$OPEN"
expect_rc 0 "restore of a 07777 root"
if [ "$(stat -c %a "$W")" = 755 ]; then ok; else bad "the restored root is $(stat -c %a "$W"), wanted 755"; fi
"$SP" export --root "$W" --store "$S" "$OPEN" -o - 2>"$T/err" | tar -tvf - 2>/dev/null | head -n 1 >"$T/root-entry"
if grep -q '^drwxr-xr-x ' "$T/root-entry"; then ok; else bad "the exported root is '$(cat "$T/root-entry")', wanted drwxr-xr-x"; fi
chmod 0755 "$W"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
