// One session of an OpenAI Agents SDK (JS) agent with sandpod as its MCP
// server, the way an application registers it:
//   node agents_sdk.mjs BASE_URL PROMPT -- COMMAND ARGS...
// BASE_URL is an OpenAI-compatible Responses API (the tests' scripted one);
// COMMAND ARGS start the MCP server (sandpod mcp --project DIR). Prints the
// agent's final output.
import { Agent, MCPServerStdio, run, setDefaultOpenAIClient, setOpenAIAPI, setTracingDisabled } from '@openai/agents';
import OpenAI from 'openai';

const sep = process.argv.indexOf('--');
const [baseURL, prompt] = process.argv.slice(2, sep);
const [command, ...args] = process.argv.slice(sep + 1);
if (sep < 0 || !baseURL || !prompt || !command) {
    console.error('usage: node agents_sdk.mjs BASE_URL PROMPT -- COMMAND ARGS...');
    process.exit(2);
}

setTracingDisabled(true);
setOpenAIAPI('responses');
setDefaultOpenAIClient(new OpenAI({ apiKey: process.env.OPENAI_API_KEY || 'sk-dummy', baseURL }));

// The MCP SDK starts a server with HOME, LOGNAME, PATH, SHELL, TERM and
// USER only: sandpod needs SANDPOD_HOME (its state root) and, under
// rootless Podman, XDG_RUNTIME_DIR (where the user's service listens).
const env = Object.fromEntries(Object.entries(process.env).filter(([, v]) => v !== undefined));
const server = new MCPServerStdio({
    name: 'sandpod',
    command,
    args,
    env,
    // Milliseconds a tools/call may take (the SDK's default is 60 s, as
    // long as sandpod lets a shell command run by default, and a first
    // call may make the sandbox). initialize and tools/list keep the
    // SDK's 5 s (clientSessionTimeoutSeconds): sandpod answers at once.
    timeout: 300000,
});
await server.connect();
try {
    const agent = new Agent({
        name: 'sandpod-test-agent',
        instructions: 'Work in the sandbox with the sandpod tools.',
        model: 'scripted-model',
        mcpServers: [server],
    });
    const result = await run(agent, prompt, { maxTurns: 20 });
    console.log(result.finalOutput);
} finally {
    await server.close();
}
