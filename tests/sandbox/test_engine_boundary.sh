#!/bin/bash
# The engine boundary holds (issue 16): the engine-neutral code — the
# sandbox module outside sandbox/podman/, the Kubernetes engine, the model
# tools and the MCP server — reaches Podman only through the local engine's
# table (sandbox/engine/local.h). Checked on the compiled objects (no
# sp_podman_* symbol is referenced, so no macro or inline hides a call)
# and on the sources (no Podman header is included directly; the umbrella
# sandpod.h, which has every header, is left to the symbol check).
#
# usage: test_engine_boundary.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
SRC=$1
BUILD=$2
fail=0

# The one place that names the Podman table: the choice of the local engine.
allowed='^sp_podman_local_ops$'

checked=0
while IFS= read -r -d '' o; do
    rel=${o#*.dir/}
    rel=${rel%.o}
    case $rel in
    sandbox/podman/*) continue ;;
    sandbox/* | contrib/tools/* | contrib/mcp/*) ;;
    *) continue ;;
    esac
    checked=$((checked + 1))
    while read -r sym; do
        [[ $sym =~ $allowed ]] && [[ $rel == sandbox/engine/engines.c ]] && continue
        echo "boundary: $rel uses $sym"
        fail=1
    done < <(nm -u "$o" | awk '{print $NF}' | grep -E '^sp_podman_|^sp_sandbox_podman$' || true)
done < <(find "$BUILD" -path '*/CMakeFiles/sp_sandbox.dir/*.o' -print0 -o \
    -path '*/CMakeFiles/sp_kube.dir/*.o' -print0 -o \
    -path '*/CMakeFiles/sandpod_contrib.dir/*.o' -print0)
if ((checked < 30)); then
    echo "boundary: only $checked objects found under $BUILD: is it built?"
    exit 1
fi

cd "$SRC"
while read -r f; do
    case $f in
    sandbox/podman/*) continue ;;
    esac
    if grep -nE '#include "(sandpod/podman\.h|podman_internal\.h)"' "$f"; then
        echo "boundary: $f includes a Podman header"
        fail=1
    fi
done < <(find sandbox contrib/tools contrib/mcp -name '*.[ch]' |
    grep -v '^sandbox/include/sandpod/podman\.h$\|^sandbox/include/sandpod\.h$')

((fail == 0)) && echo "engine boundary holds ($checked objects)"
exit $fail
