#!/usr/bin/env bash
# End-to-end tests of egress rules on a real Podman service: a sandbox
# made with --allow reaches exactly what its rules allow through its own
# proxy, and nothing without it (no route, no DNS, no UDP, no proxy
# variables); rules change live; the proxy lives and dies with the
# sandbox (stop, start, a proxy container removed by hand, rm); a fork
# keeps its origin's rules; two sandboxes share nothing; bad input is
# refused with one line and leaves nothing.
#
# The upstream servers are the test's own and nothing leaves the machine:
# as root, in a network namespace it makes, on a /24 of 198.18.0.0/15 that
# no interface or route of the machine uses (checked); otherwise (the
# rootless run) on 127.0.0.1, where a CIDR rule must name them (loopback is
# refused to any name rule).
#
# Usage: test_egress_cli.sh PATH/TO/sandpod [PATH/TO/egress_client]
# (the static client of tests/bench: with it, 10,000 connections are opened
# from inside a sandbox and left open). Exits 77 (skip) when Podman is
# unavailable, unless CI=true.
set -u

SP=${1:?usage: test_egress_cli.sh PATH/TO/sandpod [PATH/TO/egress_client]}
FLOOD=${2:-}

PREFIX=sandpod-egress
. "$(dirname "$0")/podman_lib.sh"
need_image

NS=
VETH=
UPS=()
stop_upstreams() {
    local p
    for p in "${UPS[@]}"; do kill "$p" 2>/dev/null; done
    [ -n "$VETH" ] && ip link del "$VETH" 2>/dev/null
    [ -n "$NS" ] && ip netns del "$NS" 2>/dev/null
}
trap 'stop_upstreams; cleanup' EXIT

# An HTTP server that answers every GET with "hello from NAME" and an echo
# server on another port; "ip" is where they listen.
cat >"$T/up.py" <<'EOF'
import http.server, socket, socketserver, sys, threading
ip, hport, eport = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"hello from upstream " + self.path.encode() + b"\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
class E(socketserver.BaseRequestHandler):
    def handle(self):
        while True:
            b = self.request.recv(65536)
            if not b:
                return
            self.request.sendall(b)
socketserver.ThreadingTCPServer.allow_reuse_address = True
http.server.ThreadingHTTPServer.allow_reuse_address = True
e = socketserver.ThreadingTCPServer((ip, eport), E)
threading.Thread(target=e.serve_forever, daemon=True).start()
http.server.ThreadingHTTPServer((ip, hport), H).serve_forever()
EOF

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

HPORT=8080
EPORT=9000
if [ "$(id -u)" = 0 ] && command -v ip >/dev/null; then
    # A /24 of 198.18.0.0/15 no address or route of this machine touches.
    NET=
    for _ in $(seq 1 20); do
        cand="198.$((18 + RANDOM % 2)).$((RANDOM % 256))"
        if ! ip -4 addr | grep -qF " $cand." && ! ip -4 route | grep -qF "$cand."; then
            NET=$cand
            break
        fi
    done
    [ -n "$NET" ] || skip "no free /24 in 198.18.0.0/15"
    NS=speg$$
    VETH=speg$$h
    ip netns add "$NS" && ip link add "$VETH" type veth peer name "speg$$n" &&
        ip link set "speg$$n" netns "$NS" && ip addr add "$NET.1/24" dev "$VETH" &&
        ip link set "$VETH" up && ip netns exec "$NS" ip addr add "$NET.2/24" dev "speg$$n" &&
        ip netns exec "$NS" ip link set "speg$$n" up && ip netns exec "$NS" ip link set lo up ||
        skip "cannot make a network namespace"
    UP=$NET.2
    HOSTSIDE=$NET.1
    ip netns exec "$NS" python3 "$T/up.py" "$UP" "$HPORT" "$EPORT" &
    UPS+=($!)
    EXTRA=()
else
    UP=127.0.0.1
    HOSTSIDE=
    HPORT=$(free_port)
    EPORT=$(free_port)
    python3 "$T/up.py" "$UP" "$HPORT" "$EPORT" &
    UPS+=($!)
    # Loopback opens to a network rule only.
    EXTRA=(--allow "127.0.0.1:$HPORT" --allow "127.0.0.1:$EPORT")
fi
# The host reaches both kinds (the veth's host side routes to the namespace).
for _ in $(seq 1 100); do
    python3 -c "import socket; socket.create_connection(('$UP', $HPORT), 1)" 2>/dev/null && break
    sleep 0.1
done
printf '%s up.test other.test\n127.0.0.1 lo.test\n169.254.169.254 meta.test\n' "$UP" >"$T/hosts"
[ -n "$HOSTSIDE" ] && printf '%s self.test\n' "$HOSTSIDE" >>"$T/hosts"

# What the proxy answers, whole (busybox wget shows no body of a 403):
# one plain request through it, from inside sandbox $1.
via_proxy() {
    local host=${3%%:*}
    run exec "$1" -- sh -c "printf 'GET $2 HTTP/1.1\r\nHost: $3\r\n\r\n' | nc 127.0.0.1 3128"
}

A=eg-a-$$
run create --name "$A" --allow up.test --allow lo.test --allow meta.test --allow self.test \
    "${EXTRA[@]}" --egress-hosts "$T/hosts"
expect 0 "create with --allow"

# ------------------------------------------------------- what passes --
run exec "$A" -- wget -q -O - "http://up.test:$HPORT/one"
out_is 'hello from upstream /one\n' "an allowed name through http_proxy"
run exec "$A" -- sh -c "printf 'ping\n' | nc $UP $EPORT"
expect_rc 1 "nc, which knows no proxy, reaches nothing, even an allowed upstream"

# ------------------------------------------------------ what does not --
run exec "$A" -- wget -q -O - "http://other.test:$HPORT/"
expect_rc 1 "a name no rule allows"
run exec "$A" -- sh -c "wget -O - http://other.test:$HPORT/ 2>&1"
out_has "403" "refused with a 403"
# Straight to an address off the container (rootless: the host's own; the
# container's 127.0.0.1 is its own loopback).
DIRECT=$UP
[ -n "$NS" ] || DIRECT=$(ip -4 route get 1.1.1.1 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p')
[ -n "$DIRECT" ] || DIRECT=$(hostname -I 2>/dev/null | awk "{print \$1}")
run exec "$A" -- sh -c "env -u http_proxy -u HTTP_PROXY wget -q -O - http://$DIRECT:$HPORT/ 2>&1"
expect_rc 1 "no proxy variables: no way out"
out_has "unreachable" "... the network is unreachable, at once"
run exec "$A" -- sh -c "echo x | nc -u -w 1 $UP 53 2>&1; ping -c 1 -W 1 $UP 2>&1"
out_lacks "bytes from" "no ICMP out"
run exec "$A" -- sh -c "nslookup up.test 2>&1 || true"
out_lacks "Name:" "DNS from inside answers nothing"
via_proxy "$A" "http://lo.test:$((HPORT + 1))/" "lo.test:$((HPORT + 1))"
out_has "127.0.0.1 is loopback" "a name that resolves to loopback is refused (rebinding)"
via_proxy "$A" "http://meta.test/" "meta.test"
out_has "link-local (cloud metadata)" "the metadata address is refused by name"
via_proxy "$A" "http://169.254.169.254/latest/" "169.254.169.254"
out_has "403 Forbidden" "... and as a literal"
if [ -n "$HOSTSIDE" ]; then
    via_proxy "$A" "http://self.test:$HPORT/" "self.test:$HPORT"
    out_has "an address of this host" "a name resolving to this host's own address is refused"
    via_proxy "$A" "http://up.test:$((HPORT + 2))/" "up.test:$((HPORT + 2))"
    out_has "502 Bad Gateway" "any port of an allowed name passes; a closed one fails at once"
else
    via_proxy "$A" "http://up.test:$((HPORT + 2))/" "up.test:$((HPORT + 2))"
    out_has "403 Forbidden" "a loopback port no rule names is refused"
fi
via_proxy "$A" "http://up.test:$HPORT/" "other.test:$HPORT"
out_has "the Host header does not name" "a Host header that is not the URL's host"

# ----------------------------------------------------- live changes --
B=eg-b-$$
run create --name "$B" --deny up.test --egress-hosts "$T/hosts"
expect 0 "create with only --deny (everything refused)"
run exec "$B" -- wget -q -O - "http://up.test:$HPORT/"
expect_rc 1 "sandbox B does not reach what A's rules allow (nothing shared)"
run network "$B" --remove up.test --allow up.test "${EXTRA[@]}"
expect 0 "network --remove --allow"
out_has "allow up.test" "the new policy is printed"
out_lacks "deny up.test" "... without the removed rule"
run exec "$B" -- wget -q -O - "http://up.test:$HPORT/live"
out_is 'hello from upstream /live\n' "a live allow is in force, no restart"
run network "$B" --deny up.test
expect 0 "network --deny"
via_proxy "$B" "http://up.test:$HPORT/" "up.test:$HPORT"
out_has "denied by --deny 'up.test'" "a live deny wins, and names its rule"
run network "$B" --json
json "the policy as JSON" 'j["policy"][0] == {"verdict": "deny", "rule": "up.test"}'
run network "$B" --remove nothere
expect 1 "removing a rule it does not have"
err_has "no such rule" "... says so"
run network "$B" --allow 'exa mple.com'
expect 2 "a malformed rule is a usage error"
run network "$B" --log --json
check "the log has one record per connection, with the deciding rule" python3 -c '
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
assert any(r["verdict"] == "allow" and r["host"] == "up.test" and r["down"] > 0 for r in recs), recs
assert any(r["verdict"] == "deny" and r["rule"] == "up.test" for r in recs), recs
' "$T/out"
run network "$B" --log
out_has "denied by --deny 'up.test'" "the log as text says why"

# -------------------------------------------------------------- flood --
# 10,000 connections from inside, left open without a byte (ten processes:
# a sandbox's process may hold 1024 descriptors): the proxy holds at most its
# bound and answers the rest with a 503 at once (the silent ones it holds
# are closed at its head time out, 10 s), and once they are gone the
# sandbox is served again.
if [ -n "$FLOOD" ] && [ -x "$FLOOD" ]; then
    mkdir -p "$T/flood"
    cp "$FLOOD" "$T/flood/egress_client"
    run create --name "$A-fl" --allow up.test "${EXTRA[@]}" --egress-hosts "$T/hosts" \
        --mount "src=$T/flood"
    expect 0 "create the flood's sandbox"
    run exec "$A-fl" -- sh -c "
        pids=''
        for i in 0 1 2 3 4 5 6 7 8 9; do
            /workspace/egress_client flood 1000 127.0.0.1:3128 8 /tmp/ready\$i >/tmp/out\$i &
            pids=\"\$pids \$!\"
        done
        n=0
        while [ \$(ls /tmp/ready* 2>/dev/null | wc -l) -lt 10 ] && [ \$n -lt 900 ]; do
            sleep 0.1; n=\$((n + 1))
        done
        cat /tmp/out*
        kill \$pids 2>/dev/null; wait"
    check "the proxy refused at once nearly all of 10,000 open connections (its bound held)" python3 -c '
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
assert len(recs) == 10, recs
total = sum(r["opened"] + r["failed_to_open"] for r in recs)
held = sum(r["held"] for r in recs)
gone = sum(r["refused"] + r["closed"] for r in recs)
refused = sum(r["refused"] for r in recs)
# Each process judges its connections a second after opening them, and the
# proxy frees the silent ones at its 10 s head time out for others: over
# the flood it may have held its bound more than once, never more at once
# (test_egress_proxy checks that exactly); without a bound nothing would
# have been refused.
assert total == 10000 and refused >= 9000, recs
print("held", held, "refused or closed", gone, file=sys.stderr)
' "$T/out"
    run exec "$A-fl" -- sh -c "n=0; until wget -q -O - http://up.test:$HPORT/after 2>/dev/null; do
        n=\$((n + 1)); [ \$n -gt 100 ] && exit 1; sleep 0.1; done"
    out_is 'hello from upstream /after\n' "once the flood is gone the sandbox is served again"
    fl=$(podman ps --format '{{.Names}}' | grep -- "-$A-fl-[0-9a-f]*-egress$")
    check "the proxy is still up after the flood" test -n "$fl"
    run rm --force "$A-fl"
    expect 0 "rm the flood's sandbox"
fi

# ------------------------------------------------ lifetime of the proxy --
# Making B swept the service for orphans: A's proxy is A's, not one.
run gc
expect 0 "gc"
proxy_name() { podman ps -a --format '{{.Names}}' | grep -- "-$1-[0-9a-f]*-egress$"; }
proxies() { podman inspect -f '{{.State.Status}}' "$(proxy_name "$1")"; }
run stop "$A"
expect 0 "stop"
st=$(proxies "$A" 2>&1)
check "the proxy stops with the sandbox ($st)" test "$st" = exited
run start "$A"
expect 0 "start"
st=$(proxies "$A")
check "the proxy starts with the sandbox ($st)" test "$st" = running
run exec "$A" -- wget -q -O - "http://up.test:$HPORT/again"
out_is 'hello from upstream /again\n' "egress works after stop and start"
podman rm -f "$(proxy_name "$A")" >/dev/null 2>&1
run restart "$A"
expect 0 "restart after the proxy container was removed (a reboot's stand-in)"
run exec "$A" -- wget -q -O - "http://up.test:$HPORT/remade"
out_is 'hello from upstream /remade\n' "the proxy is made again"

# --------------------------------------------------------------- fork --
run fork "$A" --name "$A-f"
expect 0 "fork"
run network "$A-f"
out_has "allow up.test" "the fork keeps its origin's rules"
run exec "$A-f" -- wget -q -O - "http://up.test:$HPORT/fork"
out_is 'hello from upstream /fork\n' "the fork has a proxy of its own"
run exec "$A-f" -- wget -q -O - "http://other.test:$HPORT/"
expect_rc 1 "... that refuses what the origin's refuses"

# -------------------------------------------------------- setup-allow --
S=eg-s-$$
run create --name "$S" --allow up.test "${EXTRA[@]}" --egress-hosts "$T/hosts" \
    --setup-allow other.test --setup "wget -q -O /workspace/got http://other.test:$HPORT/setup"
expect 0 "create --setup-allow: setup reaches a wider list"
run exec "$S" -- cat /workspace/got
out_is 'hello from upstream /setup\n' "... what setup fetched is in the workspace"
run exec "$S" -- wget -q -O - "http://other.test:$HPORT/"
expect_rc 1 "the sandbox does not keep the setup's rule"
run network "$S"
out_lacks "other.test" "... and its policy does not list it"
run rm --force "$S"
expect 0 "rm $S"
run create --name bad-$$ --setup-allow up.test --setup true
expect 1 "--setup-allow without rules"
err_has "--setup-allow widens" "... says why"

# ----------------------------------------------------------- template --
run template save "$A" "tpl-$$"
expect 0 "template save"
run template inspect "tpl-$$"
out_has "egress:     allow up.test" "the template records the rules"
run create --template "tpl-$$" --name "$A-t"
expect 0 "create --template"
run exec "$A-t" -- wget -q -O - "http://up.test:$HPORT/tpl"
out_is 'hello from upstream /tpl\n' "a sandbox from the template has the rules and the hosts file"
run exec "$A-t" -- wget -q -O - "http://other.test:$HPORT/"
expect_rc 1 "... and refuses the rest"
run rm --force "$A-t"
expect 0 "rm the template's sandbox"
run template rm "tpl-$$"
expect 0 "template rm"

# ---------------------------------------- --network default stays off --
# A server on all of this host's addresses, and a neighbour sandbox.
HOSTPORT=$(free_port)
python3 -m http.server --bind 0.0.0.0 "$HOSTPORT" >/dev/null 2>&1 &
UPS+=($!)
HOSTIP=$(ip -4 route get 1.1.1.1 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p')
[ -n "$HOSTIP" ] || HOSTIP=$(hostname -I 2>/dev/null | awk '{print $1}')
D=eg-d-$$
run create --name "$D" --network default
expect 0 "create --network default"
run create --name "$D-n" --network default
expect 0 "a neighbour"
NIP=$(podman inspect -f '{{.NetworkSettings.IPAddress}}' "$(podman ps --format '{{.Names}}' | grep -- "-$D-n-[0-9a-f]*$")")
for _ in $(seq 1 50); do
    python3 -c "import socket; socket.create_connection(('$HOSTIP', $HOSTPORT), 1)" 2>/dev/null && break
    sleep 0.1
done
run exec "$D" -- sh -c "printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 3 $HOSTIP $HOSTPORT 2>&1"
out_lacks "200 OK" "--network default does not reach a service on this host's address"
out_has "refused" "... and fails at once"
if [ -n "$NS" ]; then
    run exec "$D" -- sh -c "printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 3 $UP $HPORT"
    out_has "200 OK" "--network default still reaches the world (the namespace's upstream)"
    run exec "$D" -- sh -c "printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 3 $HOSTSIDE $HPORT 2>&1"
    out_lacks "200 OK" "... but not the host's side of the veth"
fi
run exec "$D" -- sh -c "nc -w 3 169.254.169.254 80 </dev/null 2>&1; echo rc=\$?"
out_has "rc=1" "the metadata address is refused"
if [ -n "$NIP" ]; then
    run exec "$D" -- sh -c "nc -w 3 $NIP 22 </dev/null 2>&1; echo rc=\$?"
    out_has "refused" "another sandbox's address is refused"
fi
run restart "$D"
expect 0 "restart (a new network namespace)"
run exec "$D" -- sh -c "printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 3 $HOSTIP $HOSTPORT 2>&1"
out_lacks "200 OK" "the rules hold after a restart"
for s in "$D" "$D-n"; do
    run rm --force "$s"
    expect 0 "rm $s"
done

# ------------------------------------------------------------ refusals --
run create --name bad-$$ --allow 'a b'
expect 2 "create with a malformed rule"
check "nothing made" test ! -e "$SANDPOD_HOME/sandboxes/bad-$$"
run create --name bad-$$ --allow up.test --network default
expect 1 "rules with --network default"
err_has "leave --network at none" "... says why"
check "nothing made" test ! -e "$SANDPOD_HOME/sandboxes/bad-$$"
C=eg-c-$$
run create --name "$C"
expect 0 "a sandbox without rules"
run network "$C"
out_has "has no egress policy" "network shows there is none"
run network "$C" --allow up.test
expect 1 "rules cannot be added to a sandbox made without"

# ----------------------------------------------------------------- rm --
for s in "$A-f" "$A" "$B" "$C"; do
    run rm --force "$s"
    expect 0 "rm $s"
done
check "no proxy container is left" test -z "$(podman ps -a --format '{{.Names}}' | grep -- "-eg-[abc]-$$-.*-egress")"

finish
