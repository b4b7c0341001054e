#!/usr/bin/env bash
# Egress rules on a kubernetes engine, through the Podman-backed fake (which
# enforces the NetworkPolicies sandpod makes by where it puts each Pod; see
# fake_podman.py): the sandbox's proxy is a Pod of its own, and the
# workload's Pod may reach that Pod alone.
#
#   an allowed name (from --egress-hosts) is reached through the proxy; an
#   unlisted name gets 403 and is never reached; the upstream's address
#   without the proxy, and DNS, are unreachable from the workload; a bad
#   rule is refused with nothing made; `network` shows the policy and
#   changes it live (a deny in force before the call returns, then the
#   allow back); `network --log` has the proxy's records, and --follow
#   shows one made while it runs; ls shows one
#   sandbox and gc takes neither Pod for an orphan; a fork gets the rules
#   and a proxy of its own; rm takes the proxy's Pod and its
#   NetworkPolicies along; a sandbox without rules makes no proxy, and
#   reaches the API service's address directly, which a sandbox with rules
#   did not; on a cluster that does not enforce NetworkPolicies (the fake's
#   ignore_netpol fault) a sandbox with rules is refused in one line, with
#   nothing left, unless the engine accepts "netpol".
#
# Usage: test_engine_egress.sh PATH/TO/sandpod
set -u

SP=${1:?usage: test_engine_egress.sh PATH/TO/sandpod}
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
PREFIX=sandpod-egress-kube
. "$SRC/tests/cmd/podman_lib.sh"
podman info >/dev/null 2>&1 || skip "podman does not work for $(id -un): $(podman info 2>&1 | tail -n 1)"
. "$HERE/fake_lib.sh"
fake_engine "eg$$-"
E=eg$$-e
UP=sandpod-egress-up-$$
trap 'podman rm -f -t 0 "$UP" >/dev/null 2>&1; fake_engine_cleanup' EXIT

# The upstream: a web server on Podman's default network, where the proxy's
# Pod is too. Its address is a private one, so the rules name it by CIDR
# as well as by name (a name resolving to a private address is refused
# otherwise: rebinding).
CONTAINERS_CONF=$T/containers.conf podman run -d --name "$UP" --network podman "$WIMG" sh -c \
    'mkdir -p /tmp/www && echo hello-upstream >/tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www' \
    >/dev/null 2>"$T/up.err" || skip "cannot run the upstream: $(tail -n 1 "$T/up.err")"
UPIP=$(podman inspect "$UP" --format '{{(index .NetworkSettings.Networks "podman").IPAddress}}')
[ -n "$UPIP" ] || skip "the upstream has no address on Podman's network"
printf '%s good.test\n%s other.test\n' "$UPIP" "$UPIP" >"$T/hosts"
netpols() {
    curl -sf --cacert "$T/ca.pem" -H 'Authorization: Bearer token-one' \
        "https://127.0.0.1:$PORT/apis/networking.k8s.io/v1/namespaces/default/networkpolicies" |
        python3 -c 'import json,sys; print(" ".join(sorted(i["metadata"]["name"] for i in json.load(sys.stdin)["items"])))'
}
fake_pods() {
    curl -sf --cacert "$T/ca.pem" -H 'Authorization: Bearer token-one' \
        "https://127.0.0.1:$PORT/api/v1/namespaces/default/pods" |
        python3 -c 'import json,sys; print(" ".join(sorted(i["metadata"]["name"] for i in json.load(sys.stdin)["items"])))'
}

# A bad rule: refused before anything is made.
run create --engine fake --name "$E-bad" --image "$WIMG" --allow 'exa mple.test'
expect 2 "a bad rule is refused"
check "nothing made for it" [ -z "$(netpols)" ]

run create --engine fake --name "$E" --image "$WIMG" --allow good.test:8080 \
    --allow "$UPIP/32:8080" --egress-hosts "$T/hosts"
skip_if_play_fails
expect 0 "create --engine fake with egress rules"
PROXY=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["remote"]["egress_pod"])' \
    "$SANDPOD_HOME/sandboxes/$E/sandbox.json" 2>/dev/null)
check "the record names the proxy's Pod" [ -n "$PROXY" ]
check "its NetworkPolicies exist" [ "$(netpols)" = "$PROXY-proxy $PROXY-workload" ]

# The image's busybox wget crashes (static, no NSS): a plain request by nc
# to the proxy $http_proxy names does the same.
GET='get() { p=${http_proxy#http://}; printf "GET http://$1/ HTTP/1.0\r\nHost: $1\r\n\r\n" |
    nc -w 5 "${p%:*}" "${p##*:}"; }; get'
run sh "$E" "$GET good.test:8080"
expect 0 "an allowed name through the proxy"
out_has "hello-upstream" "the upstream's page"
run sh "$E" 'echo "$http_proxy"'
out_has ":3128" "commands are told where the proxy is"
run sh "$E" "$GET other.test:8080"
out_has "403" "an unlisted name: 403"
out_lacks "hello-upstream" "an unlisted name is not reached"
run sh "$E" "printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 3 $UPIP 8080 2>&1; echo rc=\$?"
out_lacks "hello-upstream" "the upstream's address without the proxy is unreachable"
out_has "rc=1" "a direct connection fails"
run sh "$E" 'nslookup good.test 2>&1 | tail -n 2; timeout 5 nslookup example.com 8.8.8.8 >/dev/null 2>&1; echo "dns=$?"'
out_lacks "dns=0" "DNS from the workload answers nothing"
NC_API='echo "svc=$KUBERNETES_SERVICE_HOST"; nc -w 3 "$KUBERNETES_SERVICE_HOST" "$KUBERNETES_SERVICE_PORT" </dev/null; echo "api=$?"'
run sh "$E" "$NC_API"
out_has "api=1" "the API service's address is unreachable from the workload"

run network "$E"
expect 0 "network NAME"
out_has "good.test:8080" "it shows the rules"
run network "$E" --deny good.test
expect 0 "a live deny"
run sh "$E" "$GET good.test:8080"
out_has "403" "the deny is in force when network returns"
run network "$E" --remove good.test
expect 0 "the deny removed"
run sh "$E" "$GET good.test:8080"
out_has "hello-upstream" "allowed again"

run network "$E" --log --json
expect 0 "network --log --json"
check "the log has the allowed and the refused connections" python3 -c '
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
hv = {(r.get("host"), r.get("verdict")) for r in recs}
sys.exit(0 if ("good.test", "allow") in hv and ("other.test", "deny") in hv else 1)' "$T/out"

BEFORE=$(grep -c . "$T/out")
"$SP" network "$E" --log --follow --json >"$T/follow" 2>&1 &
FPID=$!
run sh "$E" "$GET good.test:8080"
for _ in $(seq 60); do
    [ "$(grep -c . "$T/follow")" -gt "$BEFORE" ] && break
    sleep 0.25
done
kill "$FPID" 2>/dev/null
wait "$FPID" 2>/dev/null
check "--log --follow shows a connection made while it runs" \
    [ "$(grep -c . "$T/follow")" -gt "$BEFORE" ]

run ls --json
check "ls shows the sandbox once" python3 -c '
import json, sys
names = [s["name"] for s in json.load(open(sys.argv[1]))["sandboxes"]
         if s["name"].startswith(sys.argv[2])]
sys.exit(0 if names == [sys.argv[2]] else 1)' "$T/out" "$E"
run gc --engine fake --dry-run --json
expect 0 "gc --engine --dry-run"
out_lacks "$PROXY" "gc does not take the proxy's Pod for an orphan"

run fork --name "$E-f" "$E"
expect 0 "fork a sandbox with rules"
FPROXY=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["remote"]["egress_pod"])' \
    "$SANDPOD_HOME/sandboxes/$E-f/sandbox.json" 2>/dev/null)
check "the fork has a proxy of its own" [ -n "$FPROXY" ] && [ "$FPROXY" != "$PROXY" ]
run sh "$E-f" "$GET good.test:8080; $GET other.test:8080"
out_has "hello-upstream" "the fork reaches the allowed name (the hosts file came along)"
out_has "403" "and not the unlisted one"
run rm --force "$E-f"
expect 0 "rm the fork"

run rm --force "$E"
expect 0 "rm"
check "the proxies' NetworkPolicies are gone" [ -z "$(netpols)" ]
check "no Pod is left" [ -z "$(fake_pods)" ]

run create --engine fake --name "$E-plain" --image "$WIMG"
expect 0 "create without rules"
check "no proxy and no NetworkPolicy for it" [ -z "$(netpols)" ] && [ "$(fake_pods | wc -w)" = 1 ]
run sh "$E-plain" "$NC_API"
out_has "api=0" "without rules the API service's address is reached (what create tries is there)"
run rm --force "$E-plain"
expect 0 "rm the plain one"

# A network plugin that ignores NetworkPolicies: the workload could go
# around its proxy, so the sandbox is refused, unless accepted by name.
fault '{"ignore_netpol": true}'
run create --engine fake --name "$E-open" --image "$WIMG" --allow good.test:8080 \
    --egress-hosts "$T/hosts"
expect 1 "create with rules where NetworkPolicies are not enforced"
err_has "its NetworkPolicy is not enforced (the Pod, allowed only its egress proxy, reached the API service at" \
    "... saying so"
err_has "--accept netpol" "... and how to accept it by name"
check "... leaving no sandbox" [ ! -e "$SANDPOD_HOME/sandboxes/$E-open" ]
check "... no Pod and no NetworkPolicy" [ -z "$(netpols)" ] && [ -z "$(fake_pods)" ]
python3 -c '
import json, sys
p = sys.argv[1]
d = json.load(open(p))
d["engines"]["fake"]["accept"] += ",netpol"
json.dump(d, open(p, "w"))' "$SANDPOD_HOME/engines.json"
run create --engine fake --name "$E-open" --image "$WIMG" --allow good.test:8080 \
    --egress-hosts "$T/hosts"
expect 0 "the same on an engine that accepts netpol"
run rm --force "$E-open"
expect 0 "rm it"
fault '{"ignore_netpol": false}'

finish
