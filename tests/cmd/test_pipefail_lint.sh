#!/usr/bin/env bash
# Scripts under `set -o pipefail` must not end a pipeline with a reader that
# quits early (`grep -q`, awk's `exit`): the writer then dies of SIGPIPE
# whenever it has not finished writing, the pipeline fails, and `set -e`
# ends the script without a word, now and then. build-sandpod-image.sh did
# this (`ldconfig -p | awk '... exit'`, 2 runs in 300) and made the
# Kubernetes tests fail at random with an empty error. Read the whole input
# instead: `grep PATTERN >/dev/null`, awk with a `found` flag.
#
# Usage: test_pipefail_lint.sh SOURCE_DIR
set -u
SRC=${1:?usage: test_pipefail_lint.sh SOURCE_DIR}
cd "$SRC" || exit 1
bad=0
n=0
while IFS= read -r f; do
    grep -q 'pipefail' "$f" || continue
    n=$((n + 1))
    hits=$(grep -nE '\|[[:space:]]*(grep[[:space:]]+-[a-zA-Z]*q|awk[[:space:]].*[{;][[:space:]]*exit[[:space:]]*\})' "$f" |
        grep -v 'sigpipe-safe')
    if [ -n "$hits" ]; then
        printf '%s\n' "$hits" | sed "s#^#FAIL: $f:#"
        bad=$((bad + 1))
    fi
done < <({ git ls-files '*.sh' .ci/run 2>/dev/null || find . -name '*.sh' -not -path './build*'; } | sort -u)
echo "$n scripts under pipefail read, $bad with an early-quitting reader"
[ "$n" -gt 0 ] && [ "$bad" = 0 ]
