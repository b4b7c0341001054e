// sandpod's MCP server through the agent clients people run: Claude Code,
// Codex CLI and the OpenAI Agents SDK, each talking to a scripted model API
// of our own (model_api.mjs) on 127.0.0.1 and starting sandpod as its
// registration in contrib/docs/tools-and-mcp.md says. What the model was shown for each tool result
// is read from the recorded requests: sandpod's rendered text (numbered
// L1: lines, Exit code / Wall time / Output, the edit and patch messages),
// never a JSON dump of the structured result. Writing tools must run
// under the documented configuration, and ten sessions and health checks
// must leave exactly one sandbox for the project, never left running.
//
//   node test.mjs SANDPOD
// SANDPOD_AGENT_CLIENTS_MCP replaces the target arguments of `sandpod mcp`
// ('--project .' by default; '.' is the project folder), e.g.
// '--create --mount . --rm' for a server without --project (the session
// assertions then fail, as they should). SANDPOD_AGENT_CLIENTS_KEEP=1
// keeps the scratch folder. Prints 'N passed, M failed'.
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ModelApi } from './model_api.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const SP = path.resolve(process.argv[2] || 'sandpod');
const BIN = path.join(here, 'node_modules', '.bin');
const TARGET = (process.env.SANDPOD_AGENT_CLIENTS_MCP || '--project .').split(/\s+/).filter(Boolean);
const CLIENT_TIMEOUT_MS = 240000;
const t0 = Date.now();

// ------------------------------------------------------------- reporting
let passed = 0, failed = 0;
function check(what, cond, detail) {
    if (cond) {
        passed++;
        return true;
    }
    failed++;
    console.log(`FAIL: ${what}${detail === undefined ? '' : ': ' + (typeof detail === 'string' ? detail : JSON.stringify(detail)).slice(0, 900)}`);
    return false;
}
const say = s => console.log(`[${((Date.now() - t0) / 1000).toFixed(1).padStart(6)} s] ${s}`);

// --------------------------------------------------------------- scratch
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'sandpod-test-agents-'));
const home = path.join(root, 'home');
const codexHome = path.join(root, 'codex-home');
const spHome = path.join(root, 'sandpod-home');
const tmp = path.join(root, 'tmp');
const project = path.join(root, 'project');
for (const d of [home, codexHome, spHome, tmp, project])
    fs.mkdirSync(d, { recursive: true });

const CLIENTS = ['claude', 'codex', 'agents'];
const notes = Array.from({ length: 30 }, (_, i) => `note ${i + 1}`).join('\n') + '\n';
fs.writeFileSync(path.join(project, 'README.md'), '# demo project\n');
fs.writeFileSync(path.join(project, 'notes.txt'), notes);
for (const c of CLIENTS)
    fs.writeFileSync(path.join(project, `${c}.txt`), `owner: ${c}\nstate: original\n`);
const git = (...a) => execFileSync('git', ['-c', 'user.name=sandpod test', '-c', 'user.email=test@sandpod.invalid', ...a], { cwd: project, stdio: 'pipe' });
git('init', '-q');
git('add', '.');
git('commit', '-q', '-m', 'a project');

// The clients' environment: a private HOME, CODEX_HOME, TMPDIR and state
// root, sandpod first on PATH (the guide's plain `sandpod`), no telemetry
// or update checks, dummy keys. The caller's client settings are dropped
// (a test run from inside a Claude Code session would otherwise nest).
const env = {};
for (const [k, v] of Object.entries(process.env))
    if (!/^(CLAUDE|ANTHROPIC_|OPENAI_|CODEX_|MCP_)/.test(k))
        env[k] = v;
Object.assign(env, {
    PATH: [path.dirname(SP), BIN, process.env.PATH || '/usr/bin:/bin'].join(':'),
    HOME: home,
    XDG_CONFIG_HOME: path.join(home, '.config'),
    XDG_CACHE_HOME: path.join(home, '.cache'),
    XDG_DATA_HOME: path.join(home, '.local', 'share'),
    TMPDIR: tmp,
    SANDPOD_HOME: spHome,
    CODEX_HOME: codexHome,
    ANTHROPIC_API_KEY: 'sk-ant-sandpod-test-dummy',
    OPENAI_API_KEY: 'sk-sandpod-test-dummy',
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    DISABLE_AUTOUPDATER: '1',
    DISABLE_TELEMETRY: '1',
    DISABLE_ERROR_REPORTING: '1',
    NO_COLOR: '1',
});

const api = new ModelApi(path.join(root, 'model-requests.jsonl'));
const port = await api.listen();
env.ANTHROPIC_BASE_URL = `http://127.0.0.1:${port}`;
const OPENAI_BASE = `http://127.0.0.1:${port}/v1`;

// run(cmd, args): a client in a process group of its own, killed with
// everything it started after CLIENT_TIMEOUT_MS. Output goes to files in
// the scratch folder; {code, out, err, ms} comes back.
let runs = 0;
function run(cmd, args, opts = {}) {
    const n = ++runs;
    const outFile = path.join(root, `run${n}.out`), errFile = path.join(root, `run${n}.err`);
    const out = fs.openSync(outFile, 'w'), err = fs.openSync(errFile, 'w');
    const start = Date.now();
    return new Promise(resolve => {
        const p = spawn(cmd, args, { cwd: opts.cwd || project, env, stdio: ['ignore', out, err], detached: true });
        const timer = setTimeout(() => {
            try {
                process.kill(-p.pid, 'SIGKILL');
            } catch { /* gone */ }
        }, opts.timeout || CLIENT_TIMEOUT_MS);
        const done = (code, signal) => {
            clearTimeout(timer);
            fs.closeSync(out);
            fs.closeSync(err);
            resolve({ code, signal, ms: Date.now() - start, out: fs.readFileSync(outFile, 'utf8'), err: fs.readFileSync(errFile, 'utf8') });
        };
        p.on('error', e => done(127, String(e)));
        p.on('exit', done);
    });
}

const sandpod = (...a) => execFileSync(SP, a, { env, stdio: ['ignore', 'pipe', 'pipe'] }).toString();
function sandboxes() {
    return JSON.parse(sandpod('ls', '--json')).sandboxes || [];
}

// ------------------------------------------------------ registrations
// The registrations as contrib/docs/tools-and-mcp.md gives them; '.' in the target is the
// project folder, which Claude Code and Codex start their servers in.
const targetIn = dir => TARGET.map(a => (a === '.' ? dir : a));
const toml = s => JSON.stringify(s);
async function register() {
    const add = await run('claude', ['mcp', 'add', 'sandpod', '--', 'sandpod', 'mcp', ...TARGET]);
    check('claude mcp add', add.code === 0, add.err || add.out);
    fs.writeFileSync(path.join(codexHome, 'config.toml'), `# Codex CLI against the scripted model API, with sandpod over MCP.
model = "scripted-model"
model_provider = "scripted"
check_for_update_on_startup = false

[analytics]
enabled = false

[model_providers.scripted]
name = "scripted model API"
base_url = ${toml(OPENAI_BASE)}
wire_api = "responses"
env_key = "OPENAI_API_KEY"

[mcp_servers.sandpod]
command = "sandpod"
args = ${toml(['mcp', ...TARGET])}
# Codex starts MCP servers with a few variables (HOME, PATH, LANG, SHELL,
# TERM, TMPDIR, ...): sandpod's state root and the way to the Podman
# service are passed by name. Without XDG_RUNTIME_DIR a non-root sandpod
# misses the user's rootless service and starts a private one.
env_vars = ["SANDPOD_HOME", "XDG_RUNTIME_DIR", "CONTAINER_HOST", "SANDPOD_URL"]
# Without it a tool without readOnlyHint is refused under exec's approval
# policy "never" ("MCP tool call requires approval").
default_tools_approval_mode = "approve"
# Codex waits for required servers before the first turn (and fails when
# one cannot start); an optional one that is not up within a fraction of
# a second is left out of that turn, and the model gets Codex's own tools.
required = true
`);
}

// ------------------------------------------------------------ the script
// What each session's model does. The last step of a writing session
// reads the file back: the change is really there.
const readAndRun = c => ({
    steps: [
        { tool: 'read_file', args: { path: 'notes.txt', limit: 5 } },
        { tool: 'shell', args: { command: `echo from-${c}; wc -l notes.txt` } },
    ],
});
const patchOf = c => `*** Begin Patch\n*** Update File: ${c}.txt\n@@\n owner: ${c}\n-state: edited by ${c}\n+state: patched by ${c}\n*** End Patch\n`;
const writes = (c, alsoRead) => ({
    steps: [
        ...(alsoRead ? [{ tool: 'read_file', args: { path: `${alsoRead}.txt` } }] : []),
        { tool: 'edit_file', args: { path: `${c}.txt`, old_string: 'state: original', new_string: `state: edited by ${c}` } },
        { tool: 'apply_patch', args: { input: patchOf(c) } },
        { tool: 'shell', args: { command: `cat ${c}.txt` } },
        { tool: 'read_file', args: { path: `${c}.txt` } },
    ],
});
const readAll = () => ({ steps: CLIENTS.map(c => ({ tool: 'read_file', args: { path: `${c}.txt` } })) });

// What the model must have been shown: sandpod's text, not JSON.
function jsonDump(text) {
    return /^\s*\{\s*"ok"/.test(text) || /\{"ok":(true|false)/.test(text) || text.includes('"truncated":');
}
// A client's own refusal or failure in place of the result: approval
// (Codex, Claude Code), a call that timed out (Codex) or that the MCP SDK
// rejected, e.g. no structuredContent for a tool that declares an
// outputSchema (the Agents SDK).
const clientError = text => /requires approval|haven't granted|has been denied|was not run|tool call error|timed out awaiting|An error occurred while running the tool/i.test(text);
const RENDER = {
    read_file: (args, text) => {
        const m = [];
        if (!/^L1: /m.test(text))
            m.push('no numbered "L1: " line');
        if (args.limit && !/offset=\d+/.test(text))
            m.push('no continuation hint (offset=N) for a cut read');
        return m;
    },
    shell: (args, text) => {
        const m = [];
        for (const want of ['Exit code: 0', 'Wall time: ', 'Output:'])
            if (!text.includes(want))
                m.push(`no "${want}"`);
        return m;
    },
    edit_file: (args, text) => (/replaced 1 occurrence in \S+\.txt/.test(text) ? [] : ['no "replaced 1 occurrence in FILE"']),
    apply_patch: (args, text) => (/applied a \S+ patch to 1 file/.test(text) ? [] : ['no "applied a ... patch to 1 file"']),
};

// The checks every tool result of a session gets, plus what its text
// must hold (expect[step]: strings).
const namesSeen = {};
function checkResults(label, client, script, expect = {}) {
    const asked = api.requests.filter(x => x.session === api.session && x.answered);
    const offered = asked.some(x => x.answered.name || x.answered.search);
    const other = [...new Set(asked.flatMap(x => x.answered.offered || []))];
    if (!check(`${label}: the client offered the model sandpod's tools`, offered, `it offered: ${other.join(', ') || 'no tools'}`))
        return;
    const got = api.results();
    for (let i = 0; i < script.steps.length; i++) {
        const { tool, args } = script.steps[i];
        const r = got.find(x => x.step === i);
        const what = `${label}: ${tool} (step ${i + 1})`;
        if (!check(`${what}: its result reached the model`, r, `the model saw results of steps ${got.map(x => x.step + 1).join(', ') || 'none'}`))
            continue;
        const text = r.text;
        const shown = JSON.stringify(text.slice(0, 400));
        if (!check(`${what}: ran (the client reported no refusal or error)`, !clientError(text) && !r.is_error, shown))
            continue;
        // A dump makes every check below fail for the same reason: it is
        // reported once.
        if (!check(`${what}: the model was shown sandpod's text, not a JSON dump of structuredContent`, !jsonDump(text), shown))
            continue;
        const miss = RENDER[tool] ? RENDER[tool](args, text) : [];
        check(`${what}: rendered as sandpod renders it`, miss.length === 0, `${miss.join('; ')} in ${shown}`);
        for (const want of expect[i] || [])
            check(`${what}: shows ${JSON.stringify(want)}`, text.includes(want), shown);
    }
    for (const r of asked.filter(x => x.answered.name))
        (namesSeen[client] ||= new Set()).add(r.answered.name);
    const lost = asked.filter(x => x.answered.missing && x.answered.text !== 'ok');
    check(`${label}: the model found every tool it asked for`, lost.length === 0, lost.map(x => x.answered.text));
}

// After a session: the client has exited; its server must not leave a
// sandbox running (it gets a grace period to stop it), and never more
// than one sandbox for the project.
// The processes that end sessions after their servers are gone (`sandpod
// mcp --finish-session ... --state-root spHome`): a session is over when its
// finisher is.
function finishers() {
    let n = 0;
    for (const pid of fs.readdirSync('/proc').filter(d => /^[0-9]+$/.test(d))) {
        let argv;
        try { argv = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0'); } catch { continue; }
        if (argv.includes('--finish-session') && argv.includes(spHome))
            n++;
    }
    return n;
}

async function checkSandboxes(label, want) {
    let list = sandboxes();
    const start = Date.now();
    while ((list.some(s => s.running) || finishers() > 0) && Date.now() - start < 30000) {
        await new Promise(r => setTimeout(r, 500));
        list = sandboxes();
    }
    const desc = list.map(s => `${s.name} ${s.state}`).join(', ') || 'none';
    check(`${label}: no sandbox left running after the session`, !list.some(s => s.running), desc);
    check(`${label}: no sandbox record whose container is gone`, !list.some(s => s.state === 'missing'), `${desc} (a server killed during its exit cleanup leaves this)`);
    if (want === 0)
        check(`${label}: no sandbox (nothing was changed yet)`, list.length === 0, desc);
    else
        check(`${label}: exactly one sandbox for the project`, list.length === 1, desc);
    return { list, waitedMs: Date.now() - start };
}

// ------------------------------------------------------------- sessions
const timings = [];
async function session(n, label, client, script, expect, sandboxesAfter) {
    const final = `session ${n} done`;
    api.play({ ...script, final }, label);
    let r;
    if (client === 'claude')
        r = await run('claude', ['-p', `Session ${n}: work in the sandbox with the sandpod tools.`, '--allowedTools', 'mcp__sandpod']);
    else if (client === 'codex')
        // --strict-config: a key of config.toml this Codex does not know
        // fails instead of being ignored.
        r = await run('codex', ['exec', '--strict-config', '--skip-git-repo-check', `Session ${n}: work in the sandbox with the sandpod tools.`]);
    else
        r = await run(process.execPath, [path.join(here, 'agents_sdk.mjs'), OPENAI_BASE, `Session ${n}: work in the sandbox with the sandpod tools.`, '--', 'sandpod', 'mcp', ...targetIn(project)]);
    say(`${label}: exit ${r.code}${r.signal ? ' ' + r.signal : ''} in ${(r.ms / 1000).toFixed(1)} s, ${api.requests.filter(x => x.session === api.session).length} model requests`);
    check(`${label}: the client exits 0`, r.code === 0, `${r.signal || ''} ${r.err.slice(-1500)}`);
    check(`${label}: the client printed the model's last answer`, r.out.includes(final), (r.out + r.err).slice(-1500));
    checkResults(label, client, script, expect);
    const s = await checkSandboxes(label, sandboxesAfter);
    timings.push({ label, ms: r.ms, stopMs: s.waitedMs });
    return s.list;
}

async function health(n, label, cmd, args, want, sandboxesAfter) {
    const r = await run(cmd, args);
    say(`${label}: exit ${r.code} in ${(r.ms / 1000).toFixed(1)} s`);
    check(`${label}: exits 0`, r.code === 0, r.err.slice(-1500));
    check(`${label}: reports sandpod ${want}`, new RegExp(`sandpod.*${want}`).test(r.out), r.out.slice(-1500));
    const s = await checkSandboxes(label, sandboxesAfter);
    timings.push({ label, ms: r.ms, stopMs: s.waitedMs });
}

try {
    say(`sandpod mcp ${TARGET.join(' ')}; scratch ${root}; model API on 127.0.0.1:${port}`);
    await register();
    // A read-only start: listing tools makes no sandbox, and a session
    // that changed nothing leaves none.
    await health(1, '1 claude mcp list', 'claude', ['mcp', 'list'], 'Connected', 0);
    await session(2, '2 claude -p (read, shell)', 'claude', readAndRun('claude'), { 0: ['L5: note 5', 'offset=6'], 1: ['from-claude', '30 notes.txt'] }, 0);
    await health(3, '3 codex mcp list', 'codex', ['mcp', 'list'], 'enabled', 0);
    await session(4, '4 codex exec (read, shell)', 'codex', readAndRun('codex'), { 0: ['L5: note 5', 'offset=6'], 1: ['from-codex', '30 notes.txt'] }, 0);
    await session(5, '5 agents SDK (read, shell)', 'agents', readAndRun('agents'), { 0: ['L5: note 5', 'offset=6'], 1: ['from-agents', '30 notes.txt'] }, 0);
    // Writing sessions: the sandbox is made, kept with the work, and each
    // later session (of any client) sees the earlier ones' changes.
    await session(6, '6 claude -p (edit, patch, shell, read)', 'claude', writes('claude'), { 2: ['state: patched by claude'], 3: ['L2: state: patched by claude'] }, 1);
    await session(7, '7 codex exec (read, edit, patch, shell, read)', 'codex', writes('codex', 'claude'), { 0: ['L2: state: patched by claude'], 3: ['state: patched by codex'], 4: ['L2: state: patched by codex'] }, 1);
    await session(8, '8 agents SDK (read, edit, patch, shell, read)', 'agents', writes('agents', 'codex'), { 0: ['L2: state: patched by codex'], 3: ['state: patched by agents'], 4: ['L2: state: patched by agents'] }, 1);
    await health(9, '9 claude mcp list', 'claude', ['mcp', 'list'], 'Connected', 1);
    const last = await session(10, '10 claude -p (read all)', 'claude', readAll(), Object.fromEntries(CLIENTS.map((c, i) => [i, [`L2: state: patched by ${c}`]])), 1);
    // The work is in the kept sandbox, for `sandpod diff` and `apply`.
    if (last.length === 1) {
        let diff = '';
        try {
            diff = sandpod('diff', last[0].name);
        } catch (e) {
            diff = String(e.stderr || e);
        }
        check('sandpod diff names the three changed files', CLIENTS.every(c => diff.includes(`${c}.txt`)), diff.slice(0, 600));
    }
    for (const [c, names] of Object.entries(namesSeen))
        say(`${c} named the tools: ${[...names].sort().join(', ')}`);
    for (const t of timings)
        say(`timing: ${t.label}: ${(t.ms / 1000).toFixed(1)} s${t.stopMs > 100 ? `, then ${(t.stopMs / 1000).toFixed(1)} s until no sandbox ran` : ''}`);
} finally {
    await api.close();
    // Every sandbox of the private state root, then the scratch folder.
    let left = [];
    try {
        left = sandboxes().map(s => s.name);
        if (left.length)
            sandpod('rm', '-f', ...left);
    } catch (e) {
        console.log(`cleanup: sandpod rm -f ${left.join(' ')}: ${e.stderr || e}`);
    }
    if (process.env.SANDPOD_AGENT_CLIENTS_KEEP === '1')
        say(`kept ${root}`);
    else
        fs.rmSync(root, { recursive: true, force: true });
}
say(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
