#!/usr/bin/env bash
# The documentation holds together: every relative link of the README,
# SECURITY.md and the guides (tests/cmd/doc_files.sh) names a file that
# exists, and every #anchor a heading of its target (tests/cmd/doc_links.py,
# GitHub's slugs); the README links to every guide and stays a front door
# of at most 400 lines. The checker is first run on a scratch tree with
# dead links of each kind, which it must refuse, so a checker that finds
# nothing cannot pass.
#
# Usage: test_doc_links.sh SOURCE_DIR
set -u

SRC=${1:?usage: test_doc_links.sh SOURCE_DIR}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/cmd/doc_files.sh
. "$here/doc_files.sh"
command -v python3 >/dev/null 2>&1 || {
    echo "skip: python3 is missing"
    exit 77
}

T=$(mktemp -d "${TMPDIR:-/tmp}/sandpod-links.XXXXXX")
trap 'rm -rf "$T"' EXIT
fails=0
ok() { echo "ok - $1"; }
bad() {
    echo "not ok - $1"
    fails=$((fails + 1))
}
links() { python3 "$here/doc_links.py" "$@"; }

# The checker itself, on a scratch tree: good links pass, each dead one fails.
mkdir -p "$T/tree/guides"
cat >"$T/tree/guides/b.md" <<'MD'
# B's title

## Options: `--json`, and more!

## Twice

## Twice

<a id="kept-anchor"></a>Text.
MD
cat >"$T/tree/good.md" <<'MD'
# Good

A [file](guides/b.md), [a heading](guides/b.md#options---json-and-more),
[the second of two](guides/b.md#twice-1), [an explicit one](guides/b.md#kept-anchor),
[here](#good), [a folder](guides), [a site](https://example.com/#x) and
`[in a code span](missing.md)`.

```sh
# [in a code block](missing.md)
```
MD
if out=$(links "$T/tree" good.md 2>&1); then
    ok "the checker passes good links"
else
    bad "the checker refuses good links: $out"
fi
printf '# Dead\n\nSee [this](%s).\n' 'guides/missing.md' >"$T/tree/dead_file.md"
printf '# Dead\n\nSee [this](%s).\n' 'guides/b.md#no-such-heading' >"$T/tree/dead_anchor.md"
printf '# Dead\n\nSee [this](%s).\n' '#nowhere' >"$T/tree/dead_self.md"
printf '# Dead\n\nSee [this](%s).\n' 'guides/b.md#twice-2' >"$T/tree/dead_dup.md"
printf '# Dead\n\n[ref]: %s\n' 'nothing/here.md' >"$T/tree/dead_ref.md"
for f in dead_file dead_anchor dead_self dead_dup dead_ref; do
    if out=$(links "$T/tree" "$f.md" 2>&1); then
        bad "the checker passes a dead link ($f)"
    elif printf '%s' "$out" | grep -q "^$f.md:3: "; then
        ok "the checker refuses a dead link with FILE:LINE ($f)"
    else
        bad "the checker refuses $f.md without FILE:LINE: $out"
    fi
done

# The documentation.
mapfile -t docs < <(doc_files "$SRC")
for d in "${docs[@]}"; do
    [ -f "$SRC/$d" ] || bad "$d is listed in doc_files.sh but missing"
done
if out=$(links "$SRC" "${docs[@]}" 2>&1); then
    ok "every relative link of the ${#docs[@]} documentation files resolves"
else
    bad "dead links:
$out"
fi

# Every guide is linked from the README (a link naming the file).
for d in "${docs[@]}"; do
    [ "$d" = README.md ] && continue
    if grep -qF "]($d" "$SRC/README.md"; then
        ok "the README links to $d"
    else
        bad "the README does not link to $d"
    fi
done

n=$(wc -l <"$SRC/README.md")
if [ "$n" -le 400 ]; then
    ok "the README has $n lines (at most 400)"
else
    bad "the README has $n lines: more than 400; move the detail into a guide"
fi

[ $fails = 0 ] || {
    echo "$fails failed"
    exit 1
}
