#!/usr/bin/env bash
# The man pages the build writes from the command tables: one for sandpod
# and one per command, no groff warning, each page's options exactly the
# command's, and text that roff would take for requests or escapes kept as
# text. groff missing skips (77), except under CI=true.
#
# Usage: test_man.sh PATH/TO/sandpod MAN1_DIR
set -u

SP=${1:?usage: test_man.sh PATH/TO/sandpod MAN1_DIR}
MAN=${2:?usage: test_man.sh PATH/TO/sandpod MAN1_DIR}
if ! command -v groff >/dev/null 2>&1 || ! command -v python3 >/dev/null 2>&1; then
    echo "groff or python3 is missing (apt-get install groff-base python3)"
    [ "${CI:-}" = true ] && exit 1
    exit 77
fi

T=$(mktemp -d "${TMPDIR:-/tmp}/sandpod-man.XXXXXX")
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/lib.sh"

run __spec
expect 0 "__spec"
cp "$T/out" "$T/spec.json"

# The pages of the build are those `sandpod __man` writes now.
run __man "$T/pages"
expect 1 "__man into a missing folder"
mkdir "$T/pages"
run __man "$T/pages"
expect 0 "__man"
if diff -r "$MAN" "$T/pages" >"$T/diff"; then ok; else bad "the build's pages are stale: $(head -c 300 "$T/diff")"; fi

check_page() { # FILE
    groff -man -ww -z -Tutf8 "$1" >"$T/gout" 2>&1
    if [ -s "$T/gout" ]; then bad "groff warns on $(basename "$1"): $(head -c 300 "$T/gout")"; else ok; fi
}
check_page "$MAN/sandpod.1"
n=0
for cmd in $(python3 -c 'import json,sys; print(" ".join(c["name"] for c in json.load(open(sys.argv[1]))["commands"] if not c["hidden"]))' "$T/spec.json"); do
    page=$MAN/sandpod-$cmd.1
    n=$((n + 1))
    if [ ! -f "$page" ]; then
        bad "no page for $cmd"
        continue
    fi
    check_page "$page"
    grep -q "^\.BR sandpod\\\\-$cmd (1)" "$MAN/sandpod.1" && ok || bad "sandpod(1) does not point to sandpod-$cmd(1)"
done
[ "$n" -ge 20 ] && ok || bad "only $n commands"
[ "$(find "$MAN" -name 'sandpod-*.1' | wc -l)" -eq "$n" ] && ok || bad "pages for commands that do not exist"

# Each page's OPTIONS are the options the command's parser takes.
if python3 - "$T/spec.json" "$MAN" >"$T/report" 2>&1 <<'PY'; then ok; else bad "page options differ: $(head -c 1500 "$T/report")"; fi
import json, re, sys
spec, man = json.load(open(sys.argv[1])), sys.argv[2]
failed = False
for c in spec["commands"]:
    if c["hidden"]:
        continue
    text = open("%s/sandpod-%s.1" % (man, c["name"])).read()
    lines = text.splitlines()
    paged = set()
    for i, l in enumerate(lines):
        if l == ".TP" and i + 1 < len(lines):
            for m in re.finditer(r"\\fB((?:\\-)+)([A-Za-z0-9\\-]+)\\fR", lines[i + 1]):
                dashes = m.group(1).count("\\-")
                paged.add("-" * dashes + m.group(2).replace("\\-", "-"))
    parsed = {"--" + o["name"] for o in c["longopts"]}
    parsed |= {"-" + ch for ch in c["shortopts"].lstrip("+:") if ch != ":"}
    if paged != parsed:
        failed = True
        print("%s: page only %s, parser only %s" % (c["name"], sorted(paged - parsed), sorted(parsed - paged)))
sys.exit(1 if failed else 0)
PY

# Escaping: \xNN and option dashes come out as text, and so does a line
# that starts with a dot or a quote.
groff -man -Tutf8 -P-c "$MAN/sandpod-fs.1" 2>/dev/null | col -b >"$T/fs.txt" 2>/dev/null ||
    groff -man -Tascii -P-c "$MAN/sandpod-fs.1" >"$T/fs.txt"
grep -qF -- '\xNN' "$T/fs.txt" && ok || bad "fs page: a backslash was taken for an escape"
grep -qF -- '--offset N' "$T/fs.txt" && ok || bad "fs page: --offset"
# Every line that roff reads as a request is one of the few the pages use.
if cat "$MAN"/*.1 | grep -vE '^\.(TH|SH|SS|TP|PP|nf|fi|br|BR)( |$)|^\.\\"' | grep -qE "^[.']"; then
    bad "a text line starts with . or ' unescaped"
else
    ok
fi

finish
