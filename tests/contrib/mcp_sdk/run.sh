#!/bin/sh
# The MCP server through the official TypeScript SDK client (test.mjs).
# Installs the SDK from package-lock.json (npm ci) when node_modules is
# missing. Exits 77 (skip) without node/npm, except under CI=true.
here=$(cd "$(dirname "$0")" && pwd)
skip() {
    if [ "$CI" = true ]; then
        echo "FAIL: $1 (required under CI=true)"
        exit 1
    fi
    echo "skipping: $1"
    exit 77
}
command -v node >/dev/null 2>&1 || skip "node is not installed"
command -v npm >/dev/null 2>&1 || skip "npm is not installed"
if [ ! -d "$here/node_modules/@modelcontextprotocol/sdk" ]; then
    (cd "$here" && npm ci --no-audit --no-fund >&2) || skip "npm ci failed (no registry?)"
fi
exec node "$here/test.mjs" "$@"
