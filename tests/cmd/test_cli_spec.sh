#!/usr/bin/env bash
# The command tables: for every command, the options --help prints are
# exactly those getopt is given (read back with the hidden `sandpod __spec`),
# each with a value exactly when help shows a METAVAR; plus the CLI's
# conventions that come from the tables: "did you mean", JSON usage errors,
# version --json.
#
# Usage: test_cli_spec.sh PATH/TO/sandpod
set -u

SP=${1:?usage: test_cli_spec.sh PATH/TO/sandpod}
if ! command -v python3 >/dev/null 2>&1; then
    echo "python3 is missing: skipping"
    [ "${CI:-}" = true ] && exit 1
    exit 77
fi

T=$(mktemp -d "${TMPDIR:-/tmp}/sandpod-spec.XXXXXX")
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/lib.sh"

# ------------------------------------------- help == parser, per command --
run __spec
expect 0 "__spec"
cp "$T/out" "$T/spec.json"
if python3 - "$SP" "$T/spec.json" >"$T/report" 2>&1 <<'PY'; then ok; else bad "help and parser differ: $(head -c 2000 "$T/report")"; fi
import json, re, subprocess, sys
sp, spec = sys.argv[1], json.load(open(sys.argv[2]))
failed = False
def fail(msg):
    global failed
    failed = True
    print(msg)
cmds = spec["commands"]
if len(cmds) < 20:
    fail("only %d commands in __spec" % len(cmds))
for c in cmds:
    name = c["name"]
    h = subprocess.run([sp, name, "--help"], capture_output=True, text=True)
    if h.returncode != 0 or h.stderr:
        fail("%s --help: exit %d, stderr %r" % (name, h.returncode, h.stderr))
        continue
    # Option lines: two spaces, then "-x, --long META, --other" up to two spaces.
    helped = {}
    for line in h.stdout.splitlines():
        m = re.match(r"^  (-[^ ].*?)(?:  +|$)", line)
        if not m:
            continue
        for part in m.group(1).split(", "):
            words = part.split(" ")
            if not re.fullmatch(r"--?[A-Za-z0-9][A-Za-z0-9-]*", words[0]):
                fail("%s: unreadable option label %r" % (name, part))
                continue
            helped[words[0]] = len(words) > 1
    # A short option shares the METAVAR of the long one on its line.
    for line in h.stdout.splitlines():
        m = re.match(r"^  -([A-Za-z]), (--[a-z0-9-]+)( [^ ]+)?", line)
        if m:
            helped["-" + m.group(1)] = helped.get(m.group(2), False)
    parsed = {"--" + o["name"]: o["value"] for o in c["longopts"]}
    so = c["shortopts"].lstrip("+:")
    for i, ch in enumerate(so):
        if ch != ":":
            parsed["-" + ch] = i + 1 < len(so) and so[i + 1] == ":"
    for o in sorted(set(helped) | set(parsed)):
        if o not in parsed:
            fail("%s: --help shows %s, which the parser refuses" % (name, o))
        elif o not in helped:
            fail("%s: the parser takes %s, which --help does not show" % (name, o))
        elif helped[o] != parsed[o]:
            fail("%s: %s takes a value in %s only" % (name, o, "help" if helped[o] else "the parser"))
sys.exit(1 if failed else 0)
PY

# The check itself can fail: a help text with an option the parser lacks.
cat >"$T/fake" <<'SH'
#!/bin/sh
if [ "$1" = ls ] && [ "$2" = --help ]; then
    "$REAL" "$@"
    echo "  --not-an-option      shown but not parsed"
    exit 0
fi
exec "$REAL" "$@"
SH
chmod +x "$T/fake"
sed -n '/^if python3 - "\$SP"/,/^PY$/p' "$0" | sed '1d;$d' >"$T/check.py"
if REAL=$SP python3 "$T/check.py" "$T/fake" "$T/spec.json" >"$T/report" 2>&1; then
    bad "the help/parser check did not notice an extra help line"
elif grep -q "ls: --help shows --not-an-option" "$T/report"; then ok; else bad "fake: $(cat "$T/report")"; fi

# ------------------------------------------------------ did you mean --
run crate
expect 2 "unknown command"
if [ "$(cat "$T/err")" = "sandpod: unknown command 'crate' (did you mean 'create'?)" ]; then ok; else bad "crate: $(cat "$T/err")"; fi
run snapshotz
expect 2 "unknown command, one letter more"
err_has "(did you mean 'snapshot'?)" "snapshotz"
run zzzzzz
expect 2 "unknown command, nothing near"
err_has "see 'sandpod --help'" "zzzzzz gets the help hint"
run ls --jsn
expect 2 "unknown long option"
err_has "bad option '--jsn' (did you mean '--json'?)" "--jsn"
run create --netwrk=host
expect 2 "unknown long option with a value"
err_has "(did you mean '--network'?)" "--netwrk=host"
run ls --zzzzzz
expect 2 "unknown long option, nothing near"
err_has "(see 'sandpod ls --help')" "--zzzzzz gets the help hint"
run --verison
expect 2 "unknown option of sandpod itself"
if [ "$(cat "$T/err")" = "sandpod: unknown option '--verison' (did you mean '--version'?)" ]; then ok; else bad "--verison: $(cat "$T/err")"; fi
run --version
expect 0 "--version"
run fs --root "$T" reed x
expect 2 "fs: unknown operation"
err_has "unknown operation 'reed' (did you mean 'read'?)" "fs reed"
run help crate
expect 2 "help on a typo"
err_has "(did you mean 'create'?)" "help crate"

# ------------------------------------------------ --json usage errors --
run ls --json --bogus
expect 2 "--json with a bad option"
if python3 -c '
import json, sys
o = json.load(open(sys.argv[1]))
assert o["ok"] is False and o["error"]["code"] == "usage", o
assert "--bogus" in o["error"]["message"], o
' "$T/out"; then ok; else bad "usage error JSON: $(cat "$T/out")"; fi
run inspect --json
expect 2 "--json with a missing operand"
out_has '"code":"usage"' "missing NAME as JSON"
out_has '"ok":false' "missing NAME as JSON has ok"
run ls --bogus
expect 2 "no --json, no JSON"
out_is "" "usage error without --json prints nothing on stdout"
run exec box -- echo --json
out_lacks '"usage"' "a --json of exec's COMMAND is not sandpod's"
run fs --root "$T" --json read
expect 2 "fs: missing operand as JSON"
out_has '"code":"usage"' "fs usage JSON"

# ------------------------------------------------------- version, tools --
run version --json
expect 0 "version --json"
if python3 -c '
import json, sys
o = json.load(open(sys.argv[1]))
assert o["ok"] is True and o["version"].count(".") == 2 and o["mcp_protocol"], o
' "$T/out"; then ok; else bad "version --json: $(cat "$T/out")"; fi
run version --bogus
expect 2 "version --bogus"
run tools --list --json
expect 0 "tools --list --json"
if python3 -c '
import json, sys
o = json.load(open(sys.argv[1]))
assert o["ok"] is True and o["count"] == len(o["tools"]) > 5, o
names = [t["name"] for t in o["tools"]]
assert "read_file" in names or "list_dir" in names, names
assert all(t["tier"] in ("safe", "cautious", "dangerous") for t in o["tools"]), o
' "$T/out"; then ok; else bad "tools --list --json: $(head -c 300 "$T/out")"; fi
run tools --list
expect 0 "tools --list"
out_lacks '{' "tools --list is a table"

finish
