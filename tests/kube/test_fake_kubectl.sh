#!/bin/bash
# kubectl is the oracle that the fake API server speaks the real protocol:
# the installed kubectl gets, lists, deletes Pods and lists Events against
# it, with a token and with a client certificate. Only then are the C
# client's tests against the fake worth anything.
T=$(mktemp -d)
trap 'stop_fake; rm -rf "$T"' EXIT
. "$(dirname "$0")/fake_lib.sh"
need kubectl
fails=0
check() { # check DESC CMD...: CMD succeeds
    local d=$1
    shift
    if ! "$@" >"$T/out" 2>"$T/err"; then
        echo "FAIL: $d"
        sed 's/^/    /' "$T/err" | head -5
        fails=$((fails + 1))
    fi
}
expect_out() { # expect_out DESC PATTERN
    if ! grep -q -- "$2" "$T/out"; then
        echo "FAIL: $1: no '$2' in:"
        sed 's/^/    /' "$T/out" | head -5
        fails=$((fails + 1))
    fi
}
create() { # create NAME IMAGE
    curl -sf --cacert "$T/ca.pem" -H 'Authorization: Bearer token-one' \
        --cert "$T/client.pem" --key "$T/client.key" \
        -X POST "https://127.0.0.1:$PORT/api/v1/namespaces/default/pods" \
        -d "{\"metadata\":{\"name\":\"$1\",\"labels\":{\"sandpod\":\"1\"}},
             \"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"$2\"}]}}" >/dev/null
}
k() { timeout 30 kubectl --kubeconfig "$T/kubeconfig" "$@"; }

for mode in token cert; do
    if [ $mode = cert ]; then
        start_fake --client-cert
    else
        start_fake
    fi
    write_kubeconfig $mode
    check "$mode: create through the API" create box fake/ready
    check "$mode: create a pod that cannot pull" create bad fake/nosuchimage
    check "$mode: kubectl version" k version
    expect_out "$mode: server version" "v1.32.0-fake"
    check "$mode: kubectl get pods -o json" k get pods -o json
    expect_out "$mode: the list holds box" '"name": "box"'
    check "$mode: kubectl get pod box" k get pod box
    expect_out "$mode: one row for box" "^box "
    check "$mode: kubectl get pods -l" k get pods -l sandpod=1 -o name
    expect_out "$mode: label selector" "pod/bad"
    check "$mode: kubectl get events" k get events --field-selector involvedObject.name=bad -o json
    expect_out "$mode: the pull failure event" "Failed to pull image"
    check "$mode: kubectl delete pod box" k delete pod box
    expect_out "$mode: deleted" 'pod "box" deleted'
    if k get pod box >"$T/out" 2>"$T/err"; then
        echo "FAIL: $mode: box is still there"
        fails=$((fails + 1))
    fi
    grep -q 'NotFound\|not found' "$T/err" || { echo "FAIL: $mode: no NotFound"; fails=$((fails + 1)); }
    # SelfSubjectAccessReview: allowed by default, denied by the deny fault.
    check "$mode: kubectl auth can-i create pods/exec" k auth can-i create pods --subresource=exec
    expect_out "$mode: can-i yes" "^yes"
    curl -sf --cacert "$T/ca.pem" --cert "$T/client.pem" --key "$T/client.key" \
        -X POST "https://127.0.0.1:$PORT/fake/faults" -d '{"deny": ["create pods/exec"]}' >/dev/null
    if k auth can-i create pods --subresource=exec >"$T/out" 2>"$T/err"; then
        echo "FAIL: $mode: can-i says yes to a denied verb"
        fails=$((fails + 1))
    fi
    expect_out "$mode: can-i no" "^no"
    check "$mode: kubectl auth can-i watch pods" k auth can-i watch pods
    expect_out "$mode: others still yes" "^yes"
    stop_fake
done
# Without the client certificate, the cert-mode fake refuses the TLS session.
start_fake --client-cert
write_kubeconfig token
if k get pods >"$T/out" 2>&1; then
    echo "FAIL: a client without a certificate was let in"
    fails=$((fails + 1))
fi
stop_fake
[ $fails -eq 0 ] && echo "ok: kubectl agrees with the fake"
exit $((fails > 0))
