// sandpod mcp --root DIR through the official MCP TypeScript SDK client:
// both protocol revisions, outputSchema validation (the SDK checks every
// structuredContent against the tool's outputSchema), parallel calls,
// cancellation by a client timeout, and the answers to requests already
// sent when stdin closes. Prints 'N passed, M failed'.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import {
    CallToolResultSchema,
    ElicitRequestSchema,
    InitializeResultSchema,
    ListToolsResultSchema,
} from '@modelcontextprotocol/sdk/types.js';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const SP = path.resolve(process.argv[2] || 'sandpod');
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'sandpod-sdk-'));
fs.writeFileSync(path.join(root, 'a.txt'), 'alpha\nbeta\n');
fs.writeFileSync(path.join(root, 'keep.txt'), 'kept\n');
let passed = 0, failed = 0;
function check(what, cond, detail) {
    if (cond) passed++;
    else {
        failed++;
        console.log(`FAIL: ${what}${detail === undefined ? '' : ': ' + JSON.stringify(detail).slice(0, 600)}`);
    }
}

async function connect(args, capabilities = {}) {
    const client = new Client({ name: 'sandpod-sdk-test', version: '1' }, { capabilities });
    const transport = new StdioClientTransport({ command: SP, args: ['mcp', '--root', root, ...args], stderr: 'ignore' });
    await client.connect(transport);
    return client;
}

// ------------------------------------------------ 2025-11-25, the SDK's own
{
    const client = await connect([]);
    // The SDK offers 2025-11-25; serverInfo.description is that revision's.
    const info = client.getServerVersion();
    check('2025-11-25 negotiated by the SDK', info?.name === 'sandpod' && typeof info?.description === 'string', info);
    const { tools } = await client.listTools();
    check('tools/list through the SDK', tools.some(t => t.name === 'read_file' && t.outputSchema), tools.map(t => t.name));

    // Every call's structuredContent is validated by the SDK against outputSchema.
    const calls = [
        ['list_dir', {}], ['read_file', { path: 'a.txt' }], ['stat', { path: 'a.txt' }],
        ['glob', { pattern: '*.txt' }], ['grep', { pattern: 'beta' }],
        ['write_file', { path: 'w.txt', content: 'w\n' }],
        ['edit_file', { path: 'w.txt', old_string: 'w', new_string: 'W' }],
        ['insert', { path: 'w.txt', line: -1, text: 'end' }], ['mkdir', { path: 'd' }],
        ['delete', { path: 'd' }], ['read_file', { path: 'nope.txt' }],
    ];
    for (const [name, args] of calls) {
        try {
            const r = await client.callTool({ name, arguments: args });
            check(`${name}: valid per the SDK, one text content`, r.content.length === 1 && r.content[0].type === 'text' && r.structuredContent && !('message' in r.structuredContent), r);
        } catch (e) {
            check(`${name}: valid per the SDK`, false, String(e));
        }
    }

    // Parallel calls: all answered, each with its own answer.
    const names = Array.from({ length: 8 }, (_, i) => `p${i}.txt`);
    names.forEach(n => fs.writeFileSync(path.join(root, n), `${n}\n`));
    const rs = await Promise.all(names.map(n => client.callTool({ name: 'read_file', arguments: { path: n } })));
    check('parallel calls: every answer matches its request', rs.every((r, i) => r.content[0].text === `L1: ${names[i]}\n`), rs.map(r => r.content[0].text));
    await client.close();
}

// ------------------------------------------ cancellation by a client timeout
{
    let asked = 0;
    const client = await connect(['--approval', 'untrusted'], { elicitation: {} });
    client.setRequestHandler(ElicitRequestSchema, () => { asked++; return new Promise(() => {}); });
    await client.listTools();
    let timedOut = false;
    try {
        await client.callTool({ name: 'write_file', arguments: { path: 'keep.txt', content: 'changed\n' } }, undefined, { timeout: 800 });
    } catch (e) {
        timedOut = /timed out|timeout/i.test(String(e));
    }
    check('a held call times out in the client', timedOut && asked === 1, { timedOut, asked });
    const r = await client.callTool({ name: 'read_file', arguments: { path: 'keep.txt' } });
    check('the timed-out (cancelled) call changed nothing, the next is answered', r.content[0].text === 'L1: kept\n', r);
    // An AbortSignal cancels as well.
    const ac = new AbortController();
    const p = client.callTool({ name: 'delete', arguments: { path: 'keep.txt' } }, undefined, { signal: ac.signal });
    setTimeout(() => ac.abort('no'), 300);
    let aborted = false;
    try { await p; } catch { aborted = true; }
    const r2 = await client.callTool({ name: 'stat', arguments: { path: 'keep.txt' } });
    check('an aborted call is cancelled and deletes nothing', aborted && r2.isError === false, r2);
    await client.close();
}

// -------------------- 2025-06-18, and the answers after stdin closes (SDK transport)
{
    const transport = new StdioClientTransport({ command: SP, args: ['mcp', '--root', root], stderr: 'ignore' });
    const got = [];
    const closed = new Promise(resolve => { transport.onclose = resolve; });
    transport.onmessage = m => got.push(m);
    await transport.start();
    const send = m => transport.send({ jsonrpc: '2.0', ...m });
    await send({ id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } } });
    await send({ method: 'notifications/initialized' });
    await send({ id: 2, method: 'tools/list' });
    await send({ id: 3, method: 'tools/call', params: { name: 'write_file', arguments: { path: 'eof.txt', content: 'e\n' } } });
    await send({ id: 4, method: 'tools/call', params: { name: 'read_file', arguments: { path: 'eof.txt' } } });
    await send({ id: 5, method: 'tools/call', params: { name: 'grep', arguments: { pattern: 'alpha' } } });
    transport._process.stdin.end();
    await Promise.race([closed, new Promise(r => setTimeout(r, 30000))]);
    const by = id => got.find(m => m.id === id);
    check('2025-06-18 negotiated when offered', by(1)?.result?.protocolVersion === '2025-06-18', by(1));
    check('initialize result valid per the SDK', InitializeResultSchema.safeParse(by(1)?.result).success);
    check('tools/list valid per the SDK', ListToolsResultSchema.safeParse(by(2)?.result).success);
    check('stdin closed: every request answered', [3, 4, 5].every(id => CallToolResultSchema.safeParse(by(id)?.result).success), got);
    check('...the read seeing the write', by(4)?.result?.content?.[0]?.text === 'L1: e\n', by(4));
}

fs.rmSync(root, { recursive: true, force: true });
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
