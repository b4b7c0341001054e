#!/usr/bin/env bash
# End-to-end tests of the sandpod CLI and every `sandpod fs` operation on a
# scratch folder: exit codes, error lines, containment, JSON output.
#
# Usage: test_cli.sh PATH/TO/sandpod
set -u

SP=${1:?usage: test_cli.sh PATH/TO/sandpod}
if ! command -v python3 >/dev/null 2>&1; then
    echo "python3 is missing: skipping"
    exit 77
fi

T=$(mktemp -d "${TMPDIR:-/tmp}/sandpod-cli.XXXXXX")
trap 'rm -rf "$T"' EXIT
W=$T/ws      # the workspace
O=$T/outside # what must stay out of reach
mkdir -p "$W" "$O"
printf 'TOPSECRET\n' >"$O/secret"

. "$(dirname "$0")/lib.sh"

: >"$T/empty"

fs() {
    run fs --root "$W" "$@"
}

fsin() {
    local input=$1
    shift
    runin "$input" fs --root "$W" "$@"
}

# ---------------------------------------------------------- top level --
run --version
expect 0 "--version"
if grep -qE '^sandpod [0-9]+\.[0-9]+\.[0-9]+$' "$T/out"; then ok; else bad "--version format"; fi
run version
expect 0 "version"
if grep -qE '^sandpod [0-9]+\.[0-9]+\.[0-9]+$' "$T/out"; then ok; else bad "version format"; fi
run --help
expect 0 "--help"
out_has "fs" "--help lists fs"
run help
expect 0 "help"
out_has "version" "help lists version"
run help fs
expect 0 "help fs"
for op in read cat write ls glob grep stat exists rm mkdir edit insert; do
    out_has "  $op " "help fs lists $op"
done
run fs --help
expect 0 "fs --help"
out_has "--root DIR" "fs --help shows --root"
run
expect 2 "no command"
run bogus
expect 2 "unknown command"
err_has "sandpod: unknown command 'bogus'" "unknown command message"
run help bogus
expect 2 "help on an unknown command"
run --bogus
expect 2 "unknown top-level option"

# ------------------------------------------------------------ usage --
run fs read a.txt
expect 2 "fs without --root"
fs
expect 2 "fs without an operation"
fs frobnicate
expect 2 "unknown operation"
fs read
expect 2 "read without PATH"
fs stat a b
expect 2 "stat with two paths"
fs ls --offset 1
expect 2 "option of another operation"
fs read a.txt --bogus
expect 2 "unknown option"
fs read a.txt --offset
expect 2 "option without its value"
for n in abc -1 5x "" " 5" 1e3 99999999999999999999999; do
    fs read a.txt --offset "$n"
    expect 2 "bad --offset '$n'"
done
fs ls --depth -3
expect 2 "negative --depth"
fs grep x --max 1.5
expect 2 "fractional --max"
fs read a.txt --view 0:2
expect 2 "--view starting at 0"
fs read a.txt --view 3:2
expect 2 "--view ending before its start"
fs read a.txt --view 3
expect 2 "--view without END"
fs read a.txt --view 1:2 --offset 1
expect 2 "--view with --offset"
fsin "x" write w.txt --mode sideways
expect 2 "bad --mode"
fsin "x" insert a.txt --line -2
expect 2 "--line below -1"
fsin "x" insert a.txt
expect 2 "insert without --line"
fs edit a.txt --new x
expect 2 "edit without --old"
fs edit a.txt --old x --old-file "$T/in" --new y
expect 2 "edit with --old and --old-file"
run fs --root "$T/missing" ls
expect 1 "a missing root"

# ------------------------------------------------------ write / read --
fsin $'one\ntwo\nthree\n' write f.txt
expect 0 "write from stdin"
out_is 'wrote 14 bytes to f.txt\n' "write message"
file_is "$W/f.txt" 'one\ntwo\nthree\n' "written file on the host"
fs read f.txt
expect 0 "read"
out_is 'one\ntwo\nthree\n' "read back"
fs read f.txt --offset 2 --limit 1
expect 0 "read a slice"
out_is 'two\n' "read slice content (--offset is 1-based, as the tool's)"
err_has "--offset 3" "truncation note tells how to go on"
fs read f.txt --offset 0 --limit 1
out_is 'one\n' "--offset 0 reads as 1, as the tool's"
fs read f.txt --offset 4
expect 1 "--offset past the end"
err_has "past the end: f.txt has 3 lines" "--offset past the end says so"
fs read f.txt --view 4:9
expect 1 "--view past the end"
err_has "past the end: f.txt has 3 lines" "--view past the end says so"
fs read f.txt --view 3:9
expect 0 "--view END past the end reads to the end"
out_is 'three\n' "--view END clamped"
run call --root "$W" read_file '{"path":"f.txt","offset":4}'
out_has "past the end: f.txt has 3 lines" "the tool agrees on the end"
printf '\211PNG\r\n\032\n\000\001' >"$W/img.png" # bash strings cannot hold NUL
fs read img.png --base64
expect 0 "read --base64"
out_is 'iVBORw0KGgoAAQ==\n' "base64 of the file"
fs --json read img.png
json "binary read --json" 'j["ok"] and j["mime"] == "image/png" and j["base64"] == "iVBORw0KGgoAAQ==" and j["size"] == 10'
fs read img.png
expect 1 "plain read of a binary file"
err_has "fs read --base64" "the refusal points to --base64"
fsin $'iVBORw0K\nGgoAAQ==\n' write copy.png --base64
expect 0 "write --base64 (line breaks allowed)"
if cmp -s "$W/img.png" "$W/copy.png"; then ok; else bad "write --base64 writes the bytes"; fi
fsin 'iVBORw0K*' write copy.png --base64
expect 1 "write --base64 of bad base64"
err_has "not valid base64" "bad base64 is named"
if cmp -s "$W/img.png" "$W/copy.png"; then ok; else bad "bad base64 keeps the file"; fi
run fs read --limit 1 f.txt --root "$W"
expect 0 "options before and after the operand"
out_is 'one\n' "permuted options"
fs read f.txt --view 2:-1
expect 0 "read --view"
out_is 'two\nthree\n' "view content"
fs read f.txt --view 1:1
out_is 'one\n' "view of one line"
fs read /workspace/f.txt
expect 0 "read a /workspace path"
out_is 'one\ntwo\nthree\n' "/workspace maps to the root"
fs --json read f.txt
expect 0 "read --json"
json "read --json" 'j["ok"] and j["content"] == "one\ntwo\nthree\n" and j["total_lines"] == 3'
fs read f.txt --json --limit 1
json "truncated read --json" 'j["truncated"] and j["next_offset"] == 2 and j["offset"] == 1'
# call: limits and the stale check from the command line, exact integers.
printf 'a\000b' >"$W/bin.dat"
run call --root "$W" --max-read-bytes 2 read_file '{"path":"bin.dat"}'
expect_rc 1 "call --max-read-bytes"
json "too_large from --max-read-bytes" 'j["error"]["code"] == "too_big" and j["error"]["reason"] == "too_large"'
run call --root "$W" --max-read-bytes 1K read_file '{"path":"bin.dat"}'
expect 0 "call --max-read-bytes 1K"
json "binary read_file" 'j["value"]["base64"] == "YQBi" and j["value"]["mime"] == "application/octet-stream"'
run call --root "$W" --max-write-bytes 4 write_file '{"path":"w5.txt","content":"12345"}'
expect_rc 1 "call --max-write-bytes"
json "write over the limit" 'j["error"]["reason"] == "too_large"'
for bad in 0 -1 4Q ''; do
    run call --root "$W" --max-read-bytes "$bad" stat '{"path":"f.txt"}'
    expect 2 "bad --max-read-bytes '$bad'"
done
run call --root "$W" --timeout 0 stat '{"path":"f.txt"}'
expect 2 "bad --timeout"
run call --root "$W" --no-stale-check stat '{"path":"f.txt"}'
expect 0 "call --no-stale-check"
touch -d @1795600000.987654321 "$W/f.txt"
run call --root "$W" stat '{"path":"f.txt"}'
out_has '"mtime_ns":1795600000987654321' "call keeps mtime_ns an exact integer"
out_lacks 'e+18' "no double in call's output"

fs read nope.txt
expect 1 "read a missing file"
fs read nope.txt --json
expect 1 "read --json on a missing file"
json "error object" 'j["ok"] is False and j["error"]["code"] == "not_found" and j["error"]["message"]'

# ------------------------------------------ terminal escapes from files --
# A file may carry escape sequences that set the clipboard (OSC 52) or the
# title, clear the screen, move the cursor, or a lone \r that hides text.
# On a terminal, read shows them as text; to a pipe, it stays byte-exact.
printf 'h\303\251llo \342\202\254\n\033]52;c;SGVsbG8=\007\033]0;pwned\007\033[2J\033[1;1Hgone\rfake\r\nwin\tok\n\302\23331mred\177\010\n' >"$W/esc.txt"
run_tty fs --root "$W" read esc.txt
expect_rc 0 "read on a terminal"
out_is 'h\303\251llo \342\202\254\n\\x1b]52;c;SGVsbG8=\\x07\\x1b]0;pwned\\x07\\x1b[2J\\x1b[1;1Hgone\\x0dfake\r\nwin\tok\n\\u009b31mred\\x7f\\x08\n' \
    "read on a terminal shows control characters as text, keeps UTF-8, tabs and CRLF"
if grep -q $'\033' "$T/out"; then bad "read wrote a raw ESC to the terminal"; else ok; fi
fs read esc.txt
check "read to a pipe is byte-exact" cmp -s "$W/esc.txt" "$T/out"
run_tty fs --root "$W" read esc.txt --raw
expect_rc 0 "read --raw on a terminal"
check "read --raw on a terminal is byte-exact" cmp -s "$W/esc.txt" "$T/out"
run_tty fs --root "$W" read esc.txt --view 3:-1
out_is 'win\tok\n\\u009b31mred\\x7f\\x08\n' "read --view on a terminal"
run_tty fs --root "$W" --json read esc.txt
json "read --json on a terminal keeps the content" 'j["content"].startswith("h\u00e9llo \u20ac\n\u001b]52;")'
run_tty fs --root "$W" cat esc.txt
check "cat (the raw view) is byte-exact on a terminal" cmp -s "$W/esc.txt" "$T/out"
rm -f "$W/esc.txt"

fsin "again" write f.txt --mode create
expect 1 "write --mode create on an existing file"
file_is "$W/f.txt" 'one\ntwo\nthree\n' "failed create left the file alone"
fsin $'four\n' write f.txt --mode append
expect 0 "write --mode append"
file_is "$W/f.txt" 'one\ntwo\nthree\nfour\n' "appended"
fsin "x" write nodir/x.txt --no-parents
expect 1 "write --no-parents into a missing folder"
check "--no-parents created nothing" test ! -e "$W/nodir"
fsin "deep" write d1/d2/d3.txt
expect 0 "write creates parents"
file_is "$W/d1/d2/d3.txt" 'deep' "deep file"
fsin "" write empty.txt --json
expect 0 "write --json"
json "write --json" 'j["ok"] and j["bytes_written"] == 0 and j["path"] == "empty.txt"'
fsin "dash" write -- -dash.txt
expect 0 "write a name starting with '-' after --"
file_is "$W/-dash.txt" 'dash' "dash file"

# --------------------------------------------------------------- cat --
printf 'A\000B\377C\nD' >"$T/bin"
"$SP" fs --root "$W" write bin.dat <"$T/bin" >"$T/out" 2>"$T/err"
rc=$?
expect 0 "write binary from stdin"
check "binary written exactly" cmp -s "$T/bin" "$W/bin.dat"
fs cat bin.dat
expect 0 "cat"
check "cat gives the bytes back" cmp -s "$T/bin" "$T/out"
fs cat bin.dat --offset 2 --limit 3
expect 0 "cat a slice"
out_is 'B\377C' "cat slice"
fs cat bin.dat --json
expect 0 "cat --json"
json "binary cat --json is base64" 'j["encoding"] == "base64" and __import__("base64").b64decode(j["content"]) == b"A\x00B\xffC\nD" and j["size"] == 7'
fs cat f.txt --json
json "text cat --json is utf-8" 'j["encoding"] == "utf-8" and j["content"].startswith("one\n")'
fs read bin.dat
expect 1 "read refuses binary"

# ---------------------------------------------------------------- ls --
mkdir -p "$W/sub"
printf '#!/bin/sh\necho hi\n' >"$W/sub/run.sh"
chmod 755 "$W/sub/run.sh"
ln -s f.txt "$W/lnk"
fs ls
expect 0 "ls"
out_has "sub/" "ls marks folders"
out_has "lnk@ -> f.txt" "ls shows link targets"
out_lacks "run.sh" "ls stays at depth 1"
fs ls --depth 2
out_has "sub/run.sh*" "ls --depth 2 marks executables"
fs ls sub --json
expect 0 "ls --json"
json "ls --json" 'j["ok"] and j["count"] == 1 and j["entries"][0]["path"] == "sub/run.sh" and j["entries"][0]["mode"] == "0755"'
fs ls nope
expect 1 "ls a missing folder"

# ------------------------------------------------------- glob / grep --
fs glob '**/*.sh'
expect 0 "glob"
out_is 'sub/run.sh\n' "glob result"
fs glob '*.sh' --path sub --json
expect 0 "glob --path --json"
json "glob --json" 'j["count"] == 1 and j["entries"][0]["path"] == "sub/run.sh"'
fs grep two
expect 0 "grep"
out_is 'f.txt:2:two\n' "grep output"
fs grep -i TWO f.txt
out_is 'f.txt:2:two\n' "grep -i on one file"
fs grep 'o.e'
out_has "f.txt:1:one" "grep regex"
fs grep -F 'o.e'
expect 0 "grep -F without a match"
out_is '' "grep -F treats . literally"
fs grep hi --glob '**/*.sh'
out_is 'sub/run.sh:2:echo hi\n' "grep --glob"
fs grep hi sub --glob '*.sh'
out_is 'sub/run.sh:2:echo hi\n' "grep PATH --glob"
fs grep hi --glob '*.sh'
out_is 'sub/run.sh:2:echo hi\n' "grep --glob by name at any depth"
fs grep zzzz
expect 0 "grep without a match exits 0"
out_is '' "grep without a match prints nothing"
fs grep 'th('
expect 1 "grep with a bad regex"
fs grep --json thr
expect 0 "grep --json"
json "grep --json" 'j["count"] == 1 and j["matches"][0]["line_number"] == 3 and j["matches"][0]["match_start"] == 0 and j["matches"][0]["match_end"] == 3'
# rg's defaults: hidden and ignored files are skipped unless asked; -g repeats, '!' excludes.
mkdir -p "$W/.hid" "$W/gen" "$W/node_modules/pkg"
printf 'hi there\n' >"$W/.hid/h.txt"
printf 'hi there\n' >"$W/gen/g.txt"
printf 'hi there\n' >"$W/node_modules/pkg/i.js"
printf 'gen/\n' >"$W/.ignore"
fs grep there
out_is 'node_modules/pkg/i.js:1:hi there\n' "grep skips hidden and .ignore'd files"
fs grep there --hidden --no-ignore
out_is '.hid/h.txt:1:hi there\ngen/g.txt:1:hi there\nnode_modules/pkg/i.js:1:hi there\n' "grep --hidden --no-ignore"
fs grep there --no-ignore -g '*.txt' -g '!g*'
out_is '' "grep -g: the last matching glob wins ('!g*' over '*.txt')"
fs grep there --no-ignore -g '!g.txt' -g '*.txt'
out_is 'gen/g.txt:1:hi there\n' "grep -g: a later include wins"
fs grep there --no-ignore -g '!gen' -g '*.txt'
out_is '' "grep -g: an excluded folder is not entered"
fs grep there --json
json "grep --json counts ignored entries" 'j["ignored"] == 3'
fs glob '*/'
out_has 'gen' "glob PATTERN/ lists folders"
out_lacks '.hid' "glob PATTERN/ skips dot folders"
out_lacks 'f.txt' "glob PATTERN/ skips files"
fs glob '.*'
out_is '.hid\n.ignore\n' "glob .* finds dot names"
fs ls --depth 3
out_has "node_modules/" "ls shows node_modules"
out_lacks "node_modules/pkg" "ls does not enter node_modules"
fs ls --depth 3 --no-ignore
out_has "node_modules/pkg/i.js" "ls --no-ignore enters it"
fs ls --depth 3 --ignore sub
out_has "node_modules/pkg/i.js" "ls --ignore replaces the default list"
out_lacks "sub/run.sh" "ls --ignore skips what it names"
rm -rf "$W/.hid" "$W/gen" "$W/node_modules" "$W/.ignore"

# ------------------------------------------------------ stat / exists --
fs stat f.txt
expect 0 "stat"
out_has "type:     file" "stat type"
out_has "access:   readable, writable" "stat access"
fs stat f.txt --json
json "stat --json has the FileStat fields" 'j["permissions"] == "rw-r--r--" and j["readable"] and j["writable"] and isinstance(j["atime_ns"], int) and "created" in j and j["modified"] == j["mtime"]'
ln -s /usr/lib/os-release "$W/imglink"
fs stat imglink
out_has "container's image" "stat names a link into the image"
fs stat imglink --json
json "stat --json target_in_image" 'j["target_in_image"] is True'
rm -f "$W/imglink"
fs stat lnk --json
json "stat --json on a link" 'j["type"] == "symlink" and j["link_target"] == "f.txt" and not j["target_escapes"]'
fs stat sub --json
json "stat --json on a folder" 'j["type"] == "dir" and j["path"] == "sub"'
fs exists f.txt
expect 0 "exists on a file"
out_is 'true\n' "exists prints true"
fs exists nope
expect_rc 1 "exists on a missing path"
out_is 'false\n' "exists prints false"
fs exists nope --json
json "exists --json" 'j["exists"] is False'

# -------------------------------------------------------- mkdir / rm --
fs mkdir m1
expect 0 "mkdir"
check "mkdir made a folder" test -d "$W/m1"
fs mkdir m1
expect 1 "mkdir on an existing folder"
fs mkdir m1 --exist-ok
expect 0 "mkdir --exist-ok"
fs mkdir m2/a/b
expect 1 "mkdir without -p and missing parents"
fs mkdir -p m2/a/b
expect 0 "mkdir -p"
check "mkdir -p made the chain" test -d "$W/m2/a/b"
fs mkdir -p m2/a/b
expect 0 "mkdir -p on an existing folder"
fs rm m2
expect 1 "rm a non-empty folder without -r"
fs rm -r m2 --json
expect 0 "rm -r"
json "rm --json" 'j["ok"] and j["path"] == "m2"'
check "rm -r removed the folder" test ! -e "$W/m2"
fs rm empty.txt
expect 0 "rm a file"
check "rm removed the file" test ! -e "$W/empty.txt"
fs rm empty.txt
expect 1 "rm a missing file"
fs rm .
expect 1 "rm the root"
check "the root survives" test -d "$W"

# ------------------------------------------------------ edit / insert --
fs edit f.txt --old two --new TWO
expect 0 "edit"
out_is 'replaced 1 occurrence in f.txt\n' "edit message"
file_is "$W/f.txt" 'one\nTWO\nthree\nfour\n' "edited file"
fs edit f.txt --old absent --new x
expect 1 "edit with no occurrence"
fs edit f.txt --old o --new 0
expect 1 "edit with several occurrences"
file_is "$W/f.txt" 'one\nTWO\nthree\nfour\n' "failed edit left the file alone"
fs edit f.txt --old o --new 0 --all --json
expect 0 "edit --all"
json "edit --json" 'j["replaced"] == 2'
printf 'three\nf0ur\n' >"$T/old"
printf 'line3\nline4\n' >"$T/new"
fs edit f.txt --old-file "$T/old" --new-file "$T/new"
expect 0 "edit with --old-file/--new-file"
file_is "$W/f.txt" '0ne\nTWO\nline3\nline4\n' "multi-line edit"
fsin $'new first\n' insert f.txt --line 0
expect 0 "insert at the start"
fsin $'after 2' insert f.txt --line 2
expect 0 "insert after a line"
fsin $'last\n' insert f.txt --line -1
expect 0 "insert at the end"
file_is "$W/f.txt" 'new first\n0ne\nafter 2\nTWO\nline3\nline4\nlast\n' "inserted lines"
fsin "x" insert nope.txt --line 0
expect 1 "insert into a missing file"

# ------------------------------------------------------- containment --
ln -s "$O" "$W/esc"
ln -s "$O/secret" "$W/esclink"
ln -s ../outside/secret "$W/esc_rel"
for p in ../outside/secret "$O/secret" /etc/passwd esc/secret esclink esc_rel sub/../../outside/secret \
    "$W/f.txt" /workspace/../outside/secret; do
    fs read "$p"
    expect 1 "read '$p' is refused"
    out_lacks TOPSECRET "read '$p' leaks nothing"
done
fs read ../outside/secret --json
json "escape --json" 'j["ok"] is False and j["error"]["code"] == "escape"'
fs cat esclink
expect 1 "cat through an escaping link"
out_lacks TOPSECRET "cat leaks nothing"
fs ls esc
expect 1 "ls through an escaping link"
fs ls ..
expect 1 "ls .."
fsin "pwned" write ../outside/evil
expect 1 "write ../"
fsin "pwned" write esc/evil
expect 1 "write through an escaping folder link"
fsin "pwned" write esclink
expect 1 "write through an escaping file link"
check "nothing was written outside" test ! -e "$O/evil"
file_is "$O/secret" 'TOPSECRET\n' "the outside file is untouched"
fs edit esclink --old TOP --new NOT
expect 1 "edit through an escaping link"
fsin "x" insert esc/secret --line 0
expect 1 "insert through an escaping link"
fs mkdir ../outside/newdir
expect 1 "mkdir ../"
fs mkdir -p esc/newdir
expect 1 "mkdir through an escaping link"
check "no folder appeared outside" test ! -e "$O/newdir"
fs rm esc/secret
expect 1 "rm through an escaping link"
check "the outside file survives" test -e "$O/secret"
fs grep TOPSECRET
expect 0 "grep over links that point out"
out_lacks TOPSECRET "grep never follows links out"
fs grep TOPSECRET esc
out_lacks TOPSECRET "grep on an escaping folder link"
fs glob 'esc/**'
out_lacks "secret" "glob never descends through links"
fs exists ../outside/secret
expect_rc 1 "exists on an escaping path"
fs stat esclink --json
json "stat reports escaping targets" 'j["target_escapes"] is True'
fs rm esclink
expect 0 "rm an escaping link removes the link"
check "rm left the link's target alone" test -e "$O/secret"

# ---------------------------------------------- read-only and deny --
run fs --root "$W" --read-only ls
expect 0 "ls on a read-only handle"
fsin "x" --read-only write ro.txt
expect 1 "write on a read-only handle"
check "read-only wrote nothing" test ! -e "$W/ro.txt"
fs rm f.txt --read-only
expect 1 "rm on a read-only handle"
fs mkdir ro --read-only
expect 1 "mkdir on a read-only handle"
fs edit f.txt --old TWO --new 2 --read-only
expect 1 "edit on a read-only handle"
printf 'hidden\n' >"$W/secret.key"
fs --deny 'secret*' read secret.key
expect 1 "read a denied path"
fs --deny 'secret*' --deny '*.sh' ls --depth 3
out_lacks "secret.key" "ls hides denied paths"
out_lacks "run.sh" "a second --deny applies too"
fs --deny 'secret*' grep hidden
out_lacks "hidden" "grep skips denied paths"

# ------------------------------------------------- hostile file names --
printf 'x\n' >"$W/$(printf 'bad\377\376name.txt')"
printf 'x\n' >"$W/$(printf 'esc\033[31mred')"
fs ls --json
expect 0 "ls with a non-UTF-8 name"
json "non-UTF-8 names give valid JSON" 'any(e["name"] == "bad\\xff\\xfename.txt" for e in j["entries"])'
fs glob '*name*' --json
json "glob --json with a non-UTF-8 name" 'j["count"] == 1'
fs ls
if grep -q $'\033' "$T/out"; then bad "ls prints raw escape characters"; else ok; fi
out_has 'esc\x1b[31mred' "ls shows control bytes as \\xNN"

# ------------------------------------------- inspect masks env values --
# A sandbox's state as `create -e` leaves it; Podman is not needed (the
# state is unknown without it), so this runs anywhere.
H=$T/state
mkdir -p "$H/sandboxes/sec/workspace"
chmod 700 "$H"
cat >"$H/sandboxes/sec/sandbox.json" <<EOF
{"version": 1, "name": "sec", "image": "localhost/sandpod:latest",
 "container_id": "0123456789ab", "created_at": "2026-01-01T00:00:00Z",
 "workspace": "$H/sandboxes/sec/workspace",
 "env": ["API_TOKEN=s3cr3t-t0ken", "DB_URL=postgres://u:pw-x9@db/x", "EMPTY=", "BARE"],
 "workdir": "/workspace", "user": "1000:1000", "network": 0, "memory_bytes": 1073741824,
 "nano_cpus": 1000000000, "pids_limit": 256, "tmpfs_bytes": 67108864,
 "writable_root": false, "cap_add": []}
EOF
NOPODMAN=unix://$T/no-podman.sock
run inspect --state-root "$H" --url "$NOPODMAN" sec
expect_rc 0 "inspect without Podman"
out_has "API_TOKEN=***" "inspect shows env names"
out_has "EMPTY=***" "inspect masks an empty value too"
out_has "BARE" "inspect shows a bare name"
out_lacks "s3cr3t" "inspect does not print an env value"
out_lacks "pw-x9" "inspect does not print a value holding '='"
run inspect --json --state-root "$H" --url "$NOPODMAN" sec
json "inspect --json masks env values" \
    'j["config"]["env"] == ["API_TOKEN=***", "DB_URL=***", "EMPTY=***", "BARE"]'
out_lacks "s3cr3t" "inspect --json does not print an env value"
run inspect --show-secrets --state-root "$H" --url "$NOPODMAN" sec
out_has "API_TOKEN=s3cr3t-t0ken" "inspect --show-secrets shows values"
out_has "DB_URL=postgres://u:pw-x9@db/x" "inspect --show-secrets keeps the whole value"
run inspect --json --show-secrets --state-root "$H" --url "$NOPODMAN" sec
json "inspect --json --show-secrets" \
    'j["config"]["env"] == ["API_TOKEN=s3cr3t-t0ken", "DB_URL=postgres://u:pw-x9@db/x", "EMPTY=", "BARE"]'
run ls --json --state-root "$H" --url "$NOPODMAN"
json "ls --json lists the sandbox" '[s["name"] for s in j["sandboxes"]] == ["sec"]'
out_lacks "s3cr3t" "ls --json does not print an env value"
run ls --state-root "$H" --url "$NOPODMAN"
out_lacks "s3cr3t" "ls does not print an env value"

# ------------------------------------------------------- start-up cost --
# libcurl and libarchive (about thirty libraries) load on first use, not
# at start: fs tools and snapshots never pay for them (overlay/base/lazy.h).
if command -v readelf >/dev/null; then
  if readelf -d "$SP" | grep NEEDED | grep -q 'libcurl\|libarchive'; then
    bad "the CLI links libcurl or libarchive at start"
  else
    ok
  fi
fi

finish
