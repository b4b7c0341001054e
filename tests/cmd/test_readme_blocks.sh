#!/usr/bin/env bash
# Every command block of the README runs as written. Each fenced block with
# the language `sh` is run verbatim with `bash -e -o pipefail`, from a
# scratch folder laid out like the source tree (its top-level entries linked,
# `build` = this build) with this build's sandpod first on PATH and a private
# state root, unless the line right before its fence says why not:
#
#   <!-- not run: REASON -->         it needs what a test machine cannot have
#   <!-- run by FILE -->             FILE (in the source tree) runs it
#
# A block must clean up after itself: no sandbox or template left in the
# state root, nothing left in the folder it ran in. Every fence needs a
# language (`text` for a synopsis), and commands are `sh`, so a command block
# cannot slip past this test unlabelled.
#
# Usage: test_readme_blocks.sh PATH/TO/sandpod SOURCE_DIR
set -u

SP=${1:?usage: test_readme_blocks.sh PATH/TO/sandpod SOURCE_DIR}
SRC=${2:?usage: test_readme_blocks.sh PATH/TO/sandpod SOURCE_DIR}

# shellcheck disable=SC2034 # read by podman_lib.sh
PREFIX=sandpod-readme
# shellcheck source=tests/cmd/podman_lib.sh
. "$(dirname "$0")/podman_lib.sh"
need_image

# The blocks, one file each (NNNN = the line of the opening fence), and a
# manifest: LINE LANG MARK, MARK being `-` or the marker comment's text.
mkdir -p "$T/blocks"
awk -v dir="$T/blocks" '
    function trim(x) { sub(/^[ \t]+/, "", x); sub(/[ \t]+$/, "", x); return x }
    !inblock && /^[ \t]*```/ {
        lang = trim(substr(trim($0), 4))
        mark = prev ~ /^<!-- .* -->$/ ? prev : "-"
        inblock = 1; start = NR
        f = sprintf("%s/%05d.%s", dir, NR, lang == "" ? "none" : lang)
        printf "" > f
        printf "%d\t%s\t%s\n", NR, lang == "" ? "-" : lang, mark > (dir "/manifest")
        prev = $0; next
    }
    inblock && /^[ \t]*```[ \t]*$/ { inblock = 0; close(f); prev = $0; next }
    inblock { print > f }
    { prev = $0 }
    END { if (inblock) printf "%d\tunclosed\t-\n", start > (dir "/manifest") }
' "$SRC/README.md"
check "the README has fenced blocks" [ -s "$T/blocks/manifest" ]

bindir=$(cd "$(dirname "$SP")" && pwd)
nrun=0
nskip=0
while IFS=$'\t' read -r line lang mark; do
    where="README.md:$line"
    case "$lang" in
    -)
        bad "$where: a fence without a language (text for a synopsis, sh for commands)"
        continue
        ;;
    unclosed)
        bad "$where: a fence that is never closed"
        continue
        ;;
    bash | shell | console | zsh | shell-session)
        bad "$where: commands are \`sh\` blocks (this one is \`$lang\`), so this test runs them"
        continue
        ;;
    sh) ;;
    *) continue ;;
    esac
    case "$mark" in
    '<!-- not run: '?*' -->')
        nskip=$((nskip + 1))
        continue
        ;;
    '<!-- run by '*' -->')
        by=${mark#'<!-- run by '}
        by=${by%% *}
        by=${by%' -->'}
        if [ -f "$SRC/$by" ] && grep -q README "$SRC/$by"; then
            nskip=$((nskip + 1))
        else
            bad "$where: marked as run by $by, which does not exist or never reads the README"
        fi
        continue
        ;;
    -) ;;
    *)
        bad "$where: the comment before the block is neither '<!-- not run: REASON -->' nor '<!-- run by FILE -->': $mark"
        continue
        ;;
    esac

    # A folder like the source tree, for blocks that name contrib/... or
    # build/...; whatever a block makes lands here, not in the sources.
    w=$T/run$line
    mkdir -p "$w"
    for e in "$SRC"/*; do
        [ "$(basename "$e")" = build ] || ln -s "$e" "$w/$(basename "$e")"
    done
    ln -s "$bindir" "$w/build"
    before=$(ls -A "$w")
    nrun=$((nrun + 1))
    (
        cd "$w" && PATH=$bindir:$PATH TMPDIR=$T timeout 600 \
            bash -e -o pipefail "$T/blocks/$(printf %05d "$line").sh"
    ) >"$T/block.out" 2>"$T/block.err" </dev/null
    rc=$?
    ran_ok "$where: the block" "$T/block.out" "$T/block.err" 10
    for what in sandboxes templates; do
        left=$(ls -A "$SANDPOD_HOME/$what" 2>/dev/null | tr '\n' ' ')
        if [ -z "$left" ]; then ok; else bad "$where: the block leaves $what behind: $left"; fi
    done
    after=$(ls -A "$w")
    if [ "$after" = "$before" ]; then
        ok
    else
        bad "$where: the block leaves files in its folder: $(comm -13 <(echo "$before") <(echo "$after") | tr '\n' ' ')"
    fi
    # The next block starts clean either way.
    for d in "$SANDPOD_HOME"/sandboxes/*/; do
        [ -d "$d" ] && "$SP" rm --force "$(basename "$d")" >/dev/null 2>&1
    done
    for d in "$SANDPOD_HOME"/templates/*/; do
        [ -d "$d" ] && "$SP" template rm "$(basename "$d")" >/dev/null 2>&1
    done
    rm -rf "$w"
done <"$T/blocks/manifest"

echo "README: $nrun sh blocks run, $nskip marked as run elsewhere or not run"
check "the README's command blocks were found and run" [ "$nrun" -ge 5 ]

finish
