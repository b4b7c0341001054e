#!/usr/bin/python3
"""A fake Kubernetes API server for the REST client's tests (standard
library only). kubectl is run against it by the tests to hold it to the real
protocol.

Usage: fake_apiserver.py DIR [--client-cert]
  Serves HTTPS on 127.0.0.1 with DIR/server.pem + DIR/server.key (made by the
  test with openssl, signed by DIR/ca.pem). Bearer tokens are accepted when
  they equal the current contents of DIR/tokens (one per line, re-read on
  each request so a test can rotate them). With --client-cert a client
  certificate signed by DIR/ca.pem is required and is enough.
  Prints "PORT n" once listening.

Pods behave by their first container's image:
  .../ready*        Pending, then Running and Ready 0.2 s later
  .../ready-slow*   the same 1.5 s later (time for faults to happen first)
  .../nosuchimage*  Pending, waiting ImagePullBackOff, a Warning event
  .../unschedulable* Pending, PodScheduled False Unschedulable, FailedScheduling
  anything else     Pending for ever

Test controls (not Kubernetes paths):
  POST /fake/faults  {"throttle": n, "unavailable": n, "watch_gone": n,
                      "watch_error_gone": n, "drop_watch": n, "compact": true}
    throttle: the next n API requests answer 429 Retry-After: 1
    unavailable: the next n answer 503 Retry-After: 1
    watch_gone: the next n watches answer HTTP 410
    watch_error_gone: the next n watches send an ERROR event with code 410
    drop_watch: the next n watches send headers then drop the connection
    log: {"lines": n, "pace_ms": p, "stall_ms": s} how GET pods/NAME/log
          streams: n lines "log line I" (default 3), p ms apart, and s ms
          of silence after the first one
    deny: ["VERB RESOURCE[/SUBRESOURCE]", ...] SelfSubjectAccessReviews
          answer allowed false for these (every other one is allowed)
  GET /fake/requests  the requests seen: [{"method","path","auth"}]

pods/exec (a WebSocket, v5.channel.k8s.io or v4) on a Running Pod runs
nothing: it answers the command's words on stdout ("ran: a b c\n"), then a
Success status on channel 3, then a close (fake_podman.py runs real ones).
"""
import base64
import hashlib
import json
import os
import struct
import socket
import ssl
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DIR = sys.argv[1]
CLIENT_CERT = "--client-cert" in sys.argv[2:]

lock = threading.Condition()
state = {"rv": 100, "pods": {}, "history": [], "events": [], "faults": {}, "requests": [],
         "netpols": {}}


def now():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def next_rv():
    state["rv"] += 1
    return str(state["rv"])


def pb_fields(buf):
    """The fields of a protobuf message: {number: [value, ...]}, values
    bytes (length-delimited) or int (varint); others are skipped."""
    out, i = {}, 0

    def varint():
        nonlocal i
        v, shift = 0, 0
        while True:
            b = buf[i]
            i += 1
            v |= (b & 0x7f) << shift
            shift += 7
            if not b & 0x80:
                return v
    while i < len(buf):
        key = varint()
        num, wire = key >> 3, key & 7
        if wire == 0:
            val = varint()
        elif wire == 2:
            n = varint()
            val, i = buf[i:i + n], i + n
        elif wire in (1, 5):
            i += 8 if wire == 1 else 4
            continue
        else:
            raise ValueError("protobuf wire type %d" % wire)
        out.setdefault(num, []).append(val)
    return out


def ssar_from_protobuf(buf):
    """A SelfSubjectAccessReview from Kubernetes' protobuf envelope
    (runtime.Unknown{typeMeta=1, raw=2}): spec=2, resourceAttributes=1 with
    namespace=1 verb=2 group=3 version=4 resource=5 subresource=6 name=7."""
    raw = pb_fields(buf)[2][0]
    spec = pb_fields(pb_fields(raw)[2][0])
    ra = pb_fields(spec[1][0])
    names = {1: "namespace", 2: "verb", 3: "group", 4: "version", 5: "resource",
             6: "subresource", 7: "name"}
    attrs = {names[k]: v[0].decode() for k, v in ra.items() if k in names}
    return {"spec": {"resourceAttributes": attrs}}


def status_obj(code, reason, message):
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


def record(kind, pod):
    """A change to pod: a new resourceVersion and a watch event (under lock)."""
    pod["metadata"]["resourceVersion"] = next_rv()
    state["history"].append((int(pod["metadata"]["resourceVersion"]), kind,
                             json.loads(json.dumps(pod))))
    lock.notify_all()


def add_event(pod, typ, reason, message):
    name = pod["metadata"]["name"]
    ev = {"kind": "Event", "apiVersion": "v1",
          "metadata": {"name": "%s.%d" % (name, len(state["events"])),
                       "namespace": pod["metadata"]["namespace"],
                       "resourceVersion": next_rv(), "creationTimestamp": now()},
          "involvedObject": {"kind": "Pod", "name": name,
                             "namespace": pod["metadata"]["namespace"],
                             "uid": pod["metadata"]["uid"]},
          "reason": reason, "message": message, "type": typ, "count": 1,
          "firstTimestamp": now(), "lastTimestamp": now(),
          "source": {"component": "fake"}}
    state["events"].append(ev)


def behave(pod):
    """Move a new Pod along, by its image (under lock)."""
    image = pod["spec"]["containers"][0].get("image", "")
    st = pod["status"]
    cname = pod["spec"]["containers"][0].get("name", "c")
    if "nosuchimage" in image:
        add_event(pod, "Normal", "Scheduled", "Successfully assigned to fake-node")
        add_event(pod, "Warning", "Failed",
                  'Failed to pull image "%s": manifest unknown' % image)
        st["containerStatuses"] = [{"name": cname, "ready": False, "restartCount": 0,
                                    "image": image, "imageID": "",
                                    "state": {"waiting": {"reason": "ImagePullBackOff",
                                                          "message": "Back-off pulling image"}}}]
        record("MODIFIED", pod)
    elif "unschedulable" in image:
        add_event(pod, "Warning", "FailedScheduling",
                  "0/3 nodes are available: 3 Insufficient memory.")
        st["conditions"] = [{"type": "PodScheduled", "status": "False",
                             "reason": "Unschedulable",
                             "message": "0/3 nodes are available: 3 Insufficient memory."}]
        record("MODIFIED", pod)
    elif "ready" in image:
        def later():
            time.sleep(1.5 if "ready-slow" in image else 0.2)
            with lock:
                if pod["metadata"]["name"] not in state["pods"]:
                    return
                add_event(pod, "Normal", "Started", "Started container %s" % cname)
                st["phase"] = "Running"
                st["conditions"] = [{"type": "Ready", "status": "True"},
                                    {"type": "PodScheduled", "status": "True"}]
                st["containerStatuses"] = [{"name": cname, "ready": True, "restartCount": 0,
                                            "image": image, "imageID": "",
                                            "state": {"running": {"startedAt": now()}}}]
                record("MODIFIED", pod)
        threading.Thread(target=later, daemon=True).start()


def api_resources():
    verbs = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "v1",
            "resources": [
                {"name": "pods", "singularName": "pod", "namespaced": True, "kind": "Pod",
                 "verbs": verbs, "shortNames": ["po"], "categories": ["all"]},
                {"name": "events", "singularName": "event", "namespaced": True,
                 "kind": "Event", "verbs": verbs, "shortNames": ["ev"]}]}


def field_match(obj, selector):
    for term in filter(None, (selector or "").split(",")):
        key, _, want = term.partition("=")
        v = obj
        for part in key.split("."):
            v = v.get(part, {}) if isinstance(v, dict) else {}
        if v != want:
            return False
    return True


def label_match(obj, selector):
    labels = obj["metadata"].get("labels", {}) or {}
    for term in filter(None, (selector or "").split(",")):
        if "=" in term:
            k, _, v = term.partition("=")
            if labels.get(k.rstrip("=")) != v.lstrip("="):
                return False
        elif term not in labels:
            return False
    return True


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def send_json(self, code, obj, extra=None):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def fail(self, code, reason, message, extra=None):
        self.send_json(code, status_obj(code, reason, message), extra)

    def authorized(self):
        if CLIENT_CERT:
            return self.connection.getpeercert() is not None
        auth = self.headers.get("Authorization", "")
        try:
            with open(os.path.join(DIR, "tokens")) as f:
                good = [t.strip() for t in f if t.strip()]
        except OSError:
            good = []
        return auth.startswith("Bearer ") and auth[7:] in good

    def body(self):
        n = int(self.headers.get("Content-Length", "0") or 0)
        return self.rfile.read(n) if n else b""

    def handle_any(self, method):
        u = urllib.parse.urlsplit(self.path)
        q = {k: v[-1] for k, v in urllib.parse.parse_qs(u.query).items()}
        parts = [p for p in u.path.split("/") if p]
        data = self.body()
        if parts[:1] == ["fake"]:
            return self.control(method, parts, data)
        with lock:
            auth = self.headers.get("Authorization", "")
            state["requests"].append({"method": method, "path": self.path,
                                      "auth": auth[7:] if auth.startswith("Bearer ") else ""})
            if not self.authorized():
                return self.fail(401, "Unauthorized", "Unauthorized")
            f = state["faults"]
            for fault, code, reason in (("throttle", 429, "TooManyRequests"),
                                        ("unavailable", 503, "ServiceUnavailable")):
                if f.get(fault, 0) > 0:
                    f[fault] -= 1
                    return self.fail(code, reason, "the server is busy, try again",
                                     {"Retry-After": "1"})
        if len(parts) == 7 and parts[:3] == ["api", "v1", "namespaces"] and \
                parts[4] == "pods" and parts[6] == "log" and method == "GET":
            return self.pod_log(parts[3], parts[5])
        if len(parts) == 7 and parts[:3] == ["api", "v1", "namespaces"] and \
                parts[4] == "pods" and parts[6] == "exec":
            return self.echo_exec(parts[3], parts[5], urllib.parse.parse_qs(u.query))
        if parts == ["version"]:
            return self.send_json(200, {"major": "1", "minor": "32", "gitVersion": "v1.32.0-fake",
                                        "platform": "linux/amd64"})
        if parts == ["api"]:
            return self.send_json(200, {"kind": "APIVersions", "versions": ["v1"],
                                        "serverAddressByClientCIDRs": [
                                            {"clientCIDR": "0.0.0.0/0",
                                             "serverAddress": "127.0.0.1"}]})
        if parts == ["apis"]:
            return self.send_json(200, {"kind": "APIGroupList", "apiVersion": "v1",
                                        "groups": []})
        if parts == ["api", "v1"]:
            return self.send_json(200, api_resources())
        if parts == ["apis", "authorization.k8s.io", "v1", "selfsubjectaccessreviews"] and \
                method == "POST":
            return self.access_review(data)
        if len(parts) in (6, 7) and parts[:4] == ["apis", "networking.k8s.io", "v1",
                                                   "namespaces"] and parts[5] == "networkpolicies":
            return self.netpols(method, parts[4], parts[6] if len(parts) == 7 else None, data)
        if len(parts) >= 5 and parts[:3] == ["api", "v1", "namespaces"]:
            ns, res, name = parts[3], parts[4], parts[5] if len(parts) > 5 else None
            if res == "pods":
                return self.pods(method, ns, name, q, data)
            if res == "events" and method == "GET" and not name:
                with lock:
                    items = [e for e in state["events"] if e["metadata"]["namespace"] == ns
                             and field_match(e, q.get("fieldSelector"))]
                    return self.send_json(200, {"kind": "EventList", "apiVersion": "v1",
                                                "metadata": {"resourceVersion": str(state["rv"])},
                                                "items": items})
        return self.fail(404, "NotFound", "the server could not find the requested resource")

    def access_review(self, data):
        """SelfSubjectAccessReview: allowed unless the deny fault names it."""
        try:
            if data[:4] == b"k8s\x00":  # kubectl sends built-in kinds as protobuf
                review = ssar_from_protobuf(data[4:])
            else:
                review = json.loads(data)
            ra = review["spec"]["resourceAttributes"]
            verb, res = ra["verb"], ra["resource"]
        except (ValueError, KeyError, TypeError, IndexError):
            return self.fail(422, "Invalid", "SelfSubjectAccessReview is invalid: "
                             "spec.resourceAttributes with verb and resource is required")
        key = "%s %s%s" % (verb, res, "/" + ra["subresource"] if ra.get("subresource") else "")
        with lock:
            denied = key in state["faults"].get("deny", [])
        review.update({"apiVersion": "authorization.k8s.io/v1",
                       "kind": "SelfSubjectAccessReview"})
        review.setdefault("metadata", {})["creationTimestamp"] = None
        review["status"] = {"allowed": not denied}
        if denied:
            review["status"]["reason"] = "denied by the fake's deny fault"
        return self.send_json(201, review)

    def netpols(self, method, ns, name, data):
        """NetworkPolicies, kept (create, get, list, delete); what they do
        is the Podman-backed fake's (fake_podman.py)."""
        if method == "POST" and not name:
            try:
                np = json.loads(data)
                npname = np["metadata"]["name"]
                assert np["spec"]["podSelector"] is not None
            except (ValueError, KeyError, TypeError, AssertionError):
                return self.fail(422, "Invalid", "NetworkPolicy is invalid: metadata.name or "
                                 "spec.podSelector is missing")
            with lock:
                if (ns, npname) in state["netpols"]:
                    return self.fail(409, "AlreadyExists",
                                     'networkpolicies.networking.k8s.io "%s" already exists'
                                     % npname)
                np["metadata"].update({"namespace": ns, "uid": "uid-np-%s" % npname,
                                       "resourceVersion": next_rv()})
                state["netpols"][(ns, npname)] = np
            self.netpol_added(np)
            return self.send_json(201, np)
        if method == "GET" and name:
            with lock:
                np = state["netpols"].get((ns, name))
            if not np:
                return self.fail(404, "NotFound",
                                 'networkpolicies.networking.k8s.io "%s" not found' % name)
            return self.send_json(200, np)
        if method == "GET":
            with lock:
                items = [v for (n, _), v in state["netpols"].items() if n == ns]
            return self.send_json(200, {"kind": "NetworkPolicyList",
                                        "apiVersion": "networking.k8s.io/v1",
                                        "metadata": {"resourceVersion": str(state["rv"])},
                                        "items": items})
        if method == "DELETE" and name:
            with lock:
                np = state["netpols"].pop((ns, name), None)
            if not np:
                return self.fail(404, "NotFound",
                                 'networkpolicies.networking.k8s.io "%s" not found' % name)
            self.netpol_deleted(np)
            return self.send_json(200, {"kind": "Status", "apiVersion": "v1", "status": "Success"})
        return self.fail(405, "MethodNotAllowed", "the server does not allow this method")

    def netpol_added(self, np):
        pass

    def netpol_deleted(self, np):
        pass

    def pods(self, method, ns, name, q, data):
        if method == "POST" and not name:
            try:
                pod = json.loads(data)
                pname = pod["metadata"]["name"]
                assert pod["spec"]["containers"][0]["image"]
            except (ValueError, KeyError, IndexError, TypeError, AssertionError):
                return self.fail(422, "Invalid", "Pod is invalid: metadata.name or an image "
                                 "is missing")
            with lock:
                if pname in state["pods"]:
                    return self.fail(409, "AlreadyExists", 'pods "%s" already exists' % pname)
                pod["apiVersion"], pod["kind"] = "v1", "Pod"
                pod["metadata"].update({"namespace": ns, "uid": "uid-%s-%d" % (pname, state["rv"]),
                                        "creationTimestamp": now()})
                pod["status"] = {"phase": "Pending", "conditions": []}
                state["pods"][pname] = pod
                record("ADDED", pod)
                behave(pod)
                return self.send_json(201, pod)
        if method == "GET" and name:
            with lock:
                pod = state["pods"].get(name)
                if not pod or pod["metadata"]["namespace"] != ns:
                    return self.fail(404, "NotFound", 'pods "%s" not found' % name)
                return self.send_json(200, pod)
        if method == "DELETE" and name:
            with lock:
                pod = state["pods"].pop(name, None)
                if not pod:
                    return self.fail(404, "NotFound", 'pods "%s" not found' % name)
                pod["metadata"]["deletionTimestamp"] = now()
                pod["metadata"]["deletionGracePeriodSeconds"] = int(
                    q.get("gracePeriodSeconds", "30"))
                record("DELETED", pod)
                return self.send_json(200, pod)
        if method == "GET" and not name:
            if q.get("watch") in ("1", "true"):
                return self.watch(ns, q)
            with lock:
                items = [p for p in state["pods"].values() if p["metadata"]["namespace"] == ns
                         and field_match(p, q.get("fieldSelector"))
                         and label_match(p, q.get("labelSelector"))]
                return self.send_json(200, {"kind": "PodList", "apiVersion": "v1",
                                            "metadata": {"resourceVersion": str(state["rv"])},
                                            "items": items})
        return self.fail(405, "MethodNotAllowed", "the server does not allow this method")

    def echo_exec(self, ns, name, q):
        with lock:
            pod = state["pods"].get(name)
            running = pod and pod["metadata"]["namespace"] == ns and \
                pod["status"].get("phase") == "Running"
        if not running:
            return self.fail(404, "NotFound", 'pods "%s" not found or not running' % name)
        offered = [p.strip() for h in self.headers.get_all("Sec-WebSocket-Protocol", [])
                   for p in h.split(",")]
        proto = next((p for p in ("v5.channel.k8s.io", "v4.channel.k8s.io") if p in offered),
                     None)
        key = self.headers.get("Sec-WebSocket-Key")
        if self.headers.get("Upgrade", "").lower() != "websocket" or not key or not proto:
            return self.fail(400, "BadRequest", "pods/exec needs a WebSocket upgrade")
        accept = base64.b64encode(hashlib.sha1(
            key.encode() + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest()).decode()
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.send_header("Sec-WebSocket-Protocol", proto)
        self.end_headers()
        self.close_connection = True

        def frame(op, payload):
            n = len(payload)
            head = struct.pack("!BB", 0x80 | op, n) if n < 126 else \
                struct.pack("!BBH", 0x80 | op, 126, n)
            self.wfile.write(head + payload)

        frame(2, b"\x01ran: " + " ".join(q.get("command", [])).encode() + b"\n")
        frame(2, b"\x03" + json.dumps({"metadata": {}, "status": "Success"}).encode())
        frame(8, struct.pack("!H", 1000))
        self.wfile.flush()

    def pod_log(self, ns, name):
        with lock:
            pod = state["pods"].get(name)
            if not pod or pod["metadata"]["namespace"] != ns:
                return self.fail(404, "NotFound", 'pods "%s" not found' % name)
            how = dict(state["faults"].get("log") or {})
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for i in range(int(how.get("lines", 3))):
                if i == 1 and how.get("stall_ms"):
                    time.sleep(how["stall_ms"] / 1000)
                elif i and how.get("pace_ms"):
                    time.sleep(how["pace_ms"] / 1000)
                line = b"log line %d\n" % (i + 1)
                self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
        except (OSError, ssl.SSLError):
            self.close_connection = True  # the client went away

    def chunk(self, obj):
        line = (json.dumps(obj) + "\n").encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
        self.wfile.flush()

    def watch(self, ns, q):
        f = state["faults"]
        with lock:
            if f.get("watch_gone", 0) > 0:
                f["watch_gone"] -= 1
                return self.fail(410, "Expired", "too old resource version")
            # One fault per watch, so a test can count them.
            error_gone = f.get("watch_error_gone", 0) > 0
            drop = not error_gone and f.get("drop_watch", 0) > 0
            if error_gone:
                f["watch_error_gone"] -= 1
            if drop:
                f["drop_watch"] -= 1
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if error_gone:
            self.chunk({"type": "ERROR", "object": status_obj(410, "Expired",
                                                              "too old resource version")})
            self.wfile.write(b"0\r\n\r\n")
            return
        if drop:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return
        try:
            self.stream(ns, q)
        except (OSError, ssl.SSLError):
            self.close_connection = True  # the client went away

    def stream(self, ns, q):
        since = int(q.get("resourceVersion") or 0)
        deadline = time.time() + min(int(q.get("timeoutSeconds", "30")), 30)
        with lock:
            while True:
                for rv, kind, pod in state["history"]:
                    if rv > since and pod["metadata"]["namespace"] == ns and \
                            field_match(pod, q.get("fieldSelector")) and \
                            label_match(pod, q.get("labelSelector")):
                        self.chunk({"type": kind, "object": pod})
                        since = rv
                left = deadline - time.time()
                if left <= 0:
                    break
                lock.wait(left)
        self.wfile.write(b"0\r\n\r\n")

    def control(self, method, parts, data):
        with lock:
            if parts == ["fake", "faults"] and method == "POST":
                state["faults"].update(json.loads(data or b"{}"))
                return self.send_json(200, state["faults"])
            if parts == ["fake", "requests"]:
                return self.send_json(200, state["requests"])
        return self.fail(404, "NotFound", "no such control")

    def do_GET(self):
        self.handle_any("GET")

    def do_POST(self):
        self.handle_any("POST")

    def do_DELETE(self):
        self.handle_any("DELETE")

    def do_PUT(self):
        self.handle_any("PUT")

    def do_PATCH(self):
        self.handle_any("PATCH")


def main():
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.path.join(DIR, "server.pem"), os.path.join(DIR, "server.key"))
    if CLIENT_CERT:
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(os.path.join(DIR, "ca.pem"))
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    print("PORT %d" % srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
