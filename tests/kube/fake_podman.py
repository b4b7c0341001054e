#!/usr/bin/python3
"""The fake API server (fake_apiserver.py) backed by Podman: standard
library only. kubectl is run against it by the tests to hold it to the real
protocol, and real containers run the real Pod.

Usage: fake_podman.py DIR [--client-cert] [--v4-only]
  (POST /fake/faults {"v4_only": true} turns --v4-only on at run time.)
  Everything fake_apiserver.py does for auth, discovery, faults, lists,
  watches and Events, with Pods that are Podman's:
  - POST pods: the name comes from generateName when there is none, each
    volume gets the Pod's name as a prefix (Podman 4.3's kube play turns an
    emptyDir into a named volume every Pod with that volume name would
    share), containers' ports are dropped (kube play would publish them on
    the host), hostUsers is dropped (see for_play()), and `podman kube
    play` runs the rest as it is, with runc and
    the host's nofile/nproc limits from DIR/containers.conf (kube play takes
    them from there only). A Pod that cannot be played stays Pending with a
    waiting ErrImagePull (or CreateContainerError) and a Warning event
    carrying Podman's message.
  - status: polled from `podman inspect` of the Pod's containers (named
    POD-CONTAINER): Pending, Running (every container running, all Ready),
    Succeeded (all exited 0) or Failed; each change is a MODIFIED event with
    a new resourceVersion.
  - DELETE: `podman pod rm -f` and the Pod's volumes, before the answer.
  - pods/exec over WebSocket (RFC 6455, server side here):
    v5.channel.k8s.io (v4.channel.k8s.io with --v4-only, or when the client
    offers no v5), channels 0-4, `podman exec -i [-t] POD-CONTAINER cmd...`;
    the channel-3 Status carries the exit code (ExitCode cause); v5's
    [255, 0] closes the command's stdin; channel 4 resizes a tty.
  - fault {"drop_export_at_stdout": k}: the next exec of a command with an
    "export" word drops its connection in place of its k-th stdout message
    (an archive cut mid-stream).
  - fault {"drop_exec_after_stdin": k}: the next exec drops its connection
    (no close frame, no Status) 0.3 s after its k-th stdin message reached
    the command, as an API server or load balancer going away mid-call.
  - NetworkPolicies (networking.k8s.io/v1) of the shape sandpod makes are
    enforced by where a Pod is put, when it is played: a Pod selected
    (podSelector.matchLabels) by a policy with "Egress" in policyTypes is
    put on that policy's network alone, a Podman network made --internal
    (no route out, no gateway on the host); a Pod that a policy's
    egress[].to[].podSelector selects joins that network as well as
    Podman's default one. So the first reaches the second and nothing
    else. Not modelled: ports (any port of the allowed Pod is reachable),
    ingress rules (a policy of Ingress only changes nothing), and policies
    made after the Pod was played (sandpod makes them first). status.podIP
    is the Pod's address on its first policy network, else on the default.
    Fault {"ignore_netpol": true}: policies are kept but not enforced (a
    network plugin without NetworkPolicy support).
  - The API service, as the kubelet tells every container of it
    (KUBERNETES_SERVICE_HOST and _PORT): a TCP listener of the fake's on
    this host's own address (the one its default route leaves from), which
    accepts and closes. A Pod on Podman's network reaches it; one on a
    policy's network does not (what `sandpod peer protections network`
    tries).
  - DIR/made gets a line "pod NAME" or "net NAME" for each Pod and network
    it makes, for fake_lib.sh's cleanup.
"""
import errno
import fcntl
import hashlib
import base64
import json
import os
import pty
import random
import resource
import select
import signal
import socket
import ssl
import struct
import subprocess
import sys
import termios
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fake_apiserver as base  # noqa: E402  (reads DIR and --client-cert from argv)

V4_ONLY = "--v4-only" in sys.argv[2:]
V5, V4 = "v5.channel.k8s.io", "v4.channel.k8s.io"
WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
lock, state = base.lock, base.state
plays = {}  # Pod name -> {"error": message or None, "played": bool}


def containers_conf():
    """runc and nofile/nproc limits the host allows: kube play reads them
    from containers.conf only."""
    def cap(limit, most):
        hard = resource.getrlimit(limit)[1]
        return most if hard == resource.RLIM_INFINITY or hard > most else hard
    path = os.path.join(base.DIR, "containers.conf")
    with open(path, "w") as f:
        n, p = cap(resource.RLIMIT_NOFILE, 1024), cap(resource.RLIMIT_NPROC, 4096)
        f.write('[containers]\ndefault_ulimits = ["nofile=%d:%d", "nproc=%d:%d"]\n'
                '[engine]\nruntime = "runc"\n' % (n, n, p, p))
    os.environ["CONTAINERS_CONF"] = path


def podman(*args, timeout=300):
    # In the fake's own folder: kube play takes a folder (or file) named
    # like an image's last path part in its working directory for that
    # image's build context, so a test run where `./sandpod` exists (the
    # build folder) failed with "stat .../sandpod/Dockerfile".
    return subprocess.run(["podman"] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=timeout, text=True, cwd=os.path.abspath(base.DIR))


def made(kind, name):
    with open(os.path.join(base.DIR, "made"), "a") as f:
        f.write("%s %s\n" % (kind, name))


def selects(sel, labels):
    ml = (sel or {}).get("matchLabels") or {}
    return all(labels.get(k) == v for k, v in ml.items())


def net_of(np):
    h = hashlib.sha1((os.path.abspath(base.DIR) + "/" + np["metadata"]["name"]).encode())
    return "fakenp-" + h.hexdigest()[:12]


nets_made = set()


def ensure_net(name):
    if name in nets_made:
        return
    r = podman("network", "create", "--internal", name)
    if r.returncode != 0 and "already exists" not in r.stderr:
        raise RuntimeError("podman network create %s: %s" % (name, r.stderr.strip()))
    nets_made.add(name)
    made("net", name)


def networks_for(pod):
    """The networks Pod pod is played on (NetworkPolicies, as above); []
    for Podman's default."""
    labels = pod["metadata"].get("labels") or {}
    ns = pod["metadata"].get("namespace")
    with lock:
        if state["faults"].get("ignore_netpol"):
            return []
        nps = [np for (n, _), np in state["netpols"].items() if n == ns]
    egress = [np for np in nps if "Egress" in (np["spec"].get("policyTypes") or [])]
    mine = [net_of(np) for np in egress if selects(np["spec"].get("podSelector"), labels)]
    if mine:
        return mine
    peers = [net_of(np) for np in egress
             if any(selects(to.get("podSelector"), labels)
                    for rule in np["spec"].get("egress") or [] for to in rule.get("to") or [])]
    return ["podman"] + peers if peers else []


api_service = None  # (host, port) of the API service's stand-in


def host_address():
    """This host's address on its default route (a UDP socket's connect
    sends nothing), else its first address that is not loopback."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
            u.connect(("198.18.0.1", 9))
            return u.getsockname()[0]
    except OSError:
        pass
    for a in subprocess.run(["hostname", "-I"], capture_output=True, text=True).stdout.split():
        if ":" not in a and not a.startswith("127."):
            return a
    raise RuntimeError("fake_podman: this host has no address but loopback")


def serve_api_service():
    global api_service
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", 0))
    srv.listen(64)
    api_service = (host_address(), srv.getsockname()[1])

    def loop():
        while True:
            c, _ = srv.accept()
            c.close()
    threading.Thread(target=loop, daemon=True).start()


def for_play(pod):
    """The Pod as kube play needs it: its volumes named after it."""
    pod = json.loads(json.dumps(pod))
    name = pod["metadata"]["name"]
    pod.pop("status", None)
    spec = pod["spec"]
    # hostUsers: false is not played: kube play gives such a Pod a range of
    # its own (userns=auto) and id-mapped copies of its image's layers,
    # which made local sandboxes started at the same moment from the same
    # image fail ("creating overlay mount ... permission denied"), and
    # rootless on vfs failed to start the Pod itself. So the fake's Pods
    # have the node's ids when rootful (their service's user's namespace
    # when rootless), and its test engines accept "userns".
    spec.pop("hostUsers", None)
    for v in spec.get("volumes") or []:
        v["name"] = name + "-" + v["name"]
    for key in ("initContainers", "containers"):
        for c in spec.get(key) or []:
            for m in c.get("volumeMounts") or []:
                m["name"] = name + "-" + m["name"]
            # In Kubernetes a containerPort says what the container listens
            # on; Podman 4.3's kube play publishes it on the host as well
            # (so a second such Pod failed: "address already in use").
            c.pop("ports", None)
            if api_service:
                env = c.setdefault("env", [])
                env += [{"name": "KUBERNETES_SERVICE_HOST", "value": api_service[0]},
                        {"name": "KUBERNETES_SERVICE_PORT", "value": str(api_service[1])}]
    return pod


def play(pod):
    """`podman kube play` in the background; the poller reports the rest."""
    name = pod["metadata"]["name"]
    path = os.path.abspath(os.path.join(base.DIR, "play-%s.json" % name))
    with open(path, "w") as f:
        json.dump(for_play(pod), f)
    made("pod", name)
    nets = networks_for(pod)
    for n in nets:
        if n != "podman":
            ensure_net(n)
    net_args = [a for n in nets for a in ("--network", n)]
    r = podman("kube", "play", *net_args, path)
    if r.returncode != 0 and os.geteuid() != 0 and "cgroup" in r.stderr:
        # Rootless where cgroups are not delegated (v1): no limit can be
        # set, as the library drops them for local sandboxes.
        remove(name)
        played = for_play(pod)
        for key in ("initContainers", "containers"):
            for c in played["spec"].get(key) or []:
                c.pop("resources", None)
        with open(path, "w") as f:
            json.dump(played, f)
        r = podman("kube", "play", *net_args, path)
    if r.returncode != 0:
        sys.stderr.write("kube play %s failed:\n%s\n" % (name, r.stderr))
    with lock:
        if r.returncode != 0:
            msg = (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1]
            plays[name] = {"error": msg, "played": True}
            p = state["pods"].get(name)
            if p:
                pull = "pull" in msg or "image" in msg
                reason = "ErrImagePull" if pull else "CreateContainerError"
                base.add_event(p, "Warning", "Failed",
                               ('Failed to pull image "%s": %s' % (
                                   p["spec"]["containers"][0]["image"], msg)) if pull
                               else "Error: " + msg)
                p["status"]["containerStatuses"] = [
                    {"name": c["name"], "ready": False, "restartCount": 0,
                     "image": c.get("image", ""), "imageID": "",
                     "state": {"waiting": {"reason": reason, "message": msg}}}
                    for c in p["spec"]["containers"]]
                base.record("MODIFIED", p)
        else:
            plays[name] = {"error": None, "played": True}
            p = state["pods"].get(name)
            if p:
                base.add_event(p, "Normal", "Started", "podman kube play started the Pod")
    if r.returncode != 0:
        remove(name)


def grace(q, data):
    """The grace period asked for (the query's, else DeleteOptions'), at
    most 10 s, Podman's own stop timeout."""
    g = q.get("gracePeriodSeconds")
    try:
        g = json.loads(data or b"{}").get("gracePeriodSeconds", g)
    except (ValueError, AttributeError):
        pass
    try:
        return max(0, min(int(g), 10))
    except (TypeError, ValueError):
        return 10


def remove(name, timeout=0):
    podman("pod", "rm", "-f", "-t", str(timeout), name, timeout=120)
    vols = podman("volume", "ls", "--quiet").stdout.split()
    mine = [v for v in vols if v.startswith(name + "-")]
    if mine:
        podman("volume", "rm", "-f", *mine, timeout=120)


def status_of(pod):
    """The Pod's status from its containers' Podman state."""
    names = [c["name"] for c in pod["spec"]["containers"]]
    r = podman("inspect", "--type", "container",
               *["%s-%s" % (pod["metadata"]["name"], n) for n in names], timeout=60)
    try:
        found = {c["Name"]: c for c in json.loads(r.stdout or "[]")}
    except ValueError:
        found = {}
    if r.returncode != 0 and "no such" not in r.stderr.lower():
        return None  # Podman did not answer (a busy host): no news
    statuses, running, exited, failed = [], 0, 0, 0
    for c in pod["spec"]["containers"]:
        st = (found.get("%s-%s" % (pod["metadata"]["name"], c["name"])) or {}).get("State")
        cs = {"name": c["name"], "ready": False, "restartCount": 0,
              "image": c.get("image", ""), "imageID": ""}
        if not st or st.get("Status") in ("created", "configured", "initialized"):
            cs["state"] = {"waiting": {"reason": "ContainerCreating"}}
        elif st.get("Running"):
            running += 1
            cs["ready"] = True
            cs["started"] = True
            cs["state"] = {"running": {"startedAt": st.get("StartedAt", "")}}
        else:
            exited += 1
            code = st.get("ExitCode", 0)
            failed += code != 0
            cs["state"] = {"terminated": {"exitCode": code,
                                          "reason": "Completed" if code == 0 else "Error"}}
        statuses.append(cs)
    nets = ((found.get("%s-%s" % (pod["metadata"]["name"], names[0])) or {})
            .get("NetworkSettings") or {}).get("Networks") or {}
    ips = {k: v.get("IPAddress") for k, v in nets.items() if v.get("IPAddress")}
    pick = sorted(k for k in ips if k.startswith("fakenp-")) or sorted(ips)
    n = len(names)
    phase = ("Running" if running == n else
             "Failed" if exited == n and failed else
             "Succeeded" if exited == n else
             "Running" if running else "Pending")
    ready = "True" if running == n else "False"
    extra = {"podIP": ips[pick[0]]} if pick else {}
    return dict(extra, **{"phase": phase, "containerStatuses": statuses,
            "conditions": [{"type": "PodScheduled", "status": "True"},
                           {"type": "ContainersReady", "status": ready},
                           {"type": "Ready", "status": ready}]})


def poller():
    """Podman's state into the Pods, a MODIFIED event for each change."""
    while True:
        time.sleep(0.3)
        with lock:
            todo = [json.loads(json.dumps(p)) for n, p in state["pods"].items()
                    if plays.get(n, {}).get("played") and not plays[n]["error"]]
        for pod in todo:
            st = status_of(pod)
            if st is None:
                continue
            with lock:
                p = state["pods"].get(pod["metadata"]["name"])
                if p and p["metadata"]["uid"] == pod["metadata"]["uid"]:
                    old = dict(p["status"])
                    new = dict(old)
                    new.update(st)
                    if json.dumps(new, sort_keys=True) != json.dumps(old, sort_keys=True):
                        p["status"] = new
                        base.record("MODIFIED", p)


def ws_accept(key):
    return base64.b64encode(hashlib.sha1(key.encode() + WS_GUID).digest()).decode()


class WS:
    """The server side of RFC 6455 on the handler's socket."""

    def __init__(self, rfile, wfile):
        self.r, self.w = rfile, wfile
        self.wlock = threading.Lock()

    def read_exact(self, n):
        b = self.r.read(n)
        if b is None or len(b) < n:
            raise EOFError
        return b

    def send(self, opcode, data):
        n = len(data)
        head = bytes([0x80 | opcode])
        if n < 126:
            head += bytes([n])
        elif n < 65536:
            head += bytes([126]) + struct.pack("!H", n)
        else:
            head += bytes([127]) + struct.pack("!Q", n)
        with self.wlock:
            self.w.write(head + data)
            self.w.flush()

    def recv(self):
        """One message: (opcode, payload); pings answered, fragments joined."""
        msg, op = b"", None
        while True:
            b0, b1 = self.read_exact(2)
            fin, opcode, n = b0 & 0x80, b0 & 0x0F, b1 & 0x7F
            if not b1 & 0x80:
                raise ValueError("unmasked client frame")
            if n == 126:
                n = struct.unpack("!H", self.read_exact(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", self.read_exact(8))[0]
            mask = self.read_exact(4)
            data = bytes(c ^ mask[i % 4] for i, c in enumerate(self.read_exact(n)))
            if opcode == 9:
                self.send(10, data)
                continue
            if opcode == 10:
                continue
            if opcode == 8:
                return 8, data
            if opcode:
                op = opcode
            msg += data
            if fin:
                return op, msg


class Handler(base.Handler):
    def pods(self, method, ns, name, q, data):
        if method == "POST" and not name:
            return self.create(ns, data)
        if method == "DELETE" and name:
            with lock:
                known = name in state["pods"]
            if known:
                with lock:
                    plays[name] = {"error": "deleted", "played": True}
                    # As a real API server: marked first, then its
                    # containers are stopped.
                    pod = state["pods"].get(name)
                    if pod and not pod["metadata"].get("deletionTimestamp"):
                        pod["metadata"]["deletionTimestamp"] = base.now()
                        base.record("MODIFIED", pod)
                remove(name, grace(q, data))
        return super().pods(method, ns, name, q, data)

    def create(self, ns, data):
        try:
            pod = json.loads(data)
            md = pod["metadata"]
            if not md.get("name"):
                md["name"] = md.pop("generateName") + "".join(
                    random.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5))
            assert pod["spec"]["containers"][0]["image"]
        except (ValueError, KeyError, IndexError, TypeError, AssertionError):
            return self.fail(422, "Invalid", "Pod is invalid: metadata.name (or generateName) "
                             "or an image is missing")
        md.pop("generateName", None)
        name = md["name"]
        with lock:
            if name in state["pods"]:
                return self.fail(409, "AlreadyExists", 'pods "%s" already exists' % name)
            pod["apiVersion"], pod["kind"] = "v1", "Pod"
            md.update({"namespace": ns, "uid": "uid-%s-%d" % (name, state["rv"]),
                       "creationTimestamp": base.now()})
            pod["status"] = {"phase": "Pending", "conditions": []}
            state["pods"][name] = pod
            plays[name] = {"error": None, "played": False}
            base.add_event(pod, "Normal", "Scheduled", "Successfully assigned to podman")
            base.record("ADDED", pod)
            out = json.loads(json.dumps(pod))
        threading.Thread(target=play, args=(out,), daemon=True).start()
        return self.send_json(201, out)

    def netpol_deleted(self, np):
        """Its network goes once no container is on it (now, or when the
        cleanup runs)."""
        podman("network", "rm", net_of(np))

    def handle_any(self, method):
        u = urllib.parse.urlsplit(self.path)
        parts = [p for p in u.path.split("/") if p]
        if len(parts) == 7 and parts[:3] == ["api", "v1", "namespaces"] and \
                parts[4] == "pods" and parts[6] == "exec":
            with lock:
                if not self.authorized():
                    return self.fail(401, "Unauthorized", "Unauthorized")
            q = urllib.parse.parse_qs(u.query)
            return self.exec(parts[5], q)
        if method == "GET" and len(parts) == 7 and parts[:3] == ["api", "v1", "namespaces"] and \
                parts[4] == "pods" and parts[6] == "log":
            with lock:
                if not self.authorized():
                    return self.fail(401, "Unauthorized", "Unauthorized")
            return self.log(parts[5], urllib.parse.parse_qs(u.query))
        return super().handle_any(method)

    def pod_copy(self, name):
        """A copy of Pod name's object, or None."""
        with lock:
            pod = state["pods"].get(name)
            return json.loads(json.dumps(pod)) if pod else None

    def log(self, name, q):
        """GET pods/NAME/log as a real API server answers it: text/plain,
        stdout and stderr as one stream, chunked while it follows; the
        content from `podman logs` of the container."""
        pod = self.pod_copy(name)
        if not pod:
            return self.fail(404, "NotFound", 'pods "%s" not found' % name)
        names = [c["name"] for c in pod["spec"]["containers"]]
        inits = [c["name"] for c in pod["spec"].get("initContainers", [])]
        want = (q.get("container") or [None])[-1]
        if not want:
            if len(names) != 1:
                return self.fail(400, "BadRequest",
                                 "a container name must be specified for pod %s, choose one "
                                 "of: [%s] or one of the init containers: [%s]" %
                                 (name, " ".join(names), " ".join(inits)))
            want = names[0]
        if want not in names + inits:
            return self.fail(400, "BadRequest", "container %s is not valid for pod %s" %
                             (want, name))
        target = "%s-%s" % (name, want)
        if podman("container", "exists", target).returncode != 0:
            return self.fail(400, "BadRequest", 'container "%s" in pod "%s" is waiting to '
                             'start: ContainerCreating' % (want, name))
        one = lambda k: (q.get(k) or [None])[-1]  # noqa: E731
        args = ["podman", "logs"]
        if one("follow") in ("true", "1"):
            args.append("--follow")
        if one("timestamps") in ("true", "1"):
            args.append("--timestamps")
        if one("tailLines") is not None:
            args += ["--tail", str(int(one("tailLines")))]
        if one("sinceSeconds") is not None:
            args += ["--since", "%ds" % int(one("sinceSeconds"))]
        elif one("sinceTime") is not None:
            args += ["--since", one("sinceTime")]
        proc = subprocess.Popen(args + [target], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        out = proc.stdout.fileno()
        try:
            while True:
                # A client that closes the stream (^C on `logs -f`) ends
                # `podman logs --follow` now, as a real server ends its
                # kubelet stream, not at the next line the Pod prints.
                ready, _, _ = select.select([out, self.connection], [], [])
                if self.connection in ready and not self.connection.recv(1):
                    self.close_connection = True
                    break
                if out not in ready:
                    continue
                data = os.read(out, 65536)
                if not data:
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                    break
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()
        except (OSError, ssl.SSLError):
            self.close_connection = True  # the client went away
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()

    def fail(self, code, reason, message, extra=None):
        if code == 400:
            sys.stderr.write("fake_podman: 400 %s %s: %s\n" % (self.command, self.path, message))
        super().fail(code, reason, message, extra)

    def exec(self, name, q):
        pod = self.pod_copy(name)
        if not pod:
            return self.fail(404, "NotFound", 'pods "%s" not found' % name)
        names = [c["name"] for c in pod["spec"]["containers"]]
        container = (q.get("container") or [names[0]])[-1]
        if container not in names:
            return self.fail(400, "BadRequest", "container %s is not valid for pod %s" %
                             (container, name))
        if pod["status"].get("phase") != "Running":
            return self.fail(400, "BadRequest", "pod %s is not running (phase %s)" %
                             (name, pod["status"].get("phase")))
        cmd = q.get("command") or []
        if not cmd:
            return self.fail(400, "BadRequest", "you must specify at least 1 command")
        # One header with a list (kubectl) or one header each (RFC 6455
        # allows both; sandpod's client sends several).
        offered = [p.strip() for h in self.headers.get_all("Sec-WebSocket-Protocol", [])
                   for p in h.split(",")]
        with lock:
            v4_only = V4_ONLY or state["faults"].get("v4_only")
            drop_at = state["faults"].pop("drop_exec_after_stdin", 0)
            drop_out = (state["faults"].pop("drop_export_at_stdout", 0)
                        if "export" in (q.get("command") or []) else 0)
        proto = V5 if V5 in offered and not v4_only else V4 if V4 in offered else None
        key = self.headers.get("Sec-WebSocket-Key")
        if self.headers.get("Upgrade", "").lower() != "websocket" or not key or not proto:
            return self.fail(400, "BadRequest", "pods/exec needs a WebSocket upgrade offering "
                             "%s" % (V4 if v4_only else V5 + " or " + V4))
        flag = lambda k: (q.get(k) or ["false"])[-1] in ("true", "1")  # noqa: E731
        stdin, stdout, stderr, tty = flag("stdin"), flag("stdout"), flag("stderr"), flag("tty")
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", ws_accept(key))
        self.send_header("Sec-WebSocket-Protocol", proto)
        self.end_headers()
        self.wfile.flush()
        self.close_connection = True
        ws = WS(self.rfile, self.wfile)
        try:
            self.relay(ws, proto, "%s-%s" % (name, container), cmd, stdin, stdout, stderr, tty,
                       drop_at, drop_out)
        except (OSError, EOFError, ValueError):
            pass

    def relay(self, ws, proto, target, cmd, stdin, stdout, stderr, tty, drop_at=0, drop_out=0):
        args = ["podman", "exec"] + (["-i"] if stdin else []) + (["-t"] if tty else [])
        args += [target] + cmd
        master = None
        if tty:
            master, slave = pty.openpty()
            fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
            # The pty is the command's controlling terminal: a resize
            # (TIOCSWINSZ on the master) signals podman, which passes it on.
            p = subprocess.Popen(args, stdin=slave, stdout=slave, stderr=slave,
                                 start_new_session=True,
                                 preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))
            os.close(slave)
            outs = [(master, 1)]
            in_fd = master
        else:
            p = subprocess.Popen(args, stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            outs = [(p.stdout.fileno(), 1), (p.stderr.fileno(), 2)]
            in_fd = p.stdin.fileno() if stdin else None
        want = {1: stdout, 2: stderr}

        sent = [0]

        def pump(fd, ch):
            while True:
                try:
                    b = os.read(fd, 65536)
                except OSError as e:  # a pty's master reads EIO once the child is gone
                    if e.errno != errno.EIO:
                        raise
                    b = b""
                if not b:
                    return
                if ch == 1 and drop_out:
                    sent[0] += 1
                    if sent[0] == drop_out:  # cut before this message
                        drop()
                        return
                if want[ch]:
                    try:
                        ws.send(2, bytes([ch]) + b)
                    except OSError:
                        return

        pumps = [threading.Thread(target=pump, args=o, daemon=True) for o in outs]
        for t in pumps:
            t.start()

        dropped = threading.Event()

        def drop():
            dropped.set()
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            if p.poll() is None:
                p.kill()

        def reader():
            nonlocal in_fd
            seen = 0
            while True:
                try:
                    op, msg = ws.recv()
                except (OSError, EOFError, ValueError):
                    op, msg = 8, b""
                if op == 8:
                    # The client went away: so does the command.
                    if p.poll() is None:
                        p.kill()
                    return
                if not msg:
                    continue
                ch, body = msg[0], msg[1:]
                if ch == 0 and in_fd is not None and body:
                    try:
                        os.write(in_fd, body)
                    except OSError:
                        pass
                    seen += 1
                    if drop_at and seen == drop_at:
                        threading.Timer(0.3, drop).start()
                elif ch == 255 and proto == V5 and body == b"\x00" and in_fd is not None:
                    if tty:
                        os.write(master, b"\x04")
                    else:
                        p.stdin.close()
                    in_fd = None
                elif ch == 4 and tty:
                    try:
                        size = json.loads(body)
                        fcntl.ioctl(master, termios.TIOCSWINSZ,
                                    struct.pack("HHHH", size["Height"], size["Width"], 0, 0))
                        # The kernel's SIGWINCH is lost when it comes before
                        # podman listens for it: once more, later.
                        threading.Timer(0.5, lambda: p.poll() is None and
                                        os.kill(p.pid, signal.SIGWINCH)).start()
                    except (ValueError, KeyError, OSError):
                        pass

        threading.Thread(target=reader, daemon=True).start()
        rc = p.wait()
        for t in pumps:
            t.join(5)
        if dropped.is_set():
            return
        if rc == 0:
            status = {"metadata": {}, "status": "Success"}
        else:
            status = {"metadata": {}, "status": "Failure", "reason": "NonZeroExitCode",
                      "message": "command terminated with non-zero exit code: exit status %d"
                      % rc,
                      "details": {"causes": [{"reason": "ExitCode", "message": str(rc)}]}}
        ws.send(2, b"\x03" + json.dumps(status).encode())
        ws.send(8, struct.pack("!H", 1000))
        if master is not None:
            os.close(master)
        try:
            self.connection.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def main():
    containers_conf()
    serve_api_service()
    base.Handler = Handler
    threading.Thread(target=poller, daemon=True).start()
    base.main()


if __name__ == "__main__":
    main()
