# The Markdown files of the documentation: the README (the front door),
# SECURITY.md and every guide it links to. test_readme_blocks runs their
# `sh` blocks, test_install builds their `c` blocks, test_doc_links checks
# their links. A new guide goes into contrib/docs/ and is picked up here.
# shellcheck shell=bash

# doc_files SRC: the files, relative to SRC, one a line.
doc_files() {
    (cd "$1" && printf '%s\n' README.md SECURITY.md contrib/docs/*.md \
        contrib/python/README.md tests/README.md tests/bench/README.md)
}
