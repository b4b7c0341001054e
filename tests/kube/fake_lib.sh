# Start the fake API server in a scratch folder: sourced with T set; gives
# PORT, FAKE_PID, a kubeconfig at $T/kubeconfig (token or client-cert user)
# and stop_fake. Skips (77) without python3 or openssl, except under CI=true.
# shellcheck shell=bash
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
need() {
    if ! command -v "$1" >/dev/null 2>&1; then
        if [ "${CI:-}" = true ]; then
            echo "FAIL: $1 is missing"
            exit 1
        fi
        echo "skip: $1 is missing"
        exit 77
    fi
}
need /usr/bin/python3
need openssl
sh "$here/make_certs.sh" "$T"

# start_fake [--client-cert]: the canned fake, or the one FAKE names
# (fake_podman.py: Pods run by Podman).
start_fake() {
    /usr/bin/python3 "$here/${FAKE:-fake_apiserver.py}" "$T" "$@" >"$T/port" 2>"$T/fake.err" &
    FAKE_PID=$!
    for _ in $(seq 100); do
        [ -s "$T/port" ] && break
        sleep 0.05
    done
    PORT=$(awk '{print $2}' "$T/port")
    [ -n "$PORT" ] || { echo "FAIL: the fake did not start"; cat "$T/fake.err"; exit 1; }
}

stop_fake() {
    [ -n "${FAKE_PID:-}" ] && kill "$FAKE_PID" 2>/dev/null && wait "$FAKE_PID" 2>/dev/null
    FAKE_PID=
}

# write_kubeconfig token|cert
write_kubeconfig() {
    {
        echo "apiVersion: v1"
        echo "kind: Config"
        echo "clusters:"
        echo "- name: fake"
        echo "  cluster:"
        echo "    server: https://127.0.0.1:$PORT"
        echo "    certificate-authority-data: $(base64 -w0 "$T/ca.pem")"
        echo "users:"
        echo "- name: u"
        echo "  user:"
        if [ "$1" = token ]; then
            echo "    token: token-one"
        else
            echo "    client-certificate-data: $(base64 -w0 "$T/client.pem")"
            echo "    client-key-data: $(base64 -w0 "$T/client.key")"
        fi
        echo "contexts:"
        echo "- name: fake"
        echo "  context: {cluster: fake, user: u, namespace: default}"
        echo "current-context: fake"
    } >"$T/kubeconfig"
}

# need_busybox_image: the default workload image, built from /bin/busybox
# when missing (skip without it).
need_busybox_image() {
    podman image exists localhost/sandpod-busybox:latest && return 0
    [ -x /bin/busybox ] || skip "the busybox image is missing and /bin/busybox is not there"
    "$SRC/contrib/image/build-image.sh" >"$T/build.log" 2>&1 ||
        skip "build-image.sh: $(tail -n 1 "$T/build.log")"
}

# build_sandpod_image IMG: the sandpod image of $SP's build; a failure ends
# the test as failed.
build_sandpod_image() {
    if ! SANDPOD=$SP "$SRC/contrib/image/build-sandpod-image.sh" --force "$1" >"$T/build.log" 2>&1; then
        bad "build-sandpod-image.sh: $(tail -n 3 "$T/build.log")"
        finish
        exit 1
    fi
}

# skip_if_play_fails: after `run create --engine fake ...`, end the test as
# skipped when it failed because rootless `podman kube play` does not work
# on this host (as test_render_kube).
skip_if_play_fails() {
    if [ "$rc" -ne 0 ] && [ "$(id -u)" != 0 ] && grep -q "did not start" "$T/err"; then
        echo "skipping: rootless podman kube play fails here: $(head -n 1 "$T/err")"
        exit 77
    fi
}

# fault JSON: set faults on the running fake (POST /fake/faults).
fault() {
    curl -sf --cacert "$T/ca.pem" -H 'Authorization: Bearer token-one' \
        -X POST "https://127.0.0.1:$PORT/fake/faults" -d "$1" >/dev/null
}

# fake_engine SANDBOX_PREFIX: the engine "fake" in $SANDPOD_HOME/engines.json
# on the Podman-backed fake with the sandpod image of $SP's build (IMG);
# WIMG is the workload image. At exit the fake stops and the Pods of
# sandboxes named SANDBOX_PREFIX* (their volumes too) and IMG are removed,
# then podman_lib.sh's cleanup.
fake_engine() {
    FAKE_ENGINE_PREFIX=$1
    IMG=localhost/sandpod:fake-engine-$$
    # shellcheck disable=SC2034 # for the sourcing test
    WIMG=localhost/sandpod-busybox:latest
    trap fake_engine_cleanup EXIT
    need_busybox_image
    build_sandpod_image "$IMG"
    FAKE=fake_podman.py start_fake
    write_kubeconfig token
    # "accept": the fake plays no hostUsers (fake_podman.py's for_play), and
    # Podman's default seccomp filter allows keyctl and new user namespaces,
    # which a local sandbox's profile refuses: its Pods are weaker.
    cat >"$SANDPOD_HOME/engines.json" <<EOF2
{"engines": {"fake": {"kind": "kubernetes", "kubeconfig": "$T/kubeconfig",
                      "image": "$IMG", "namespace": "default", "accept": "userns,seccomp"}}}
EOF2
}

fake_engine_cleanup() {
    stop_fake
    {
        podman pod ls --format '{{.Name}}' 2>/dev/null | grep "^sp-$FAKE_ENGINE_PREFIX"
        if [ -f "$T/made" ]; then awk '$1 == "pod" {print $2}' "$T/made"; fi
    } | sort -u | while read -r p; do
        podman pod rm -f -t 0 "$p" >/dev/null 2>&1
        podman volume ls --quiet | grep "^$p-" | xargs -r podman volume rm -f >/dev/null 2>&1
    done
    # The networks it made for NetworkPolicies, once their Pods are gone.
    if [ -f "$T/made" ]; then
        awk '$1 == "net" {print $2}' "$T/made" | sort -u | xargs -r podman network rm -f >/dev/null 2>&1 || true
    fi
    podman rmi "$IMG" >/dev/null 2>&1
    cleanup
}
