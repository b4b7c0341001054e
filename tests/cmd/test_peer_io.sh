#!/usr/bin/env bash
# `sandpod peer import` / `peer export` on host folders (no Pod): how a
# workspace crosses the wire as a tar. Exactness (modes, symlinks, empty
# folders, a name with a space and a newline), a round trip export ->
# import into another folder, all or nothing on a truncated, a corrupt and
# an escaping archive and on a restore failing half-way (the workspace
# compared entry by entry, byte for byte, and the store's snapshots listed,
# before and after), the import lock, and two concurrent imports.
#
# Usage: test_peer_io.sh PATH/TO/sandpod
set -u

SP=${1:?usage: test_peer_io.sh PATH/TO/sandpod}
if ! command -v python3 >/dev/null 2>&1; then
    echo "python3 is missing: skipping"
    exit 77
fi
HERE=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d "${TMPDIR:-/tmp}/sandpod-peerio.XXXXXX")
immutable=
trap '[ -n "$immutable" ] && chattr -i "$immutable" 2>/dev/null; chmod -R u+w "$T" 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$T"' EXIT
. "$HERE/lib.sh"

# fp DIR: every entry below DIR, sorted: path, type, permission bits, and
# the content's sha256 or the symlink's target.
fp() {
    python3 - "$1" <<'PY'
import hashlib, os, stat, sys
root = sys.argv[1]
out = []
for d, dirs, files in os.walk(root):
    for n in dirs + files:
        p = os.path.join(d, n)
        st = os.lstat(p)
        rel = os.path.relpath(p, root)
        if stat.S_ISLNK(st.st_mode):
            what = "l " + os.readlink(p)
        elif stat.S_ISDIR(st.st_mode):
            what = "d"
        else:
            with open(p, "rb") as f:
                what = "f " + hashlib.sha256(f.read()).hexdigest()
        out.append("%r %o %s" % (rel, stat.S_IMODE(st.st_mode), what))
print("\n".join(sorted(out)))
PY
}

# same_tree DESC A B: two folders hold the same entries.
same_tree() {
    if [ "$(fp "$2")" = "$(fp "$3")" ]; then
        ok
    else
        bad "$1"
        diff <(fp "$2") <(fp "$3") | head -n 10 | sed 's/^/    /'
    fi
}

# snaps STORE WS: the store's snapshot list (ids and tags).
snaps() {
    "$SP" snapshots --json --root "$2" --store "$1" 2>/dev/null |
        python3 -c 'import json,sys; j=json.load(sys.stdin); print(sorted((s["id"], s.get("tag")) for s in (j.get("snapshots") or [])))'
}

# The source: every kind of entry a snapshot keeps.
SRC=$T/src
mkdir -p "$SRC/empty" "$SRC/sub/deeper" "$SRC/ro"
printf 'hello\n' >"$SRC/a.txt"
printf '#!/bin/sh\necho hi\n' >"$SRC/run.sh"
chmod 0750 "$SRC/run.sh"
printf 'secret' >"$SRC/sub/private"
chmod 0600 "$SRC/sub/private"
printf 'odd' >"$SRC/sp ace
nl"
ln -s a.txt "$SRC/link"
ln -s ../nowhere "$SRC/sub/dangling"
head -c 300000 /dev/urandom >"$SRC/sub/deeper/big.bin"
chmod 0700 "$SRC/ro"

# --- export, then import into an empty and a non-empty folder --------------
"$SP" peer export --store "$T/st-src" --root "$SRC" >"$T/a.tar" 2>"$T/err"
rc=$?
expect 0 "export --root takes a snapshot and writes it"
check "the archive is a tar" sh -c "tar -tf '$T/a.tar' >/dev/null"
W=$T/w
mkdir -p "$W/stale/inner"
printf 'old' >"$W/a.txt"
printf 'gone' >"$W/stale/inner/f"
"$SP" peer import --root "$W" --store "$T/st" --tag first <"$T/a.tar" >"$T/out" 2>"$T/err"
rc=$?
expect 0 "import"
json "import prints id, files, bytes" \
    'set(j) == {"id", "files", "bytes"} and j["files"] == 5 and j["bytes"] == 300000 + 6 + 18 + 6 + 3'
id=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])' <"$T/out")
same_tree "the workspace is exactly the archive (modes, symlinks, empty folders, odd names)" "$SRC" "$W"
check "what the folder held before is gone" test ! -e "$W/stale"
check "the store has the import, tagged, and nothing else" \
    test "$(snaps "$T/st" "$W")" = "[('$id', 'first')]"

# Round trip: the import's snapshot, exported from the store alone (the
# newest), compressed, into another folder.
"$SP" peer export --store "$T/st" --gzip >"$T/b.tar.gz" 2>"$T/err"
rc=$?
expect 0 "export --gzip of the newest snapshot, without --root"
check "it is gzip" sh -c "gzip -t '$T/b.tar.gz'"
check "no folder left in the store by an export without --root" \
    sh -c "! ls -d '$T'/st/sandpod/export-* 2>/dev/null"
W2=$T/w2
mkdir "$W2"
"$SP" peer import --root "$W2" --store "$T/st2" <"$T/b.tar.gz" >"$T/out" 2>"$T/err"
rc=$?
expect 0 "import of a gzip archive"
same_tree "round trip export -> import into another folder" "$SRC" "$W2"
"$SP" peer export --store "$T/st" "$id" >"$T/c.tar" 2>"$T/err"
rc=$?
expect 0 "export REF"

# --transient: a fresh snapshot of --root, exported, not kept.
before=$(snaps "$T/st2" "$W2")
printf 'now\n' >"$W2/now.txt"
"$SP" peer export --root "$W2" --store "$T/st2" --transient >"$T/d.tar" 2>"$T/err"
rc=$?
expect 0 "export --root --transient"
check "the archive has the workspace as it is now" sh -c "tar -xOf '$T/d.tar' ./now.txt 2>/dev/null | grep -qx now || tar -xOf '$T/d.tar' now.txt | grep -qx now"
check "--transient keeps no snapshot" test "$(snaps "$T/st2" "$W2")" = "$before"
check "export REF writes the same archive as the newest" \
    sh -c "gzip -dc '$T/b.tar.gz' | cmp -s - '$T/c.tar'"

# --- all or nothing ---------------------------------------------------------
# A workspace with content of its own, and its store with one snapshot.
V=$T/v
mkdir -p "$V/keep/empty"
printf 'mine\n' >"$V/mine.txt"
ln -s mine.txt "$V/mine.link"
"$SP" peer import --root "$V" --store "$T/sv" --tag base <"$T/a.tar" >/dev/null 2>&1
rm -rf "${V:?}"/* && mkdir -p "$V/keep/empty" && printf 'mine\n' >"$V/mine.txt" && ln -s mine.txt "$V/mine.link"
cp -a "$V" "$T/v.before"
before=$(snaps "$T/sv" "$V")
check "the store has one snapshot to start with" test "$(echo "$before" | grep -o "'base'" | wc -l)" -eq 1

unchanged() {
    same_tree "$1: the workspace is as it was" "$T/v.before" "$V"
    check "$1: the store's snapshots are as they were" test "$(snaps "$T/sv" "$V")" = "$before"
}

head -c 200000 "$T/a.tar" >"$T/trunc.tar"
"$SP" peer import --root "$V" --store "$T/sv" <"$T/trunc.tar" >"$T/out" 2>"$T/err"
rc=$?
expect 1 "a truncated archive is refused"
unchanged "truncated"

# A tar header damaged (its checksum no longer matches) in the last
# entries: the first entries read fine before the damage is met.
python3 - "$T/a.tar" "$T/corrupt.tar" <<'PY'
import sys, tarfile
b = bytearray(open(sys.argv[1], "rb").read())
with tarfile.open(sys.argv[1]) as t:
    last = t.getmembers()[-1]
off = last.offset + 100  # inside the mode field of the last header
b[off:off + 8] = b"9999999\0"
open(sys.argv[2], "wb").write(b)
PY
"$SP" peer import --root "$V" --store "$T/sv" <"$T/corrupt.tar" >"$T/out" 2>"$T/err"
rc=$?
expect 1 "a damaged header is refused"
unchanged "damaged header"
gzip -c "$T/corrupt.tar" >"$T/corrupt.tar.gz"
"$SP" peer import --root "$V" --store "$T/sv" <"$T/corrupt.tar.gz" >"$T/out" 2>"$T/err"
rc=$?
expect 1 "a damaged header, gzip-compressed, is refused"
unchanged "damaged header (gzip)"
gzip -c "$T/a.tar" | head -c 100000 >"$T/trunc.tar.gz"
"$SP" peer import --root "$V" --store "$T/sv" <"$T/trunc.tar.gz" >"$T/out" 2>"$T/err"
rc=$?
expect 1 "a truncated gzip stream is refused"
unchanged "truncated gzip"

head -c 4096 /dev/urandom >"$T/noise"
"$SP" peer import --root "$V" --store "$T/sv" <"$T/noise" >"$T/out" 2>"$T/err"
rc=$?
expect 1 "noise is refused"
unchanged "noise"

for name in ../escape /abs/path sub/../../escape; do
    python3 - "$T/esc.tar" "$name" <<'PY'
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w", format=tarfile.PAX_FORMAT) as t:
    for n, data in (("fine.txt", b"ok"), (sys.argv[2], b"evil")):
        i = tarfile.TarInfo(n)
        i.size = len(data)
        t.addfile(i, io.BytesIO(data))
PY
    "$SP" peer import --root "$V" --store "$T/sv" <"$T/esc.tar" >"$T/out" 2>"$T/err"
    rc=$?
    expect 1 "an entry named $name is refused"
    unchanged "escaping $name"
    check "nothing written beside the workspace ($name)" test ! -e "$T/escape"
done

# A restore that fails half-way: an immutable folder (chattr +i, root
# only: a restore makes a folder its owner cannot write 0700 first, so a
# read-only one does not stop it) sorts after the entries the archive
# changes. A plain restore is shown to stop half-way; the import rolls back.
mkdir -p "$V/zz"
printf 'stuck' >"$V/zz/f"
if [ "$(id -u)" -eq 0 ]; then
    chattr +i "$V/zz" 2>/dev/null && immutable=$V/zz
fi
if [ -z "$immutable" ]; then
    rm -rf "${V:?}/zz"
    echo "skipped: the half-way restore (needs root and chattr +i on this filesystem)"
else
    rm -rf "$T/v.before" && cp -a "$V" "$T/v.before"
    chattr -i "$T/v.before/zz"
    before=$(snaps "$T/sv" "$V")
    # The same archive restored the plain way, on a copy, stops half-way.
    H=$T/half
    cp -a "$V" "$H"
    chattr +i "$H/zz"
    "$SP" snapshot import --root "$H" --store "$T/sh" "$T/a.tar" --tag x >/dev/null 2>&1
    "$SP" restore --root "$H" --store "$T/sh" x >/dev/null 2>&1
    rc=$?
    check "a plain restore fails on the folder" test "$rc" -ne 0
    chattr -i "$H/zz"
    check "and leaves the workspace half-way (changed, not the archive)" \
        test "$(fp "$H")" != "$(fp "$T/v.before")" -a "$(fp "$H")" != "$(fp "$SRC")"
    "$SP" peer import --root "$V" --store "$T/sv" <"$T/a.tar" >"$T/out" 2>"$T/err"
    rc=$?
    expect 1 "a restore failing half-way fails the import"
    err_has "zz" "the error names the folder"
    unchanged "half-way"
    chattr -i "$V/zz"
    immutable=
fi

# --- serialisation ----------------------------------------------------------
# An import waits for the lock another import holds.
L=$T/l
mkdir "$L"
"$SP" peer import --root "$L" --store "$T/sl" <"$T/a.tar" >/dev/null 2>&1
rm -rf "${L:?}"/* && printf 'x' >"$L/x"
flock "$T/sl/sandpod/peer.lock" sleep 2 &
holder=$!
sleep 0.3
start=$(date +%s%N)
"$SP" peer import --root "$L" --store "$T/sl" <"$T/a.tar" >"$T/out" 2>"$T/err"
rc=$?
waited=$((($(date +%s%N) - start) / 1000000))
wait "$holder"
expect 0 "import after the lock is released"
check "the import waited for the lock (${waited} ms)" test "$waited" -ge 1200
same_tree "then the workspace is the archive" "$SRC" "$L"

# Two imports at once end with the workspace exactly one of the archives.
B=$T/srcb
mkdir -p "$B/bdir"
for i in $(seq 1 200); do printf 'b%s' "$i" >"$B/bdir/f$i"; done
"$SP" peer export --store "$T/st-b" --root "$B" >"$T/b.tar" 2>/dev/null
C=$T/c
mkdir "$C"
for round in 1 2 3; do
    "$SP" peer import --root "$C" --store "$T/sc" <"$T/a.tar" >"$T/out1.$round" 2>"$T/err1.$round" &
    p1=$!
    "$SP" peer import --root "$C" --store "$T/sc" <"$T/b.tar" >"$T/out2.$round" 2>"$T/err2.$round" &
    p2=$!
    wait "$p1"
    r1=$?
    wait "$p2"
    r2=$?
    check "round $round: both concurrent imports succeed ($r1 $r2: $(cat "$T/err1.$round" "$T/err2.$round"))" test "$r1$r2" = 00
    now=$(fp "$C")
    check "round $round: the workspace is exactly one archive" \
        test "$now" = "$(fp "$SRC")" -o "$now" = "$(fp "$B")"
done
check "no snapshot of the workspace left behind: only the imports" \
    test "$(snaps "$T/sc" "$C" | grep -o "', None)" | wc -l)" -eq 6

# --- usage --------------------------------------------------------------------
run peer import --store "$T/st"
expect 2 "import needs --root"
run peer export
expect 2 "export needs --store"
run peer import --root "$W" --store "$T/st" --gzip
expect 2 "--gzip is export's"
run peer export --store "$T/st" --tag x
expect 2 "--tag is import's"
run peer export --store "$T/st" --transient
expect 2 "--transient needs --root"
run peer export --root "$W" --store "$T/st" --transient "$id"
expect 2 "--transient takes no REF"
run peer import --root "$W" --store "$T/st" --transient
expect 2 "--transient is export's"
"$SP" peer export --store "$T/nostore" >"$T/out" 2>"$T/err"
rc=$?
expect 1 "export from a folder that is no store"
"$SP" peer export --store "$T/st" nosuch >"$T/out" 2>"$T/err"
rc=$?
expect 1 "export of an unknown REF"

finish
