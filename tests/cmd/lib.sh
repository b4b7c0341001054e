# Shared by the CLI test scripts: run sandpod, keep its output, and count
# checks. The sourcing script sets SP (the sandpod binary) and T (a scratch
# folder) first, and ends with `finish`.
# shellcheck shell=bash

pass=0
fail=0
rc=0
: >"$T/empty"

ok() {
    pass=$((pass + 1))
}

bad() {
    fail=$((fail + 1))
    echo "FAIL: $*"
    if [ -s "$T/err" ]; then
        head -n 5 "$T/err" | sed 's/^/    stderr: /'
    fi
}

# run ARGS...: sandpod with no stdin; stdout, stderr and status kept.
run() {
    local t0=${EPOCHREALTIME:-}
    "$SP" "$@" <"$T/empty" >"$T/out" 2>"$T/err"
    rc=$?
    [ -n "${SP_TEST_TRACE:-}" ] && echo "$(echo "${EPOCHREALTIME} - $t0" | bc) $*" >>"$SP_TEST_TRACE"
    return 0
}

# runin INPUT ARGS...: the same with INPUT on stdin.
runin() {
    local input=$1
    shift
    printf '%s' "$input" >"$T/in"
    "$SP" "$@" <"$T/in" >"$T/out" 2>"$T/err"
    rc=$?
}

# Every stderr line of a failure is `sandpod: ...`.
err_lines_ok() {
    [ -s "$T/err" ] && ! grep -qv '^sandpod: ' "$T/err"
}

# expect RC DESC: the last run exited RC; a sandpod failure said why in
# `sandpod: ` lines, and bad usage in exactly one.
expect() {
    local want=$1 desc=$2
    if [ "$rc" -ne "$want" ]; then
        bad "$desc: exit $rc, wanted $want"
    elif [ "$want" -eq 1 ] && ! err_lines_ok; then
        bad "$desc: stderr is not 'sandpod: ...'"
    elif [ "$want" -eq 2 ] && { ! err_lines_ok || [ "$(wc -l <"$T/err")" -ne 1 ]; }; then
        bad "$desc: bad usage did not print exactly one 'sandpod: ' line"
    else
        ok
    fi
}

# ran_ok DESC OUT ERR [N]: a script just run (its status in rc) exited 0;
# else the last N (20) lines of its stdout and stderr files go with the FAIL.
ran_ok() {
    if [ "$rc" -eq 0 ]; then
        ok
        return
    fi
    bad "$1 exits $rc"
    tail -n "${4:-20}" "$2" | sed 's/^/    stdout: /'
    tail -n "${4:-20}" "$3" | sed 's/^/    stderr: /'
}

# expect_rc RC DESC: the exit status alone.
expect_rc() {
    if [ "$rc" -eq "$1" ]; then ok; else bad "$2: exit $rc, wanted $1"; fi
}

# out_is TEXT DESC: stdout is exactly TEXT (printf %b escapes allowed).
out_is() {
    printf '%b' "$1" >"$T/want"
    if cmp -s "$T/want" "$T/out"; then ok; else bad "$2: stdout was '$(head -c 300 "$T/out")'"; fi
}

# out_has TEXT DESC / out_lacks TEXT DESC: a fixed string in stdout.
out_has() {
    if grep -qF -- "$1" "$T/out"; then ok; else bad "$2: no '$1' in '$(head -c 300 "$T/out")'"; fi
}

out_lacks() {
    if grep -qF -- "$1" "$T/out"; then bad "$2: '$1' found in stdout"; else ok; fi
}

err_has() {
    if grep -qF -- "$1" "$T/err"; then ok; else bad "$2: no '$1' in stderr"; fi
}

# check DESC CMD...: any host-side condition.
check() {
    local desc=$1
    shift
    if "$@"; then ok; else bad "$desc"; fi
}

# json DESC [EXPR]: stdout is strict UTF-8 JSON and the Python expression
# EXPR (over `j`) holds.
json() {
    local desc=$1 expr=${2:-True}
    if python3 -c '
import json, sys
j = json.loads(sys.stdin.buffer.read().decode("utf-8"))
sys.exit(0 if eval(sys.argv[1]) else 1)' "$expr" <"$T/out" 2>"$T/pyerr"; then
        ok
    else
        bad "$desc: '$expr' on '$(head -c 300 "$T/out")' $(head -c 300 "$T/pyerr")"
    fi
}

# file_is PATH TEXT DESC: a host file holds exactly TEXT (%b escapes).
file_is() {
    printf '%b' "$2" >"$T/want"
    if cmp -s "$T/want" "$1"; then ok; else bad "$3: file holds '$(head -c 300 "$1" 2>&1)'"; fi
}

# finish: the closing line CTest and CI read, and the exit status.
finish() {
    echo "$pass passed, $fail failed"
    [ "$fail" -eq 0 ]
}

# run_tty ARGS...: sandpod with stdin, stdout and stderr on a terminal (a
# pty in raw mode, so bytes arrive exactly as written); what it wrote to
# either goes to $T/out, its exit status to rc. Skipped (rc 77) where
# Python has no pty module.
run_tty() {
    python3 - "$SP" "$@" >"$T/out" 2>"$T/err" <<'PY'
import fcntl, os, select, sys, termios
try:
    import pty, tty
except ImportError:
    sys.exit(77)
# The parent keeps the terminal's other end open: a master whose slave is
# gone may answer EIO before it hands over the last output (seen under
# load: a --json answer cut to its first byte). It reads until the program
# has exited and the terminal is empty.
master, slave = pty.openpty()
pid = os.fork()
if pid == 0:
    os.close(master)
    os.setsid()
    fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
    for f in (0, 1, 2):
        os.dup2(slave, f)
    if slave > 2:
        os.close(slave)
    tty.setraw(0)  # no \n -> \r\n: compare bytes as the program wrote them
    os.execv(sys.argv[1], sys.argv[1:])
out = b""
st = None
while True:
    r, _, _ = select.select([master], [], [], 0.05)
    if r:
        out += os.read(master, 65536)
        continue
    if st is not None:
        break  # exited, and nothing more came
    p, status = os.waitpid(pid, os.WNOHANG)
    if p:
        st = status
os.close(slave)
os.close(master)
sys.stdout.buffer.write(out)
sys.exit(os.waitstatus_to_exitcode(st))
PY
    rc=$?
}
