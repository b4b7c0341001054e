// A scripted model API on 127.0.0.1 for the agent clients under test:
// Anthropic Messages (POST /v1/messages, SSE or JSON) and OpenAI Responses
// (POST /v1/responses, SSE or JSON). It plays a script instead of thinking:
// while the conversation holds fewer results of our tool calls than the
// script has steps, it answers the next step's tool call; then it answers
// the script's final text. Requests that offer none of the script's tools
// (titles, quota checks, summaries) get a short text. Every request is
// recorded (and appended to a JSONL file when one is given), so a test can
// read what the client showed the model for each tool result.
//
// Tool names: a step names a sandpod tool (read_file); the request's tools
// say how this client exposes it (Claude Code mcp__sandpod__read_file,
// Codex and the Agents SDK something else): the step uses the one tool
// whose name ends with the sandpod name.
//
// Standalone: node model_api.mjs [LOG.jsonl] prints the port; the script
// is then set with POST /_script {steps, final}.
import fs from 'node:fs';
import http from 'node:http';

// One result a client gave back for one of our calls: {step, id, output}
// where output is what the model was shown, as the client sent it (a
// string, or the client's array of content blocks).
export function textOf(output) {
    if (typeof output === 'string')
        return output;
    if (Array.isArray(output))
        return output.map(textOf).join('\n');
    if (output && typeof output === 'object') {
        if (typeof output.text === 'string')
            return output.text;
        if (output.content !== undefined)
            return textOf(output.content);
        if (output.output !== undefined)
            return textOf(output.output);
        return JSON.stringify(output);
    }
    return output === undefined ? '' : String(output);
}

function toolNames(body) {
    const names = [];
    for (const t of body.tools || []) {
        if (typeof t.name === 'string')
            names.push(t.name);
        else if (t.function && typeof t.function.name === 'string')
            names.push(t.function.name);
        // A namespace of tools (Responses API; Codex puts an MCP server's
        // tools in one): its tools as NAMESPACE__TOOL.
        for (const s of t.tools || [])
            if (typeof s.name === 'string')
                names.push(nsName(t.name, s.name));
    }
    return names;
}

function nsName(ns, name) {
    return ns.endsWith('__') ? `${ns}${name}` : `${ns}__${name}`;
}

// The client's name for a sandpod tool: exactly it, or ending in a
// separator and it, with "sandpod" in it when several match.
export function clientToolName(names, tool) {
    const hits = names.filter(n => n === tool || n.endsWith(`__${tool}`) || n.endsWith(`.${tool}`) || n.endsWith(`/${tool}`));
    if (hits.length <= 1)
        return hits[0];
    return hits.find(n => n.includes('sandpod')) || hits[0];
}

// The full name of a tool the client lists by name only (deferred): the
// name with a sandpod prefix that the request's text mentions.
function deferredName(body, tool) {
    const re = new RegExp(`(?<![A-Za-z0-9_.-])[A-Za-z0-9_.-]*sandpod[A-Za-z0-9_.-]*__${tool}(?![A-Za-z0-9_])`);
    let found = null;
    const walk = v => {
        if (found)
            return;
        if (typeof v === 'string') {
            const m = re.exec(v);
            if (m)
                found = m[0];
        } else if (v && typeof v === 'object') {
            for (const x of Array.isArray(v) ? v : Object.values(v))
                walk(x);
        }
    };
    walk([body.system, body.messages]);
    return found;
}

export class ModelApi {
    constructor(logPath) {
        this.logPath = logPath || null;
        this.requests = [];
        this.script = { steps: [], final: 'done' };
        this.session = 0;
        this.server = http.createServer((req, res) => this.handle(req, res));
    }

    listen() {
        return new Promise((resolve, reject) => {
            this.server.once('error', reject);
            this.server.listen(0, '127.0.0.1', () => {
                this.port = this.server.address().port;
                resolve(this.port);
            });
        });
    }

    close() {
        this.server.closeAllConnections?.();
        return new Promise(resolve => this.server.close(() => resolve()));
    }

    // A new session plays script {steps: [{tool, args}], final: TEXT};
    // call ids carry the session number, so a result is matched to its
    // step and never to an earlier session's.
    play(script, label = '') {
        this.session++;
        this.script = { steps: script.steps || [], final: script.final || 'done' };
        this.label = label;
        return this.session;
    }

    callId(step, prefix, kind = 's') {
        return `${prefix}sp${this.session}${kind}${step}`;
    }

    // What this session's calls got back, by step, from the last request
    // that carried each: [{step, id, name, output, text, request}].
    results(session = this.session) {
        const found = new Map();
        for (const r of this.requests) {
            if (r.session !== session)
                continue;
            for (const res of r.results)
                found.set(res.step, { ...res, text: textOf(res.output), request: r.seq });
        }
        return [...found.values()].sort((a, b) => a.step - b.step);
    }

    record(entry) {
        this.requests.push(entry);
        if (this.logPath)
            fs.appendFileSync(this.logPath, JSON.stringify(entry) + '\n');
    }

    async handle(req, res) {
        const chunks = [];
        for await (const c of req)
            chunks.push(c);
        const raw = Buffer.concat(chunks).toString('utf8');
        let body = null;
        try {
            body = raw ? JSON.parse(raw) : null;
        } catch {
            body = null;
        }
        const url = new URL(req.url, 'http://127.0.0.1');
        const path = url.pathname;
        const seq = this.requests.length + 1;
        const entry = { seq, t: new Date().toISOString(), session: this.session, label: this.label, method: req.method, path, headers: { 'user-agent': req.headers['user-agent'] || '' }, body: body ?? (raw || null), results: [], answered: null };
        try {
            if (req.method === 'POST' && path === '/_script') {
                this.play(body || {});
                return send(res, 200, { session: this.session });
            }
            if (req.method === 'POST' && /\/v1\/messages\/count_tokens$/.test(path))
                return send(res, 200, { input_tokens: 100 });
            if (req.method === 'POST' && /\/v1\/messages$/.test(path))
                return this.anthropic(entry, body || {}, res);
            if (req.method === 'POST' && /\/responses$/.test(path))
                return this.responses(entry, body || {}, res);
            if (req.method === 'GET' && /\/models$/.test(path))
                return send(res, 200, { object: 'list', data: [{ id: 'scripted-model', object: 'model', created: 0, owned_by: 'sandpod-test' }], models: [] });
            // Anything else a client calls at startup (telemetry, feature
            // flags, account checks) gets an empty answer, and is recorded.
            return send(res, 404, { error: { type: 'not_found', message: `the scripted model API has no ${req.method} ${path}` } });
        } finally {
            this.record(entry);
        }
    }

    // The next step for a request: how many of this session's calls it
    // already holds results of, and the client's tool names. A client that
    // defers its MCP tools (Claude Code lists them by name and offers
    // ToolSearch to load their schemas) gets a ToolSearch call first, as a
    // model would make.
    decide(entry, body, results, searched) {
        entry.results = results;
        const names = toolNames(body);
        const done = new Set(results.map(r => r.step));
        const steps = this.script.steps;
        let step = 0;
        while (done.has(step))
            step++;
        if (step >= steps.length) {
            entry.answered = { text: this.script.final };
            return { text: this.script.final };
        }
        const want = steps[step].tool;
        const name = clientToolName(names, want);
        if (name) {
            entry.answered = { step, name };
            return { step, name, args: steps[step].args || {} };
        }
        const deferred = deferredName(body, want);
        if (deferred && names.includes('ToolSearch') && !searched.has(step)) {
            const all = [...new Set(steps.map(s => deferredName(body, s.tool)).filter(Boolean))];
            entry.answered = { step, search: all };
            return { step, search: `select:${all.join(',')}` };
        }
        // Requests without our tools are a client's side tasks (titles,
        // summaries): they get a short text. A conversation that should
        // have them says what it found instead.
        const text = results.length || searched.size ? `the scripted model found no tool ${want} among: ${names.join(', ')}` : 'ok';
        entry.answered = { text, missing: want, offered: names };
        return { text };
    }

    ourStep(id, kind = 's') {
        const m = new RegExp(`sp(\\d+)${kind}(\\d+)$`).exec(id || '');
        return m && Number(m[1]) === this.session ? Number(m[2]) : -1;
    }

    // ---------------------------------------------------- Anthropic Messages
    anthropic(entry, body, res) {
        const results = [];
        const searched = new Set();
        for (const m of body.messages || []) {
            if (!Array.isArray(m.content))
                continue;
            for (const b of m.content) {
                if (b.type !== 'tool_result')
                    continue;
                const step = this.ourStep(b.tool_use_id);
                if (step >= 0)
                    results.push({ step, id: b.tool_use_id, output: b.content, is_error: !!b.is_error });
                const q = this.ourStep(b.tool_use_id, 'q');
                if (q >= 0)
                    searched.add(q);
            }
        }
        const next = this.decide(entry, body, results, searched);
        const model = body.model || 'scripted-model';
        const msgId = `msg_sp${this.session}r${entry.seq}`;
        const usage = { input_tokens: 100, output_tokens: 10, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 };
        let block, stop;
        if (next.name) {
            block = { type: 'tool_use', id: this.callId(next.step, 'toolu_'), name: next.name, input: next.args };
            stop = 'tool_use';
        } else if (next.search) {
            block = { type: 'tool_use', id: this.callId(next.step, 'toolu_', 'q'), name: 'ToolSearch', input: { query: next.search } };
            stop = 'tool_use';
        } else {
            block = { type: 'text', text: next.text };
            stop = 'end_turn';
        }
        if (!body.stream)
            return send(res, 200, { id: msgId, type: 'message', role: 'assistant', model, content: [block], stop_reason: stop, stop_sequence: null, usage });
        const ev = sse(res);
        ev('message_start', { type: 'message_start', message: { id: msgId, type: 'message', role: 'assistant', model, content: [], stop_reason: null, stop_sequence: null, usage: { ...usage, output_tokens: 1 } } });
        if (block.type === 'tool_use') {
            ev('content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'tool_use', id: block.id, name: block.name, input: {} } });
            ev('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: JSON.stringify(block.input) } });
        } else {
            ev('content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } });
            ev('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: block.text } });
        }
        ev('content_block_stop', { type: 'content_block_stop', index: 0 });
        ev('message_delta', { type: 'message_delta', delta: { stop_reason: stop, stop_sequence: null }, usage: { output_tokens: 10 } });
        ev('message_stop', { type: 'message_stop' });
        res.end();
    }

    // ----------------------------------------------------- OpenAI Responses
    responses(entry, body, res) {
        const results = [];
        const input = Array.isArray(body.input) ? body.input : [];
        for (const it of input) {
            // function_call_output (a function tool), mcp_call (a hosted
            // MCP item carrying its own output), custom_tool_call_output.
            if (it.type === 'function_call_output' || it.type === 'custom_tool_call_output') {
                const step = this.ourStep(it.call_id);
                if (step >= 0)
                    results.push({ step, id: it.call_id, output: it.output });
            } else if (it.type === 'mcp_call') {
                const step = this.ourStep(it.id);
                if (step >= 0)
                    results.push({ step, id: it.id, output: it.output, error: it.error });
            }
        }
        const next = this.decide(entry, body, results, new Set());
        const model = body.model || 'scripted-model';
        const respId = `resp_sp${this.session}r${entry.seq}`;
        let item;
        if (next.name) {
            const callId = this.callId(next.step, 'call_');
            item = { type: 'function_call', id: `fc_sp${this.session}r${entry.seq}`, call_id: callId, name: next.name, arguments: JSON.stringify(next.args), status: 'completed' };
            // A namespaced tool: the call names the namespace and the tool.
            for (const t of body.tools || []) {
                const sub = t.type === 'namespace' && (t.tools || []).find(s => nsName(t.name, s.name) === next.name);
                if (sub) {
                    item.namespace = t.name;
                    item.name = sub.name;
                }
            }
        } else {
            item = { type: 'message', id: `msg_sp${this.session}r${entry.seq}`, role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: next.text, annotations: [] }] };
        }
        const usage = { input_tokens: 100, input_tokens_details: { cached_tokens: 0 }, output_tokens: 10, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 110 };
        const base = { id: respId, object: 'response', created_at: Math.floor(Date.now() / 1000), model, output: [], parallel_tool_calls: false, tool_choice: body.tool_choice || 'auto', tools: [], usage: null, error: null, incomplete_details: null, instructions: null, metadata: {}, temperature: 1, top_p: 1, text: { format: { type: 'text' } } };
        if (!body.stream)
            return send(res, 200, { ...base, status: 'completed', output: [item], usage });
        const ev = sse(res);
        let seq = 0;
        const emit = (type, data) => ev(type, { type, sequence_number: seq++, ...data });
        emit('response.created', { response: { ...base, status: 'in_progress' } });
        emit('response.in_progress', { response: { ...base, status: 'in_progress' } });
        if (item.type === 'function_call') {
            emit('response.output_item.added', { output_index: 0, item: { ...item, arguments: '', status: 'in_progress' } });
            emit('response.function_call_arguments.delta', { output_index: 0, item_id: item.id, delta: item.arguments });
            emit('response.function_call_arguments.done', { output_index: 0, item_id: item.id, arguments: item.arguments });
        } else {
            const text = item.content[0].text;
            emit('response.output_item.added', { output_index: 0, item: { ...item, status: 'in_progress', content: [] } });
            emit('response.content_part.added', { output_index: 0, item_id: item.id, content_index: 0, part: { type: 'output_text', text: '', annotations: [] } });
            emit('response.output_text.delta', { output_index: 0, item_id: item.id, content_index: 0, delta: text, logprobs: [] });
            emit('response.output_text.done', { output_index: 0, item_id: item.id, content_index: 0, text, logprobs: [] });
            emit('response.content_part.done', { output_index: 0, item_id: item.id, content_index: 0, part: item.content[0] });
        }
        emit('response.output_item.done', { output_index: 0, item });
        emit('response.completed', { response: { ...base, status: 'completed', output: [item], usage } });
        res.end();
    }
}

function send(res, status, obj) {
    const data = JSON.stringify(obj);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) });
    res.end(data);
}

function sse(res) {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
    return (event, data) => res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
}

if (import.meta.url === `file://${process.argv[1]}`) {
    const api = new ModelApi(process.argv[2]);
    const port = await api.listen();
    console.log(port);
}
