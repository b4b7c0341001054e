#!/bin/sh
# sandpod mcp through the agent clients people run (test.mjs): Claude Code,
# Codex CLI and the OpenAI Agents SDK, against a scripted model API on
# 127.0.0.1. Installs them from package-lock.json (npm ci) when
# node_modules is missing. Exits 77 (skip) without node/npm, git, Podman
# or the registry, except under CI=true.
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
command -v git >/dev/null 2>&1 || skip "git is not installed"
command -v podman >/dev/null 2>&1 || skip "podman is not installed"
installed() {
    [ -x "$here/node_modules/.bin/claude" ] && [ -x "$here/node_modules/.bin/codex" ] &&
        [ -d "$here/node_modules/@openai/agents" ]
}
if ! installed; then
    (cd "$here" && npm ci --no-audit --no-fund >&2) || skip "npm ci failed (no registry?)"
    installed || skip "npm ci left a client out (no native build for $(uname -m)?)"
fi
# Claude Code's postinstall puts its native binary in place of a stub that
# only prints an error; npm skips install scripts under --ignore-scripts
# (and npm 11 warns it will ask for them to be allowed).
if ! "$here/node_modules/.bin/claude" --version >/dev/null 2>&1; then
    (cd "$here/node_modules/@anthropic-ai/claude-code" && node install.cjs >&2)
    "$here/node_modules/.bin/claude" --version >/dev/null 2>&1 || skip "claude does not run here"
fi
exec node "$here/test.mjs" "$@"
