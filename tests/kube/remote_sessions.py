#!/usr/bin/python3
"""The Python package's interactive sessions on a sandbox of a kubernetes
engine (run by test_engine_snapshots.sh with SANDPOD_LIBRARY,
SANDPOD_TOOLS_LIBRARY and SANDPOD_HOME set): exec_command / write_stdin /
kill_session / list_sessions / sessions.signal through the library
(sp_session_*), which asks the peer's exec_command and write_stdin tools;
what those cannot carry is refused with InvalidError, nothing started.

usage: remote_sessions.py NAME
Prints "ok" and exits 0, or raises.
"""
import signal
import sys
import time

import sandpod
from sandpod import errors


def expect_error(cls, words, f, *args, **kw):
    try:
        f(*args, **kw)
    except errors.Error as e:
        assert isinstance(e, cls), (type(e), e)
        assert words in str(e), e
    else:
        raise AssertionError(f"{f.__name__}{args} did not fail")


def until_exit(sb, sid, chars=""):
    out = ""
    for _ in range(100):
        o = sb.write_stdin(sid, chars, yield_time_ms=300)
        chars = ""
        out += o.output
        if o.exited:
            return out, o.exit_code
    raise AssertionError(f"session {sid} did not end: {out!r}")


def main():
    name = sys.argv[1]
    sb = sandpod.Sandbox.open(name)
    assert sb.is_remote

    # Pipes: input in, output and exit code back.
    o = sb.exec_command("read x; echo got $x; exit 7", tty=False, yield_time_ms=100)
    assert not o.exited and o.session_id > 0, o
    sid = o.session_id
    assert [s.id for s in sb.list_sessions()] == [sid], sb.list_sessions()
    info = sb.list_sessions()[0]
    assert info.command == "read x; echo got $x; exit 7" and not info.tty and info.running, info
    out, code = until_exit(sb, sid, "hello\n")
    assert "got hello" in out and code == 7, (out, code)
    assert sb.list_sessions() == [], "an ended session is forgotten"
    expect_error(errors.NotFoundError, f"{sid}", sb.write_stdin, sid, "more\n")

    # A terminal, its working folder, an interrupt.
    o = sb.exec_command("cd . && pwd && sleep 1000", yield_time_ms=500, cwd="/tmp")
    assert "/tmp" in o.output and not o.exited, o
    sb.sessions.signal(o.session_id, signal.SIGINT)
    out, code = until_exit(sb, o.session_id)
    assert code != 0, (out, code)

    # close_stdin on a write: cat sees end-of-file.
    o = sb.exec_command("cat; echo done", tty=False, yield_time_ms=100)
    w = sb.write_stdin(o.session_id, "abc\n", close_stdin=True, yield_time_ms=500)
    out, code = w.output, w.exit_code if w.exited else None
    if not w.exited:
        more, code = until_exit(sb, o.session_id)
        out += more
    assert "abc" in out and "done" in out and code == 0, (out, code)

    # Kill: the process is gone in the workload.
    o = sb.exec_command("echo $$ >/tmp/rs.pid; exec sleep 1000", tty=False, yield_time_ms=300)
    pid = sb.shell("cat /tmp/rs.pid").stdout.strip()
    assert pid and sb.shell(f"kill -0 {pid}").exit_code == 0, pid
    sb.kill_session(o.session_id)
    assert sb.list_sessions() == []
    for _ in range(50):
        if sb.shell(f"kill -0 {pid}").exit_code != 0:
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"the killed session's process {pid} still runs")
    expect_error(errors.NotFoundError, "", sb.kill_session, o.session_id)

    # Refused, nothing started: what the tools cannot carry.
    expect_error(errors.InvalidError, "extra environment", sb.exec_command, "touch /tmp/no1",
                 env={"A": "1"})
    expect_error(errors.InvalidError, "another user", sb.exec_command, "touch /tmp/no2",
                 user="root")
    expect_error(errors.InvalidError, "terminal size", sb.exec_command, "touch /tmp/no3",
                 rows=10, cols=10)
    expect_error(errors.InvalidError, "stdin closed", sb.exec_command, "touch /tmp/no4",
                 close_stdin=True)
    assert sb.shell("ls /tmp/no1 /tmp/no2 /tmp/no3 /tmp/no4 2>/dev/null").stdout == "", \
        "a refused start ran nothing"
    assert sb.list_sessions() == []
    o = sb.exec_command("cat", tty=False, yield_time_ms=100)
    expect_error(errors.InvalidError, "not text", sb.write_stdin, o.session_id, b"a\x00b")
    expect_error(errors.InvalidError, "not text", sb.write_stdin, o.session_id, b"\xff\xfe")
    expect_error(errors.InvalidError, "signal other", sb.sessions.signal, o.session_id,
                 signal.SIGUSR1)
    assert [s.id for s in sb.list_sessions()] == [o.session_id], "a refused write keeps the session"
    kept = o.session_id

    # Closing the handle ends the sessions it started, as locally.
    sb.close()
    sb = sandpod.Sandbox.open(name)
    expect_error(errors.NotFoundError, "", sb.write_stdin, kept, "x")
    sb.close()
    print("ok")


if __name__ == "__main__":
    main()
