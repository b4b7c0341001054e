#!/usr/bin/env bash
# The shell completions `sandpod completion SHELL` writes (and the build
# installs): bash driven through its completion function, zsh and fish
# checked for syntax and, where the shell allows, asked for completions.
# A missing shell skips (77), except under CI=true.
#
# Usage: test_completion.sh PATH/TO/sandpod bash|zsh|fish [GENERATED_SCRIPT]
set -u

SP=${1:?usage: test_completion.sh PATH/TO/sandpod SHELL [SCRIPT]}
SHELL_NAME=${2:?usage: test_completion.sh PATH/TO/sandpod SHELL [SCRIPT]}
GENERATED=${3:-}
if ! command -v "$SHELL_NAME" >/dev/null 2>&1 || ! command -v python3 >/dev/null 2>&1; then
    echo "$SHELL_NAME or python3 is missing (apt-get install $SHELL_NAME python3)"
    [ "${CI:-}" = true ] && exit 1
    exit 77
fi

T=$(mktemp -d "${TMPDIR:-/tmp}/sandpod-compl.XXXXXX")
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/lib.sh"

# Sandboxes to complete: `ls --quiet` reads the state root only.
export SANDPOD_HOME=$T/home
for n in alpha beta; do
    mkdir -p "$SANDPOD_HOME/sandboxes/$n"
    : >"$SANDPOD_HOME/sandboxes/$n/sandbox.json"
done
mkdir -p "$T/other/sandboxes/gamma" "$T/dirs/sub1" "$T/dirs/sub2"
: >"$T/other/sandboxes/gamma/sandbox.json"
: >"$T/dirs/file"
mkdir -p "$T/bin"
ln -s "$(cd "$(dirname "$SP")" && pwd)/$(basename "$SP")" "$T/bin/sandpod"
export PATH=$T/bin:$PATH

run ls --quiet
expect 0 "ls --quiet"
out_is 'alpha\nbeta\n' "ls --quiet prints the names only"
run completion "$SHELL_NAME"
expect 0 "completion $SHELL_NAME"
cp "$T/out" "$T/script"
if [ -n "$GENERATED" ]; then
    if cmp -s "$T/script" "$GENERATED"; then ok; else bad "the build's $GENERATED differs from 'sandpod completion $SHELL_NAME'"; fi
fi
run completion tcsh
expect 2 "completion of an unknown shell"
run __spec
cp "$T/out" "$T/spec.json"

case $SHELL_NAME in
bash)
    bash -n "$T/script" && ok || bad "bash -n"
    # comp WORDS...: what _sandpod offers for the last word.
    comp() {
        bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
                 _sandpod; printf "%s\n" "${COMPREPLY[@]}" | sort' _ "$T/script" "$@"
    }
    want() { # DESC WANT WORDS...
        local desc=$1 wantv=$2 got
        shift 2
        got=$(comp "$@" | tr '\n' ' ' | sed 's/ $//')
        if [ "$got" = "$wantv" ]; then ok; else bad "$desc: [$*] gave '$got', wanted '$wantv'"; fi
    }
    want "a command name" "create" sandpod cr
    want "sandpod's own options" "--version" sandpod --vers
    want "command names" "snapshot snapshots" sandpod snap
    want "a long option" "--network" sandpod create --netw
    want "an option's choices" "default host none" sandpod create --network ""
    want "a choice after --opt=" "host" sandpod create --network = h
    want "a choice from a shared group" "on-request" sandpod mcp --approval on
    want "sandbox names" "alpha beta" sandpod inspect ""
    want "sandbox names of --state-root" "gamma" sandpod rm --state-root "$T/other" ""
    want "sandbox names after a flag" "alpha" sandpod stop -t 5 a
    want "folders for a DIR option" "$T/dirs/sub1 $T/dirs/sub2" sandpod snapshots --root "$T/dirs/s"
    want "no sandpod option after --" "" sandpod exec box -- -
    want "no sandpod option in exec's command" "" sandpod exec box ls -
    want "exec's options before NAME" "--interactive" sandpod exec --inter
    want "the second operand is not a sandbox" "" sandpod sh alpha ""
    want "help's COMMAND" "create" sandpod help cre
    want "completion's SHELL" "bash fish zsh" sandpod completion ""
    # Every command offers exactly the options its parser takes.
    python3 - "$T/spec.json" >"$T/cmds" <<'PY'
import json, sys
for c in json.load(open(sys.argv[1]))["commands"]:
    if c["hidden"]:
        continue
    opts = {"--" + o["name"] for o in c["longopts"]}
    so = c["shortopts"].lstrip("+:")
    opts |= {"-" + ch for ch in so if ch != ":"}
    print(c["name"], " ".join(sorted(opts)))
PY
    while read -r cmd opts; do
        got=$(comp sandpod "$cmd" - | tr '\n' ' ' | sed 's/ $//')
        if [ "$got" = "$opts" ]; then ok; else bad "$cmd: completes '$got', parser takes '$opts'"; fi
    done <"$T/cmds"
    [ "$(wc -l <"$T/cmds")" -ge 20 ] && ok || bad "fewer than 20 commands checked"
    ;;
zsh)
    zsh -n "$T/script" && ok || bad "zsh -n"
    mkdir -p "$T/fpath"
    cp "$T/script" "$T/fpath/_sandpod"
    got=$(zsh -fc 'fpath=("$1" $fpath); autoload -U compinit; compinit -u -D; print -r -- ${_comps[sandpod]}' _ "$T/fpath" 2>&1)
    if [ "$got" = "_sandpod" ]; then ok; else bad "compinit does not register _sandpod: '$got'"; fi
    # Real completions: zsh completes a line once (TAB) in a pseudo-terminal.
    zc() { # DESC WANT LINE
        local got
        got=$(timeout 20 zsh -f "$(dirname "$0")/zsh_complete.zsh" "$T/fpath" "$3" 2>/dev/null)
        if [ "$got" = "$2" ]; then ok; else bad "zsh $1: '$3' became '$got', wanted '$2'"; fi
    }
    zc "a command name" "sandpod create " "sandpod cr"
    zc "sandpod's own options" "sandpod --version " "sandpod --vers"
    zc "a long option" "sandpod create --network " "sandpod create --netw"
    zc "an option's choice" "sandpod create --network host " "sandpod create --network ho"
    zc "a sandbox name" "sandpod inspect alpha " "sandpod inspect al"
    zc "a folder" "sandpod snapshots --root $T/dirs/sub" "sandpod snapshots --root $T/dirs/s"
    zc "no sandpod option in exec's command" "sandpod exec box ls --ver" "sandpod exec box ls --ver"
    # Every command is offered with its summary.
    grep -q "'create:Create a sandbox" "$T/script" && ok || bad "zsh: create is not offered"
    grep -q -- "'\*--network\[.*\]:MODE:(none default host)'" "$T/script" && ok || bad "zsh: --network choices"
    ;;
fish)
    fish -n "$T/script" && ok || bad "fish -n"
    fc() { fish --no-config -c 'source $argv[1]; complete -C $argv[2]' "$T/script" "$1" | cut -f1 | sort | tr '\n' ' ' | sed 's/ $//'; }
    fwant() { # DESC WANT LINE
        local got
        got=$(fc "$3")
        if [ "$got" = "$2" ]; then ok; else bad "fish $1: '$3' gave '$got', wanted '$2'"; fi
    }
    fwant "a command name" "create" "sandpod cr"
    fwant "sandpod's own options" "--version" "sandpod --vers"
    fwant "a long option" "--network" "sandpod create --netw"
    fwant "an option's choices" "default host none" "sandpod create --network "
    fwant "sandbox names" "alpha beta" "sandpod inspect "
    fwant "completion's SHELL" "bash fish zsh" "sandpod completion "
    ;;
*)
    bad "unknown shell $SHELL_NAME"
    ;;
esac

finish
