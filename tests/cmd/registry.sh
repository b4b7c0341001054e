# A private registry on 127.0.0.1 for the image tests: contrib/registry.sh
# (Debian's docker-registry) on a free port, its storage in the test's
# scratch folder, stopped at exit.
#
# registry_start: sets REG (host:port), or returns 1 with the reason in
# REG_WHY. The sourcing script has T and a cleanup trap; it calls
# registry_stop from there.
# shellcheck shell=bash

REGISTRY_SH=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../contrib" && pwd)/registry.sh

# A port nothing listens on now (the registry may still lose a race for
# it; registry_start retries).
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

registry_start() {
    local try port
    for try in 1 2 3; do
        port=$(free_port) || break
        if REG_WHY=$("$REGISTRY_SH" start "127.0.0.1:$port" "$T/registry" 2>&1); then
            REG=127.0.0.1:$port
            return 0
        fi
        case "$REG_WHY" in *"no registry at"*) return 1 ;; esac
    done
    return 1
}

registry_stop() {
    "$REGISTRY_SH" stop "$T/registry" 2>/dev/null || true
}
