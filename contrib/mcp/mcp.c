/* The MCP server: newline-delimited JSON-RPC 2.0 on a pair of fds.
 *
 * The main thread reads and answers everything but tools/call, which goes to a bounded list of
 * jobs in arrival order (SP_MCP_MAX_QUEUED waiting) served by WORKERS threads. A job starts once
 * every earlier job it conflicts with has ended (see can_start()): the calls that change files or
 * run commands form one lane in arrival order, and read-only file tools run beside them, each
 * after the earlier writes to the workspace but not after an earlier command. A quick read
 * (read_file, stat) that finds nothing else to do runs on the main thread. The main thread wakes
 * at least every TICK_MS to send progress notifications and to poll should_stop; it handles
 * notifications/cancelled by flagging the job and, for the running lane job, calling
 * sp_tools_cancel(); it delivers the client's answers to elicitation requests. At the end of the
 * input it waits for every job it has read to be answered. Every write to the output is one whole
 * line under out_mu. */
#include <errno.h>
#include <stddef.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fs_json.h"
#include "mcp.h"
#include "mcp_internal.h"
#include "sandpod.h"
#include "tools_internal.h"

#define TICK_MS 250
/* Threads that run tool calls: one lane call and the reads beside it. */
#define WORKERS        4
#define PROGRESS_EVERY 1000
#define READ_CHUNK     65536
/* A line longer than this is refused (and skipped to its end). */
#define MAX_LINE ((size_t)256 << 20)
/* How long an approval question may stay unanswered. */
#define APPROVAL_TIMEOUT_MS (10 * 60 * 1000)

enum {
    RPC_PARSE_ERROR = -32700,
    RPC_INVALID_REQUEST = -32600,
    RPC_METHOD_NOT_FOUND = -32601,
    RPC_INVALID_PARAMS = -32602,
    RPC_INTERNAL_ERROR = -32603,
    /* Implementation-defined server errors are -32000 to -32099. */
    RPC_SERVER_BUSY = SP_MCP_BUSY,
};

static const char *const versions[] = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05",
                                       NULL};

typedef struct job {
    cJSON *id;
    char *name;
    char *args;
    cJSON *progress_token;
    bool read;         /* a read-only file tool: runs beside the lane */
    bool blocks_reads; /* changes files (not a command): later reads wait for it */
    bool started;
    bool cancelled;
    size_t bytes; /* what it holds, counted against MAX_QUEUED_BYTES */
    int64_t started_ms;
    int64_t last_progress_ms;
    double last_progress;
    struct job *next;
} job;

typedef struct server {
    sp_tools *tools;
    int in_fd, out_fd;
    sp_mcp_opts opts;
    pthread_mutex_t out_mu;
    bool out_broken;

    pthread_mutex_t mu;
    pthread_cond_t cond;
    job *head, *tail;              /* every job not yet answered, in arrival order */
    size_t n_queued, queued_bytes; /* of the jobs not started */
    job *lane;                     /* the running job of the lane, or NULL */
    bool quit;                     /* workers end once nothing can start */
    bool input_closed;             /* nobody can answer an elicitation any more */

    bool client_elicit;
    uint64_t elicit_seq;
    char *elicit_id; /* the pending question's id, or NULL */
    cJSON *elicit_answer;
    bool elicit_done;

    char *tools_list; /* the tools/list result, as text */
} server;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void logf_(const server *s, const char *fmt, ...) TOOLS_PRINTF(2, 3);
static void logf_(const server *s, const char *fmt, ...)
{
    if (!s->opts.verbose)
        return;
    va_list ap;
    va_start(ap, fmt);
    char *m = NULL;
    if (vasprintf(&m, fmt, ap) >= 0) {
        fprintf(stderr, "sandpod mcp: %s\n", m);
        free(m);
    }
    va_end(ap);
}

static void job_free(job *j)
{
    if (!j)
        return;
    cJSON_Delete(j->id);
    cJSON_Delete(j->progress_token);
    free(j->name);
    free(j->args);
    free(j);
}

/* ------------------------------------------------------------- output -- */

static void send_text(server *s, const char *text)
{
    size_t n = strlen(text);
    char *line = sp_xmalloc(n + 1);
    memcpy(line, text, n);
    line[n] = '\n';
    pthread_mutex_lock(&s->out_mu);
    size_t off = 0;
    while (!s->out_broken && off < n + 1) {
        ssize_t w = write(s->out_fd, line + off, n + 1 - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            s->out_broken = true;
            break;
        }
        off += (size_t)w;
    }
    pthread_mutex_unlock(&s->out_mu);
    free(line);
}

/* Send a message object (consumed). */
static void send_json(server *s, cJSON *msg)
{
    if (!msg)
        return;
    char *text = cJSON_PrintUnformatted(msg);
    cJSON_Delete(msg);
    if (!text) {
        fputs("sandpod mcp: out of memory\n", stderr);
        return;
    }
    send_text(s, text);
    free(text);
}

static cJSON *envelope(const cJSON *id)
{
    cJSON *m = cJSON_CreateObject();
    if (!m)
        return NULL;
    cJSON_AddStringToObject(m, "jsonrpc", "2.0");
    cJSON_AddItemToObject(m, "id", id ? cJSON_Duplicate(id, true) : cJSON_CreateNull());
    return m;
}

static void send_result(server *s, const cJSON *id, cJSON *result)
{
    cJSON *m = envelope(id);
    if (!m || !result) {
        cJSON_Delete(m);
        cJSON_Delete(result);
        return;
    }
    cJSON_AddItemToObject(m, "result", result);
    send_json(s, m);
}

static void send_error(server *s, const cJSON *id, int code, const char *fmt, ...)
    TOOLS_PRINTF(4, 5);
static void send_error(server *s, const cJSON *id, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *msg = NULL;
    if (vasprintf(&msg, fmt, ap) < 0)
        msg = NULL;
    va_end(ap);
    cJSON *m = envelope(id);
    cJSON *e = cJSON_CreateObject();
    if (m && e) {
        cJSON_AddNumberToObject(e, "code", code);
        cJSON *ms = sp_json_string(msg ? msg : "error");
        if (ms)
            cJSON_AddItemToObject(e, "message", ms);
        cJSON_AddItemToObject(m, "error", e);
        e = NULL;
        send_json(s, m);
        m = NULL;
    }
    cJSON_Delete(m);
    cJSON_Delete(e);
    logf_(s, "error %d: %s", code, msg ? msg : "?");
    free(msg);
}

static void send_notification(server *s, const char *method, cJSON *params)
{
    cJSON *m = cJSON_CreateObject();
    if (!m) {
        cJSON_Delete(params);
        return;
    }
    cJSON_AddStringToObject(m, "jsonrpc", "2.0");
    cJSON_AddStringToObject(m, "method", method);
    if (params)
        cJSON_AddItemToObject(m, "params", params);
    send_json(s, m);
}

/* -------------------------------------------------------------- tools -- */

/* Run j, answer it unless it was cancelled meanwhile; the caller frees it. */
static void run_job(server *s, job *j)
{
    logf_(s, "call %s", j->name);
    char *result = NULL;
    sp_tools_call(&result, s->tools, j->name, j->args, strlen(j->args));

    pthread_mutex_lock(&s->mu);
    bool cancelled = j->cancelled;
    pthread_mutex_unlock(&s->mu);
    if (cancelled) {
        /* A cancelled request gets no answer. */
        logf_(s, "call %s cancelled", j->name);
        free(result);
    } else {
        cJSON *r = mcp_call_result(result, s->opts.structured);
        if (r)
            send_result(s, j->id, r);
        else
            send_error(s, j->id, RPC_INTERNAL_ERROR, "out of memory");
    }
}

/* The ordering rule. A lane job (it changes files or runs a command)
 * starts when every earlier job has ended: lane jobs run one at a time in
 * arrival order, after the reads that came before them. A read starts
 * when no earlier job that writes files (a file tool of the lane, not a
 * command) is still waiting or running: it sees every earlier write, and
 * does not wait for a running shell or session call. Called under mu. */
static bool can_start(const server *s, const job *j)
{
    for (const job *k = s->head; k && k != j; k = k->next)
        if (!j->read || k->blocks_reads)
            return false;
    return true;
}

static job *next_job(server *s)
{
    for (job *j = s->head; j; j = j->next)
        if (!j->started && !j->cancelled && can_start(s, j))
            return j;
    return NULL;
}

static void unlink_job(server *s, job *j)
{
    job *prev = NULL;
    for (job *k = s->head; k && k != j; k = k->next)
        prev = k;
    if (prev)
        prev->next = j->next;
    else if (s->head == j)
        s->head = j->next;
    if (s->tail == j)
        s->tail = prev;
    j->next = NULL;
    if (!j->started) {
        s->n_queued--;
        s->queued_bytes -= j->bytes;
    }
}

static void *worker_main(void *arg)
{
    server *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        job *j;
        while (!(j = next_job(s)) && !s->quit)
            pthread_cond_wait(&s->cond, &s->mu);
        if (!j)
            break;
        j->started = true;
        s->n_queued--;
        s->queued_bytes -= j->bytes;
        j->started_ms = j->last_progress_ms = now_ms();
        if (!j->read)
            s->lane = j;
        pthread_mutex_unlock(&s->mu);
        run_job(s, j);
        pthread_mutex_lock(&s->mu);
        if (s->lane == j)
            s->lane = NULL;
        unlink_job(s, j);
        job_free(j);
        pthread_cond_broadcast(&s->cond); /* later jobs may start; a drain may end */
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ---------------------------------------------------------- approvals -- */

static sp_tools_verdict approve(void *ud, const sp_tools_approval_request *req)
{
    server *s = ud;
    if (!s->client_elicit)
        return SP_VERDICT_UNAVAILABLE;
    pthread_mutex_lock(&s->mu);
    char *id = sp_xasprintf("sandpod-approval-%" PRIu64, ++s->elicit_seq);
    free(s->elicit_id);
    s->elicit_id = sp_xstrdup(id);
    cJSON_Delete(s->elicit_answer);
    s->elicit_answer = NULL;
    s->elicit_done = false;
    pthread_mutex_unlock(&s->mu);

    /* {message, requestedSchema: {approve: boolean, always: boolean}} */
    char *msg = sp_xasprintf("Allow %s? (%s is a %s tool, and the approval policy asks before it "
                             "runs.)",
                             req->summary, req->tool, sp_tool_tier_name(req->tier));
    char *always = sp_xasprintf("Also allow every later %s call in this session", req->tool);
    cJSON *m = cJSON_CreateObject();
    cJSON *params = cJSON_CreateObject();
    cJSON *schema = cJSON_CreateObject();
    cJSON *props = cJSON_CreateObject();
    cJSON *ap = cJSON_CreateObject();
    cJSON *al = cJSON_CreateObject();
    cJSON *reqd = cJSON_CreateArray();
    if (m && params && schema && props && ap && al && reqd) {
        cJSON_AddStringToObject(ap, "type", "boolean");
        cJSON_AddStringToObject(ap, "title", "Allow this call");
        cJSON_AddItemToObject(props, "approve", ap);
        cJSON_AddStringToObject(al, "type", "boolean");
        cJSON_AddStringToObject(al, "title", always);
        cJSON_AddFalseToObject(al, "default");
        cJSON_AddItemToObject(props, "always", al);
        cJSON_AddItemToArray(reqd, cJSON_CreateString("approve"));
        cJSON_AddStringToObject(schema, "type", "object");
        cJSON_AddItemToObject(schema, "properties", props);
        cJSON_AddItemToObject(schema, "required", reqd);
        cJSON *ms = sp_json_string(msg);
        if (ms)
            cJSON_AddItemToObject(params, "message", ms);
        cJSON_AddItemToObject(params, "requestedSchema", schema);
        cJSON_AddStringToObject(m, "jsonrpc", "2.0");
        cJSON_AddStringToObject(m, "id", id);
        cJSON_AddStringToObject(m, "method", "elicitation/create");
        cJSON_AddItemToObject(m, "params", params);
        send_json(s, m);
    } else {
        cJSON_Delete(m);
        cJSON_Delete(params);
        cJSON_Delete(schema);
        cJSON_Delete(props);
        cJSON_Delete(ap);
        cJSON_Delete(al);
        cJSON_Delete(reqd);
    }
    free(msg);
    free(always);
    logf_(s, "asked the client to approve %s", req->summary);

    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += APPROVAL_TIMEOUT_MS / 1000;
    sp_tools_verdict v = SP_VERDICT_DENY;
    pthread_mutex_lock(&s->mu);
    while (!s->elicit_done && !s->quit && !s->input_closed && !(s->lane && s->lane->cancelled)) {
        if (pthread_cond_timedwait(&s->cond, &s->mu, &ts) == ETIMEDOUT)
            break;
    }
    if (!s->elicit_done && s->input_closed)
        v = SP_VERDICT_UNAVAILABLE; /* the client can no longer answer */
    const cJSON *ans = s->elicit_answer;
    const cJSON *action = cJSON_GetObjectItemCaseSensitive(ans, "action");
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(ans, "content");
    if (s->elicit_done && cJSON_IsString(action) && strcmp(action->valuestring, "accept") == 0 &&
        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(content, "approve")))
        v = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(content, "always"))
                ? SP_VERDICT_ALLOW_ALWAYS
                : SP_VERDICT_ALLOW;
    free(s->elicit_id);
    s->elicit_id = NULL;
    cJSON_Delete(s->elicit_answer);
    s->elicit_answer = NULL;
    s->elicit_done = false;
    pthread_mutex_unlock(&s->mu);
    free(id);
    return v;
}

/* A response from the client: the answer to our elicitation, or nothing
 * we asked for (ignored). */
static void handle_response(server *s, const cJSON *msg)
{
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(msg, "id");
    pthread_mutex_lock(&s->mu);
    if (s->elicit_id && cJSON_IsString(id) && strcmp(id->valuestring, s->elicit_id) == 0) {
        const cJSON *res = cJSON_GetObjectItemCaseSensitive(msg, "result");
        s->elicit_answer = res ? cJSON_Duplicate(res, true) : NULL;
        s->elicit_done = true;
        pthread_cond_broadcast(&s->cond);
    }
    pthread_mutex_unlock(&s->mu);
}

/* ----------------------------------------------------------- requests -- */

static void handle_initialize(server *s, const cJSON *id, const cJSON *params)
{
    const cJSON *pv = cJSON_GetObjectItemCaseSensitive(params, "protocolVersion");
    if (!cJSON_IsObject(params) || !cJSON_IsString(pv)) {
        send_error(s, id, RPC_INVALID_PARAMS,
                   "initialize needs params.protocolVersion (a string such as \"%s\")",
                   SP_MCP_PROTOCOL_VERSION);
        return;
    }
    const char *version = SP_MCP_PROTOCOL_VERSION;
    for (size_t i = 0; versions[i]; i++)
        if (strcmp(pv->valuestring, versions[i]) == 0)
            version = versions[i];
    const cJSON *caps = cJSON_GetObjectItemCaseSensitive(params, "capabilities");
    s->client_elicit = cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(caps, "elicitation"));

    cJSON *r = cJSON_CreateObject();
    cJSON *sc = cJSON_CreateObject();
    cJSON *tc = cJSON_CreateObject();
    cJSON *info = cJSON_CreateObject();
    if (!r || !sc || !tc || !info) {
        cJSON_Delete(r);
        cJSON_Delete(sc);
        cJSON_Delete(tc);
        cJSON_Delete(info);
        send_error(s, id, RPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    cJSON_AddStringToObject(r, "protocolVersion", version);
    cJSON_AddFalseToObject(tc, "listChanged");
    cJSON_AddItemToObject(sc, "tools", tc);
    cJSON_AddItemToObject(r, "capabilities", sc);
    cJSON_AddStringToObject(info, "name", s->opts.server_name ? s->opts.server_name : "sandpod");
    cJSON_AddStringToObject(info, "title", "sandpod sandbox tools");
    cJSON_AddStringToObject(info, "version",
                            s->opts.server_version ? s->opts.server_version : sp_version());
    if (strcmp(version, "2025-11-25") >= 0)
        cJSON_AddStringToObject(info, "description",
                                "A model's tools (files, patches, commands, snapshots) over a "
                                "sandboxed workspace");
    cJSON_AddItemToObject(r, "serverInfo", info);
    char *ins = sp_xasprintf(
        "Tools over a sandbox workspace. File paths are relative to the workspace (which "
        "commands see as /workspace); '..' cannot leave it. Read before you edit; prefer "
        "edit_file or apply_patch for changes. Each answer's text is meant for you (on failure it "
        "says how to recover). "
        "Read-only file tools answer while a command runs; calls that change files run one at "
        "a time in the order sent.%s%s",
        s->opts.instructions ? " " : "", s->opts.instructions ? s->opts.instructions : "");
    cJSON_AddStringToObject(r, "instructions", ins);
    free(ins);
    logf_(s, "initialize: client asked for %s, answering %s%s", pv->valuestring, version,
          s->client_elicit ? " (client supports elicitation)" : "");
    send_result(s, id, r);
}

/* Tools that never ask for approval (read-only) and end at once: the main
 * thread may run them itself, since there is nothing to cancel or report
 * progress on. Not grep, glob or list_dir, whose walks can be long. */
static bool quick_tool(const char *name)
{
    return strcmp(name, "read_file") == 0 || strcmp(name, "stat") == 0;
}

static void handle_tools_call(server *s, const cJSON *id, const cJSON *params, const char *line,
                              size_t len)
{
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(params, "name");
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(params, "arguments");
    if (!cJSON_IsObject(params) || !cJSON_IsString(name)) {
        send_error(s, id, RPC_INVALID_PARAMS, "tools/call needs params.name (a string)");
        return;
    }
    if (args && !cJSON_IsObject(args) && !cJSON_IsNull(args)) {
        send_error(s, id, RPC_INVALID_PARAMS, "tools/call params.arguments must be an object");
        return;
    }
    if (!sp_tools_has(s->tools, name->valuestring)) {
        send_error(s, id, RPC_INVALID_PARAMS, "Unknown tool: %s", name->valuestring);
        return;
    }
    /* cJSON cuts strings at an escaped NUL: look at the raw text. */
    char *nul = NULL;
    if (json_nul_check(line, len, &nul) < 0) {
        cJSON *r = mcp_refused_result(nul, s->opts.structured);
        free(nul);
        if (r)
            send_result(s, id, r);
        return;
    }
    job *j = sp_xcalloc(1, sizeof(*j));
    j->id = cJSON_Duplicate(id, true);
    j->name = sp_xstrdup(name->valuestring);
    j->args = cJSON_IsObject(args) ? cJSON_PrintUnformatted(args) : sp_xstrdup("{}");
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(params, "_meta");
    const cJSON *tok = cJSON_GetObjectItemCaseSensitive(meta, "progressToken");
    if (cJSON_IsString(tok) || cJSON_IsNumber(tok))
        j->progress_token = cJSON_Duplicate(tok, true);
    if (!j->id || !j->args) {
        job_free(j);
        send_error(s, id, RPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    j->bytes = sizeof(*j) + strlen(j->name) + strlen(j->args);
    const tool_def *d = tool_find(j->name);
    j->read = d && tool_concurrent(d);
    j->blocks_reads = !j->read && !(d && (d->needs & NEED_SANDBOX));
    pthread_mutex_lock(&s->mu);
    if (!s->head && quick_tool(j->name) && sp_tools_ready(s->tools)) {
        /* Nothing else waits or runs: run it here, without the two thread
         * hand-offs that are most of a small read's cost. */
        pthread_mutex_unlock(&s->mu);
        run_job(s, j);
        job_free(j);
        return;
    }
    /* A client that sends calls faster than they run must not grow the
     * queue without end: past the bound it is told at once, and every
     * request still gets exactly one answer. One call of any size may wait
     * when nothing else does. */
    size_t waiting = s->n_queued;
    if (waiting >= SP_MCP_MAX_QUEUED ||
        (waiting && s->queued_bytes + j->bytes > SP_MCP_MAX_QUEUED_BYTES)) {
        pthread_mutex_unlock(&s->mu);
        job_free(j);
        send_error(s, id, RPC_SERVER_BUSY,
                   "server busy: %zu tool calls are already waiting (at most %d, %zu MiB); "
                   "send this one again once earlier calls are answered",
                   waiting, SP_MCP_MAX_QUEUED, (size_t)SP_MCP_MAX_QUEUED_BYTES >> 20);
        return;
    }
    if (s->tail)
        s->tail->next = j;
    else
        s->head = j;
    s->tail = j;
    s->n_queued++;
    s->queued_bytes += j->bytes;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mu);
}

/* A cancelled call gets no answer. A waiting one is dropped; a running
 * read ends by itself; the running lane call is stopped (its command
 * killed, an approval question given up). */
static void handle_cancelled(server *s, const cJSON *params)
{
    const cJSON *rid = cJSON_GetObjectItemCaseSensitive(params, "requestId");
    if (!rid)
        return;
    bool kill = false;
    pthread_mutex_lock(&s->mu);
    for (job *j = s->head; j; j = j->next) {
        if (j->cancelled || !cJSON_Compare(j->id, rid, true))
            continue;
        j->cancelled = true;
        if (!j->started) {
            unlink_job(s, j);
            job_free(j);
        } else if (j == s->lane) {
            kill = true;
        }
        pthread_cond_broadcast(&s->cond); /* a wait for approval ends; later jobs may start */
        break;
    }
    pthread_mutex_unlock(&s->mu);
    if (kill) {
        logf_(s, "cancelling the running call");
        sp_tools_cancel(s->tools);
    }
}

static bool valid_id(const cJSON *id)
{
    return cJSON_IsString(id) ||
           (cJSON_IsNumber(id) && id->valuedouble == (double)(int64_t)id->valuedouble);
}

static void handle_line(server *s, const char *line, size_t len)
{
    const char *end = NULL;
    cJSON *msg = cJSON_ParseWithLengthOpts(line, len, &end, false);
    if (msg && end) {
        /* Only whitespace may follow the message on its line. */
        for (const char *p = end; p < line + len; p++) {
            if (*p != ' ' && *p != '\t' && *p != '\r' && *p != '\n') {
                cJSON_Delete(msg);
                msg = NULL;
                break;
            }
        }
    }
    if (!msg) {
        size_t at = end && end >= line ? (size_t)(end - line) : 0;
        send_error(s, NULL, RPC_PARSE_ERROR, "parse error: not valid JSON (near byte %zu)", at);
        return;
    }
    if (cJSON_IsArray(msg)) {
        send_error(s, NULL, RPC_INVALID_REQUEST,
                   "invalid request: batches are not supported (MCP %s); send one message per "
                   "line",
                   SP_MCP_PROTOCOL_VERSION);
        goto done;
    }
    if (!cJSON_IsObject(msg)) {
        send_error(s, NULL, RPC_INVALID_REQUEST, "invalid request: a message is a JSON object");
        goto done;
    }
    const cJSON *jv = cJSON_GetObjectItemCaseSensitive(msg, "jsonrpc");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(msg, "id");
    const cJSON *method = cJSON_GetObjectItemCaseSensitive(msg, "method");
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(msg, "params");
    const cJSON *reply_id = id && valid_id(id) ? id : NULL;
    if (!cJSON_IsString(jv) || strcmp(jv->valuestring, "2.0") != 0) {
        send_error(s, reply_id, RPC_INVALID_REQUEST,
                   "invalid request: \"jsonrpc\" must be \"2.0\"");
        goto done;
    }
    if (!method) {
        if (id && (cJSON_GetObjectItemCaseSensitive(msg, "result") ||
                   cJSON_GetObjectItemCaseSensitive(msg, "error")))
            handle_response(s, msg);
        else
            send_error(s, reply_id, RPC_INVALID_REQUEST, "invalid request: no \"method\"");
        goto done;
    }
    if (!cJSON_IsString(method)) {
        send_error(s, reply_id, RPC_INVALID_REQUEST,
                   "invalid request: \"method\" must be a string");
        goto done;
    }
    if (id && !valid_id(id)) {
        send_error(s, NULL, RPC_INVALID_REQUEST,
                   "invalid request: \"id\" must be a string or an integer");
        goto done;
    }
    if (params && !cJSON_IsObject(params) && !cJSON_IsArray(params)) {
        if (id)
            send_error(s, id, RPC_INVALID_PARAMS, "invalid params: \"params\" must be an object");
        goto done;
    }
    const char *m = method->valuestring;
    if (!id) {
        /* Notifications: never answered. */
        if (strcmp(m, "notifications/cancelled") == 0)
            handle_cancelled(s, params);
        else if (strcmp(m, "notifications/initialized") == 0)
            logf_(s, "client initialized");
        goto done;
    }
    if (strcmp(m, "initialize") == 0)
        handle_initialize(s, id, params);
    else if (strcmp(m, "ping") == 0)
        send_result(s, id, cJSON_CreateObject());
    else if (strcmp(m, "tools/list") == 0)
        send_result(s, id, cJSON_Parse(s->tools_list));
    else if (strcmp(m, "tools/call") == 0)
        handle_tools_call(s, id, params, line, len);
    else
        send_error(s, id, RPC_METHOD_NOT_FOUND, "method not found: %s", m);
done:
    cJSON_Delete(msg);
}

/* Progress for the running calls that asked for it, about once a second. */
static void tick(server *s)
{
    cJSON *notes[WORKERS];
    size_t n = 0;
    /* While the sandbox is made, the calls that wait say how far it got. */
    char *pending = sp_tools_pending_status(s->tools);
    pthread_mutex_lock(&s->mu);
    int64_t now = now_ms();
    for (job *j = s->head; j && n < WORKERS; j = j->next) {
        if (!j->started || !j->progress_token || j->cancelled ||
            now - j->last_progress_ms < PROGRESS_EVERY)
            continue;
        double secs = (double)(now - j->started_ms) / 1000.0;
        if (secs <= j->last_progress)
            secs = j->last_progress + 0.001;
        j->last_progress = secs;
        j->last_progress_ms = now;
        cJSON *params = cJSON_CreateObject();
        if (params) {
            char msg[512];
            if (pending)
                snprintf(msg, sizeof(msg), "%s waits for the sandbox (%.0f s): %s", j->name, secs,
                         pending);
            else
                snprintf(msg, sizeof(msg), "%s running for %.0f s", j->name, secs);
            cJSON_AddItemToObject(params, "progressToken",
                                  cJSON_Duplicate(j->progress_token, true));
            cJSON_AddNumberToObject(params, "progress", secs);
            cJSON_AddStringToObject(params, "message", msg);
            notes[n++] = params;
        }
    }
    pthread_mutex_unlock(&s->mu);
    free(pending);
    for (size_t i = 0; i < n; i++)
        send_notification(s, "notifications/progress", notes[i]);
}

/* At the end of the input: answer every call already read (the client may
 * still read its output), unless told to stop. */
static void drain(server *s)
{
    pthread_mutex_lock(&s->mu);
    s->input_closed = true;
    pthread_cond_broadcast(&s->cond);
    while (s->head && !s->out_broken) {
        pthread_mutex_unlock(&s->mu);
        if (s->opts.should_stop && s->opts.should_stop(s->opts.userdata))
            return;
        tick(s);
        pthread_mutex_lock(&s->mu);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += (long)TICK_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&s->cond, &s->mu, &ts);
    }
    pthread_mutex_unlock(&s->mu);
}

/* ---------------------------------------------------------------- loop -- */

int sp_mcp_serve(sp_tools *tools, int in_fd, int out_fd, const sp_mcp_opts *opts, sp_error **err)
{
    if (SP_OPTS_CHECK(opts, 1, SP_MCP_OPTS_VERSION, "sp_mcp_opts", err) < 0)
        return SP_EINVAL;
    if (!tools)
        return sp_err_set(err, SP_EINVAL, 0, "no tools given");
    server s;
    memset(&s, 0, sizeof(s));
    s.tools = tools;
    s.in_fd = in_fd;
    s.out_fd = out_fd;
    sp_mcp_opts o = SP_MCP_OPTS_INIT;
    if (opts && opts->version == 1)
        /* A caller built against the first layout: its struct ends there. */
        memcpy(&o, opts, offsetof(sp_mcp_opts, structured));
    else if (opts)
        o = *opts;
    o.version = SP_MCP_OPTS_VERSION;
    s.opts = o;
    pthread_mutex_init(&s.out_mu, NULL);
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.cond, NULL);
    char *specs = sp_tools_specs(tools, SP_TOOLS_FORMAT_MCP);
    if (specs && !o.structured) {
        char *plain = mcp_unstructured_list(specs);
        free(specs);
        specs = plain;
    }
    s.tools_list = specs ? specs : sp_xstrdup("{\"tools\":[]}");
    sp_tools_approve_fn old_fn = tools->opts.approve;
    void *old_ud = tools->opts.approve_userdata;
    sp_tools_set_approver(tools, approve, &s);

    pthread_t workers[WORKERS];
    size_t n_workers = 0;
    int rc = 0;
    while (n_workers < WORKERS && pthread_create(&workers[n_workers], NULL, worker_main, &s) == 0)
        n_workers++;
    if (!n_workers) {
        rc = sp_err_set(err, SP_ERROR, 0, "cannot start the worker threads");
        goto out_nothread;
    }

    sp_buf buf = {0};
    size_t scan = 0;       /* bytes of buf already searched for a newline */
    bool skipping = false; /* inside an over-long line */
    bool eof = false;
    while (!eof && !s.out_broken) {
        if (s.opts.should_stop && s.opts.should_stop(s.opts.userdata))
            break;
        struct pollfd pfd = {.fd = in_fd, .events = POLLIN};
        int pr = poll(&pfd, 1, TICK_MS);
        if (pr < 0 && errno != EINTR)
            break;
        tick(&s);
        if (pr <= 0)
            continue;
        if (buf.cap - buf.len < READ_CHUNK + 1) {
            buf.cap = buf.cap ? buf.cap * 2 : READ_CHUNK * 2;
            while (buf.cap - buf.len < READ_CHUNK + 1)
                buf.cap *= 2;
            buf.data = sp_xrealloc(buf.data, buf.cap);
        }
        ssize_t n = read(in_fd, buf.data + buf.len, READ_CHUNK);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            break;
        }
        if (n == 0) {
            eof = true;
        } else {
            buf.len += (size_t)n;
            buf.data[buf.len] = '\0';
        }
        /* Hand out every complete line. */
        size_t start = 0;
        for (;;) {
            char *nl = memchr(buf.data + scan, '\n', buf.len - scan);
            if (!nl) {
                if (eof && buf.len > start && !skipping) {
                    nl = buf.data + buf.len; /* a last line without a newline */
                } else {
                    scan = buf.len;
                    break;
                }
            }
            size_t llen = (size_t)(nl - (buf.data + start));
            if (skipping) {
                skipping = false;
            } else {
                bool blank = true;
                for (size_t i = 0; i < llen && blank; i++) {
                    char ch = buf.data[start + i];
                    blank = ch == ' ' || ch == '\t' || ch == '\r';
                }
                if (!blank)
                    handle_line(&s, buf.data + start, llen);
            }
            start += llen + 1;
            scan = start;
            if (start >= buf.len)
                break;
        }
        if (start) {
            size_t rest = start < buf.len ? buf.len - start : 0;
            memmove(buf.data, buf.data + (start < buf.len ? start : buf.len), rest);
            buf.len = rest;
            scan = scan >= start ? scan - start : 0;
            if (scan > buf.len)
                scan = buf.len;
            buf.data[buf.len] = '\0';
        }
        if (!skipping && buf.len > MAX_LINE) {
            send_error(&s, NULL, RPC_INVALID_REQUEST,
                       "invalid request: a message longer than %zu MiB was skipped",
                       MAX_LINE >> 20);
            skipping = true;
            buf.len = 0;
            scan = 0;
        } else if (skipping && buf.len) {
            buf.len = 0;
            scan = 0;
        }
    }
    sp_buf_dispose(&buf);
    if (eof)
        drain(&s);

    /* Shut down: drop what waits, stop what runs, let the workers finish. */
    pthread_mutex_lock(&s.mu);
    s.quit = true;
    s.input_closed = true;
    for (job *j = s.head, *next; j; j = next) {
        next = j->next;
        j->cancelled = true;
        if (!j->started) {
            unlink_job(&s, j);
            job_free(j);
        }
    }
    bool running = s.lane != NULL;
    pthread_cond_broadcast(&s.cond);
    pthread_mutex_unlock(&s.mu);
    if (running)
        sp_tools_cancel(tools);
    for (size_t i = 0; i < n_workers; i++)
        pthread_join(workers[i], NULL);
    if (s.out_broken)
        rc = sp_err_set(err, SP_ERROR, 0, "the client closed the output");

out_nothread:
    sp_tools_set_approver(tools, old_fn, old_ud);
    free(s.tools_list);
    free(s.elicit_id);
    cJSON_Delete(s.elicit_answer);
    pthread_mutex_destroy(&s.out_mu);
    pthread_mutex_destroy(&s.mu);
    pthread_cond_destroy(&s.cond);
    return rc;
}
