#!/usr/bin/env bash
# The Python guide, contrib/python/README.md, as a new user on Debian 12
# follows it, after the README's Build section (`cmake --install build`) to
# /usr/local — without
# touching the real /usr/local: this build is installed with DESTDIR and
# that tree is bind-mounted on /usr/local in a private mount namespace
# (so the package must find libsandpod.so.0, libsandpod_tools.so.0 and the
# agent at their installed paths, with no variable set). Then, as written:
#   - the guide's sh block (venv + pip install --no-build-isolation
#     contrib/python), from a copy of the source tree, HOME a scratch folder;
#   - every python block of the guide, each in a fresh folder, with the
#     venv's python (pip's package) and with /usr/bin/python3 (the package
#     cmake --install put in /usr/local/lib/python3.X/dist-packages).
# Blocks that make sandboxes need Podman: without a service they are
# skipped, except under CI=true.
# usage: readme.sh BUILD_DIR SOURCE_DIR
set -uo pipefail
build=${1:?build dir}
src=${2:?source dir}
if [ "${SP_README_INSIDE:-}" != 1 ]; then
    prefix=$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' "$build/CMakeCache.txt")
    if [ "$prefix" != /usr/local ]; then
        echo "skip: this build's prefix is $prefix, the guide's is /usr/local"
        exit 77
    fi
    # A user installs a plain build: a sanitized library loads in python
    # only with its runtime preloaded (run.sh does that for the unit tests).
    if ldd "$build/libsandpod.so" 2>/dev/null | grep 'lib\(a\|ub\)san\.so' >/dev/null; then
        echo "skip: a sanitized build; the guide's install is of a plain one"
        exit 77
    fi
    # The guide installs into /usr/local as root (cmake --install); as
    # another user a fake root in a user namespace would reach neither the
    # rootful service nor its own rootless one, so the run is root's.
    if [ "$(id -u)" != 0 ]; then
        echo "skip: the guide's install into /usr/local is root's (this is uid $(id -u))"
        exit 77
    fi
    if unshare --mount --propagation private true 2>/dev/null; then
        ns=(unshare --mount --propagation private)
    else
        echo "skip: no private mount namespace (unshare --mount) to install into /usr/local"
        [ "${CI:-}" = true ] && exit 1
        exit 77
    fi
    T=$(mktemp -d "${TMPDIR:-/tmp}/sandpod-readme-XXXXXX")
    trap 'rm -rf "$T"' EXIT
    if ! DESTDIR=$T/dest cmake --install "$build" >"$T/install.log" 2>&1; then
        cat "$T/install.log"
        exit 1
    fi
    SP_README_INSIDE=1 SP_T=$T "${ns[@]}" bash "$0" "$build" "$src"
    exit $?
fi

T=$SP_T
fails=0
ok() { echo "ok - $1"; }
bad() {
    echo "not ok - $1"
    fails=$((fails + 1))
}
mount --bind "$T/dest/usr/local" /usr/local || exit 1

# A user's environment: nothing of the build's, Debian's python3 first.
unset SANDPOD_LIBRARY SANDPOD_TOOLS_LIBRARY SANDPOD_AGENT SANDPOD_HOME PYTHONPATH \
    XDG_DATA_HOME LD_LIBRARY_PATH LD_PRELOAD VIRTUAL_ENV
export HOME=$T/home PATH=/usr/local/bin:/usr/bin:/bin PYTHONDONTWRITEBYTECODE=1
mkdir -p "$HOME" "$T/src/contrib" "$T/blocks"
# A copy: pip writes build/ and *.egg-info next to the sources.
cp -r "$src/contrib/python" "$T/src/contrib/python"
rm -rf "$T/src/contrib/python/build" "$T/src/contrib/python"/*.egg-info

# The guide, cut into its fenced blocks.
awk '/^```(sh|python)$/ {n++; lang = substr($0, 4); f = dir "/" n "." lang; next}
     /^```$/ {f = ""; next}
     f != "" {print > f}' dir="$T/blocks" "$src/contrib/python/README.md"
nsh=$(ls "$T/blocks"/*.sh 2>/dev/null | wc -l)
npy=$(ls "$T/blocks"/*.python 2>/dev/null | wc -l)
[ "$nsh" -ge 1 ] && [ "$npy" -ge 2 ] && ok "the Python guide has $nsh sh and $npy python blocks" ||
    bad "the Python guide's blocks were not found ($nsh sh, $npy python)"

for b in "$T/blocks"/*.sh; do
    if (cd "$T/src" && bash -e "$b") >"$T/sh.log" 2>&1; then
        ok "Python guide sh block $(basename "$b") runs"
    else
        bad "Python guide sh block $(basename "$b"): $(tail -n 5 "$T/sh.log")"
    fi
done
venv_py=$HOME/.venvs/sandpod/bin/python
where=$(cd / && "$venv_py" -c 'import sandpod; print(sandpod.__file__)' 2>&1)
case $where in
"$HOME"/.venvs/sandpod/*) ok "the venv imports the pip-installed package" ;;
*) bad "the venv imports sandpod from $where" ;;
esac
if grep -q '^SANDPOD_PYTHON:BOOL=ON' "$build/CMakeCache.txt"; then
    sys_py=/usr/bin/python3
else
    sys_py= # -DSANDPOD_PYTHON=OFF: cmake --install left the package out
fi
[ -n "$sys_py" ] && where=$(cd / && /usr/bin/python3 -c 'import sandpod; from sandpod.tools import _load; _load(); print(sandpod.__file__)' 2>&1)
[ -n "$sys_py" ] && case $where in
/usr/local/lib/python3*/dist-packages/sandpod/__init__.py) ok "python3 imports the package cmake --install put in /usr/local" ;;
*) bad "python3 imports sandpod from $where" ;;
esac

# A Podman service to run the sandbox blocks against?
podman_ok=1
probe=$(cd "$T" && "$venv_py" -c 'import sandpod; print(sandpod.Sandbox.list())' 2>&1) || podman_ok=0
if [ $podman_ok = 1 ]; then
    out=$(cd "$T" && "$venv_py" -c '
import os, sandpod
with sandpod.Sandbox.create(network="none") as sb:
    agent = os.path.exists(os.path.join(sb.state_dir, "agent", "sandpod-agent"))
    print(sb.shell("echo up").stdout.strip(), "agent" if agent else "no-agent")' 2>&1) ||
        podman_ok=0
    probe=$out
    if [ $podman_ok = 1 ]; then
        # The library found the agent where cmake --install put it.
        [ "$out" = "up agent" ] && ok "a sandbox gets the installed agent" ||
            bad "a sandbox from the installed library: $out"
    fi
fi

for py in "$venv_py" $sys_py; do
    for b in "$T/blocks"/*.python; do
        name="$(basename "$b") with $py"
        if grep -q 'Sandbox\.' "$b" && [ $podman_ok = 0 ]; then
            if [ "${CI:-}" = true ]; then
                bad "$name: no sandbox: $probe"
            else
                echo "ok - $name # SKIP no sandbox: $(printf '%s' "$probe" | tail -n 1)"
            fi
            continue
        fi
        run=$(mktemp -d "$T/run-XXXXXX")
        if (cd "$run" && timeout 300 "$py" "$b") >"$run.out" 2>"$run.err"; then
            ok "Python guide python block $name runs"
        else
            bad "Python guide python block $name: $(tail -n 5 "$run.err")"
            continue
        fi
        # What the sandbox example prints, line for line where it is fixed.
        if grep -q 'fed on stdin' "$b"; then
            head -n 3 "$run.out" | diff - <(printf '3 a.txt\nb.txt\n oops\n') >/dev/null &&
                grep -q 'fed on stdin' "$run.out" && grep -qF "[('added', 'new.txt')]" "$run.out" &&
                [ "$(grep -v "^$" "$run.out" | tail -n 1)" = hi ] && ok "$name prints what the guide says" ||
                bad "$name prints: $(cat "$run.out")"
        fi
    done
done
[ $fails = 0 ] || {
    echo "$fails failed"
    exit 1
}
