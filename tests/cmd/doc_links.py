#!/usr/bin/env python3
"""Check the relative links of Markdown files: every [text](path) and
[text](path#anchor) must name a file or folder that exists in the source
tree, and an anchor must name a heading of the target (GitHub's slugs) or
an explicit <a id="..."> / <a name="...">. Links to other sites (a scheme
such as https: or mailto:) are not followed. Code blocks and code spans are
not read. Prints FILE:LINE: why for each dead link; exits 1 if any.

usage: doc_links.py ROOT FILE...   (FILEs relative to ROOT, or absolute)
"""

import os
import re
import sys

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"", re.I)
LINK = re.compile(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REFDEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
CODESPAN = re.compile(r"(`+)(.+?)\1")


def text_lines(path):
    """(line number, text) outside fenced code blocks, code spans blanked."""
    fence = None
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            m = FENCE.match(line)
            if m:
                if fence is None:
                    fence = m.group(1)
                elif m.group(1) == fence:
                    fence = None
                continue
            if fence is None:
                yield n, line.rstrip("\n")


def slug(heading):
    """GitHub's anchor for a heading's text: the rendered text (code spans'
    content, links' text, no emphasis), lowercased, punctuation removed,
    each space a '-'."""
    t = CODESPAN.sub(lambda m: m.group(2).strip(), heading)
    t = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", t)
    t = re.sub(r"<[^>]+>", "", t)
    t = t.lower()
    t = "".join(c for c in t if c.isalnum() or c in " -_")
    return t.replace(" ", "-")


_anchors = {}


def anchors(path):
    if path not in _anchors:
        seen, out = {}, set()
        for _, line in text_lines(path):
            for a in ANCHOR.findall(line):
                out.add(a)
            m = HEADING.match(line)
            if m:
                s = slug(m.group(2))
                if s in seen:
                    seen[s] += 1
                    s = f"{s}-{seen[s]}"
                else:
                    seen[s] = 0
                out.add(s)
        _anchors[path] = out
    return _anchors[path]


def targets(path):
    for n, line in text_lines(path):
        m = REFDEF.match(line)
        if m:
            yield n, m.group(1)
            continue
        for m in LINK.finditer(CODESPAN.sub(lambda c: " " * len(c.group(0)), line)):
            yield n, m.group(2)


def check(root, rel):
    root = os.path.realpath(root)
    path = os.path.join(root, rel)
    dead = []
    for n, target in targets(path):
        if not target or SCHEME.match(target):
            if not target:
                dead.append((n, "an empty link"))
            continue
        file, _, frag = target.partition("#")
        if file:
            base = root if file.startswith("/") else os.path.dirname(path)
            dest = os.path.normpath(os.path.join(base, file.lstrip("/")))
            if os.path.commonpath([root, os.path.realpath(dest)]) != root:
                dead.append((n, f"{target}: leaves the source tree"))
                continue
            if not os.path.exists(dest):
                dead.append((n, f"{target}: no such file"))
                continue
        else:
            dest = path
        if frag and dest.endswith(".md") and os.path.isfile(dest):
            if frag not in anchors(dest):
                dead.append((n, f"{target}: no heading or anchor '{frag}' in "
                                f"{os.path.relpath(dest, root)}"))
    return [f"{rel}:{n}: {why}" for n, why in dead]


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    root, files = argv[1], argv[2:]
    bad = [msg for rel in files for msg in check(root, rel)]
    for msg in bad:
        print(msg)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
