#!/usr/bin/env bash
# Brokered secrets end to end on a real Podman service (rootful and
# rootless), over plain HTTP and HTTPS to the test's own upstreams on
# 127.0.0.1 (a CIDR rule opens loopback to the proxy; nothing leaves the
# machine):
#
#   the workload's $NAME is a stand-in, never the value; the upstream the
#   secret is for gets the value in the header (and in the query when
#   asked); an allowed upstream it is not for gets 403 naming the secret,
#   nothing reaches it, and the log records the secret's name; the value is
#   found nowhere sandpod writes or prints but its two 0600 secret files
#   (the proxy's not ours when rootful); a fork gets a stand-in of its own
#   and the origin's does nothing there; over HTTPS the proxy terminates
#   the tunnel with its own CA, which the sandbox's variables point at, and
#   verifies the upstream (--egress-ca; without it, 502 and nothing sent);
#   a fork keeps the trusted CAs and gets a CA of its own; `sandpod secret
#   NAME set|rm` changes a value (or takes it away) while it runs, a request
#   open across the change getting the new one; bad input is refused in one
#   line and leaves nothing.
#
# Usage: test_secrets_cli.sh PATH/TO/sandpod. Exits 77 (skip) when Podman
# is unavailable, unless CI=true.
set -u

SP=${1:?usage: test_secrets_cli.sh PATH/TO/sandpod}
PREFIX=sandpod-secrets
. "$(dirname "$0")/podman_lib.sh"
need_image

UPS=()
trap 'for p in "${UPS[@]}"; do kill "$p" 2>/dev/null; done; cleanup' EXIT

# Two upstreams: each records every request head it gets (to FILE.PORT)
# and answers "ok PORT".
cat >"$T/up.py" <<'EOF'
import http.server, sys
port, log = int(sys.argv[1]), sys.argv[2]
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with open(log, "a") as f:
            f.write(self.requestline + "\n" + str(self.headers) + "\n")
        body = b"ok %d\n" % port
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        with open(log, "a") as f:
            f.write(self.requestline + "\n" + str(self.headers) + "\nbody: " +
                    self.rfile.read(n).decode("latin1") + "\n")
        body = b"ok %d\n" % port
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), H)
if len(sys.argv) > 3:  # HTTPS: CERT KEY
    import ssl
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(sys.argv[3], sys.argv[4])
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
srv.serve_forever()
EOF
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
P1=$(free_port)
P2=$(free_port)
for p in "$P1" "$P2"; do
    python3 "$T/up.py" "$p" "$T/up.$p" &
    UPS+=($!)
done
for p in "$P1" "$P2"; do
    for _ in $(seq 1 100); do
        python3 -c "import socket; socket.create_connection(('127.0.0.1', $p), 1)" 2>/dev/null && break
        sleep 0.1
    done
done

CANARY="canary-$$-$RANDOM$RANDOM-value"
export SP_TEST_SECRET=$CANARY
printf 'query-%s\n' "$CANARY" >"$T/qfile"
chmod 600 "$T/qfile"

# lacks TEXT FILE: FILE does not hold TEXT.
lacks() { ! grep -qF -- "$1" "$2"; }

# One plain request through the proxy from inside sandbox $1: GET $2
# (a path and query on 127.0.0.1:$3) with header $4.
get() {
    run exec "$1" -- sh -c "printf 'GET http://127.0.0.1:$3$2 HTTP/1.1\r\nHost: 127.0.0.1:$3\r\n$4\r\n\r\n' | nc 127.0.0.1 3128"
}

S=sec-$$
RULES=(--allow "127.0.0.1:$P1" --allow "127.0.0.1:$P2")
run create --name "$S" "${RULES[@]}" --secret TOKEN=env:SP_TEST_SECRET \
    --secret-for "TOKEN=http://127.0.0.1:$P1" --secret QK=file:"$T/qfile" \
    --secret-for "QK=http://127.0.0.1:$P1" --secret-in QK=query,body
expect 0 "create with two secrets"
run exec "$S" -- sh -c 'echo "t=$TOKEN q=$QK"'
expect 0 "the variables are there"
out_lacks "$CANARY" "the workload holds no value"
TOK=$(sed -n 's/^t=\(sandpod-standin-[0-9a-f]*\) .*/\1/p' "$T/out")
QST=$(sed -n 's/.* q=\(sandpod-standin-[0-9a-f]*\)$/\1/p' "$T/out")
check "TOKEN holds a stand-in" [ "${#TOK}" = 56 ]
check "QK holds another" [ "${#QST}" = 56 -a "$QST" != "$TOK" ]

get "$S" "/v1?k=$QST" "$P1" "Authorization: Bearer $TOK"
expect 0 "a request to the host the secrets are for"
out_has "ok $P1" "it is answered"
check "the upstream got the value in the header" grep -q "Authorization: Bearer $CANARY" "$T/up.$P1"
check "... and QK's value in the query" grep -q "GET /v1?k=query-$CANARY HTTP" "$T/up.$P1"
# A body (--secret-in QK=query,body): taken whole, the value put in.
run exec "$S" -- sh -c "b='{\"k\": \"$QST\", \"t\": \"$TOK\"}'; printf 'POST http://127.0.0.1:$P1/b HTTP/1.1\r\nHost: 127.0.0.1:$P1\r\nContent-Length: %d\r\n\r\n%s' \${#b} \"\$b\" | nc 127.0.0.1 3128"
out_has "ok $P1" "a POST to the host is answered"
check "QK's value in the body, TOKEN's stand-in left (headers only)" \
    grep -qF "body: {\"k\": \"query-$CANARY\", \"t\": \"$TOK\"}" "$T/up.$P1"

get "$S" "/x" "$P2" "Authorization: Bearer $TOK"
out_has "403" "TOKEN's stand-in to an allowed host it is not for: 403"
out_has "stand-in of secret TOKEN, which is not for http://127.0.0.1:$P2" "... naming it"
check "nothing reached that host" [ ! -e "$T/up.$P2" ]
run network "$S" --log --json
check "the log records the refusal with the secret's name" python3 -c '
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
sys.exit(0 if any(r.get("secret") == "TOKEN" and r["verdict"] == "deny" for r in recs) else 1)' "$T/out"

# The value nowhere but the two secret files.
STATE=$("$SP" inspect "$S" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["state_dir"])')
check "the state folder is known" [ -d "$STATE" ]
# A session's worth of use first: a tool call that dumps the environment
# (and leaves a file of it in the workspace), a snapshot and its export.
"$SP" call "$S" shell '{"command":"env; env > /workspace/env.txt"}' >"$T/call.out" 2>&1
check "a tool call ran" grep -q "sandpod-standin-" "$T/call.out"
"$SP" snapshot "$S" --tag canary >/dev/null 2>&1
"$SP" export "$S" canary -o "$T/canary.tar" >/dev/null 2>&1
check "the snapshot exported" [ -s "$T/canary.tar" ]
check "... holds no value" lacks "$CANARY" "$T/canary.tar"
{
    "$SP" inspect "$S" --json
    "$SP" ls --json
    "$SP" network "$S" --log --json
    "$SP" logs "$S"
    "$SP" exec "$S" -- env
    "$SP" snapshots "$S" --json
    "$SP" diff "$S"
    cat "$T/call.out"
} >"$T/printed" 2>&1
check "nothing sandpod prints holds the value" lacks "$CANARY" "$T/printed"
found=$(grep -rl --exclude=secrets "$CANARY" "$STATE" 2>/dev/null)
check "no file of the state folder but the secret files holds it ($found)" [ -z "$found" ]
check "our copy is 0600" [ "$(stat -c %a "$STATE/secrets")" = 600 ]
check "the proxy's is 0600" [ "$(stat -c %a "$STATE/egress/secrets")" = 600 ]
if [ "$(id -u)" = 0 ]; then
    check "the proxy's copy is its user's, not root's" [ "$(stat -c %u "$STATE/egress/secrets")" != 0 ]
fi

# own_standin_gets_value WHAT SANDBOX: SANDBOX's $TOKEN is a stand-in of its
# own (not the first sandbox's), and a request with it gets the value.
own_standin_gets_value() {
    run exec "$2" -- sh -c 'echo "t=$TOKEN"'
    OWN=$(sed -n 's/^t=\(sandpod-standin-[0-9a-f]*\)$/\1/p' "$T/out")
    check "$1: the stand-in is its own" [ "${#OWN}" = 56 -a "$OWN" != "$TOK" ]
    : >"$T/up.$P1"
    get "$2" "/own" "$P1" "Authorization: Bearer $OWN"
    check "$1: its stand-in gets the value" grep -q "Authorization: Bearer $CANARY" "$T/up.$P1"
}

# A fork: stand-ins of its own; the origin's does nothing there.
F=$S-f
run fork --name "$F" "$S"
expect 0 "fork a sandbox with secrets"
own_standin_gets_value "the fork" "$F"
: >"$T/up.$P1"
get "$F" "/g" "$P1" "Authorization: Bearer $TOK"
check "the origin's stand-in gets nothing in the fork" grep -q "Authorization: Bearer $TOK" "$T/up.$P1"
check "... not the value" lacks "$CANARY" "$T/up.$P1"
run rm --force "$F"
expect 0 "rm the fork"

# A template keeps names and scopes, never a value: a sandbox made from it
# is refused without one, and works with one given.
run template save "$S" "sectpl-$$"
expect 0 "template save"
TDIR=$(dirname "$(dirname "$STATE")")/templates/sectpl-$$
found=$(grep -rl "$CANARY" "$TDIR" 2>/dev/null)
check "the template holds no value ($found)" [ -d "$TDIR" -a -z "$found" ]
run create --name "$S-t" --template "sectpl-$$"
check "create --template without values: refused" [ "$rc" != 0 ]
err_has "secret TOKEN of sectpl-$$ needs a value here: --secret TOKEN=env:VAR" "... naming it"
check "... leaving nothing" [ ! -e "$(dirname "$STATE")/$S-t" ]
run create --name "$S-t" --template "sectpl-$$" --secret TOKEN=env:SP_TEST_SECRET \
    --secret QK=file:"$T/qfile"
expect 0 "create --template with the values"
own_standin_gets_value "from the template" "$S-t"
run create --name "$S-t2" --template "sectpl-$$" --secret OTHER=env:SP_TEST_SECRET
err_has "--secret OTHER: sectpl-$$ has no such secret" "a value for a secret the template lacks: refused"
run rm --force "$S-t"
expect 0 "rm it"
run template rm "sectpl-$$"
expect 0 "template rm"

# Rotation while it runs: `sandpod secret NAME set|rm`. A request whose head
# is still coming when the value changes gets the new one (values are put
# in when the head is whole).
export SP_TEST_SECRET2="rotated-$CANARY"
run exec "$S" -- sh -c "rm -f /tmp/go; ( printf 'GET http://127.0.0.1:$P1/slow HTTP/1.1\r\nHost: 127.0.0.1:$P1\r\nAuthorization: Bearer $TOK\r\n'; until [ -e /tmp/go ]; do sleep 0.05; done; printf '\r\n' ) | nc 127.0.0.1 3128 >/tmp/slow.out 2>&1 &"
: >"$T/up.$P1"
run secret "$S" set TOKEN=env:SP_TEST_SECRET2
expect 0 "secret set: a new value while the sandbox runs"
err_has "the new value is in force" "... says so"
"$SP" exec "$S" -- touch /tmp/go >/dev/null 2>&1
for _ in $(seq 1 100); do
    grep -q "/slow" "$T/up.$P1" 2>/dev/null && break
    sleep 0.1
done
check "a request open across the change gets the new value" \
    grep -q "Authorization: Bearer rotated-$CANARY" "$T/up.$P1"
: >"$T/up.$P1"
get "$S" "/after" "$P1" "Authorization: Bearer $TOK"
check "the next request gets the new value" grep -q "Authorization: Bearer rotated-$CANARY" "$T/up.$P1"
check "our copy has it (a fork reads it there)" \
    grep -q "$(printf '%s' "rotated-$CANARY" | od -An -tx1 | tr -d ' \n')" "$STATE/secrets"
run secret "$S" rm QK --json
json "secret rm --json" "j['ok'] is True and j['secrets'] == ['QK']"
: >"$T/up.$P1"
get "$S" "/q?k=$QST" "$P1" "X-A: b"
check "a secret taken away: its stand-in goes as it is" grep -q "GET /q?k=$QST HTTP" "$T/up.$P1"
check "... not the value" lacks "query-$CANARY" "$T/up.$P1"
run secret "$S" set NOPE=env:SP_TEST_SECRET
check "set of a secret the sandbox lacks: refused" [ "$rc" = 1 ]
err_has "has no secret NOPE" "... naming it"
run secret "$S" set TOKEN=env:SP_UNSET_$$
check "set from an unset variable: refused" [ "$rc" = 1 ]
: >"$T/up.$P1"
get "$S" "/still" "$P1" "Authorization: Bearer $TOK"
check "... the value in force stays" grep -q "Authorization: Bearer rotated-$CANARY" "$T/up.$P1"
run secret "$S" set TOKEN
expect 2 "set without a source: usage"
run secret "$S" frob TOKEN
expect 2 "neither set nor rm: usage"
run secret "$S" rm TOKEN=env:X
expect 2 "rm takes a name alone"
found=$(grep -rl --exclude=secrets "rotated-$CANARY" "$STATE" 2>/dev/null)
check "the new value in no file but the secret files ($found)" [ -z "$found" ]

# The proxy holds values: it makes no core file and is not ptrace-able by
# its own user (its /proc files are not that user's).
PROXY=$(podman ps --filter "label=sandpod.name=$S" --filter label=sandpod.role=egress \
    --format '{{.Names}}' | head -n 1)
PPID_=$(podman inspect --format '{{.State.Pid}}' "$PROXY" 2>/dev/null)
check "the proxy is not dumpable" [ -n "$PPID_" -a "$(stat -c %u "/proc/$PPID_/mem" 2>/dev/null)" != "$(stat -c %u "$STATE/egress/secrets")" ]

# ------------------------------------------------------------------ HTTPS --
# An HTTPS upstream on 127.0.0.1 with a certificate of a CA of the test's
# (given with --egress-ca; the host's bundle does not hold it). A client on
# this host speaks through the sandbox: its bytes go in and out of `sandpod
# exec -i NAME -- nc 127.0.0.1 3128` (the workload's proxy port), and it
# trusts the CA certificate read from inside the sandbox.
EC=(-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes)
openssl req -x509 "${EC[@]}" -keyout "$T/ca.key" -out "$T/ca.pem" -subj "/CN=secrets test CA" \
    -days 2 -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign \
    >/dev/null 2>&1
openssl req "${EC[@]}" -keyout "$T/srv.key" -out "$T/srv.csr" -subj /CN=127.0.0.1 >/dev/null 2>&1
printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >"$T/srv.ext"
openssl x509 -req -in "$T/srv.csr" -CA "$T/ca.pem" -CAkey "$T/ca.key" -CAcreateserial \
    -out "$T/srv.pem" -days 2 -extfile "$T/srv.ext" >/dev/null 2>&1
check "the test's CA and server certificate" [ -s "$T/srv.pem" ]
P3=$(free_port)
python3 "$T/up.py" "$P3" "$T/up.$P3" "$T/srv.pem" "$T/srv.key" &
UPS+=($!)
for _ in $(seq 1 100); do
    python3 -c "import socket; socket.create_connection(('127.0.0.1', $P3), 1)" 2>/dev/null && break
    sleep 0.1
done
cat >"$T/tls_get.py" <<'PY'
import socket, ssl, subprocess, sys
sp, name, port, ca, header = sys.argv[1:6]
a, b = socket.socketpair()
p = subprocess.Popen([sp, "exec", "-i", name, "--", "nc", "127.0.0.1", "3128"], stdin=b, stdout=b)
b.close()
a.settimeout(30)
target = "127.0.0.1:%s" % port
a.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, target)).encode())
head = b""
while b"\r\n\r\n" not in head:
    d = a.recv(1)  # a byte at a time: none of the TLS that follows
    if not d:
        break
    head += d
status = head.split(b"\r\n")[0].decode("latin1")
print("connect:", status)
if " 200 " not in status:
    sys.exit(3)
ctx = ssl.create_default_context(cafile=ca)
try:
    t = ctx.wrap_socket(a, server_hostname="127.0.0.1")
except (ssl.SSLError, OSError) as e:
    print("tls:", e)
    sys.exit(4)
t.sendall(("GET /tls HTTP/1.1\r\nHost: %s\r\n%s\r\n\r\n" % (target, header)).encode())
data = b""
try:
    while True:
        d = t.recv(65536)
        if not d:
            break
        data += d
except (ssl.SSLError, OSError):
    pass
sys.stdout.write(data.decode("latin1"))
p.wait(timeout=30)
PY
# tls_get NAME HEADER: GET https://127.0.0.1:$P3/tls from inside NAME,
# trusting NAME's /.sandpod/egress/ca.pem.
tls_get() {
    "$SP" exec "$1" -- cat /.sandpod/egress/ca.pem >"$T/inside-ca.pem" 2>/dev/null
    python3 "$T/tls_get.py" "$SP" "$1" "$P3" "$T/inside-ca.pem" "$2" >"$T/out" 2>"$T/err"
    rc=$?
}

# tls_get_own NAME: the same with NAME's own stand-in of TOKEN, the
# upstream's record emptied first.
tls_get_own() {
    local own
    own=$("$SP" exec "$1" -- sh -c 'echo "$TOKEN"' 2>/dev/null)
    : >"$T/up.$P3"
    tls_get "$1" "Authorization: Bearer $own"
}

H=$S-tls
run create --name "$H" --allow "127.0.0.1:$P3" --secret TOKEN=env:SP_TEST_SECRET \
    --secret-for "TOKEN=127.0.0.1:$P3" --egress-ca "$T/ca.pem"
expect 0 "create with a secret over HTTPS and --egress-ca"
run exec "$H" -- sh -c 'echo "t=$TOKEN"; echo "ssl=$SSL_CERT_FILE"; echo "node=$NODE_EXTRA_CA_CERTS"; echo "curl=$CURL_CA_BUNDLE"'
HTOK=$(sed -n 's/^t=\(sandpod-standin-[0-9a-f]*\)$/\1/p' "$T/out")
check "TOKEN holds a stand-in" [ "${#HTOK}" = 56 ]
out_has "ssl=/.sandpod/egress/ca-bundle.pem" "SSL_CERT_FILE names the bundle with the proxy's CA"
out_has "curl=/.sandpod/egress/ca-bundle.pem" "... CURL_CA_BUNDLE too"
out_has "node=/.sandpod/egress/ca.pem" "NODE_EXTRA_CA_CERTS names the proxy's CA alone"
run exec "$H" -- sh -c 'grep -c "BEGIN CERTIFICATE" /.sandpod/egress/ca-bundle.pem'
check "the bundle holds the host's CAs and the proxy's" [ "$(cat "$T/out")" -ge 2 ]
HSTATE=$(dirname "$STATE")/$H
check "the proxy trusts the given CA" \
    grep -qF "$(sed -n 2p "$T/ca.pem")" "$HSTATE/egress/upstream-ca.pem"
tls_get "$H" "Authorization: Bearer $HTOK"
expect 0 "HTTPS through the proxy, its certificate verified against the sandbox's CA"
out_has "ok $P3" "it is answered"
check "the HTTPS upstream got the value" grep -q "Authorization: Bearer $CANARY" "$T/up.$P3"
: >"$T/up.$P3"
tls_get "$H" "Authorization: Bearer $TOK"
check "another sandbox's stand-in goes as it is (it means nothing here)" \
    grep -q "Authorization: Bearer $TOK" "$T/up.$P3"
check "... not the value" lacks "$CANARY" "$T/up.$P3"
tls_get "$H" "X-Nothing: 1"
out_has "ok $P3" "a request without a stand-in is answered too"
"$SP" network "$H" --log --json >"$T/hlog" 2>&1
check "the log says the TLS was terminated and names the secret" python3 -c '
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
sys.exit(0 if any(r.get("tls") == "terminated" and r.get("secret") == "TOKEN" for r in recs) else 1)' "$T/hlog"
found=$(grep -rl --exclude=secrets "$CANARY" "$HSTATE" 2>/dev/null)
check "no file of its state folder but the secret files holds the value ($found)" [ -z "$found" ]
found=$(grep -rlI "PRIVATE KEY" "$HSTATE" 2>/dev/null)
check "no private key in its state folder: the proxy's CA key is in its memory only ($found)" \
    [ -z "$found" ]

# A fork keeps the CAs the proxy trusts, and gets a CA of its own.
run fork --name "$H-f" "$H"
expect 0 "fork the HTTPS sandbox"
tls_get_own "$H-f"
out_has "ok $P3" "the fork brokers over HTTPS (its proxy trusts the given CA)"
check "... the value went" grep -q "Authorization: Bearer $CANARY" "$T/up.$P3"
check "the fork's CA is not the origin's" \
    [ "$("$SP" exec "$H-f" -- cat /.sandpod/egress/ca.pem)" != "$(cat "$HSTATE/egress/run/ca.pem")" ]
run rm --force "$H-f"
# So does a template of it (with the value given again).
run template save "$H" "htpl-$$"
expect 0 "template save of the HTTPS sandbox"
run create --name "$H-t" --template "htpl-$$" --secret TOKEN=env:SP_TEST_SECRET
expect 0 "create --template with the value"
tls_get_own "$H-t"
out_has "ok $P3" "from the template: brokered over HTTPS (the given CA came along)"
run rm --force "$H-t"
run template rm "htpl-$$"

# Without --egress-ca the upstream's certificate does not verify: 502, and
# the request never reaches it.
run create --name "$H-n" --allow "127.0.0.1:$P3" --secret TOKEN=env:SP_TEST_SECRET \
    --secret-for "TOKEN=127.0.0.1:$P3"
expect 0 "create over HTTPS without --egress-ca"
tls_get_own "$H-n"
out_has "502" "an upstream the proxy cannot verify: 502"
out_has "certificate" "... naming the certificate"
check "... nothing reached it" [ ! -s "$T/up.$P3" ]
run rm --force "$H-n"
run rm --force "$H"
expect 0 "rm the HTTPS sandbox"

printf 'not a certificate\n' >"$T/notpem"

# Bad input: one line, nothing left.
bad() {
    local what=$1 needle=$2
    shift 2
    run create --name "$S-bad" "$@"
    check "$what: refused" [ "$rc" != 0 ]
    err_has "$needle" "$what: says why"
    check "$what: nothing left" [ ! -e "$(dirname "$STATE")/$S-bad" ]
}
bad "no rules" "give egress rules too" --secret TOKEN=env:SP_TEST_SECRET \
    --secret-for TOKEN=http://127.0.0.1:1
bad "an unset variable" "the variable SP_NOT_SET_$$ is not set" "${RULES[@]}" \
    --secret TOKEN=env:SP_NOT_SET_$$ --secret-for TOKEN=http://127.0.0.1:1
bad "a value on the command line" "is not env:VAR or file:PATH" "${RULES[@]}" \
    --secret TOKEN=hunter2 --secret-for TOKEN=http://127.0.0.1:1
bad "no host" "secret TOKEN is for no host" "${RULES[@]}" --secret TOKEN=env:SP_TEST_SECRET
bad "a host for no secret" "no --secret OTHER" "${RULES[@]}" --secret TOKEN=env:SP_TEST_SECRET \
    --secret-for TOKEN=http://127.0.0.1:1 --secret-for OTHER=x.test
bad "an https:// scope" "a scope is HOST[:PORT]" "${RULES[@]}" --secret TOKEN=env:SP_TEST_SECRET \
    --secret-for TOKEN=https://x.test
bad "a name sandpod sets" "the name is a variable's" "${RULES[@]}" \
    --secret HTTPS_PROXY=env:SP_TEST_SECRET --secret-for HTTPS_PROXY=x.test
bad "a missing file" "$T/nofile" "${RULES[@]}" --secret TOKEN=file:"$T/nofile" \
    --secret-for TOKEN=x.test
bad "--secret-in somewhere else" "write NAME=query, NAME=body or NAME=query,body" "${RULES[@]}" \
    --secret TOKEN=env:SP_TEST_SECRET --secret-for TOKEN=x.test --secret-in TOKEN=path
bad "--egress-ca without secrets" "give --secret and --secret-for too" "${RULES[@]}" \
    --egress-ca "$T/ca.pem"
bad "--egress-ca with plain-HTTP secrets only" "every secret here is for http://" "${RULES[@]}" \
    --secret TOKEN=env:SP_TEST_SECRET --secret-for TOKEN=http://127.0.0.1:1 --egress-ca "$T/ca.pem"
bad "--egress-ca of a missing file" "$T/nofile" "${RULES[@]}" --secret TOKEN=env:SP_TEST_SECRET \
    --secret-for TOKEN=x.test --egress-ca "$T/nofile"
bad "--egress-ca of a file with no certificate" "no PEM certificate in it" "${RULES[@]}" \
    --secret TOKEN=env:SP_TEST_SECRET --secret-for TOKEN=x.test --egress-ca "$T/notpem"

run rm --force "$S"
expect 0 "rm"
check "its folder is gone, secrets with it" [ ! -e "$STATE" ]
finish
