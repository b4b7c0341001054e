#!/usr/bin/env python3
"""What brokering a secret over HTTPS costs, per request, in one run:

  brokered  CONNECT to a host a secret is for: the proxy ends the client's
            TLS with its own CA, puts the value in place of the stand-in,
            and makes its own TLS connection to the upstream (verified)
  tunnel    the same request through the same proxy to a host no secret is
            for: a CONNECT tunnel, the client's TLS end to end
  direct    the same request straight to the upstream (no proxy)

Each request is a new connection (the proxy takes one request per brokered
connection): TCP connect, the CONNECT and its 200 (not direct), the TLS
handshake, GET with an Authorization header, the whole answer, close.
Paths are interleaved, ROUNDS rounds of N/ROUNDS requests each; medians
and p99s over all samples of a path.

The proxy is the build's sandpod-agent run as `--egress-proxy DIR RUN
--listen PORT` on this host (no container: what is measured is the proxy's
own work), its rules allowing the two upstream ports on 127.0.0.1; the
upstream is a Python HTTPS server (a thread per connection) with an EC
P-256 certificate of a CA made here, which the proxy trusts through
DIR/upstream-ca.pem. Clients are Python's ssl, the same for every path.

Usage: tests/bench/bench_secrets.py PATH/TO/sandpod-agent [--quick]
  env N (requests per path, default 600), ROUNDS (default 6), BENCH_OUT
  (default tests/bench/results/secrets.json); --quick: N=60 ROUNDS=2.
Needs openssl (the certificates). Writes BENCH_OUT and prints a markdown
table."""

import json
import os
import platform
import shutil
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def openssl(*args):
    subprocess.run(["openssl"] + list(args), check=True, capture_output=True)


def upstream(ctx, port, stop):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(128)
    ls.settimeout(0.2)
    body = b"ok\n"

    def serve(c):
        try:
            c.settimeout(10)
            t = ctx.wrap_socket(c, server_side=True)
            buf = b""
            while b"\r\n\r\n" not in buf:
                d = t.recv(65536)
                if not d:
                    return
                buf += d
            t.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                      % len(body) + body)
            t.close()
        except (OSError, ssl.SSLError):
            pass
        finally:
            c.close()

    while not stop.is_set():
        try:
            c, _ = ls.accept()
        except socket.timeout:
            continue
        threading.Thread(target=serve, args=(c,), daemon=True).start()
    ls.close()


def request(proxy_port, target_port, cafile, header, via_proxy=True):
    t0 = time.perf_counter()
    if via_proxy:
        s = socket.create_connection(("127.0.0.1", proxy_port), timeout=10)
        target = b"127.0.0.1:%d" % target_port
        s.sendall(b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, target))
        head = b""
        while b"\r\n\r\n" not in head:
            d = s.recv(1)
            if not d:
                raise RuntimeError("the proxy closed")
            head += d
        if b" 200 " not in head.split(b"\r\n")[0]:
            raise RuntimeError("CONNECT: %r" % head[:200])
    else:
        s = socket.create_connection(("127.0.0.1", target_port), timeout=10)
    ctx = ssl.create_default_context(cafile=cafile)
    t = ctx.wrap_socket(s, server_hostname="127.0.0.1")
    t.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n%s\r\n\r\n" % (target_port, header))
    data = b""
    while True:
        try:
            d = t.recv(65536)
        except ssl.SSLError:
            break
        if not d:
            break
        data += d
    t.close()
    if not data.startswith(b"HTTP/1.1 200"):
        raise RuntimeError("answer: %r" % data[:200])
    return (time.perf_counter() - t0) * 1000


def main():
    args = [a for a in sys.argv[1:] if a != "--quick"]
    quick = "--quick" in sys.argv
    if len(args) != 1:
        print(__doc__.split("Usage:")[1].strip().splitlines()[0], file=sys.stderr)
        return 2
    agent = os.path.abspath(args[0])
    n = int(os.environ.get("N", "60" if quick else "600"))
    rounds = int(os.environ.get("ROUNDS", "2" if quick else "6"))
    here = os.path.dirname(os.path.abspath(__file__))
    out = os.environ.get("BENCH_OUT", os.path.join(here, "results", "secrets.json"))
    if not shutil.which("openssl"):
        print("bench_secrets: openssl is missing", file=sys.stderr)
        return 1
    tmp = tempfile.mkdtemp(prefix="sandpod-bench-secrets-")
    procs = []
    stop = threading.Event()
    try:
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
        j = lambda name: os.path.join(tmp, name)  # noqa: E731
        openssl("req", "-x509", *ec, "-keyout", j("ca.key"), "-out", j("ca.pem"), "-subj",
                "/CN=bench CA", "-days", "2", "-addext", "basicConstraints=critical,CA:TRUE",
                "-addext", "keyUsage=critical,keyCertSign")
        openssl("req", *ec, "-keyout", j("srv.key"), "-out", j("srv.csr"), "-subj", "/CN=127.0.0.1")
        with open(j("srv.ext"), "w") as f:
            f.write("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
        openssl("x509", "-req", "-in", j("srv.csr"), "-CA", j("ca.pem"), "-CAkey", j("ca.key"),
                "-CAcreateserial", "-out", j("srv.pem"), "-days", "2", "-extfile", j("srv.ext"))
        sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        sctx.load_cert_chain(j("srv.pem"), j("srv.key"))
        p_broker, p_tunnel, p_proxy = free_port(), free_port(), free_port()
        for p in (p_broker, p_tunnel):
            threading.Thread(target=upstream, args=(sctx, p, stop), daemon=True).start()

        d, run = j("policy"), j("run")
        os.makedirs(d)
        os.makedirs(run)
        shutil.copy(j("ca.pem"), os.path.join(d, "upstream-ca.pem"))
        standin = "sandpod-standin-" + "ab" * 20
        with open(os.path.join(d, "secrets"), "w") as f:
            f.write("# sandpod secrets 1\nsecret TOKEN %s h %s 127.0.0.1:%d\n"
                    % (standin, b"bench-value".hex(), p_broker))
        os.chmod(os.path.join(d, "secrets"), 0o600)
        with open(os.path.join(d, "policy"), "w") as f:
            f.write("# version 1\nallow 127.0.0.1:%d\nallow 127.0.0.1:%d\n" % (p_broker, p_tunnel))
        err = open(j("proxy.err"), "w")
        procs.append(subprocess.Popen([agent, "--egress-proxy", d, run, "--listen",
                                       str(p_proxy)], stdout=subprocess.DEVNULL, stderr=err))
        ca = os.path.join(run, "ca.pem")
        end = time.monotonic() + 10
        while time.monotonic() < end and not os.path.exists(ca):
            time.sleep(0.02)
        if not os.path.exists(ca):
            print("bench_secrets: the proxy made no CA: %s" % open(j("proxy.err")).read(),
                  file=sys.stderr)
            return 1
        header = b"Authorization: Bearer " + standin.encode()
        paths = {
            "brokered": lambda: request(p_proxy, p_broker, ca, header),
            "tunnel": lambda: request(p_proxy, p_tunnel, j("ca.pem"), header),
            "direct": lambda: request(0, p_tunnel, j("ca.pem"), header, via_proxy=False),
        }
        for f in paths.values():  # warm up
            for _ in range(5):
                f()
        samples = {k: [] for k in paths}
        names = list(paths)
        for r in range(rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for name in order:
                for _ in range(max(1, n // rounds)):
                    samples[name].append(paths[name]())

        def p99(v):
            v = sorted(v)
            return v[min(len(v) - 1, int(len(v) * 0.99))]

        res = {k: {"median_ms": statistics.median(v), "p99_ms": p99(v), "n": len(v)}
               for k, v in samples.items()}
        doc = {"bench": "secrets", "machine": platform.node(), "cpus": os.cpu_count(),
               "load": os.getloadavg(), "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "results": res, "samples": samples}
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with open(out, "w") as f:
            json.dump(doc, f)
        b, t, dr = (res[k]["median_ms"] for k in ("brokered", "tunnel", "direct"))
        print("| request over HTTPS (new connection) | median ms | p99 ms |")
        print("|---|---:|---:|")
        for k in ("brokered", "tunnel", "direct"):
            print("| %s | %.2f | %.2f |" % (k, res[k]["median_ms"], res[k]["p99_ms"]))
        print("\nbrokering adds %.2f ms to a request through the proxy (%.2fx the tunnel); "
              "the proxy itself adds %.2f ms to a direct request" % (b - t, b / t, t - dr))
        return 0
    finally:
        stop.set()
        for p in procs:
            p.kill()
            p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
