# A private registry on 127.0.0.1 for the image tests: Debian's
# docker-registry (the CNCF distribution registry) on a free port, its
# storage in the test's scratch folder, stopped at exit.
#
# registry_start: sets REG (host:port) and REG_PID, or returns 1 with
# the reason in REG_WHY. The sourcing script has T and a cleanup trap; it
# calls registry_stop from there.
# shellcheck shell=bash

REGISTRY_BIN=${SANDPOD_REGISTRY_BIN:-/usr/bin/docker-registry}
REG_PID=

# A port nothing listens on now (the registry may still lose a race for
# it; registry_start retries).
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

registry_start() {
    if [ ! -x "$REGISTRY_BIN" ]; then
        REG_WHY="no registry at $REGISTRY_BIN (apt-get install docker-registry)"
        return 1
    fi
    local try port
    for try in 1 2 3; do
        port=$(free_port) || break
        mkdir -p "$T/registry/data"
        cat >"$T/registry/config.yml" <<CONF
version: 0.1
log:
  level: error
storage:
  filesystem:
    rootdirectory: $T/registry/data
  delete:
    enabled: true
http:
  addr: 127.0.0.1:$port
CONF
        "$REGISTRY_BIN" serve "$T/registry/config.yml" >"$T/registry/log" 2>&1 &
        REG_PID=$!
        local i
        for i in $(seq 1 50); do
            if curl -fsS "http://127.0.0.1:$port/v2/" >/dev/null 2>&1; then
                REG=127.0.0.1:$port
                return 0
            fi
            kill -0 "$REG_PID" 2>/dev/null || break
            sleep 0.1
        done
        registry_stop
    done
    REG_WHY="the registry did not start: $(tail -n 3 "$T/registry/log" 2>/dev/null)"
    return 1
}

registry_stop() {
    if [ -n "$REG_PID" ]; then
        kill "$REG_PID" 2>/dev/null
        wait "$REG_PID" 2>/dev/null
        REG_PID=
    fi
}
