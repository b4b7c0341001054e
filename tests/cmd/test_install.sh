#!/usr/bin/env bash
# The installed library is the product: install the build to a prefix, move
# that prefix (the .pc must not name where it was made), then as a user of
# the library would:
#   - every public header compiles alone;
#   - libsandpod.so exports exactly the functions the public headers declare;
#   - the C examples of the documentation (every `c` block of the files
#     tests/cmd/doc_files.sh lists; today those of contrib/docs/c-api.md)
#     build with pkg-config, and show.c and box.c run (the sandbox one
#     against Podman when a service answers; required under CI=true).
# usage: test_install.sh BUILD_DIR SOURCE_DIR
set -uo pipefail
build=${1:?build dir}
src=${2:?source dir}
T=$(mktemp -d "${TMPDIR:-/tmp}/sandpod-test-XXXXXX")
trap 'rm -rf "$T"' EXIT
fails=0
ok() { echo "ok - $1"; }
bad() {
    echo "not ok - $1"
    fails=$((fails + 1))
}

cmake --install "$build" --prefix "$T/made" >"$T/install.log" 2>&1 || {
    cat "$T/install.log"
    echo "cmake --install failed"
    exit 1
}
mv "$T/made" "$T/moved"
P=$T/moved
pc=$(find "$P" -name sandpod.pc | head -n 1)
[ -n "$pc" ] || {
    echo "no sandpod.pc installed"
    exit 1
}
export PKG_CONFIG_PATH=$(dirname "$pc")
cflags=$(pkg-config --cflags sandpod)
libs=$(pkg-config --libs sandpod)
libdir=$(pkg-config --variable=libdir sandpod)
if [ -f "$libdir/libsandpod.so" ]; then ok "the .pc points into the moved prefix"; else bad "libdir $libdir from the .pc has no libsandpod.so"; fi

# The man pages and the shell completions, where man and the shells look.
for f in share/man/man1/sandpod.1 share/man/man1/sandpod-create.1 \
    share/bash-completion/completions/sandpod share/zsh/site-functions/_sandpod \
    share/fish/vendor_completions.d/sandpod.fish; do
    if [ -s "$P/$f" ]; then ok "$f installed"; else bad "$f is not installed"; fi
done

# The Python package, where the system's python3 reads it under this prefix
# (SANDPOD_PYTHON); imported from the moved prefix it loads that prefix's
# libraries, with nothing set.
site=$(sed -n 's/^SANDPOD_PYTHON_SITEDIR:STRING=//p' "$build/CMakeCache.txt")
if grep -q '^SANDPOD_PYTHON:BOOL=ON' "$build/CMakeCache.txt"; then
    if [ -f "$P/$site/sandpod/__init__.py" ] && [ -f "$P/$site/sandpod/py.typed" ] &&
        [ ! -e "$P/$site/sandpod/__pycache__" ]; then
        ok "the Python package is installed in $site"
    else
        bad "the Python package is not in $P/$site: $(ls "$P/$site" 2>&1)"
    fi
    # A sanitized build's library loads in python with its runtime first.
    san=$(ldd "$P/${site%%/python*}/libsandpod.so.0" "$P/lib/libsandpod.so.0" 2>/dev/null |
        awk '/lib(asan|ubsan)\.so/ {print $3}' | sort -u | paste -sd:)
    got=$(cd / && env -u SANDPOD_LIBRARY -u SANDPOD_TOOLS_LIBRARY -u PYTHONPATH \
        ${san:+LD_PRELOAD=$san ASAN_OPTIONS=detect_leaks=0} \
        PYTHONPATH="$P/$site" PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 -c '
import sandpod._native as n
from sandpod.tools import _load
print(n.lib._name, _load()._name)' 2>&1)
    if [ "$got" = "$P/lib/libsandpod.so.0 $P/lib/libsandpod_tools.so.0" ] ||
        [ "$got" = "$P/${site%%/python*}/libsandpod.so.0 $P/${site%%/python*}/libsandpod_tools.so.0" ]; then
        ok "the installed package loads the moved prefix's libraries"
    else
        bad "the installed package loads: $got"
    fi
fi

# Every public header alone, and sandpod.h with everything.
for h in "$P"/include/sandpod.h "$P"/include/sandpod/*.h; do
    rel=${h#"$P"/include/}
    if printf '#include <%s>\nint main(void) { return 0; }\n' "$rel" |
        cc -std=c11 -Wall -Wextra -Werror $cflags -x c - -o "$T/h.out" 2>"$T/h.err"; then
        ok "#include <$rel> compiles alone"
    else
        bad "#include <$rel> compiles alone: $(head -n 3 "$T/h.err")"
    fi
done
for h in sandbox.h podman.h session.h; do
    [ -f "$P/include/sandpod/$h" ] && ok "sandpod/$h is installed" || bad "sandpod/$h is not installed"
done

# Exported symbols == functions the installed public headers declare.
cat "$P"/include/sandpod.h "$P"/include/sandpod/*.h |
    grep -E '^[a-z].*[ *]sp_[a-z0-9_]+\(' | grep -oE 'sp_[a-z0-9_]+\(' | tr -d '(' |
    sort -u >"$T/declared"
nm -D --defined-only "$libdir/libsandpod.so" | awk '{sub(/@.*/, "", $NF); print $NF}' |
    grep -vE '^(_init|_fini|_edata|_end|__bss_start|SANDPOD_0)$' | sort -u >"$T/exported"
if diff "$T/declared" "$T/exported" >"$T/sym.diff"; then
    ok "libsandpod.so exports exactly the $(wc -l <"$T/declared") public functions"
else
    bad "exported symbols differ from the public headers (< declared only, > exported only):
$(head -n 20 "$T/sym.diff")"
fi

# libsandpod_tools.so (the tool suite for the Python package) exports the
# functions tools.h declares and nothing else: the base helpers compiled into
# it stay hidden.
grep -E '^[a-z].*[ *]sp_[a-z0-9_]+\(' "$src/contrib/tools/tools.h" | grep -oE 'sp_[a-z0-9_]+\(' |
    tr -d '(' | sort -u >"$T/tools_declared"
nm -D --defined-only "$libdir/libsandpod_tools.so" | awk '{sub(/@.*/, "", $NF); print $NF}' |
    grep -vE '^(_init|_fini|_edata|_end|__bss_start|SANDPOD_TOOLS_0)$' | sort -u >"$T/tools_exported"
if diff "$T/tools_declared" "$T/tools_exported" >"$T/tools_sym.diff"; then
    ok "libsandpod_tools.so exports exactly the $(wc -l <"$T/tools_declared") functions of tools.h"
else
    bad "libsandpod_tools.so exports differ from tools.h (< declared only, > exported only):
$(head -n 20 "$T/tools_sym.diff")"
fi

# The documentation's C examples, as written there. A sanitized build's
# library needs its programs built the same way (the runtime must come
# first). Each is named by the `cc NAME.c` of its first line (else
# exampleN), and reported as FILE:LINE.
san=
readelf -d "$libdir/libsandpod.so" | grep 'libasan' >/dev/null && san="-fsanitize=address,undefined"
# shellcheck source=tests/cmd/doc_files.sh
. "$(dirname "$0")/doc_files.sh"
mkdir -p "$T/ex"
: >"$T/ex/list"
while IFS= read -r doc; do
    [ -f "$src/$doc" ] || continue
    awk -v dir="$T/ex" -v doc="$doc" '
        /^```c$/ { on = 1; start = NR + 1; name = ""; next }
        on && /^```$/ { on = 0; close(f); next }
        on && name == "" {
            name = "example" (++n)
            if (match($0, /cc [A-Za-z0-9_]+\.c/)) name = substr($0, RSTART + 3, RLENGTH - 5)
            f = dir "/" name ".c"
            printf "%s\t%s:%d\n", name, doc, start >> (dir "/list")
        }
        on { print > f }
    ' "$src/$doc"
done < <(doc_files "$src")
n=0
while IFS=$'\t' read -r name where; do
    n=$((n + 1))
    if cc -std=c11 -Wall -Wextra -Werror $san "$T/ex/$name.c" $cflags $libs -Wl,-rpath,"$libdir" \
        -o "$T/ex/$name" 2>"$T/cc.err"; then
        ok "C example $name.c ($where) builds with pkg-config"
    else
        bad "C example $name.c ($where) builds: $(head -n 5 "$T/cc.err")"
    fi
done <"$T/ex/list"
dups=$(cut -f1 "$T/ex/list" | sort | uniq -d | tr '\n' ' ')
[ -z "$dups" ] || bad "C examples share a name (each needs its own cc NAME.c): $dups"
[ "$n" -ge 2 ] && ok "the documentation has $n C examples" || bad "the documentation's C examples were not found"

# show.c reads src/main.c of the workspace it is given.
mkdir -p "$T/ws/src"
printf 'int main(void) { return 0; }\n' >"$T/ws/src/main.c"
if [ -x "$T/ex/show" ] && [ "$("$T/ex/show" "$T/ws")" = "int main(void) { return 0; }" ]; then
    ok "C example show.c runs"
else
    bad "C example show.c runs: $("$T/ex/show" "$T/ws" 2>&1 | head -n 3)"
fi

# box.c makes a sandbox: it needs a Podman service.
if [ -x "$T/ex/box" ]; then
    mkdir -p "$T/project" "$T/home"
    echo hello >"$T/project/hello.txt"
    out=$(SANDPOD_HOME=$T/home SANDPOD_AGENT=$P/libexec/sandpod/sandpod-agent \
        "$T/ex/box" "$T/project" 2>&1)
    rc=$?
    if [ $rc = 0 ] && printf '%s' "$out" | grep 'hello.txt' >/dev/null; then
        ok "C example box.c runs a sandbox"
    elif printf '%s' "$out" | grep -i 'podman service' >/dev/null && [ "${CI:-}" != true ]; then
        echo "ok - C example box.c # SKIP no Podman service: $out"
    else
        bad "C example box.c runs a sandbox (exit $rc): $(printf '%s' "$out" | head -n 5)"
    fi
else
    bad "C example box.c was not found"
fi

if [ $fails -ne 0 ]; then
    echo "$fails check(s) failed"
    exit 1
fi
echo "all install checks passed"
