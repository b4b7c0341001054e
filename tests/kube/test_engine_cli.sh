#!/usr/bin/env bash
# sandpod engine against the fake API servers.
#
#   fake    (fake_apiserver.py): add (explicit server, kubeconfig through
#           kubectl), ls (text, JSON), default, $SANDPOD_ENGINE, rm, test
#           --no-probe (SelfSubjectAccessReview per verb), a denied verb fails
#           the test naming it, a wrong server and a wrong token fail
#           clearly, a malformed engines.json is refused and left alone,
#           local's own test.
#   podman  (fake_podman.py, Pods run by Podman): the probe Pod with the
#           sandpod image built here: created, Ready, exec, MCP through
#           the peer, deleted; nothing of it left in Podman.
#
# Usage: test_engine_cli.sh PATH/TO/sandpod fake|podman
set -u

SP=${1:?usage: test_engine_cli.sh PATH/TO/sandpod fake|podman}
MODE=${2:?usage: test_engine_cli.sh PATH/TO/sandpod fake|podman}
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)

if [ "$MODE" = podman ]; then
    PREFIX=sandpod-engine-probe
    . "$SRC/tests/cmd/podman_lib.sh"
    podman info >/dev/null 2>&1 || skip "podman does not work for $(id -un)"
else
    T=$(mktemp -d "${TMPDIR:-/tmp}/sandpod-engine-cli.XXXXXX")
    export SANDPOD_HOME=$T/home
    mkdir -p "$SANDPOD_HOME"
    cleanup() { rm -rf "$T"; }
    . "$SRC/tests/cmd/lib.sh"
fi
. "$HERE/fake_lib.sh"
unset SANDPOD_ENGINE KUBECONFIG

if [ "$MODE" = fake ]; then
    trap 'stop_fake; cleanup' EXIT
    start_fake
    write_kubeconfig token
    SERVER=https://127.0.0.1:$PORT

    run engine ls
    expect 0 "engine ls with no file"
    out_has "* local" "local is there and the default"

    run engine add c1 --kind kubernetes --server "$SERVER" --token-file "$T/tokens" \
        --ca-file "$T/ca.pem" --namespace ns1 --ttl 900
    expect 0 "engine add (explicit server)"
    check "engines.json is 0600" [ "$(stat -c %a "$SANDPOD_HOME/engines.json")" = 600 ]
    run engine add c1 --kind kubernetes --server "$SERVER"
    expect 1 "engine add of an existing name"
    err_has "--replace" "the error says how to redefine"
    run engine add local --kind kubernetes --server "$SERVER"
    expect 1 "engine add local"
    err_has "built in" "local is built in"
    # Brokered secrets are not built for this engine: refused in one line
    # before anything is asked of the cluster, nothing left.
    run create --engine c1 --name sec-$$ --allow x.test --secret T=env:HOME --secret-for T=x.test
    expect 1 "create --secret on a kubernetes engine"
    err_has "brokered secrets (--secret) are not built for the kubernetes engine yet" \
        "... says so"
    check "... leaving no sandbox" [ ! -e "$SANDPOD_HOME/sandboxes/sec-$$" ]
    run engine add Bad_Name --kind kubernetes
    expect 1 "engine add with a bad name"
    run engine add c2 --kind kubernetes --server "$SERVER" --namespace Not_A_Label
    expect 1 "a namespace that is not a DNS label"
    err_has "namespace" "the error names the field"
    run engine add c2 --kind kubernetes --server ftp://x
    expect 1 "a server that is not an http(s) URL"
    run engine add c2 --server "$SERVER"
    expect 2 "add without --kind"
    run engine add c2 --kind nomad
    expect 2 "an unknown kind"
    # --url names the Podman service of an engine of kind podman (it was
    # once dropped silently); a kubernetes engine refuses it.
    run engine add pm --kind podman --url unix:///run/elsewhere/podman.sock
    expect 0 "engine add --kind podman --url"
    check "engines.json keeps the podman engine's url" python3 -c \
        'import json,sys; sys.exit(json.load(open(sys.argv[1]))["engines"]["pm"].get("url") != "unix:///run/elsewhere/podman.sock")' \
        "$SANDPOD_HOME/engines.json"
    run engine add pm2 --kind podman --url ftp://x
    expect 1 "a podman url that is not unix:// or http(s)"
    run engine add k2 --kind kubernetes --server "$SERVER" --url unix:///x
    expect 2 "--url with --kind kubernetes"
    err_has "--url is a Podman service" "the refusal says what --url is"
    run engine rm pm
    expect 0 "engine rm pm"
    run engine ls --no-probe
    expect 2 "--no-probe with ls"
    if command -v kubectl >/dev/null 2>&1; then
        run engine add kc --kind kubernetes --kubeconfig "$T/kubeconfig" --context fake --default
        expect 0 "engine add (kubeconfig through kubectl) --default"
    else
        run engine add kc --kind kubernetes --server "$SERVER" --token-file "$T/tokens" \
            --ca-file "$T/ca.pem" --default
        expect 0 "engine add --default"
    fi

    run engine ls --json
    expect 0 "engine ls --json"
    json "ls --json" 'j["default"] == "kc" and [e["name"] for e in j["engines"]] == ["local", "c1", "kc"] and j["engines"][1]["namespace"] == "ns1" and j["engines"][1]["ttl"] == 900'
    SANDPOD_ENGINE=c1 "$SP" engine ls --json >"$T/out" 2>"$T/err"
    json "\$SANDPOD_ENGINE names the default" 'j["default"] == "c1"'

    # test --no-probe: credentials, version, one review per verb.
    run engine test c1 --no-probe
    expect 0 "engine test c1 --no-probe"
    out_has "v1.32.0-fake" "the server version is printed"
    out_has "can create pods/exec" "pods/exec is reviewed"
    out_has "can create networkpolicies" "networkpolicies are reviewed (egress rules need them)"
    out_has "namespace ns1" "the engine's namespace is used"
    check "twelve checks: credentials, version, 10 reviews" [ "$(grep -c '^ok ' "$T/out")" = 12 ]
    run engine test kc --json --no-probe
    expect 0 "engine test kc --json"
    json "test --json" 'j["ok"] and len(j["checks"]) == 12 and all(c["ok"] and "ms" in c and c["detail"] for c in j["checks"])'
    # NetworkPolicies denied: said, not failed (only egress rules need them).
    fault '{"deny": ["create networkpolicies"]}'
    run engine test kc --no-probe
    expect 0 "engine test with networkpolicies denied"
    out_has "denied in namespace default (sandboxes with egress rules cannot be made)" \
        "says what cannot be made"
    fault '{"deny": []}'

    # A denied verb fails the test and is named.
    fault '{"deny": ["create pods/exec", "list events"]}'
    run engine test c1 --no-probe
    expect 1 "engine test with pods/exec denied"
    out_has "FAIL  can create pods/exec" "the denied verb has its FAIL line"
    out_has "FAIL  can list events" "every denied verb is listed"
    err_has "check 'can create pods/exec' failed" "stderr names the first failing check"
    check "one stderr line" [ "$(wc -l <"$T/err")" = 1 ]
    run engine test c1 --json --no-probe
    expect 1 "engine test --json with a denied verb"
    json "the denied check in JSON" '[c["name"] for c in j["checks"] if not c["ok"]] == ["can create pods/exec", "can list events"] and not j["ok"]'
    fault '{"deny": []}'
    # Denied verbs leave out the probe; without --no-probe nothing is created.
    fault '{"deny": ["delete pods"]}'
    run engine test c1
    expect 1 "a denied delete: no probe Pod"
    out_has "no probe Pod" "says there is no probe"
    out_lacks "probe pod create" "no Pod was created"
    fault '{"deny": []}'

    # A wrong server and a wrong token fail clearly.
    run engine add dead --kind kubernetes --server https://127.0.0.1:1 --ca-file "$T/ca.pem"
    expect 0 "engine add dead"
    run engine test dead --no-probe
    expect 1 "engine test of an unreachable server"
    out_has "FAIL  server version" "the version check fails"
    out_has "127.0.0.1:1" "the failure names the server"
    err_has "check 'server version' failed" "stderr names the check"
    echo other >"$T/badtoken"
    run engine add badtok --kind kubernetes --server "$SERVER" --token-file "$T/badtoken" \
        --ca-file "$T/ca.pem"
    run engine test badtok --no-probe
    expect 1 "engine test with a token the server refuses"
    out_has "FAIL  server version" "refused at the first request"
    run engine add gone --kind kubernetes --server "$SERVER" --token-file "$T/no-such-file"
    run engine test gone --no-probe
    expect 1 "a token file that is not there"
    out_has "FAIL  credentials" "the credentials check fails"
    out_has "no-such-file" "and names the file"
    run engine test nope
    expect 1 "engine test of an unknown engine"
    err_has "no engine named 'nope'" "says so"

    # default, rm.
    run engine default c1
    expect 0 "engine default c1"
    run engine rm c1
    expect 0 "engine rm c1"
    run engine ls --json
    json "rm of the default: local again" 'j["default"] == "local" and "c1" not in [e["name"] for e in j["engines"]]'
    run engine rm c1
    expect 1 "engine rm of a missing engine"
    run engine rm local
    expect 1 "engine rm local"

    # A malformed file: refused, named, never rewritten.
    printf '{"engines": {"x": {"kind": "kubernetes", "ttl": "soon"}}}' >"$SANDPOD_HOME/engines.json"
    cp "$SANDPOD_HOME/engines.json" "$T/bad.json"
    run engine ls
    expect 1 "engine ls of a malformed file"
    err_has "engines.json: engines.x.ttl" "names the file and the field"
    run engine add y --kind kubernetes --server "$SERVER"
    expect 1 "engine add over a malformed file"
    check "the malformed file is untouched" cmp -s "$T/bad.json" "$SANDPOD_HOME/engines.json"
    rm "$SANDPOD_HOME/engines.json"

    # local: the Podman service (skipped where there is none).
    if [ -S /run/podman/podman.sock ] || [ -n "${SANDPOD_URL:-}" ]; then
        run engine test local --json
        expect 0 "engine test local"
        json "local: service, version, host" '[c["name"] for c in j["checks"]] == ["service", "version", "host"] and j["checks"][2]["detail"].startswith(("rootless", "rootful"))'
    fi
    finish
    exit $?
fi

# ------------------------------------------------------------- podman --
command -v kubectl >/dev/null 2>&1 || skip "kubectl is missing"
IMG=localhost/sandpod:engine-probe-test-$$
probe_cleanup() {
    # Whatever the probes left (they should leave nothing): the Pods this
    # fake knows, then the fake, the image and the scratch folder.
    if [ -n "${PORT:-}" ]; then
        curl -sf --cacert "$T/ca.pem" -H 'Authorization: Bearer token-one' \
            "https://127.0.0.1:$PORT/api/v1/namespaces/default/pods" |
            python3 -c 'import json,sys; [print(p["metadata"]["name"]) for p in json.load(sys.stdin)["items"]]' \
                >"$T/left" 2>/dev/null
        while read -r p; do
            podman pod rm -f -t 0 "$p" >/dev/null 2>&1
            podman volume ls --quiet | grep "^$p-" | xargs -r podman volume rm -f >/dev/null 2>&1
        done <"$T/left"
    fi
    stop_fake
    podman rmi "$IMG" >/dev/null 2>&1
    cleanup
}
trap probe_cleanup EXIT
build_sandpod_image "$IMG"
FAKE=fake_podman.py start_fake
write_kubeconfig token
run engine add probe --kind kubernetes --server "https://127.0.0.1:$PORT" \
    --token-file "$T/tokens" --ca-file "$T/ca.pem" --image "$IMG"
expect 0 "engine add probe"
run engine test probe --json --timeout 180
if [ "$rc" -ne 0 ] && [ "$(id -u)" != 0 ] && grep -q '"probe pod ready","ok":false' "$T/out"; then
    # As test_fake_podman: rootless kube play does not work on every host.
    skip "the probe Pod did not start rootless here: $(head -c 300 "$T/out")"
fi
expect 0 "engine test probe (the probe Pod)"
json "every probe step passed and was timed" '[c["name"] for c in j["checks"]][-7:] == ["probe pod create", "probe pod ready", "exec in workload", "protections", "network policy", "mcp through peer", "probe pod delete"] and all(c["ok"] for c in j["checks"])'
# The probe Pod runs under a NetworkPolicy that allows it no egress, which
# the fake enforces: the API service's address is out of its reach.
json "NetworkPolicies are found enforced" 'any(c["name"] == "network policy" and c["detail"].startswith("enforced: the probe Pod, allowed no egress by spx-") and "could not reach the API service at" in c["detail"] for c in j["checks"])'
check "the probe's NetworkPolicy is gone" [ -z "$(curl -sf --cacert "$T/ca.pem" -H 'Authorization: Bearer token-one' \
    "https://127.0.0.1:$PORT/apis/networking.k8s.io/v1/namespaces/default/networkpolicies" |
    python3 -c 'import json,sys; print(" ".join(i["metadata"]["name"] for i in json.load(sys.stdin)["items"]))')" ]
# What the workload is kept from, tried in it: the fake plays no hostUsers
# (a rootful Pod has the node's ids, a rootless one its service's user's
# namespace), and Podman's default seccomp filter allows keyctl and new user
# namespaces.
json "the probe says what its workload is kept from" "any(c['name'] == 'protections' and 'seccomp: filter' in c['detail'] and ('user namespace: no' in c['detail']) == ($(id -u) == 0) and 'keyctl allowed, new user namespaces allowed' in c['detail'] and 'weaker than a local sandbox' in c['detail'] for c in j['checks'])"
json "the MCP round trip listed tools" 'any(c["name"] == "mcp through peer" and "tools/list" in c["detail"] for c in j["checks"])'
python3 -c 'import json,sys; [print("  %-20s %6d ms  %s" % (c["name"], c["ms"], c["detail"])) for c in json.load(open(sys.argv[1]))["checks"]]' "$T/out"
p=$(sed -n 's/.*"detail":"\(sp-engine-probe-[a-z0-9]*\) .*/\1/p' "$T/out")
check "the probe Pod is gone from Podman" [ -n "$p" ] && ! podman pod exists "$p"
# A network plugin that ignores policies: said, not failed.
fault '{"ignore_netpol": true}'
run engine test probe --json --timeout 180
expect 0 "engine test where NetworkPolicies are not enforced"
json "... says they are not" 'any(c["name"] == "network policy" and c["detail"].startswith("NOT enforced: the probe Pod, allowed no egress by spx-") and "unless the engine accepts netpol" in c["detail"] for c in j["checks"])'
fault '{"ignore_netpol": false}'
check "the probe Pod's volumes are gone" [ -n "$p" ] && ! podman volume ls --quiet | grep -q "^$p-"

# A denied exec: the probe is not made; the verb is named.
fault '{"deny": ["get pods/exec"]}'
run engine test probe --timeout 60
expect 1 "engine test with get pods/exec denied"
err_has "can get pods/exec" "names the verb"
fault '{"deny": []}'
# A probe that cannot start (an image nobody has): one Events line, and
# the Pod is deleted all the same.
run engine add noimg --kind kubernetes --server "https://127.0.0.1:$PORT" \
    --token-file "$T/tokens" --ca-file "$T/ca.pem" --image localhost/sandpod:no-such-image-$$
run engine test noimg --timeout 60
expect 1 "engine test with an image that cannot be had"
out_has "FAIL  probe pod ready" "the Pod never became Ready"
out_has "ok    probe pod delete" "and was deleted all the same"
p=$(sed -n 's/^ok    probe pod create .* \(sp-engine-probe-[a-z0-9]*\) .*/\1/p' "$T/out")
check "the stuck probe Pod is gone from Podman" [ -n "$p" ] && ! podman pod exists "$p"
finish
