#!/usr/bin/env python3
"""The egress proxy (sandbox/egress) against a real network, without containers.

A network namespace stands in for the internet: a veth pair on a /24 of
198.18.0.0/15 picked at random (and checked against every address and route
of this machine), the host side .1, the namespace side .2, .3 and .4, and an
IPv6 ULA /64 when IPv6 works. In the namespace run an HTTP server that
records every request byte it gets, echo servers (what passes through a
tunnel, exactly) and a DNS server that answers from a table and records
every query name (so the suite can tell that the proxy never looked up a
name no rule allows). Listeners on this host (127.0.0.1, ::1, the veth's
host side: every address) record any connection at all: none may arrive.

The proxy runs as `sandpod-agent --egress-proxy DIR RUN --resolv-conf F`
with the namespace's DNS server, and the relay `sandpod-agent --egress-relay
PORT RUN/proxy.sock` takes the clients, as in a sandbox. Clients are raw
sockets, so every byte sent is the one meant. Each check prints PASS or FAIL
with its number and what it holds the proxy to (CASES, at the end); every
refusal is also checked in RUN/connections.jsonl.

A second proxy with --max-connections 20 takes the flood. The slow clients
(nothing sent, a head trickled a byte at a time) run beside the rest from
the start, since the head time out is the proxy's fixed 10 s.

Usage: test_egress_proxy.py PATH/TO/sandpod-agent. Exit 0 when every check
passes, 1 when one fails, 77 when not root (ip netns needs it)."""

import atexit
import ipaddress
import json
import os
import random
import select
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback

# ---------------------------------------------------------------- upstream --
# `test_egress_proxy.py --upstream CONFIG` is what runs inside the namespace.


def upstream_main(cfg_path):
    with open(cfg_path) as f:
        cfg = json.load(f)
    out = open(cfg["log"], "a", buffering=1, encoding="utf-8")
    lock = threading.Lock()
    counter = [0]

    def emit(ev):
        with lock:
            out.write(json.dumps(ev) + "\n")

    def next_id():
        with lock:
            counter[0] += 1
            return counter[0]

    def echo(c, ev):
        got = bytearray()
        try:
            c.settimeout(30)
            while True:
                d = c.recv(65536)
                if not d:
                    break
                got += d
                c.sendall(d)
        except OSError as e:
            ev["error"] = repr(e)
        ev["data"] = got.hex()

    def http(c, ev):
        raw = bytearray()
        c.settimeout(5)

        def more():
            d = c.recv(65536)
            if not d:
                raise EOFError("EOF from the proxy")
            raw.extend(d)
            return d

        def line(buf):
            while b"\r\n" not in buf:
                buf += more()
            j = buf.index(b"\r\n")
            ln = bytes(buf[:j])
            del buf[: j + 2]
            return ln

        buf = bytearray()
        try:
            while b"\r\n\r\n" not in buf:
                buf += more()
            i = buf.index(b"\r\n\r\n")
            head, rest = bytes(buf[:i]), bytearray(buf[i + 4 :])
            lines = head.split(b"\r\n")
            ev["line"] = lines[0].decode("latin1")
            hdrs = []
            for ln in lines[1:]:
                k, _, v = ln.decode("latin1").partition(":")
                hdrs.append([k, v.strip()])
            ev["headers"] = hdrs
            low = {k.lower(): v for k, v in hdrs}
            body = bytearray()
            if low.get("transfer-encoding", "").lower() == "chunked":
                while True:
                    size = int(line(rest).split(b";")[0], 16)
                    if size == 0:
                        while line(rest):
                            pass  # trailers, up to the empty line
                        break
                    while len(rest) < size + 2:
                        rest += more()
                    body += rest[:size]
                    del rest[: size + 2]
            elif "content-length" in low:
                n = int(low["content-length"])
                while len(rest) < n:
                    rest += more()
                body += rest[:n]
                del rest[:n]
            ev["body"] = body.decode("latin1")
            # What comes after the request, for as long as the client asks.
            end = time.monotonic() + int(low.get("x-linger-ms", "0")) / 1000
            while time.monotonic() < end:
                c.settimeout(max(0.01, end - time.monotonic()))
                try:
                    d = c.recv(65536)
                except socket.timeout:
                    break
                if not d:
                    break
                raw.extend(d)
                rest += d
            ev["extra"] = bytes(rest).decode("latin1")
            reply = b"upstream saw " + lines[0] + b"\n"
            c.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n"
                b"Connection: close\r\n\r\n" % len(reply) + reply
            )
        except (OSError, EOFError, ValueError) as e:
            ev["error"] = repr(e)
        ev["raw"] = bytes(raw).decode("latin1")

    # HTTPS: 8443 with a certificate of the test's CA (the one the proxy is
    # told to trust), 8444 with a self-signed one (it must not be trusted).
    tls_ctx = {}
    for port, (cert, key) in ((8443, cfg["tls"]), (8444, cfg["tls_self"])):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        ctx.set_alpn_protocols(["h2", "http/1.1"])  # h2 first: the proxy must not take it
        tls_ctx[port] = ctx

    def https(c, ev):
        try:
            c.settimeout(5)
            t = tls_ctx[ev["port"]].wrap_socket(c, server_side=True)
        except (OSError, ssl.SSLError) as e:
            ev["error"] = repr(e)
            ev["raw"] = ""
            return
        ev["alpn"] = t.selected_alpn_protocol()
        http(t, ev)

    def serve(ls, kind, port):
        while True:
            c, peer = ls.accept()
            ev = {"ev": "done", "kind": kind, "port": port, "id": next_id(), "peer": peer[0],
                  "pport": peer[1], "local": c.getsockname()[0]}
            emit(dict(ev, ev="accept"))

            def run(c=c, ev=ev):
                try:
                    {"echo": echo, "https": https}.get(kind, http)(c, ev)
                finally:
                    c.close()
                    emit(ev)

            threading.Thread(target=run, daemon=True).start()

    families = [(socket.AF_INET, "0.0.0.0")] + ([(socket.AF_INET6, "::")] if cfg["v6"] else [])
    for kind, port in (("http", 8080), ("echo", 9000), ("echo", 9999), ("https", 8443),
                       ("https", 8444)):
        for fam, any_addr in families:
            ls = socket.socket(fam, socket.SOCK_STREAM)
            ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if fam == socket.AF_INET6:
                ls.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            ls.bind((any_addr, port))
            ls.listen(256)
            threading.Thread(target=serve, args=(ls, kind, port), daemon=True).start()

    table = cfg["dns"]

    def dns(s):
        while True:
            q, peer = s.recvfrom(4096)
            try:
                off, labels = 12, []
                while q[off]:
                    labels.append(q[off + 1 : off + 1 + q[off]])
                    off += 1 + q[off]
                qend = off + 1
                qtype = struct.unpack("!H", q[qend : qend + 2])[0]
            except (IndexError, struct.error):
                continue
            name = b".".join(labels).decode("latin1").lower()
            emit({"ev": "dns", "name": name, "type": qtype, "peer": peer[0]})
            entry = table.get(name)
            answers = []
            kind = {1: "A", 28: "AAAA"}.get(qtype)
            for a in (entry or {}).get(kind, []):
                rd = socket.inet_pton(socket.AF_INET if qtype == 1 else socket.AF_INET6, a)
                answers.append(b"\xc0\x0c" + struct.pack("!HHIH", qtype, 1, 5, len(rd)) + rd)
            flags = 0x8180 | (0 if entry else 3)  # an answer, RD, RA; NXDOMAIN
            hdr = q[:2] + struct.pack("!HHHHH", flags, 1, len(answers), 0, 0)
            s.sendto(hdr + q[12 : qend + 4] + b"".join(answers), peer)

    us = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    us.bind((cfg["dns_addr"], 53))
    threading.Thread(target=dns, args=(us,), daemon=True).start()
    print("READY", flush=True)
    threading.Event().wait()


if len(sys.argv) == 3 and sys.argv[1] == "--upstream":
    upstream_main(sys.argv[2])
    sys.exit(0)

# ------------------------------------------------------------------- set-up --

if len(sys.argv) != 2:
    print("usage: test_egress_proxy.py PATH/TO/sandpod-agent", file=sys.stderr)
    sys.exit(2)
AGENT = os.path.abspath(sys.argv[1])
if os.geteuid() != 0:
    print("test_egress_proxy: skipped: it needs root (ip netns, veth pairs)", file=sys.stderr)
    sys.exit(77)
if not shutil.which("ip"):
    print("test_egress_proxy: skipped: no `ip` (iproute2)", file=sys.stderr)
    sys.exit(77)
if not os.access(AGENT, os.X_OK):
    print("test_egress_proxy: no agent at", AGENT, file=sys.stderr)
    sys.exit(1)

T0 = time.monotonic()
T = tempfile.mkdtemp(prefix="sandpod-egress-")
TAG = "%d%02x" % (os.getpid(), random.randrange(256))
NS, VH, VN = "spegt" + TAG, "spt%sh" % TAG, "spt%sn" % TAG
procs = []
cleaned = False


def cleanup():
    global cleaned
    if cleaned:
        return
    cleaned = True
    for p in procs:
        if p.poll() is None:
            p.kill()
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            pass
    subprocess.run(["ip", "netns", "del", NS], capture_output=True)
    subprocess.run(["ip", "link", "del", VH], capture_output=True)
    if os.environ.get("EGRESS_TEST_KEEP"):
        print("kept", T)
    else:
        shutil.rmtree(T, ignore_errors=True)


def on_signal(sig, frame):
    cleanup()
    os._exit(128 + sig)


atexit.register(cleanup)  # a set-up that fails half-way too
signal.signal(signal.SIGTERM, on_signal)
signal.signal(signal.SIGINT, on_signal)


def ip(*args, check=True):
    r = subprocess.run(["ip"] + [str(a) for a in args], capture_output=True, text=True)
    if check and r.returncode:
        raise RuntimeError("ip %s: %s" % (" ".join(map(str, args)), r.stderr.strip()))
    return r.stdout


def used_networks():
    """Every network an address or route of this machine is in (not the default route)."""
    nets = []
    for fam, word in (("-4", "inet"), ("-6", "inet6")):
        for line in ip(fam, "-o", "addr", "show").splitlines():
            w = line.split()
            if word in w:
                iface = ipaddress.ip_interface(w[w.index(word) + 1])
                nets += [iface.network, ipaddress.ip_network(iface.ip)]
        for line in ip(fam, "route", "show", "table", "all").splitlines():
            w = line.split()
            if not w:
                continue
            dst = w[1] if w[0] in ("local", "broadcast", "unreachable", "prohibit", "blackhole",
                                   "throw", "multicast", "anycast", "unicast") else w[0]
            if dst == "default":
                continue
            try:
                nets.append(ipaddress.ip_network(dst, strict=False))
            except ValueError:
                pass
    return nets


def free_network(candidates):
    used = used_networks()
    for cand in candidates:
        if not any(cand.version == n.version and cand.overlaps(n) for n in used):
            return cand
    return None


def ours_only(net, dev):
    """After adding: is `dev` the only interface with an address in net?"""
    fam = "-4" if net.version == 4 else "-6"
    for line in ip(fam, "-o", "addr", "show").splitlines():
        w = line.split()
        word = "inet" if net.version == 4 else "inet6"
        if word in w and ipaddress.ip_interface(w[w.index(word) + 1]).ip in net:
            if w[1].split("@")[0] != dev:
                return False
    return True


def make_network():
    rng = random.Random()
    for attempt in range(8):
        v4s = [ipaddress.ip_network("198.%d.%d.0/24" % (18 + rng.randrange(2), rng.randrange(256)))
               for _ in range(64)]
        net = free_network(v4s)
        if not net:
            raise RuntimeError("no free /24 in 198.18.0.0/15 on this machine")
        g = rng.getrandbits(56)
        v6 = ipaddress.ip_network("fd%02x:%04x:%04x:%04x::/64" % (
            g >> 48, (g >> 32) & 0xffff, (g >> 16) & 0xffff, g & 0xffff))
        v6 = free_network([v6])
        ip("netns", "add", NS)
        ip("link", "add", VH, "type", "veth", "peer", "name", VN)
        ip("link", "set", VN, "netns", NS)
        h = list(net.hosts())
        ip("addr", "add", "%s/24" % h[0], "dev", VH)
        ip("link", "set", VH, "up")
        for a in h[1:4]:
            ip("-n", NS, "addr", "add", "%s/24" % a, "dev", VN)
        ip("-n", NS, "link", "set", VN, "up")
        ip("-n", NS, "link", "set", "lo", "up")
        have_v6 = False
        if v6:  # a kernel without IPv6, or with it off, refuses the addresses
            v6h = [v6.network_address + 1, v6.network_address + 2]
            r1 = subprocess.run(["ip", "addr", "add", "%s/64" % v6h[0], "dev", VH, "nodad"],
                                capture_output=True)
            r2 = subprocess.run(["ip", "-n", NS, "addr", "add", "%s/64" % v6h[1], "dev", VN,
                                 "nodad"], capture_output=True)
            have_v6 = r1.returncode == 0 and r2.returncode == 0
        # A parallel run may have taken the same network between the check
        # and the add: then both start over elsewhere.
        if ours_only(net, VH) and (not have_v6 or ours_only(v6, VH)):
            return net, (v6 if have_v6 else None)
        ip("netns", "del", NS, check=False)
        ip("link", "del", VH, check=False)
    raise RuntimeError("could not get a network of our own")


NET, NET6 = make_network()
H = [str(a) for a in list(NET.hosts())[:9]]
P1, P2, P3, P4 = H[0], H[1], H[2], H[3]
P9 = H[8]  # added to the host side later: an address the proxy did not start with
V1 = V2 = None
if NET6:
    V1, V2 = str(NET6.network_address + 1), str(NET6.network_address + 2)

# The bypass oracle: this host, every address, one port. Nothing may reach it.
oracle_hits = []
oracle_socks = []


def oracle_listen():
    for _ in range(20):
        a = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        a.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        a.bind(("0.0.0.0", 0))
        port = a.getsockname()[1]
        b = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        b.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        try:
            b.bind(("::", port))
        except OSError:
            a.close()
            b.close()
            continue
        for s in (a, b):
            s.listen(64)
            oracle_socks.append(s)

            def run(s=s):
                while True:
                    try:
                        c, peer = s.accept()
                    except OSError:
                        return
                    oracle_hits.append((peer[0], peer[1], c.getsockname()[0]))
                    c.close()

            threading.Thread(target=run, daemon=True).start()
        return port
    raise RuntimeError("no free port for the oracle")


PH = oracle_listen()

DNS_TABLE = {
    "dns.good.test": {"A": [P2]},
    "rebind.good.test": {"A": ["127.0.0.1"]},
    "meta.good.test": {"A": ["169.254.169.254"]},
    "mixed.good.test": {"A": ["169.254.169.254", P2]},
    "mapped.good.test": {"AAAA": ["::ffff:127.0.0.1"]},
    "denied4.good.test": {"A": [P4]},
}
if NET6:
    DNS_TABLE["v6.good.test"] = {"AAAA": [V2]}
    DNS_TABLE["self6.good.test"] = {"AAAA": [V1]}



def openssl(*args):
    r = subprocess.run(["openssl"] + list(args), capture_output=True, text=True)
    if r.returncode != 0:
        print("test_egress_proxy: set-up failed: openssl %s: %s" % (args[0], r.stderr[-300:]),
              file=sys.stderr)
        cleanup()
        sys.exit(1)


# The upstream's certificates: a CA of the test's (the proxy trusts it, as
# it would the host's public CAs), a server certificate of it for the names
# and the address the HTTPS upstream answers for, and a self-signed one.
TLS_DIR = os.path.join(T, "tls")
os.makedirs(TLS_DIR)


def tls_path(name):
    return os.path.join(TLS_DIR, name)


EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
openssl("req", "-x509", *EC, "-keyout", tls_path("ca.key"), "-out", tls_path("ca.pem"),
        "-subj", "/CN=sandpod test upstream CA", "-days", "2",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign")
openssl("req", *EC, "-keyout", tls_path("srv.key"), "-out", tls_path("srv.csr"),
        "-subj", "/CN=good.test")
with open(tls_path("srv.ext"), "w") as f:
    f.write("subjectAltName=DNS:good.test,DNS:www.good.test,IP:%s\n"
            "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\n"
            "extendedKeyUsage=serverAuth\n" % P2)
openssl("x509", "-req", "-in", tls_path("srv.csr"), "-CA", tls_path("ca.pem"),
        "-CAkey", tls_path("ca.key"), "-CAcreateserial", "-out", tls_path("srv.pem"),
        "-days", "2", "-extfile", tls_path("srv.ext"))
openssl("req", "-x509", *EC, "-keyout", tls_path("self.key"), "-out", tls_path("self.pem"),
        "-subj", "/CN=good.test", "-days", "2", "-addext", "subjectAltName=DNS:good.test")

UP_LOG = os.path.join(T, "upstream.jsonl")
with open(os.path.join(T, "upstream.json"), "w") as f:
    json.dump({"log": UP_LOG, "v6": bool(NET6), "dns_addr": P2, "dns": DNS_TABLE,
               "tls": [tls_path("srv.pem"), tls_path("srv.key")],
               "tls_self": [tls_path("self.pem"), tls_path("self.key")]}, f)
up = subprocess.Popen(
    ["ip", "netns", "exec", NS, sys.executable, os.path.abspath(__file__), "--upstream",
     os.path.join(T, "upstream.json")],
    stdout=subprocess.PIPE, stderr=open(os.path.join(T, "upstream.err"), "w"),
    start_new_session=True)
procs.append(up)


def wait_line(pipe, want, timeout):
    end = time.monotonic() + timeout
    buf = b""
    while time.monotonic() < end:
        r, _, _ = select.select([pipe], [], [], end - time.monotonic())
        if not r:
            break
        d = os.read(pipe.fileno(), 4096)
        if not d:
            break
        buf += d
        if want in buf:
            return True
    return False


def fail_setup(why):
    print("test_egress_proxy: set-up failed:", why, file=sys.stderr)
    for name in ("upstream.err", "proxy.err", "proxy-relay.err", "proxy2.err",
                 "proxy2-relay.err"):
        try:
            print("--- %s:\n%s" % (name, open(os.path.join(T, name)).read()[-3000:]),
                  file=sys.stderr)
        except OSError:
            pass
    cleanup()
    sys.exit(1)


if not wait_line(up.stdout, b"READY", 15):
    fail_setup("the upstream servers did not start")

BASE_POLICY = [
    "allow good.test:8080",
    "allow good.test:9000",
    "allow *.good.test",
    "deny bad.good.test",
    "allow loop.test",
    "allow self.test",
    "allow %s" % P3,
    "allow %s/31" % NET.network_address,  # holds .1, the host's: that stays refused
    "deny %s" % P4,  # .4 by address, whatever name leads there
]
if NET6:
    BASE_POLICY.append("allow %s" % NET6)  # a ULA network: needs a CIDR rule
HOSTS = """# the proxy's hosts file
%(P2)s good.test www.good.test new.test evil.test
127.0.0.1 loop.test
%(P1)s self.test
%(P9)s late.good.test
""" % {"P1": P1, "P2": P2, "P9": P9}


def start_proxy(name, rules, extra=()):
    d = os.path.join(T, name + "-policy")
    run = os.path.join(T, name + "-run")
    os.makedirs(d)
    os.makedirs(run)
    with open(os.path.join(d, "policy"), "w") as f:
        f.write("\n".join(rules) + "\n")
    with open(os.path.join(d, "hosts"), "w") as f:
        f.write(HOSTS)
    resolv = os.path.join(T, "resolv.conf")
    with open(resolv, "w") as f:
        f.write("nameserver %s\n" % P2)
    err = os.path.join(T, name + ".err")
    p = subprocess.Popen([AGENT, "--egress-proxy", d, run, "--resolv-conf", resolv] + list(extra),
                         stdout=subprocess.DEVNULL, stderr=open(err, "w"))
    procs.append(p)
    end = time.monotonic() + 10
    while time.monotonic() < end:
        if p.poll() is not None:
            fail_setup("the proxy %s exited (%d)" % (name, p.returncode))
        if "ready:" in open(err).read():
            break
        time.sleep(0.02)
    else:
        fail_setup("the proxy %s is not ready" % name)
    for _ in range(10):
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()
        r = subprocess.Popen([AGENT, "--egress-relay", str(port), os.path.join(run, "proxy.sock")],
                             stdout=subprocess.DEVNULL,
                             stderr=open(os.path.join(T, name + "-relay.err"), "a"))
        procs.append(r)
        end = time.monotonic() + 5
        while time.monotonic() < end and r.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return p, d, run, port, err
            except OSError:
                time.sleep(0.02)
        r.kill()
    fail_setup("no relay for %s" % name)


PROXY, DIR, RUN, RELAY, PROXY_ERR = start_proxy("proxy", BASE_POLICY)
PROXY2, DIR2, RUN2, RELAY2, _ = start_proxy("proxy2", ["allow good.test:9000"],
                                            ["--max-connections", "20"])


def watchdog():
    time.sleep(float(os.environ.get("EGRESS_TEST_WATCHDOG", "240")))
    print("FAIL the suite hung", flush=True)
    traceback.print_stack()
    for th_id, frame in sys._current_frames().items():
        traceback.print_stack(frame)
    cleanup()
    os._exit(1)


threading.Thread(target=watchdog, daemon=True).start()

# ------------------------------------------------------------------ helpers --


class Fail(Exception):
    pass


def need(cond, what, detail=None):
    if not cond:
        raise Fail(what + ("" if detail is None else ": " + repr(detail)[:800]))


results = []


def check(name, fn):
    t = time.monotonic()
    try:
        fn()
        ok, why = True, ""
    except Fail as e:
        ok, why = False, str(e)
    except Exception:
        ok, why = False, traceback.format_exc()
    results.append((name, ok))
    print("%s %s (%.2f s)%s" % ("PASS" if ok else "FAIL", name, time.monotonic() - t,
                                "" if ok else "\n     " + why.replace("\n", "\n     ")),
          flush=True)


class JsonLog:
    """A JSON-lines file another process appends to: complete lines only."""

    def __init__(self, path):
        self.path = path

    def lines(self):
        try:
            with open(self.path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return []
        out = []
        for ln in raw.split(b"\n")[:-1]:
            try:
                out.append(json.loads(ln))
            except ValueError:
                out.append({"_invalid": ln.decode("latin1")})
        return out

    def mark(self):
        return len(self.lines())

    def since(self, m):
        return self.lines()[m:]

    def wait(self, m, pred, n=1, timeout=4.0):
        end = time.monotonic() + timeout
        while True:
            got = [e for e in self.since(m) if pred(e)]
            if len(got) >= n or time.monotonic() >= end:
                return got
            time.sleep(0.02)


UP = JsonLog(UP_LOG)
LOG = JsonLog(os.path.join(RUN, "connections.jsonl"))
LOG2 = JsonLog(os.path.join(RUN2, "connections.jsonl"))
# The barrier's own connections, by where they went and where from: (the
# address, the port, the source port). A source port alone is no name: the
# proxy's connections reuse those of earlier barriers to other ports.
barriers = set()


def settle():
    """Every upstream listener and the oracle have accepted all that reached
    them before now: one direct connection each, waited for. A queue is
    accepted in order, so what the proxy connected before is logged."""
    m = UP.mark()
    mine = set()
    targets = [(P2, port) for port in (8080, 9000, 9999)]
    if NET6:
        targets += [(V2, port) for port in (8080, 9000, 9999)]
    for addr, port in targets:
        s = socket.create_connection((addr, port), timeout=3)
        mine.add((addr, port, s.getsockname()[1]))
        s.close()
    barriers.update(mine)
    got = UP.wait(m, lambda e: e["ev"] == "accept" and (e["local"], e["port"], e["pport"]) in mine,
                  n=len(mine))
    need(len(got) == len(mine), "the upstream servers answer the barrier", got)
    mine = set()
    for fam, addr in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        s = socket.socket(fam)
        s.settimeout(3)
        s.connect((addr, PH))
        mine.add((addr, PH, s.getsockname()[1]))
        s.close()
    barriers.update(mine)
    end = time.monotonic() + 3
    while not mine <= {(h[2], PH, h[1]) for h in oracle_hits} and time.monotonic() < end:
        time.sleep(0.01)


def up_mark():
    """A mark of the upstream log with every earlier connection in before it."""
    settle()
    return UP.mark()


def reached(m):
    """The upstream connections the proxy made since mark m (after settle())."""
    settle()
    return [e for e in UP.since(m)
            if e["ev"] == "accept" and (e["local"], e["port"], e["pport"]) not in barriers]


def oracle_clean():
    settle()
    bad = [h for h in oracle_hits if (h[2], PH, h[1]) not in barriers]
    need(not bad, "nothing reached this host's own listeners", bad)


def dns_queries():
    return [e["name"] for e in UP.lines() if e["ev"] == "dns"]


def relay_conn(port=None, host="127.0.0.1"):
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(3)
    s.connect((host, port or RELAY))
    return s


def recv_until_eof(s, timeout=3.0):
    """All bytes until EOF: (data, True), or (data, False) when time ran out."""
    end = time.monotonic() + timeout
    data = bytearray()
    while True:
        left = end - time.monotonic()
        if left <= 0:
            return bytes(data), False
        s.settimeout(left)
        try:
            d = s.recv(65536)
        except socket.timeout:
            return bytes(data), False
        except (ConnectionResetError, BrokenPipeError):
            return bytes(data), True
        if not d:
            return bytes(data), True
        data += d


def recv_exact(s, n, timeout=3.0):
    end = time.monotonic() + timeout
    data = bytearray()
    while len(data) < n:
        left = end - time.monotonic()
        if left <= 0:
            break
        s.settimeout(left)
        try:
            d = s.recv(n - len(data))
        except (socket.timeout, ConnectionResetError):
            break
        if not d:
            break
        data += d
    return bytes(data)


def read_head(s, timeout=3.0):
    end = time.monotonic() + timeout
    buf = b""
    while b"\r\n\r\n" not in buf:
        left = end - time.monotonic()
        need(left > 0, "a response head in time", buf)
        s.settimeout(left)
        d = s.recv(65536)
        need(d, "a response head before EOF", buf)
        buf += d
    head, _, rest = buf.partition(b"\r\n\r\n")
    return head, rest


def status_of(data):
    if not data.startswith(b"HTTP/1."):
        return None
    return int(data.split(b" ", 2)[1])


def http(raw, port=None, timeout=3.0):
    """Send raw bytes as one client; (status, whole response, body, eof)."""
    s = relay_conn(port)
    s.sendall(raw)
    data, eof = recv_until_eof(s, timeout)
    s.close()
    return status_of(data), data, data.partition(b"\r\n\r\n")[2], eof


def tunnel(target, extra=b"", port=None, host="127.0.0.1"):
    """CONNECT target; (socket, status, bytes after the head or the refusal's body)."""
    s = relay_conn(port, host)
    t = target.encode() if isinstance(target, str) else target
    s.sendall(b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (t, t) + extra)
    head, rest = read_head(s)
    st = status_of(head)
    if st != 200:
        more, _ = recv_until_eof(s)
        rest += more
        s.close()
    return s, st, rest


def echo_ok(s, payload=b"ping \x00\xff through the tunnel"):
    s.sendall(payload)
    back = recv_exact(s, len(payload))
    need(back == payload, "the echo upstream sends the bytes back", back)


def refused_body(host, port, why):
    return ("sandpod egress: connection to %s port %d: %s\n" % (host, port, why)).encode()


NO_NAME = ("refused: no --allow rule names this host, and a name is looked up only when one "
           "does (default deny)")
NO_RULE = "refused: no --allow rule matches (default deny)"


def special(addr, what):
    return "refused: %s is %s and no --allow CIDR rule names it" % (addr, what)


def record(m, log=None, timeout=4.0, **want):
    """The one record since mark m with these fields (waits for it)."""
    log = log or LOG
    got = log.wait(m, lambda e: all(e.get(k) == v for k, v in want.items()), timeout=timeout)
    need(len(got) == 1, "one log record with %s" % want, log.since(m))
    return got[0]


def refuse_connect(target, host, port, why, log_addr=None):
    """CONNECT target is refused with 403 naming why; the log says the same."""
    m = LOG.mark()
    s, st, body = tunnel(target)
    need(st == 403, "CONNECT %s: 403" % target, (st, body))
    need(body == refused_body(host, port, why), "the 403 names the reason", body)
    r = record(m, proto="connect", host=host, port=port)
    need(r["verdict"] == "deny" and r["why"] == why and r["up"] == 0,
         "the record: deny, the reason", r)
    if log_addr is not None:
        need(r["addr"] == log_addr, "the record's addr", r)
    return r


def client_hello(sni):
    """A real ClientHello (one TLS record) from Python's ssl, naming sni (None: no name)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_hostname=sni)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    hello = out.read()
    need(hello[0] == 0x16 and len(hello) == 5 + int.from_bytes(hello[3:5], "big"),
         "ssl made one handshake record", hello[:8])
    return hello


def client_hello_named(name):
    """A ClientHello whose server name is `name` byte for byte, even an IP
    literal (ssl sends none for those): made with a stand-in of the same length."""
    stand_in = "q" * len(name)
    hello = client_hello(stand_in)
    need(hello.count(stand_in.encode()) == 1, "the stand-in name appears once")
    return hello.replace(stand_in.encode(), name.encode())


ALERT = bytes.fromhex("15030100020270")


def upstream_got(m, port=9000):
    """The one upstream connection since m on port: its done event (waited for)."""
    acc = [e for e in reached(m) if e["port"] == port]
    need(len(acc) == 1, "one upstream connection on port %d" % port, acc)
    done = UP.wait(m, lambda e: e["ev"] == "done" and e["id"] == acc[0]["id"])
    need(done, "the upstream connection ended", acc)
    return done[0]


def sni_refused(target, hello, host, port, why, pre=False, s_port=None):
    """The tunnel to target answers hello with the alert alone, nothing reaches upstream."""
    m, lm = up_mark(), LOG.mark()
    if pre:  # the ClientHello right behind the CONNECT, in one write
        s, st, rest = tunnel(target, extra=hello)
    else:
        s, st, rest = tunnel(target)
        need(rest == b"", "nothing after the 200", rest)
        s.sendall(hello)
    need(st == 200, "CONNECT %s: 200" % target, (st, rest))
    data, eof = recv_until_eof(s)
    data = rest + data
    s.close()
    need(data == ALERT and eof, "a TLS alert (unrecognized_name), then the end", data)
    d = upstream_got(m, s_port or port)
    need(d["data"] == "", "the upstream received nothing", d)
    r = record(lm, host=host, port=port)
    need(r["verdict"] == "deny" and r["why"] == why and r["rule"] is None and r["up"] == 0,
         "the record: deny, the reason", r)


# -------------------------------------------------------- slow clients (21) --
# Started first: they take the proxy's head time out (10 s), the rest runs
# meanwhile.

slow = {}


def slow_silent():
    t = time.monotonic()
    s = relay_conn()
    data, eof = recv_until_eof(s, 20)
    slow["silent"] = (time.monotonic() - t, data, eof, s.getsockname()[1])
    s.close()


def slow_socks():
    t = time.monotonic()
    s = relay_conn()
    s.sendall(b"\x05")  # a greeting's first byte, never the rest
    data, eof = recv_until_eof(s, 20)
    slow["socks"] = (time.monotonic() - t, data, eof)
    s.close()


def slow_trickle():
    t = time.monotonic()
    s = relay_conn()
    head = b"GET http://good.test:8080/ HTTP/1.1\r\nHost: good.test:8080\r\nX-Slow: " + b"a" * 200
    sent = 0
    eof = False
    data = b""
    while time.monotonic() - t < 20:
        try:
            s.sendall(head[sent % len(head): sent % len(head) + 1])
            sent += 1
        except OSError:
            eof = True
            break
        r, _, _ = select.select([s], [], [], 0.25)
        if r:
            data, eof = recv_until_eof(s, 1)
            if eof:
                break
    slow["trickle"] = (time.monotonic() - t, data, eof, sent)
    s.close()


SLOW_MARK = LOG.mark()
slow_threads = [threading.Thread(target=f, daemon=True) for f in (slow_silent, slow_trickle, slow_socks)]
for th in slow_threads:
    th.start()

# -------------------------------------------------------------------- cases --


def c01_connect_allowed():
    m, lm = up_mark(), LOG.mark()
    s, st, rest = tunnel("good.test:9000")
    need(st == 200 and rest == b"", "CONNECT good.test:9000: 200", (st, rest))
    payload = bytes(range(256)) * 8
    echo_ok(s, payload)
    s.close()
    d = upstream_got(m)
    need(bytes.fromhex(d["data"]) == payload, "the upstream got the bytes exactly", d)
    need(d["peer"] == P1 and d["local"] == P2, "it came from the host to .2", d)
    r = record(lm, proto="connect", host="good.test", port=9000)
    need(r == dict(r, addr=P2, verdict="allow", rule="good.test:9000",
                   why="allowed by --allow 'good.test:9000'", up=len(payload),
                   down=len(payload)), "the record, exactly", r)


def c01b_connect_via_dns():
    m = up_mark()
    s, st, _ = tunnel("dns.good.test:9000")
    need(st == 200, "CONNECT dns.good.test:9000 (A from DNS): 200", st)
    echo_ok(s)
    s.close()
    q = [e for e in UP.since(m) if e["ev"] == "dns"]
    need({(e["name"], e["type"]) for e in q} == {("dns.good.test", 1), ("dns.good.test", 28)},
         "the DNS server saw the A and AAAA queries (the log works)", q)


def c01c_relay_v6_loopback():
    s, st, _ = tunnel("good.test:9000", host="::1")
    need(st == 200, "through the relay's ::1 listener: 200", st)
    echo_ok(s)
    s.close()


def c02_http_plain():
    m, lm = up_mark(), LOG.mark()
    req = (b"GET http://good.test:8080/path/x?q=1&r=2 HTTP/1.1\r\nHost: good.test:8080\r\n"
           b"User-Agent: egress-test\r\nProxy-Connection: keep-alive\r\n"
           b"Proxy-Authorization: Basic c2VjcmV0OnNlY3JldA==\r\nConnection: keep-alive\r\n"
           b"Keep-Alive: timeout=5\r\nX-Case: 2\r\n\r\n")
    st, data, body, eof = http(req)
    need(st == 200 and eof, "200 and the end", data)
    need(body == b"upstream saw GET /path/x?q=1&r=2 HTTP/1.1\n", "the upstream's answer", body)
    d = upstream_got(m, 8080)
    want = (b"GET /path/x?q=1&r=2 HTTP/1.1\r\nHost: good.test:8080\r\nUser-Agent: egress-test\r\n"
            b"X-Case: 2\r\nConnection: close\r\n\r\n")
    need(d["raw"].encode("latin1") == want,
         "upstream: origin-form, Connection: close, no Proxy-* or Keep-Alive", d["raw"])
    r = record(lm, proto="http", host="good.test", port=8080)
    need(r["verdict"] == "allow" and r["rule"] == "good.test:8080" and r["addr"] == P2, "record", r)


def c03_unlisted_names():
    m = up_mark()
    before = set(dns_queries())
    refuse_connect("secret-data.evil.test:443", "secret-data.evil.test", 443, NO_NAME)
    lm = LOG.mark()
    st, _, body, _ = http(b"GET http://good.test.evil.test/x HTTP/1.1\r\n"
                          b"Host: good.test.evil.test\r\n\r\n")
    need(st == 403 and body == refused_body("good.test.evil.test", 80, NO_NAME),
         "plain http to good.test.evil.test: 403", body)
    record(lm, proto="http", host="good.test.evil.test", verdict="deny", why=NO_NAME)
    s, rep = socks("evilgood.test", 9000)
    need(rep == b"\x05\x02\x00\x01" + b"\x00" * 6, "SOCKS5 evilgood.test: reply 2", rep)
    s.close()
    # a name resolved to an address no rule allows: its lookup alone is the leak
    leak = "%s.x.evil.test" % ("6c65616b" * 4)
    refuse_connect("%s:53" % leak, leak, 53, NO_NAME)
    need(not reached(m), "no upstream connection")
    new = set(dns_queries()) - before
    need(not [n for n in new if "evil" in n], "the DNS server saw no query for them", new)


def c04_deny_wins():
    m = up_mark()
    why = "denied by --deny 'bad.good.test'"
    r = refuse_connect("bad.good.test:9000", "bad.good.test", 9000, why)
    need(r["rule"] == "bad.good.test", "the record names the deny rule", r)
    refuse_connect("BAD.Good.Test.:9000", "bad.good.test.", 9000, why)
    st, _, body, _ = http(b"GET http://bad.good.test:8080/ HTTP/1.1\r\nHost: bad.good.test:8080\r\n\r\n")
    need(st == 403 and body == refused_body("bad.good.test", 8080, why), "plain http: 403", body)
    # a deny rule by address wins over a name rule that allows the name
    refuse_connect("denied4.good.test:9000", "denied4.good.test", 9000,
                   "denied by --deny '%s'" % P4, log_addr=P4)
    need(not reached(m), "no upstream connection")
    need("bad.good.test" not in dns_queries(), "no DNS query for it")
    # control: the wildcard does allow its siblings
    s, st, _ = tunnel("www.good.test:9000")
    need(st == 200, "www.good.test (by *.good.test): 200", st)
    s.close()


def c05_literal_without_rule():
    m = up_mark()
    refuse_connect("%s:9000" % P2, P2, 9000, NO_RULE, log_addr=P2)
    lm = LOG.mark()
    st, _, body, _ = http(b"GET http://%s:8080/ HTTP/1.1\r\nHost: %s:8080\r\n\r\n"
                          % (P2.encode(), P2.encode()))
    need(st == 403 and body == refused_body(P2, 8080, NO_RULE), "plain http to .2: 403", body)
    record(lm, proto="http", host=P2, port=8080, verdict="deny", why=NO_RULE)
    need(not reached(m), "no upstream connection")
    # control: the one literal a CIDR rule allows
    lm = LOG.mark()
    s, st, _ = tunnel("%s:9000" % P3)
    need(st == 200, "CONNECT %s:9000 (allow %s): 200" % (P3, P3), st)
    echo_ok(s)
    s.close()
    r = record(lm, host=P3, port=9000)
    need(r["rule"] == P3 and r["verdict"] == "allow", "its record", r)


def c06_host_header():
    m = up_mark()
    why = "refused: the Host header does not name the URL's host good.test:8080"
    for n, hdrs in enumerate((b"Host: evil.test\r\n", b"Host: good.test\r\n",
                              b"Host: www.good.test:8080\r\n",
                              b"Host: good.test:8080\r\nHost: evil.test\r\n", b"")):
        lm = LOG.mark()
        st, _, body, _ = http(b"GET http://good.test:8080/ HTTP/1.1\r\n" + hdrs + b"\r\n")
        need(st == 403 and body == b"sandpod egress: " + why.encode() + b"\n",
             "403 for Host headers %r" % hdrs, body)
        record(lm, proto="http", host="good.test", port=8080, verdict="deny", why=why)
    need(not reached(m), "the upstream got nothing")


def c07_sni_differs():
    why = "refused: the TLS server name %s is not the host asked for"
    sni_refused("good.test:9000", client_hello("evil.test"), "good.test", 9000,
                why % "evil.test")
    # a name the policy allows too, but not the one the tunnel is for
    sni_refused("good.test:9000", client_hello("www.good.test"), "good.test", 9000,
                why % "www.good.test")
    # the ClientHello in the same write as the CONNECT
    sni_refused("good.test:9000", client_hello("evil.test"), "good.test", 9000,
                why % "evil.test", pre=True)


def c07b_sni_tls_games():
    why_split = "refused: TLS that does not start with one whole, well-formed ClientHello"
    hello = client_hello("evil.test")
    rec = hello[5:]
    k = len(rec) // 2
    split = (b"\x16\x03\x01" + k.to_bytes(2, "big") + rec[:k] +
             b"\x16\x03\x01" + (len(rec) - k).to_bytes(2, "big") + rec[k:])
    sni_refused("good.test:9000", split, "good.test", 9000, why_split)
    # A warning alert first: Go's crypto/tls and rustls drop warning alerts
    # before the handshake and read on, so the server would see the name.
    sni_refused("good.test:9000", bytes.fromhex("15030100020100") + hello, "good.test", 9000,
                why_split)
    sni_refused("good.test:9000", bytes.fromhex("140301000101") + hello, "good.test", 9000,
                why_split)


def c08_sni_equal():
    for target, sni in (("good.test:9000", "good.test"), ("www.good.test:9000", "WWW.Good.Test")):
        m, lm = up_mark(), LOG.mark()
        hello = client_hello_named(sni)  # byte for byte: ssl would lowercase it
        s, st, _ = tunnel(target)
        need(st == 200, "CONNECT %s: 200" % target, st)
        # in three pieces: the proxy waits for the whole record
        for piece in (hello[:3], hello[3:40], hello[40:]):
            s.sendall(piece)
            time.sleep(0.02)
        back = recv_exact(s, len(hello))
        need(back == hello, "the ClientHello went up and came back", len(back))
        s.close()
        d = upstream_got(m)
        need(bytes.fromhex(d["data"]) == hello, "the upstream got it exactly", d)
        r = record(lm, host=target.split(":")[0], port=9000)
        need(r["verdict"] == "allow", "record: allow", r)
    # no server name at all, to an allowed literal: nothing to compare
    m = up_mark()
    hello = client_hello(None)
    s, st, _ = tunnel("%s:9000" % P3)
    need(st == 200, "CONNECT .3: 200", st)
    s.sendall(hello)
    need(recv_exact(s, len(hello)) == hello, "a ClientHello without SNI passes")
    s.close()


def c09_sni_literals():
    why = "refused: the TLS server name %s is not the host asked for"
    # an IP literal as the server name, on a tunnel to a name
    sni_refused("good.test:9000", client_hello_named(P2), "good.test", 9000, why % P2)
    # a name as the server name, on a tunnel to an allowed literal
    sni_refused("%s:9000" % P3, client_hello("good.test"), P3, 9000, why % "good.test")
    # the same through SOCKS5 (IPv4 address type)
    m, lm = up_mark(), LOG.mark()
    s, rep = socks(P3, 9000, atyp=1)
    need(rep[:2] == b"\x05\x00", "SOCKS5 to .3: granted", rep)
    s.sendall(client_hello("good.test"))
    data, eof = recv_until_eof(s)
    s.close()
    need(data == ALERT and eof, "SOCKS5 tunnel to a literal: the alert for a name", data)
    d = upstream_got(m)
    need(d["data"] == "", "the upstream received nothing", d)
    r = record(lm, proto="socks", host=P3, port=9000)
    need(r["verdict"] == "deny" and r["why"] == why % "good.test", "record", r)


def c10_port():
    m = up_mark()
    refuse_connect("good.test:9999", "good.test", 9999, NO_NAME)
    st, _, body, _ = http(b"GET http://good.test:9999/ HTTP/1.1\r\nHost: good.test:9999\r\n\r\n")
    need(st == 403, "plain http to good.test:9999: 403", body)
    need(not reached(m), "nothing reached port 9999 (or any)")


def c11_loopback():
    refuse_connect("loop.test:%d" % PH, "loop.test", PH, special("127.0.0.1", "loopback"))
    refuse_connect("rebind.good.test:%d" % PH, "rebind.good.test", PH,
                   special("127.0.0.1", "loopback"))
    refuse_connect("localhost:%d" % PH, "localhost", PH, NO_NAME)
    refuse_connect("127.0.0.1:%d" % PH, "127.0.0.1", PH, special("127.0.0.1", "loopback"))
    refuse_connect("127.8.9.10:%d" % PH, "127.8.9.10", PH, special("127.8.9.10", "loopback"))
    refuse_connect("0.0.0.0:%d" % PH, "0.0.0.0", PH, special("0.0.0.0", "unspecified (this network)"))
    refuse_connect("[::1]:%d" % PH, "::1", PH, special("::1", "loopback"))
    refuse_connect("[::]:%d" % PH, "::", PH, special("::", "unspecified"))
    for odd in ("127.1", "2130706433", "0x7f.0.0.1", "0177.0.0.1"):
        refuse_connect("%s:%d" % (odd, PH), odd, PH, "refused: not a valid host name")
    oracle_clean()


def c12_metadata():
    md = special("169.254.169.254", "link-local (cloud metadata)")
    refuse_connect("169.254.169.254:80", "169.254.169.254", 80, md)
    refuse_connect("meta.good.test:80", "meta.good.test", 80, md)
    st, _, body, _ = http(b"GET http://169.254.169.254/latest/meta-data/ HTTP/1.1\r\n"
                          b"Host: 169.254.169.254\r\n\r\n")
    need(st == 403 and body == refused_body("169.254.169.254", 80, md), "plain http: 403", body)
    refuse_connect("[fe80::a9fe:a9fe]:80", "fe80::a9fe:a9fe", 80,
                   special("fe80::a9fe:a9fe", "link-local"))
    refuse_connect("[fd00:ec2::254]:80", "fd00:ec2::254", 80,  # AWS's IPv6 metadata address
                   special("fd00:ec2::254", "unique local"))
    # the metadata address first, an allowed one second: the second one
    lm = LOG.mark()
    s, st, _ = tunnel("mixed.good.test:9000")
    need(st == 200, "mixed.good.test: 200", st)
    echo_ok(s)
    s.close()
    r = record(lm, host="mixed.good.test")
    need(r["addr"] == P2 and r["verdict"] == "allow", "it went to .2", r)


def c13_host_addresses():
    me = special(P1, "an address of this host")
    refuse_connect("self.test:%d" % PH, "self.test", PH, me)
    refuse_connect("%s:%d" % (P1, PH), P1, PH, me)  # allow NET/31 holds it: not enough
    if NET6:
        me6 = special(V1, "an address of this host")
        refuse_connect("[%s]:%d" % (V1, PH), V1, PH, me6)  # allow NET6 holds it
        refuse_connect("self6.good.test:%d" % PH, "self6.good.test", PH, me6)
    oracle_clean()


def c13b_host_address_added_later():
    """An address this host gets after the proxy started is its own too."""
    said = open(PROXY_ERR).read().count("host addresses changed")
    ip("addr", "add", "%s/32" % P9, "dev", VH)
    end = time.monotonic() + 5
    while time.monotonic() < end and open(PROXY_ERR).read().count("host addresses changed") == said:
        time.sleep(0.02)
    try:
        refuse_connect("late.good.test:%d" % PH, "late.good.test", PH,
                       special(P9, "an address of this host"))
        refuse_connect("%s:%d" % (P9, PH), P9, PH, special(P9, "an address of this host"))
        oracle_clean()
    finally:
        ip("addr", "del", "%s/32" % P9, "dev", VH, check=False)


def c14_mapped():
    lo = special("127.0.0.1", "loopback")
    # judged as 127.0.0.1; the record's addr is the one it would connect to
    refuse_connect("[::ffff:127.0.0.1]:%d" % PH, "::ffff:127.0.0.1", PH, lo,
                   log_addr="::ffff:127.0.0.1")
    refuse_connect("[64:ff9b::7f00:1]:%d" % PH, "64:ff9b::7f00:1", PH, lo)
    refuse_connect("[::ffff:%s]:%d" % (P1, PH), "::ffff:%s" % P1, PH,
                   special(P1, "an address of this host"))
    refuse_connect("mapped.good.test:%d" % PH, "mapped.good.test", PH, lo)
    lm = LOG.mark()
    s, rep = socks("::ffff:127.0.0.1", PH, atyp=4)
    need(rep == b"\x05\x02\x00\x01" + b"\x00" * 6, "SOCKS5 IPv6 ::ffff:127.0.0.1: reply 2", rep)
    s.close()
    record(lm, proto="socks", host="::ffff:127.0.0.1", verdict="deny", why=lo)
    oracle_clean()


def socks(host, port, atyp=3, cmd=1, methods=b"\x00"):
    """A SOCKS5 request; (socket, the 10-byte reply or the method reply when refused)."""
    s = relay_conn()
    s.sendall(b"\x05" + bytes([len(methods)]) + methods)
    r = recv_exact(s, 2)
    if r != b"\x05\x00":
        return s, r
    if atyp == 3:
        h = host if isinstance(host, bytes) else host.encode()
        addr = b"\x03" + bytes([len(h)]) + h
    elif atyp == 1:
        addr = b"\x01" + socket.inet_pton(socket.AF_INET, host)
    else:
        addr = b"\x04" + socket.inet_pton(socket.AF_INET6, host)
    s.sendall(b"\x05" + bytes([cmd]) + b"\x00" + addr + port.to_bytes(2, "big"))
    return s, recv_exact(s, 10)


def c15_socks():
    granted = b"\x05\x00\x00\x01" + b"\x00" * 6
    m, lm = up_mark(), LOG.mark()
    s, rep = socks("good.test", 9000)
    need(rep == granted, "SOCKS5 good.test:9000 (domain): granted", rep)
    echo_ok(s)
    s.close()
    r = record(lm, proto="socks", host="good.test", port=9000)
    need(r["verdict"] == "allow" and r["rule"] == "good.test:9000", "record", r)
    need(len(reached(m)) == 1, "one upstream connection")
    m = up_mark()
    for what, args, want, why in (
            ("denied name", ("evil.test", 9000), 2, NO_NAME),
            ("UDP ASSOCIATE", ("good.test", 9000, 3, 3), 7,
             "refused: SOCKS5 command 3 (only CONNECT is served)"),
            ("BIND", ("good.test", 9000, 3, 2), 7,
             "refused: SOCKS5 command 2 (only CONNECT is served)"),
            ("IPv4 .2 without a rule", (P2, 9000, 1), 2, NO_RULE),
            ("a NUL in the name", (b"good.test\x00.evil", 9000), 2,
             "refused: not a valid host name"),
            ("port 0", ("good.test", 0), 2, "refused: port 0")):
        lm = LOG.mark()
        s, rep = socks(*args)
        need(rep == bytes([5, want, 0, 1]) + b"\x00" * 6, "SOCKS5 %s: reply %d" % (what, want), rep)
        data, eof = recv_until_eof(s)
        need(data == b"" and eof, "then the end", data)
        s.close()
        r = record(lm, proto="socks")
        need(r["verdict"] == "deny" and r["why"] == why, "record for %s" % what, r)
    s, rep = socks("good.test", 9000, methods=b"\x02")
    need(rep == b"\x05\xff", "SOCKS5 offering only username/password: no method", rep)
    s.close()
    s, rep = socks(P3, 9000, atyp=1)
    need(rep == granted, "SOCKS5 IPv4 .3 (allowed by a CIDR rule): granted", rep)
    echo_ok(s)
    s.close()
    got = reached(m)
    need(len(got) == 1 and got[0]["local"] == P3, "only the .3 connection reached upstream", got)


def c16_connect_in_tunnel():
    m, lm = up_mark(), LOG.mark()
    before = set(dns_queries())
    s, st, _ = tunnel("good.test:9000")
    need(st == 200, "CONNECT good.test:9000: 200", st)
    inner = b"CONNECT evil.test:443 HTTP/1.1\r\nHost: evil.test:443\r\n\r\n"
    s.sendall(inner)
    need(recv_exact(s, len(inner)) == inner, "the inner CONNECT comes back from the echo")
    s.close()
    d = upstream_got(m)
    need(bytes.fromhex(d["data"]) == inner, "it reached the upstream as plain bytes", d)
    r = record(lm, host="good.test")
    tunnels = [e for e in LOG.since(lm) if e.get("proto") in ("connect", "socks", "http")
               and e.get("host")]
    need(len(tunnels) == 1, "one record only", tunnels)
    need(r["up"] == len(inner), "its byte count", r)
    need(not (set(dns_queries()) - before), "no lookup of evil.test")


def write_policy(d, rules):
    tmp = os.path.join(d, ".policy.tmp")
    with open(tmp, "w") as f:
        f.write("\n".join(rules) + "\n")
    os.rename(tmp, os.path.join(d, "policy"))


def poll_status(target, want, timeout=5.0):
    """CONNECT target until its status is want; the time it took, or None."""
    t = time.monotonic()
    while True:
        s, st, _ = tunnel(target)
        s.close()
        if st == want:
            return time.monotonic() - t
        if time.monotonic() - t > timeout:
            return None
        time.sleep(0.05)


def restore_policy():
    write_policy(DIR, BASE_POLICY)
    need(poll_status("good.test:9000", 200) is not None, "the first policy is back")
    need(poll_status("new.test:9000", 403) is not None, "... and new.test refused again")


def c17_live_deny():
    cut_tunnel, st, _ = tunnel("good.test:9000")
    need(st == 200, "tunnel to good.test:9000", st)
    echo_ok(cut_tunnel)
    kept, st, _ = tunnel("www.good.test:9000")
    need(st == 200, "tunnel to www.good.test:9000", st)
    lm = LOG.mark()
    t = time.monotonic()
    write_policy(DIR, BASE_POLICY + ["deny good.test:9000"])
    try:
        data, eof = recv_until_eof(cut_tunnel, 5)
        took = time.monotonic() - t
        need(eof and data == b"", "the open tunnel is closed within 5 s", (data, eof))
        print("     (cut %.2f s after the rename)" % took)
        r = record(lm, host="good.test", port=9000)
        need(r["verdict"] == "deny" and
             r["why"] == "cut: the policy changed: denied by --deny 'good.test:9000'", "record", r)
        echo_ok(kept)  # what the new policy still allows stays open
        refuse_connect("good.test:9000", "good.test", 9000, "denied by --deny 'good.test:9000'")
    finally:
        cut_tunnel.close()
        kept.close()
        restore_policy()


def c18_live_allow():
    refuse_connect("new.test:9000", "new.test", 9000, NO_NAME)
    write_policy(DIR, BASE_POLICY + ["allow new.test:9000"])
    try:
        took = poll_status("new.test:9000", 200)
        need(took is not None, "new.test allowed within 5 s")
        print("     (allowed %.2f s after the rename)" % took)
    finally:
        restore_policy()


def c18b_bad_policy_kept_out():
    said = open(PROXY_ERR).read().count("not a rule")
    write_policy(DIR, BASE_POLICY + ["allow new.test:9000", "this is not a rule"])
    try:
        end = time.monotonic() + 5
        while time.monotonic() < end and open(PROXY_ERR).read().count("not a rule") == said:
            time.sleep(0.02)
        need(open(PROXY_ERR).read().count("not a rule") > said, "the proxy read the bad file")
        refuse_connect("new.test:9000", "new.test", 9000, NO_NAME)  # none of it applies
        s, st, _ = tunnel("good.test:9000")
        need(st == 200, "the old policy still serves", st)
        s.close()
    finally:
        restore_policy()


def fd_count(p):
    return len(os.listdir("/proc/%d/fd" % p.pid))


def c19_flood():
    base = fd_count(PROXY2)
    lm = LOG2.mark()
    socks_ = []
    t = time.monotonic()
    for _ in range(60):
        socks_.append(relay_conn(RELAY2))
    pending = {s.fileno(): s for s in socks_}
    answers = {}
    end = time.monotonic() + 3
    while len(answers) < 40 and time.monotonic() < end:
        r, _, _ = select.select(list(pending.values()), [], [], end - time.monotonic())
        for s in r:
            data, eof = recv_until_eof(s, 1)
            answers[s.fileno()] = (data, eof, time.monotonic() - t)
            del pending[s.fileno()]
    try:
        busy = b"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
        refused = [a for a in answers.values() if a[0] == busy and a[1]]
        need(len(refused) == 40 and len(answers) == 40,
             "40 of 60 get a 503 and the end", [a[:2] for a in answers.values()][:5])
        print("     (the 40th refusal %.2f s after the first connect)" %
              max(a[2] for a in refused))
        r, _, _ = select.select(list(pending.values()), [], [], 0.2)
        need(len(pending) == 20 and not r, "20 are held, waiting for a request")
        fds = fd_count(PROXY2)
        need(fds <= base + 20 + 2, "the proxy's descriptors stay bounded", (base, fds))
        # a SOCKS client while it is full: a SOCKS refusal (or the 503)
        s = relay_conn(RELAY2)
        s.sendall(b"\x05\x01\x00")
        data, eof = recv_until_eof(s)
        s.close()
        need(eof and data in (b"\x05\xff", busy), "SOCKS5 while full: refused at once", data)
        recs = LOG2.wait(lm, lambda e: e.get("proto") == "refused", n=41)
        need(len(recs) == 41 and all(
            e["why"] == "refused: 20 connections are open, the most this sandbox may have"
            for e in recs), "41 records of the refusals", recs[:2])
    finally:
        for s in socks_:
            s.close()
    took = None
    t = time.monotonic()
    while time.monotonic() - t < 5:
        s, st, _ = tunnel("good.test:9000", port=RELAY2)
        if st == 200:
            echo_ok(s)
            s.close()
            took = time.monotonic() - t
            break
        s.close()
        time.sleep(0.05)
    need(took is not None, "after they close, a tunnel works again")
    left = LOG2.wait(lm, lambda e: e.get("why") == "the client left without a request", n=20)
    need(len(left) == 20 and all(e["proto"] == "none" for e in left),
         "the 20 held ones are recorded when they leave", left[:2])
    end = time.monotonic() + 5
    while fd_count(PROXY2) > base + 2 and time.monotonic() < end:
        time.sleep(0.05)
    need(fd_count(PROXY2) <= base + 2, "the descriptors are given back", (base, fd_count(PROXY2)))


def c20_smuggling():
    m = up_mark()
    bad = "a malformed or ambiguous request head"
    smuggled = (b"0\r\n\r\nGET http://good.test:8080/admin HTTP/1.1\r\nHost: evil.test\r\n\r\n")
    for what, hdrs in (
            ("Content-Length and Transfer-Encoding",
             b"Content-Length: %d\r\nTransfer-Encoding: chunked\r\n" % len(smuggled)),
            ("Transfer-Encoding with a space before the colon",
             b"Transfer-Encoding : chunked\r\nContent-Length: %d\r\n" % len(smuggled)),
            ("a bare LF before Transfer-Encoding",
             b"X-Pad: a\nTransfer-Encoding: chunked\r\nContent-Length: %d\r\n" % len(smuggled)),
            ("a bare CR before Transfer-Encoding",
             b"X-Pad: a\rTransfer-Encoding: chunked\r\nContent-Length: %d\r\n" % len(smuggled)),
            ("two different Content-Lengths",
             b"Content-Length: %d\r\nContent-Length: 0\r\n" % len(smuggled)),
            ("Transfer-Encoding: gzip, chunked", b"Transfer-Encoding: gzip, chunked\r\n"),
            ("a NUL in a header", b"X-Pad: a\x00b\r\nContent-Length: %d\r\n" % len(smuggled))):
        lm = LOG.mark()
        st, data, body, eof = http(b"POST http://good.test:8080/up HTTP/1.1\r\n"
                                   b"Host: good.test:8080\r\n" + hdrs + b"\r\n" + smuggled)
        need(st == 400 and body == b"sandpod egress: " + bad.encode() + b"\n",
             "400 for %s" % what, data)
        record(lm, proto="http", verdict="deny", why=bad)
    need(not reached(m), "the upstream got none of them")

    second = b"GET http://good.test:8080/second HTTP/1.1\r\nHost: good.test:8080\r\n\r\n"
    chunked = b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n"
    for what, hdrs, body_bytes, want_body in (
            ("a chunked POST", b"Transfer-Encoding: chunked\r\n", chunked, "hello world"),
            ("a Content-Length POST", b"Content-Length: 11\r\n", b"hello world", "hello world"),
            ("a GET", b"", b"", "")):
        m = up_mark()
        method = b"POST" if body_bytes else b"GET"
        st, data, body, eof = http(method + b" http://good.test:8080/first HTTP/1.1\r\n"
                                   b"Host: good.test:8080\r\nX-Linger-Ms: 300\r\n" + hdrs +
                                   b"\r\n" + body_bytes + second)
        need(st == 200 and data.count(b"HTTP/1.1 ") == 1, "%s: one answer" % what, data)
        d = upstream_got(m, 8080)
        need(d.get("body") == want_body and d.get("extra") == "",
             "%s: the body whole, nothing after it" % what, d)
        need("/second" not in d["raw"], "the pipelined request was not passed on", d["raw"])

    # a chunked body in awkward pieces
    m = up_mark()
    s = relay_conn()
    s.sendall(b"POST http://good.test:8080/pieces HTTP/1.1\r\nHost: good.test:8080\r\n"
              b"Transfer-Encoding: chunked\r\n\r\n5\r")
    for piece in (b"\nhel", b"lo\r\n6\r\n world\r", b"\n0\r\n\r", b"\n"):
        time.sleep(0.02)
        s.sendall(piece)
    data, eof = recv_until_eof(s)
    s.close()
    need(status_of(data) == 200, "the pieced chunked POST: 200", data)
    d = upstream_got(m, 8080)
    need(d.get("body") == "hello world", "its body", d)


def c20b_truncated_body():
    """A client that leaves mid-body: the upstream connection goes too."""
    m, lm = up_mark(), LOG.mark()
    s = relay_conn()
    s.sendall(b"POST http://good.test:8080/trunc HTTP/1.1\r\nHost: good.test:8080\r\n"
              b"Content-Length: 100\r\n\r\n" + b"x" * 10)
    acc = UP.wait(m, lambda e: e["ev"] == "accept" and e["port"] == 8080)
    need(acc, "the request reached the upstream")
    s.close()
    t = time.monotonic()
    done = UP.wait(m, lambda e: e["ev"] == "done" and e["id"] == acc[0]["id"], timeout=3)
    need(done and "EOF" in done[0].get("error", ""),
         "the upstream saw its connection end when the client left", done)
    print("     (upstream closed %.2f s after the client)" % (time.monotonic() - t))
    record(lm, proto="http", host="good.test", port=8080)


def c21_malformed():
    m = up_mark()
    for what, raw, code, why in (
            ("a garbage line", b"HELLO\r\n\r\n", 400, "not an HTTP/1 proxy request"),
            ("origin-form", b"GET / HTTP/1.1\r\nHost: good.test:8080\r\n\r\n", 400,
             "a proxy request needs an absolute http:// URL"),
            ("HTTP/2.0", b"GET http://good.test:8080/ HTTP/2.0\r\n\r\n", 400,
             "not an HTTP/1 proxy request"),
            ("https:// in a plain request",
             b"GET https://good.test:9000/ HTTP/1.1\r\nHost: good.test:9000\r\n\r\n", 400,
             "an https:// URL goes through CONNECT, not a plain request"),
            ("user info in the URL",
             b"GET http://good.test:8080@evil.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n", 400,
             "a URL whose authority is not host[:port]"),
            # servers that split the request line at any white space would
            # see an absolute-form target, whose host overrides Host
            ("a tab in the method", b"GET\thttp://evil.test/ http://good.test:8080/ HTTP/1.1\r\n"
             b"Host: good.test:8080\r\n\r\n", 400, "not an HTTP/1 proxy request"),
            ("a tab in the target", b"GET http://good.test:8080/a\thttp://evil.test/ HTTP/1.1\r\n"
             b"Host: good.test:8080\r\n\r\n", 400, "not an HTTP/1 proxy request"),
            ("a method that is no token", b"G(E)T http://good.test:8080/ HTTP/1.1\r\n"
             b"Host: good.test:8080\r\n\r\n", 400, "not an HTTP/1 proxy request"),
            ("CONNECT to brackets without an IPv6 address",
             b"CONNECT [evil.test]:443 HTTP/1.1\r\n\r\n", 400, "CONNECT needs host:port"),
    ):
        lm = LOG.mark()
        st, data, body, eof = http(raw)
        need(st == code and eof and body == b"sandpod egress: " + why.encode() + b"\n",
             "%s: %d" % (what, code), data)
        record(lm, verdict="deny", why=why)
    need(not reached(m), "the upstream got none of them")
    # the head limit: 16384 bytes without an end is too much; with one, fine
    start = b"GET http://good.test:8080/big HTTP/1.1\r\nHost: good.test:8080\r\nX-Pad: "
    lm = LOG.mark()
    st, data, body, eof = http(start + b"a" * (16384 - len(start)))
    need(st == 431 and eof, "a 16 KiB head without its end: 431", data[:200])
    record(lm, verdict="deny", why="a request head over 16384 bytes")
    m = up_mark()
    st, data, body, eof = http(start + b"a" * (16384 - len(start) - 4) + b"\r\n\r\n")
    need(st == 200, "a head of exactly 16384 bytes: served", data[:200])
    need(len(reached(m)) == 1, "it reached the upstream")


def c22_log_is_json():
    # hostile names: quotes, backslashes, control bytes, bytes that are no UTF-8
    lm = LOG.mark()
    name = bytes(range(1, 32)) + b'"\\\x7f\x80\xff\xc3' + b"a" * 180
    s, rep = socks(name, 443)
    need(rep[:2] == b"\x05\x02", "SOCKS5 with a hostile name: reply 2", rep)
    s.close()
    s = relay_conn()
    s.sendall(b'CONNECT \xff\xfe"x\\.test:443 HTTP/1.1\r\n\r\n')
    data, _ = recv_until_eof(s)
    s.close()
    need(status_of(data) == 403, "CONNECT with a hostile name: 403", data)
    recs = LOG.wait(lm, lambda e: e.get("proto") in ("socks", "connect"), n=2)
    need(len(recs) == 2, "two records", recs)
    with open(os.path.join(RUN, "connections.jsonl"), "rb") as f:
        lines = f.read().split(b"\n")
    need(lines[-1] == b"", "the log ends with a newline")
    for ln in lines[:-1]:
        try:
            rec = json.loads(ln.decode("utf-8"))
        except ValueError as e:
            raise Fail("a log line that is not UTF-8 JSON: %r (%s)" % (ln[:300], e))
        need(set(rec) == {"event", "time", "proto", "host", "port", "addr", "verdict", "up", "down",
                          "ms", "rule", "why"}, "the fields of every record", rec)
        need(rec["event"] == "connection", "every record is a connection event", rec)
        need(rec["verdict"] in ("allow", "deny"), "a verdict", rec)
    socks_rec = [r for r in recs if r["proto"] == "socks"]
    need(socks_rec and socks_rec[0]["host"].startswith("\x01\x02\x03"),
         "the control bytes survive as escapes", socks_rec)


def c23_v6():
    if not NET6:
        print("SKIP 23 IPv6 upstreams: IPv6 could not be set up here")
        return
    lm = LOG.mark()
    s, st, _ = tunnel("[%s]:9000" % V2)
    need(st == 200, "CONNECT [%s]:9000 (allow %s): 200" % (V2, NET6), st)
    echo_ok(s)
    s.close()
    r = record(lm, host=V2)
    need(r["rule"] == str(NET6) and r["addr"] == V2, "record", r)
    lm = LOG.mark()
    s, st, _ = tunnel("v6.good.test:9000")
    need(st == 200, "v6.good.test (AAAA in the ULA network): 200", st)
    echo_ok(s)
    s.close()
    r = record(lm, host="v6.good.test")
    need(r["addr"] == V2 and r["rule"] == str(NET6), "record", r)
    m = up_mark()
    st, data, body, eof = http(b"GET http://[%s]:8080/v6 HTTP/1.1\r\nHost: [%s]:8080\r\n\r\n"
                               % (V2.encode(), V2.encode()))
    need(st == 200 and body == b"upstream saw GET /v6 HTTP/1.1\n", "plain http to [V2]:8080", data)
    need(len(reached(m)) == 1, "one upstream connection")
    other = "fd00:1:2:3::9"
    refuse_connect("[%s]:9000" % other, other, 9000, special(other, "unique local"))


def c24_slow_clients():
    for th in slow_threads:
        th.join(25)
    took, data, eof, _ = slow["silent"]
    need(eof and data == b"", "a client that sends nothing is closed", slow["silent"])
    need(9 <= took <= 15, "after the head time out (10 s)", took)
    took2, data2, eof2, sent = slow["trickle"]
    need(eof2, "a head trickled a byte at a time is closed", slow["trickle"])
    need(9 <= took2 <= 15, "after the head time out from its start, not from its last byte",
         took2)
    took3, data3, eof3 = slow["socks"]
    need(eof3 and data3 == b"" and 9 <= took3 <= 15, "a SOCKS5 greeting cut short is closed "
         "at the head time out", slow["socks"])
    print("     (closed after %.1f s, %.1f s and %.1f s, %d bytes trickled)" %
          (took, took2, took3, sent))
    recs = LOG.since(SLOW_MARK)
    need([r for r in recs if r.get("why") == "no request in time" and r["proto"] == "none"
          and r["verdict"] == "deny"], "the silent one is recorded")
    need([r for r in recs if r.get("why") == "no complete request head in time" and
          r["proto"] == "http" and r["verdict"] == "deny"], "the trickled one is recorded")
    need([r for r in recs if r.get("why") == "not a SOCKS5 greeting" and r["proto"] == "socks"],
         "the SOCKS5 one is recorded")


def c25_pool_burst():
    """Connections handed over faster than a waiting thread wakes each get a
    thread: none waits behind a silent client (session 15's CI saw case 1
    wait 3 s behind this suite's slow clients)."""
    _, _, run, _, err = start_proxy("proxy3", ["allow good.test:9000"])
    log = JsonLog(os.path.join(run, "connections.jsonl"))
    # The start's probe made one thread; let it finish and wait.
    log.wait(0, lambda e: True, timeout=5)
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(64)
    u = socket.socket(socket.AF_UNIX)
    u.connect(os.path.join(run, "proxy.sock"))
    clients, theirs = [], []
    for _ in range(12):
        c = socket.create_connection(lst.getsockname())
        a, _ = lst.accept()
        clients.append(c)
        theirs.append(a)
    # Twelve silent connections in one burst, then one that asks.
    for a in theirs:
        socket.send_fds(u, [b"x"], [a.fileno()])
    ask = socket.create_connection(lst.getsockname())
    a, _ = lst.accept()
    socket.send_fds(u, [b"x"], [a.fileno()])
    for a2 in theirs + [a]:
        a2.close()
    try:
        ask.sendall(b"CONNECT good.test:9000 HTTP/1.1\r\nHost: good.test:9000\r\n\r\n")
        head, rest = read_head(ask, timeout=20)
        need(status_of(head) == 200, "the asking connection: 200", head)
        r, _, _ = select.select(clients, [], [], 0)
        need(not r, "answered while all twelve silent ones were still held "
             "(not after the head time out freed a thread)", len(r))
    finally:
        for c in clients + [ask]:
            c.close()
        lst.close()
        u.close()


def free_port():
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return port


def c26_tcp_listener():
    """--listen PORT (a proxy in a Pod of its own): the same proxy over TCP."""
    port = free_port()
    _, _, run, _, err = start_proxy("proxy4", ["allow good.test:9000"], ["--listen", str(port)])
    need("and TCP port %d" % port in open(err).read(), "it says it listens", open(err).read())
    log = JsonLog(os.path.join(run, "connections.jsonl"))
    m = log.mark()
    s = socket.create_connection(("127.0.0.1", port), timeout=3)
    s.sendall(b"CONNECT good.test:9000 HTTP/1.1\r\nHost: good.test:9000\r\n\r\n")
    head, rest = read_head(s)
    need(status_of(head) == 200 and rest == b"", "CONNECT over TCP: 200", head)
    echo_ok(s, b"over tcp")
    s.close()
    s = socket.create_connection(("127.0.0.1", port), timeout=3)
    s.sendall(b"CONNECT bad.test:9000 HTTP/1.1\r\nHost: bad.test:9000\r\n\r\n")
    head, _ = read_head(s)
    s.close()
    need(status_of(head) == 403, "an unlisted name over TCP: 403", head)
    got = log.wait(m, lambda e: e.get("proto") == "connect", n=2)
    need(sorted((e["host"], e["verdict"]) for e in got) ==
         [("bad.test", "deny"), ("good.test", "allow")], "both recorded", got)
    bad = subprocess.run([AGENT, "--egress-proxy", "/nonexistent", "/nonexistent", "--listen",
                          "0"], capture_output=True, text=True, timeout=10)
    need(bad.returncode == 2 and "usage" in bad.stderr, "port 0 is a usage error", bad.stderr)


def secrets_text(version, secrets):
    lines = ["# sandpod secrets 1"]
    for name, standin, where, value, scopes in secrets:
        lines.append("secret %s %s %s %s %s" % (name, standin, where, value.hex(), scopes))
    return "\n".join(lines) + "\n"


def give_secrets(d, run, err, version, rules, secrets):
    """DIR/secrets anew (0600, renamed in), then the policy (rules but its
    version line) at `version`; back once the proxy has put it in force."""
    tmp = os.path.join(d, ".secrets.tmp")
    with open(tmp, "w") as f:
        f.write(secrets_text(version, secrets))
    os.chmod(tmp, 0o600)
    os.rename(tmp, os.path.join(d, "secrets"))
    write_policy(d, ["# version %d" % version] + rules[1:])
    loaded = os.path.join(run, "policy.loaded")
    end = time.monotonic() + 5
    while time.monotonic() < end and open(loaded).read().strip() != str(version):
        time.sleep(0.02)
    need(open(loaded).read().strip() == str(version), "the proxy took version %d" % version,
         open(err).read()[-500:])


def c27_secrets_plain_http():
    """Brokered secrets over plain HTTP (a scope written http://HOST:PORT):
    the stand-ins in headers become the values, in the query only for a
    secret that goes there; a stand-in bound elsewhere is refused, named
    and recorded; a stand-in in a host name is refused; a new value is in
    force when the policy's version moves."""
    s1 = "sandpod-standin-" + "1" * 40
    s2 = "sandpod-standin-" + "2" * 40
    s3 = "sandpod-standin-" + "3" * 40
    s4 = "sandpod-standin-" + "4" * 40
    rules = ["# version 1", "allow good.test:8080", "allow www.good.test:8080",
             "allow good.test:9000", "allow %s:8080" % P2]
    _, d, run, port, err = start_proxy("proxy5", rules)
    log = JsonLog(os.path.join(run, "connections.jsonl"))

    def put(version, value1):
        give_secrets(d, run, err, version, rules, [
            ("TOKEN", s1, "h", value1, "http://good.test:8080"),
            ("QKEY", s2, "hq", b"query-value-2", "http://good.test:8080"),
            ("TLSONLY", s3, "h", b"tls-only-3", "good.test:8080"),
            ("BYADDR", s4, "h", b"by-address-4", "http://%s:8080" % P2)])

    put(2, b"s3cret-value-1")
    m, lm = up_mark(), log.mark()
    req = ("GET http://good.test:8080/v1?k=%s&t=%s HTTP/1.1\r\nHost: good.test:8080\r\n"
           "Authorization: Bearer %s\r\nX-Q: %s\r\n\r\n" % (s2, s1, s1, s2)).encode()
    st, data, body, eof = http(req, port)
    need(st == 200, "a request to the secrets' host: 200", data)
    raw = upstream_got(m, 8080)["raw"].encode("latin1")
    need(b"Authorization: Bearer s3cret-value-1\r\n" in raw and
         b"X-Q: query-value-2\r\n" in raw, "the headers carry the values", raw)
    need(raw.startswith(b"GET /v1?k=query-value-2&t=%s HTTP/1.1" % s1.encode()),
         "the query: the value of the secret that goes there, the other's stand-in kept", raw)
    r = record(lm, log, host="good.test", port=8080)
    need(r["verdict"] == "allow" and r.get("secret") in ("TOKEN", "QKEY"),
         "the record names a secret", r)
    need(b"s3cret" not in open(os.path.join(run, "connections.jsonl"), "rb").read(),
         "no value in the log")

    # A scope by address: the literal the client named.
    m = up_mark()
    req = ("GET http://%s:8080/a HTTP/1.1\r\nHost: %s:8080\r\nX-K: %s\r\n\r\n"
           % (P2, P2, s4)).encode()
    st, data, body, eof = http(req, port)
    need(st == 200, "a request to the address a secret is for: 200", data)
    raw = upstream_got(m, 8080)["raw"].encode("latin1")
    need(b"X-K: by-address-4\r\n" in raw, "the value by address", raw)

    # Bound elsewhere: another host, and the TLS-only secret over plain HTTP.
    for host, tok, name in (("www.good.test:8080", s1, "TOKEN"),
                            ("good.test:8080", s3, "TLSONLY")):
        m, lm = up_mark(), log.mark()
        req = ("GET http://%s/ HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n"
               % (host, host, tok)).encode()
        st, data, body, eof = http(req, port)
        need(st == 403 and ("secret %s, which is not for http://%s" % (name, host)).encode()
             in body, "%s's stand-in to %s: 403 naming it" % (name, host), data)
        need(not reached(m), "nothing went upstream", reached(m))
        r = record(lm, log, proto="http", host=host.split(":")[0])
        need(r["verdict"] == "deny" and r.get("secret") == name, "recorded with the name", r)

    # A stand-in in a host name: refused before any lookup.
    q = len(dns_queries())
    lm = log.mark()
    s, st, body = tunnel("%s.good.test:9000" % s1, port=port)
    need(st == 403 and b"carries a secret's stand-in: TOKEN" in body, "CONNECT: 403", body)
    need(len(dns_queries()) == q, "no lookup of it")
    r = record(lm, log, proto="connect")
    need(r.get("secret") == "TOKEN", "recorded with the name", r)

    # Rotation: a new value in force once the proxy has the version.
    put(3, b"rotated-value-9")
    m = up_mark()
    req = ("GET http://good.test:8080/ HTTP/1.1\r\nHost: good.test:8080\r\n"
           "Authorization: Bearer %s\r\n\r\n" % s1).encode()
    st, data, body, eof = http(req, port)
    raw = upstream_got(m, 8080)["raw"].encode("latin1")
    need(b"Bearer rotated-value-9\r\n" in raw, "the new value", raw)

    # A secrets file with a bad line changes nothing.
    with open(os.path.join(d, "secrets"), "w") as f:
        f.write("secret BROKEN\n")
    write_policy(d, ["# version 4"] + rules[1:])
    time.sleep(0.4)
    need(open(os.path.join(run, "policy.loaded")).read().strip() == "3",
         "the version in force stays 3", open(err).read()[-300:])
    need("secrets line 1" in open(err).read(), "the proxy says why", open(err).read()[-300:])


def tls_request(port, ca, target, name, req, check=True, alpn=("h2", "http/1.1")):
    """Through the proxy's relay on port: CONNECT target, TLS as name
    trusting ca (strictly), req; (the answer to its end, the ALPN chosen,
    the handshake's error or None)."""
    s, st, body = tunnel(target, port=port)
    need(st == 200, "CONNECT %s: 200" % target, body)
    ctx = ssl.create_default_context(cafile=ca)
    if hasattr(ssl, "VERIFY_X509_STRICT"):
        ctx.verify_flags |= ssl.VERIFY_X509_STRICT
    ctx.check_hostname = check
    if alpn:
        ctx.set_alpn_protocols(list(alpn))
    try:
        t = ctx.wrap_socket(s, server_hostname=name)
    except (ssl.SSLError, OSError) as e:
        s.close()
        return b"", None, e
    proto = t.selected_alpn_protocol()
    data = bytearray()
    t.settimeout(5)
    try:
        t.sendall(req)
        while True:
            more = t.recv(65536)
            if not more:
                break
            data += more
    except (ssl.SSLError, OSError):
        pass
    t.close()
    return bytes(data), proto, None


def c28_secrets_over_tls():
    """Brokered secrets over HTTPS: a tunnel to a host a TLS-scoped secret
    is for ends at the proxy, under a certificate of its own CA (written to
    RUN/ca.pem and, after the CAs the host trusts, RUN/ca-bundle.pem);
    the stand-ins in the request's headers become the values and the
    request goes on over the proxy's own TLS, verified against
    DIR/upstream-ca.pem. Refused inside the tunnel, nothing sent: another
    secret's stand-in, a Host that is not the tunnel's; a server name that
    is not the tunnel's ends the handshake; an upstream whose certificate
    does not verify gets nothing (502 naming why); bytes before the 200 are
    refused; one request per connection; a tunnel to a host no TLS secret
    is for is not terminated."""
    s1 = "sandpod-standin-" + "5" * 40
    s2 = "sandpod-standin-" + "6" * 40
    s3 = "sandpod-standin-" + "7" * 40
    rules = ["# version 1", "allow good.test:8443", "allow good.test:8444",
             "allow www.good.test:8443", "allow good.test:9000", "allow %s:8443" % P2]
    _, d, run, port, err = start_proxy("proxy6", rules)
    shutil.copy(tls_path("ca.pem"), os.path.join(d, "upstream-ca.pem"))
    log = JsonLog(os.path.join(run, "connections.jsonl"))
    give_secrets(d, run, err, 2, rules, [
        ("TOKEN", s1, "h", b"tls-value-1", "good.test:8443,good.test:8444"),
        ("PLAINONLY", s2, "h", b"plain-value-2", "http://good.test:8080"),
        ("BYADDR", s3, "h", b"by-address-3", "%s:8443" % P2)])
    ca = os.path.join(run, "ca.pem")
    ca_text = open(ca).read() if os.path.exists(ca) else ""
    need(ca_text.startswith("-----BEGIN CERTIFICATE-----"), "RUN/ca.pem: the proxy's CA",
         open(err).read()[-500:])
    bundle = open(os.path.join(run, "ca-bundle.pem")).read()
    need(bundle == open(tls_path("ca.pem")).read() + ca_text,
         "RUN/ca-bundle.pem: the CAs the host trusts, then the proxy's", bundle[-200:])
    def over_tls(target, name, req, check=True, alpn=("h2", "http/1.1")):
        return tls_request(port, ca, target, name, req, check, alpn)

    # The value in, over the proxy's TLS; ALPN http/1.1 both ways.
    m, lm = up_mark(), log.mark()
    req = ("GET /v1?t=%s HTTP/1.1\r\nHost: good.test:8443\r\nAuthorization: Bearer %s\r\n"
           "Connection: keep-alive\r\n\r\n" % (s1, s1)).encode()
    data, proto, e = over_tls("good.test:8443", "good.test", req)
    need(e is None, "TLS with the proxy, its certificate checked strictly against RUN/ca.pem",
         repr(e))
    need(status_of(data) == 200 and data.endswith(b"upstream saw GET /v1?t=%s HTTP/1.1\n"
                                                  % s1.encode()),
         "the answer comes back; the query keeps its stand-in (headers only)", data)
    need(proto == "http/1.1", "ALPN: http/1.1 offered beside h2, chosen", proto)
    up = upstream_got(m, 8443)
    raw = up["raw"].encode("latin1")
    need(b"Authorization: Bearer tls-value-1\r\n" in raw and b"Connection: close\r\n" in raw and
         b"keep-alive" not in raw, "upstream: the value, our Connection: close", raw)
    need(up.get("alpn") == "http/1.1", "the proxy asked the upstream for http/1.1", up)
    r = record(lm, log, host="good.test", port=8443)
    need(r["verdict"] == "allow" and r.get("tls") == "terminated" and
         r.get("secret") == "TOKEN" and r["up"] > 0 and r["down"] > 0,
         "the record: terminated, the secret named, bytes both ways", r)
    need(b"tls-value" not in open(os.path.join(run, "connections.jsonl"), "rb").read(),
         "no value in the log")

    # By address: the leaf names the address; the upstream's is checked
    # against it.
    m = up_mark()
    req = ("GET /a HTTP/1.1\r\nHost: %s:8443\r\nX-K: %s\r\n\r\n" % (P2, s3)).encode()
    data, proto, e = over_tls("%s:8443" % P2, P2, req)
    need(e is None and status_of(data) == 200, "a tunnel to an address: 200", (data, e))
    need(b"X-K: by-address-3\r\n" in upstream_got(m, 8443)["raw"].encode("latin1"),
         "the value by address")

    # A body goes as it is, stand-in and all (no --secret-in body).
    m = up_mark()
    body = ("token=%s&x=1" % s1).encode()
    req = (b"POST /p HTTP/1.1\r\nHost: good.test:8443\r\nContent-Length: %d\r\n"
           b"X-T: %s\r\n\r\n" % (len(body), s1.encode())) + body
    data, proto, e = over_tls("good.test:8443", "good.test", req)
    up = upstream_got(m, 8443)
    need(status_of(data) == 200 and up.get("body") == body.decode() and
         "X-T: tls-value-1\r\n" in up["raw"], "a POST: the body whole and as sent", up)

    # One request per connection: a second one in the same write stays.
    m = up_mark()
    req = (b"GET /one HTTP/1.1\r\nHost: good.test:8443\r\n\r\n"
           b"GET /two HTTP/1.1\r\nHost: good.test:8443\r\nX-T: %s\r\n\r\n" % s1.encode())
    data, proto, e = over_tls("good.test:8443", "good.test", req)
    up = upstream_got(m, 8443)
    need(up.get("line") == "GET /one HTTP/1.1" and "/two" not in up["raw"],
         "only the first request goes upstream", up)

    # Refused inside the tunnel, nothing sent upstream.
    for why, req, want in (
            ("a plain-HTTP secret's stand-in",
             "GET / HTTP/1.1\r\nHost: good.test:8443\r\nX-P: %s\r\n\r\n" % s2,
             b"secret PLAINONLY, which is not for good.test:8443"),
            ("a Host that is not the tunnel's",
             "GET / HTTP/1.1\r\nHost: www.good.test:8443\r\nX-T: %s\r\n\r\n" % s1,
             b"the Host header does not name the tunnel's host good.test:8443"),
            ("an absolute URL inside the tunnel",
             "GET http://evil.test/ HTTP/1.1\r\nHost: good.test:8443\r\n\r\n",
             b"names its target as /path")):
        m, lm = up_mark(), log.mark()
        data, proto, e = over_tls("good.test:8443", "good.test", req.encode())
        need(status_of(data) in (400, 403) and want in data, "%s: refused, named" % why, data)
        up = upstream_got(m, 8443)
        need(up["raw"] == "" and "line" not in up, "%s: nothing reached the upstream" % why, up)
        rec = record(lm, log, host="good.test", port=8443)
        need(rec.get("tls") == "terminated" and rec["up"] == 0, "%s: recorded" % why, rec)

    # The client's server name must be the tunnel's host.
    m, lm = up_mark(), log.mark()
    data, proto, e = over_tls("good.test:8443", "www.good.test",
                              ("GET / HTTP/1.1\r\nHost: good.test:8443\r\nX-T: %s\r\n\r\n"
                               % s1).encode(), check=False)
    need(status_of(data) is None, "a server name not the tunnel's: no answer", data)
    need(upstream_got(m, 8443)["raw"] == "", "... nothing reached the upstream")
    rec = record(lm, log, host="good.test", port=8443)
    need(rec["verdict"] == "deny" and "server name www.good.test" in rec["why"],
         "... recorded as refused", rec)

    # An upstream whose certificate does not chain to the trusted CAs.
    m, lm = up_mark(), log.mark()
    data, proto, e = over_tls("good.test:8444", "good.test",
                              ("GET / HTTP/1.1\r\nHost: good.test:8444\r\nX-T: %s\r\n\r\n"
                               % s1).encode())
    need(status_of(data) == 502 and b"the certificate" in data,
         "an upstream certificate that does not verify: 502 naming why", data)
    up = upstream_got(m, 8444)
    need("line" not in up, "... the request never reached it", up)
    rec = record(lm, log, host="good.test", port=8444)
    need("certificate" in rec["why"], "... recorded", rec)

    # Bytes sent before the 200 (a ClientHello at once): refused.
    lm = log.mark()
    s = relay_conn(port)
    s.sendall(b"CONNECT good.test:8443 HTTP/1.1\r\nHost: good.test:8443\r\n\r\n" +
              client_hello("good.test"))
    got, _ = recv_until_eof(s)
    s.close()
    rec = record(lm, log, host="good.test", port=8443)
    need(rec["verdict"] == "deny" and "before the tunnel was established" in rec["why"],
         "bytes before the 200: refused", (rec, got))

    # A host no TLS secret is for: the tunnel is not terminated.
    lm = log.mark()
    s, st, body = tunnel("good.test:9000", port=port)
    echo_ok(s)
    s.close()
    rec = record(lm, log, host="good.test", port=9000)
    need("tls" not in rec, "a tunnel elsewhere is not terminated", rec)


def c29_secrets_in_bodies():
    """A secret given --secret-in body: the request's body, to a host it is
    for, is taken whole (a chunked one joined), its stand-in put back to the
    value, and sent with a Content-Length of its own; over plain HTTP and
    inside a terminated HTTPS tunnel; a client waiting for 100 Continue is
    told to go on; a body over 1 MiB is refused with 413 and nothing sent;
    a secret without `b` leaves a body's stand-in as it is."""
    s1 = "sandpod-standin-" + "8" * 40
    s2 = "sandpod-standin-" + "9" * 40
    rules = ["# version 1", "allow good.test:8080", "allow good.test:8443"]
    _, d, run, port, err = start_proxy("proxy7", rules)
    shutil.copy(tls_path("ca.pem"), os.path.join(d, "upstream-ca.pem"))
    give_secrets(d, run, err, 2, rules, [
        ("BODY", s1, "hb", b"body-value-1", "http://good.test:8080,good.test:8443"),
        ("HEADONLY", s2, "h", b"head-value-2", "http://good.test:8080")])

    def post(body, chunked=False, expect=False):
        hdrs = "POST http://good.test:8080/p HTTP/1.1\r\nHost: good.test:8080\r\n"
        if chunked:
            data = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 7]), body[i:i + 7])
                            for i in range(0, len(body), 7)) + b"0\r\n\r\n"
            hdrs += "Transfer-Encoding: chunked\r\n"
        else:
            data = body
            hdrs += "Content-Length: %d\r\n" % len(body)
        if expect:
            hdrs += "Expect: 100-continue\r\n"
        s = relay_conn(port)
        s.sendall((hdrs + "\r\n").encode())
        if expect:
            head, rest = read_head(s)
            need(head.startswith(b"HTTP/1.1 100 Continue"), "100 Continue before the body", head)
        s.sendall(data)
        got, _ = recv_until_eof(s)
        s.close()
        return got

    body = ('{"token": "%s", "other": "%s"}' % (s1, s2)).encode()
    want = '{"token": "body-value-1", "other": "%s"}' % s2
    for chunked in (False, True):
        m = up_mark()
        got = post(body, chunked=chunked)
        up = upstream_got(m, 8080)
        need(status_of(got) == 200 and up.get("body") == want,
             "plain HTTP, %s: the body secret's value in, the header-only one's stand-in kept"
             % ("chunked" if chunked else "Content-Length"), (got, up))
        hd = {k.lower(): v for k, v in up["headers"]}
        need(hd.get("content-length") == str(len(want)) and "transfer-encoding" not in hd,
             "... sent with a Content-Length of its own", up["headers"])
    m = up_mark()
    got = post(body, expect=True)
    need(upstream_got(m, 8080).get("body") == want, "Expect: 100-continue: the same")
    lm = JsonLog(os.path.join(run, "connections.jsonl")).mark()
    m = up_mark()
    got = post(b"x" * (1024 * 1024 + 10) + s1.encode())
    need(status_of(got) == 413 and b"over 1048576 bytes" in got, "a body over 1 MiB: 413", got[:300])
    need(not [e for e in reached(m) if e["port"] == 8080], "... nothing sent upstream")

    # Inside a terminated tunnel.
    m = up_mark()
    tb = ("token=%s" % s1).encode()
    data, _, _ = tls_request(port, os.path.join(run, "ca.pem"), "good.test:8443", "good.test",
                             b"POST /t HTTP/1.1\r\nHost: good.test:8443\r\n"
                             b"Content-Length: %d\r\n\r\n%s" % (len(tb), tb))
    up = upstream_got(m, 8443)
    need(status_of(data) == 200 and up.get("body") == "token=body-value-1",
         "HTTPS: the body secret's value in", (data, up))
    need(b"body-value" not in open(os.path.join(run, "connections.jsonl"), "rb").read(),
         "no value in the log")


CASES = [
    ("1 CONNECT to an allowed name: the tunnel carries bytes exactly", c01_connect_allowed),
    ("1b a name from DNS; the DNS server logs its queries", c01b_connect_via_dns),
    ("1c the relay's ::1 listener", c01c_relay_v6_loopback),
    ("2 plain http: origin-form upstream, Connection: close, no Proxy-*", c02_http_plain),
    ("3 names no rule allows: 403, and never looked up", c03_unlisted_names),
    ("4 a deny rule wins over the wildcard allow", c04_deny_wins),
    ("5 an IP literal without a CIDR rule: 403", c05_literal_without_rule),
    ("6 a Host header that is not the URL's: 403, nothing upstream", c06_host_header),
    ("7 a ClientHello naming another host: the alert, nothing upstream", c07_sni_differs),
    ("7b split ClientHello, records before it: refused", c07b_sni_tls_games),
    ("8 a ClientHello naming the host (in pieces): passed", c08_sni_equal),
    ("9 IP literals and server names do not mix (CONNECT and SOCKS5)", c09_sni_literals),
    ("10 a port the rule does not allow: 403", c10_port),
    ("11 loopback by name, by DNS, by literal and odd spellings: refused", c11_loopback),
    ("12 the metadata address: refused; a name with it and a good one: the good one",
     c12_metadata),
    ("13 this host's own addresses: refused, a CIDR rule holding them notwithstanding",
     c13_host_addresses),
    ("13b an address this host gets later: refused", c13b_host_address_added_later),
    ("14 IPv4-mapped and NAT64 forms of loopback: refused", c14_mapped),
    ("15 SOCKS5: domain, IPv4, refusals, UDP ASSOCIATE, BIND, methods", c15_socks),
    ("16 a CONNECT inside a tunnel is payload: one record", c16_connect_in_tunnel),
    ("17 live deny: an open tunnel is cut, new ones refused", c17_live_deny),
    ("18 live allow: a new rule serves within 5 s", c18_live_allow),
    ("18b a policy file with a bad line changes nothing", c18b_bad_policy_kept_out),
    ("19 a flood past --max-connections: 503 at once, bounded fds, recovery", c19_flood),
    ("20 request smuggling: ambiguous framing 400, one request per connection", c20_smuggling),
    ("20b a client that leaves mid-body takes the upstream connection along",
     c20b_truncated_body),
    ("21 malformed requests and the 16 KiB head limit", c21_malformed),
    ("22 the log stays one UTF-8 JSON object a line, hostile names too", c22_log_is_json),
    ("23 IPv6 upstreams by literal and by AAAA (a ULA CIDR rule)", c23_v6),
    ("24 slow clients are closed at the head time out, and recorded", c24_slow_clients),
    ("25 a burst of silent connections does not hold up the next one", c25_pool_burst),
    ("26 --listen PORT: the proxy over TCP, as in a Pod of its own", c26_tcp_listener),
    ("27 secrets over plain HTTP: values in, stand-ins bound elsewhere refused, rotation",
     c27_secrets_plain_http),
    ("28 secrets over HTTPS: terminated with the proxy's CA, the upstream verified, refusals "
     "inside the tunnel", c28_secrets_over_tls),
    ("29 secrets in bodies: taken whole, put in, a Content-Length of their own; 100 Continue; "
     "413 over 1 MiB", c29_secrets_in_bodies),
]

try:
    only = os.environ.get("EGRESS_TEST_ONLY")
    for name, fn in CASES:
        if only and name.split()[0] not in only.split(","):
            continue
        check(name, fn)
    check("0 nothing reached this host's own listeners, all suite long", oracle_clean)
finally:
    failed = [n for n, ok in results if not ok]
    print("%d checks, %d failed, %.1f s" % (len(results), len(failed), time.monotonic() - T0))
    if failed:
        for name in ("proxy.err", "proxy2.err", "upstream.err"):
            try:
                print("--- %s (end):\n%s" % (name, open(os.path.join(T, name)).read()[-2000:]))
            except OSError:
                pass
    cleanup()
sys.exit(1 if failed else 0)
