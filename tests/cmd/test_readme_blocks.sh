#!/usr/bin/env bash
# Every command block of the documentation runs as written: the README,
# SECURITY.md and every guide (tests/cmd/doc_files.sh lists them). Each
# fenced block with the language `sh` is run verbatim with
# `bash -e -o pipefail`, from a scratch folder laid out like the source tree
# (its top-level entries linked, `build` = this build; a guide's blocks
# too, as they name contrib/... or tests/... from the top) with this build's
# sandpod first on PATH and a private state root, unless the line right
# before its fence says why not:
#
#   <!-- not run: REASON -->         it needs what a test machine cannot have
#   <!-- run by FILE -->             FILE (in the source tree) runs it, and
#                                    names the Markdown file it reads
#
# A block must clean up after itself: no sandbox or template left in the
# state root, nothing left in the folder it ran in. Every fence needs a
# language (`text` for a synopsis), and commands are `sh`, so a command block
# cannot slip past this test unlabelled. `python` blocks are run by
# tests/contrib/python/readme.sh and `c` blocks built by test_install.sh, so
# they may stand only where those look. Failures name FILE:LINE.
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

# shellcheck source=tests/cmd/doc_files.sh
. "$(dirname "$0")/doc_files.sh"
mapfile -t docs < <(doc_files "$SRC")

# The blocks, one file each (DOC/NNNNN = the line of the opening fence in
# the DOCth file), and a manifest: DOC LINE LANG MARK, MARK being `-` or the
# marker comment's text.
mkdir -p "$T/blocks"
: >"$T/blocks/manifest"
i=0
for doc in "${docs[@]}"; do
    i=$((i + 1))
    if [ ! -f "$SRC/$doc" ]; then
        bad "$doc: listed in doc_files.sh but missing"
        continue
    fi
    mkdir -p "$T/blocks/$i"
    awk -v dir="$T/blocks/$i" -v doc="$i" '
        function trim(x) { sub(/^[ \t]+/, "", x); sub(/[ \t]+$/, "", x); return x }
        !inblock && /^[ \t]*```/ {
            lang = trim(substr(trim($0), 4))
            mark = prev ~ /^<!-- .* -->$/ ? prev : "-"
            inblock = 1; start = NR
            f = sprintf("%s/%05d.%s", dir, NR, lang == "" ? "none" : lang)
            printf "" > f
            printf "%d\t%d\t%s\t%s\n", doc, NR, lang == "" ? "-" : lang, mark >> (dir "/../manifest")
            prev = $0; next
        }
        inblock && /^[ \t]*```[ \t]*$/ { inblock = 0; close(f); prev = $0; next }
        inblock { print > f }
        { prev = $0 }
        END { if (inblock) printf "%d\t%d\tunclosed\t-\n", doc, start >> (dir "/../manifest") }
    ' "$SRC/$doc"
done
check "the documentation has fenced blocks" [ -s "$T/blocks/manifest" ]

bindir=$(cd "$(dirname "$SP")" && pwd)
nrun=0
nskip=0
declare -A runs
while IFS=$'\t' read -r i line lang mark; do
    doc=${docs[i - 1]}
    where="$doc:$line"
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
    python)
        [ "$doc" = contrib/python/README.md ] ||
            bad "$where: a python block outside contrib/python/README.md, which no test runs"
        continue
        ;;
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
        if [ -f "$SRC/$by" ] && grep -qF "$doc" "$SRC/$by"; then
            nskip=$((nskip + 1))
        else
            bad "$where: marked as run by $by, which does not exist or never names $doc"
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
    w=$T/run$i-$line
    mkdir -p "$w"
    for e in "$SRC"/*; do
        [ "$(basename "$e")" = build ] || ln -s "$e" "$w/$(basename "$e")"
    done
    ln -s "$bindir" "$w/build"
    before=$(ls -A "$w")
    nrun=$((nrun + 1))
    runs[$doc]=$((${runs[$doc]:-0} + 1))
    (
        cd "$w" && PATH=$bindir:$PATH TMPDIR=$T timeout 600 \
            bash -e -o pipefail "$T/blocks/$i/$(printf %05d "$line").sh"
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

for doc in "${!runs[@]}"; do
    echo "$doc: ${runs[$doc]} sh blocks run"
done | sort
echo "${#docs[@]} files: $nrun sh blocks run, $nskip marked as run elsewhere or not run"
check "the documentation's command blocks were found and run" [ "$nrun" -ge 5 ]

finish
