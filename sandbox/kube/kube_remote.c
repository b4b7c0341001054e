/* The kubernetes engine behind sandbox/engine/remote.h: a sandbox is one
 * Pod rendered by render.c (the workload with sandpod-agent as pid 1, the
 * peer serving the workspace beside it), reached through the API server —
 * REST for the Pod, pods/exec over WebSocket for everything else:
 *
 *   - the peer's JSON-RPC (MCP plus sandpod's methods) through one
 *     long-lived exec of `sandpod peer connect` in the peer container,
 *     opened on first use and again after it drops; a call carries a
 *     resumable key (params._meta["sandpod/call"]) so that sending it again
 *     on the new stream neither loses nor repeats it (the peer's
 *     multiplexer remembers it);
 *   - commands in the workload container, one exec each;
 *   - archives through `sandpod peer import|export`, raw on the exec's
 *     stdin/stdout. */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "kube.h"
#include "kube_exec.h"
#include "remote.h"
#include "render.h"

/* How long the peer may take to answer initialize. */
#define PEER_HELLO_MS 30000

struct sp_remote {
    sp_kube *k;
    char *pod;
    char *egress_pod; /* the egress proxy's, or NULL */
    char *where;
    /* The peer stream, shared by every request of this handle (the peer
     * multiplexes; answers come back by id). mu guards everything below;
     * one waiting request at a time reads the stream (reading) and hands
     * the others their answers through cv. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    sp_ws *peer;
    uint64_t gen; /* counts the streams opened */
    bool reading;
    struct rpc_call *calls;                 /* the requests waiting for an answer */
    sp_buf in;                              /* channel-1 bytes not yet a whole line */
    sp_buf perr;                            /* the relay's stderr, for errors */
    int64_t next;                           /* JSON-RPC ids */
    char cancelled_key[SP_RPC_KEY_MAX + 1]; /* a cancel that came before its request */
};

/* One request waiting for its answer. */
typedef struct rpc_call {
    const char *key;
    bool cancel; /* asked to */
    int64_t id;
    cJSON *msg;  /* the answer */
    bool resend; /* its stream dropped: send it again */
    bool cancel_sent;
    struct rpc_call *next;
} rpc_call;

/* What a command printed, kept (keep_output()). */
typedef struct bulk_out {
    sp_buf *out; /* stdout, when not written to an fd */
    sp_buf err;
} bulk_out;

/* A failed sandpod command's stderr as one message: without its trailing
 * newlines and its "sandpod: " prefix. */
static char *bulk_message(const bulk_out *b)
{
    size_t n = b->err.len;
    while (n && b->err.data[n - 1] == '\n')
        n--;
    if (!n)
        return sp_xstrdup("no message");
    const char *m = b->err.data;
    if (n >= 9 && strncmp(m, "sandpod: ", 9) == 0) {
        m += 9;
        n -= 9;
    }
    return sp_xstrndup(m, n);
}

/* ------------------------------------------------------------ helpers -- */

static void key_hex(char out[33])
{
    uint8_t b[16];
    if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b)) {
        uint64_t t = (uint64_t)sp_now_ms() ^ (uint64_t)getpid() << 32;
        memcpy(b, &t, 8);
        memcpy(b + 8, &t, 8);
    }
    for (int i = 0; i < 16; i++)
        snprintf(out + 2 * i, 3, "%02x", b[i]);
}

static void remote_free(sp_remote *r)
{
    if (!r)
        return;
    sp_ws_free(r->peer);
    sp_kube_free(r->k);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    sp_buf_dispose(&r->in);
    sp_buf_dispose(&r->perr);
    free(r->pod);
    free(r->egress_pod);
    free(r->where);
    free(r);
}

static sp_remote *remote_new(sp_kube *k, const char *pod)
{
    sp_remote *r = sp_xcalloc(1, sizeof(*r));
    r->k = k;
    r->pod = sp_xstrdup(pod);
    r->where = sp_xasprintf("pod %s in namespace %s", pod, sp_kube_namespace(k));
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    r->next = 1;
    return r;
}

static int open_client(sp_kube **out, const sp_engine *e, sp_error **err)
{
    sp_kube_opts ko = SP_KUBE_OPTS_INIT;
    return sp_kube_open_engine(out, e, &ko, err);
}

/* One line of why a Pod is not serving, from its status and Events. */
static char *pod_why(sp_remote *r)
{
    char *line = NULL;
    if (sp_kube_pod_events_line(r->k, r->pod, &line, NULL) == 0 && line)
        return line;
    free(line);
    return NULL;
}

/* A stream that failed, or a command killed by a signal: when the Pod is
 * gone or not running, say so in its words ("the command was cut short:
 * ..."), as an error (rc when it is one, else SP_ERROR); 0 when the Pod
 * runs. */
static int explain_down(sp_remote *r, int rc, sp_error **err)
{
    cJSON *pod = NULL;
    sp_kube_pod_state s;
    int g = sp_kube_pod_get(r->k, r->pod, &pod, NULL);
    int out = 0;
    rc = rc < 0 ? rc : SP_ERROR;
    if (g == SP_ENOTFOUND) {
        out = err && *err
                  ? sp_err_wrap(err, rc, "the command was cut short: %s was deleted", r->where)
                  : sp_err_set(err, rc, 0, "the command was cut short: %s was deleted", r->where);
    } else if (g == 0 && sp_kube_pod_state_of(&s, pod, NULL) == 0 &&
               (s.deleting || s.phase != SP_KUBE_POD_RUNNING)) {
        cleanup_free char *why =
            s.reason[0] ? sp_xasprintf("%s: %s", s.reason, s.message) : pod_why(r);
        const char *st = s.deleting ? "being deleted" : "not running";
        out = err && *err ? sp_err_wrap(err, rc, "the command was cut short: %s is %s%s%s",
                                        r->where, st, why ? ": " : "", why ? why : "")
                          : sp_err_set(err, rc, 0, "the command was cut short: %s is %s%s%s",
                                       r->where, st, why ? ": " : "", why ? why : "");
    }
    cJSON_Delete(pod);
    return out;
}

/* ------------------------------------------------------------- create -- */

static int run_in_pod(sp_remote *r, const char *pod, const char *ctr, const sp_remote_cmd *io,
                      int *exit_code, bool *timed_out, sp_error **err);
static void keep_output(void *ud, int stream, const void *data, size_t len);

/* Whether `name` is in the comma-separated list. */
static bool listed(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        size_t k = strcspn(p, ",");
        if (k == n && strncmp(p, name, n) == 0)
            return true;
        p += k + (p[k] == ',');
    }
    return false;
}

/* The Pod is as strong as a local sandbox, or its engine accepts by name
 * what it lacks: a user namespace (the cluster ignored hostUsers: false),
 * and a seccomp profile that refuses keyctl and new user namespaces (the
 * node's RuntimeDefault allows them). Tried in the Pod, before any of the
 * user's files or commands enter it (`sandpod peer protections`, in the
 * peer container: the same Pod's user namespace, seccomp profile and
 * network). With egress rules, also NetworkPolicies that hold: the Pod,
 * whose policy allows only the proxy, must not reach the cluster's API
 * service directly (a cluster whose network plugin ignores NetworkPolicies
 * would let the workload go around its proxy). */
static int check_protections(sp_remote *r, const sp_engine *e, const sp_sandbox_opts *o,
                             bool egress, sp_error **err)
{
    const char *argv[] = {SP_KUBE_SANDPOD_BIN, "peer", "protections", egress ? "network" : NULL,
                          NULL};
    sp_buf out = SP_BUF_INIT;
    bulk_out b = {&out, SP_BUF_INIT};
    sp_remote_cmd io = {.argv = argv, .stdin_fd = -1, .out_fd = -1, .out = keep_output, .ud = &b};
    int code = -1;
    bool timed_out = false;
    int rc = run_in_pod(r, NULL, "peer", &io, &code, &timed_out, err);
    cJSON *p = rc == 0 && code == 0 ? sp_json_parse(out.data ? out.data : "", out.len) : NULL;
    if (rc == 0 && !p)
        rc = sp_err_set(err, SP_ERROR, 0,
                        "%s: cannot tell what it is kept from (sandpod peer protections: exit "
                        "%d%s%.200s)",
                        r->where, code, b.err.len ? ": " : "", b.err.data ? b.err.data : "");
    sp_buf_dispose(&out);
    sp_buf_dispose(&b.err);
    if (rc < 0)
        return rc;
    bool no_userns = !sp_json_bool(p, "user_namespace", false);
    bool weak_seccomp =
        o->seccomp != SP_SECCOMP_UNCONFINED &&
        (sp_json_bool(p, "keyctl", true) || sp_json_bool(p, "new_user_namespace", true));
    const char *verdict = egress ? sp_json_str_or(p, "direct_network", "untested") : "blocked";
    bool reached = strcmp(verdict, "reached") == 0;
    bool open_net = strcmp(verdict, "blocked") != 0 && !listed(e->accept, "netpol");
    char target[128];
    snprintf(target, sizeof(target), "%.100s", sp_json_str_or(p, "direct_target", ""));
    cJSON_Delete(p);
    sp_buf why = SP_BUF_INIT;
    if (no_userns && !listed(e->accept, "userns"))
        sp_buf_adds(&why, "; no user namespace (its uid 0 is the node's: the cluster ignored "
                          "hostUsers: false)");
    if (weak_seccomp && !listed(e->accept, "seccomp"))
        sp_buf_printf(&why, "; keyctl and new user namespaces allowed (%s)",
                      e->seccomp_profile ? "the Localhost seccomp profile does not refuse them"
                                         : "RuntimeDefault seccomp: install sandpod's profile on "
                                           "the nodes and set --seccomp-profile");
    if (open_net && reached)
        sp_buf_printf(&why,
                      "; its NetworkPolicy is not enforced (the Pod, allowed only its egress "
                      "proxy, reached the API service at %s directly)",
                      target);
    else if (open_net)
        sp_buf_adds(&why, "; cannot tell whether NetworkPolicies are enforced (the Pod has no "
                          "KUBERNETES_SERVICE_HOST to try)");
    if (!why.len)
        return 0;
    sp_buf names = SP_BUF_INIT;
    if (no_userns && !listed(e->accept, "userns"))
        sp_buf_adds(&names, ",userns");
    if (weak_seccomp && !listed(e->accept, "seccomp"))
        sp_buf_adds(&names, ",seccomp");
    if (open_net)
        sp_buf_adds(&names, ",netpol");
    rc = sp_err_set(err, SP_EDENIED, 0,
                    "engine %s: %s is weaker than a local sandbox%s; accept it by name if you "
                    "will: sandpod engine add %s --replace ... --accept %s",
                    e->name, r->where, why.data, e->name, names.data + 1);
    sp_buf_dispose(&why);
    sp_buf_dispose(&names);
    return rc;
}

/* The egress proxy's objects, gone (each already gone is fine). */
static void egress_remove(sp_kube *k, const char *id)
{
    const char *sfx[] = {"-workload", "-proxy"};
    sp_kube_pod_delete(k, id, 0, NULL);
    for (size_t i = 0; i < 2; i++) {
        cleanup_free char *np = sp_xasprintf("%s%s", id, sfx[i]);
        sp_kube_netpol_delete(k, np, NULL);
    }
}

/* An egress proxy for the sandbox: its NetworkPolicies first (the
 * workload's Pod is never without its own), then its Pod, which must run
 * and have an address before the workload's Pod is made to use it. */
static int egress_up(char **addr, sp_kube *k, const sp_remote_spec *c, const sp_sandbox_opts *o,
                     const sp_kube_render_opts *ro, int timeout_ms, sp_error **err)
{
    *addr = NULL;
    cleanup_free char *pod = NULL, *np_w = NULL, *np_p = NULL;
    int rc =
        sp_kube_render_egress(&pod, &np_w, &np_p, o, ro, c->egress_policy, c->egress_hosts, err);
    if (rc < 0)
        return rc;
    if ((rc = sp_kube_netpol_create(k, np_w, err)) < 0 ||
        (rc = sp_kube_netpol_create(k, np_p, err)) < 0 ||
        (rc = sp_kube_pod_create(k, pod, NULL, err)) < 0)
        return sp_err_wrap(err, rc, "the egress proxy %s", ro->egress_id);
    if ((rc = sp_kube_pod_wait_ready(k, ro->egress_id, timeout_ms, err)) < 0)
        return sp_err_wrap(err, rc, "the egress proxy's pod %s did not start", ro->egress_id);
    cJSON *got = NULL;
    if ((rc = sp_kube_pod_get(k, ro->egress_id, &got, err)) < 0)
        return rc;
    const char *ip = sp_json_str(sp_json_get(got, "status"), "podIP");
    if (ip && *ip)
        *addr = sp_xstrdup(ip);
    cJSON_Delete(got);
    if (!*addr)
        return sp_err_set(err, SP_ERROR, 0,
                          "kubernetes: the egress proxy's pod %s runs but has no address "
                          "(status.podIP)",
                          ro->egress_id);
    return 0;
}

static int kr_create(sp_remote **out, cJSON **record, const sp_remote_spec *c, sp_error **err)
{
    *out = NULL;
    *record = NULL;
    sp_kube *k = NULL;
    int rc = open_client(&k, c->engine, err);
    if (rc < 0)
        return rc;
    sp_kube_render_opts ro = SP_KUBE_RENDER_OPTS_INIT;
    ro.ns = sp_kube_namespace(k);
    ro.sandpod_image = c->engine->image;
    ro.deadline_seconds = c->engine->ttl_seconds;
    ro.runtime_class = c->engine->runtime_class;
    ro.owner = c->owner;
    ro.seccomp_profile = c->engine->seccomp_profile;
    sp_sandbox_opts o = *c->opts;
    o.name = c->name;
    int timeout_ms = c->timeout_ms > 0 ? c->timeout_ms : 300000;
    char id[24] = "";
    cleanup_free char *addr = NULL;
    if (c->egress_policy) {
        char hex[33];
        key_hex(hex);
        snprintf(id, sizeof(id), "spe-%.12s", hex);
        ro.egress_id = id;
        if ((rc = egress_up(&addr, k, c, &o, &ro, timeout_ms, err)) < 0) {
            egress_remove(k, id);
            sp_kube_free(k);
            return rc;
        }
        ro.egress_addr = addr;
    }
    cleanup_free char *spec = NULL;
    cJSON *made = NULL;
    if ((rc = sp_kube_render_pod(&spec, &o, &ro, err)) < 0 ||
        (rc = sp_kube_pod_create(k, spec, &made, err)) < 0) {
        if (*id)
            egress_remove(k, id);
        sp_kube_free(k);
        return rc;
    }
    const cJSON *md = sp_json_get(made, "metadata");
    const char *pod = sp_json_str(md, "name");
    if (!pod) {
        cJSON_Delete(made);
        if (*id)
            egress_remove(k, id);
        sp_kube_free(k);
        return sp_err_set(err, SP_ERROR, 0, "kubernetes: the created Pod has no name");
    }
    sp_remote *r = remote_new(k, pod);
    if (*id)
        r->egress_pod = sp_xstrdup(id);
    cJSON *rec = cJSON_CreateObject();
    cJSON_AddStringToObject(rec, "namespace", sp_kube_namespace(k));
    cJSON_AddStringToObject(rec, "pod", pod);
    const char *uid = sp_json_str(md, "uid");
    if (uid)
        cJSON_AddStringToObject(rec, "uid", uid);
    cJSON_AddStringToObject(rec, "server", sp_kube_server(k));
    if (*id)
        cJSON_AddStringToObject(rec, "egress_pod", id);
    cJSON_Delete(made);
    rc = sp_kube_pod_wait_ready(k, r->pod, timeout_ms, err);
    if (rc < 0)
        sp_err_wrap(err, rc, "the sandbox's %s did not start", r->where);
    else
        rc = check_protections(r, c->engine, &o, c->egress_policy != NULL, err);
    if (rc < 0) {
        sp_kube_pod_delete(k, r->pod, 0, NULL);
        if (*id)
            egress_remove(k, id);
        cJSON_Delete(rec);
        remote_free(r);
        return rc;
    }
    *out = r;
    *record = rec;
    return 0;
}

static int kr_open(sp_remote **out, const sp_engine *e, const cJSON *record, sp_error **err)
{
    *out = NULL;
    const char *pod = sp_json_str(record, "pod");
    if (!pod)
        return sp_err_set(err, SP_EINVAL, 0, "the sandbox's record names no Pod");
    sp_engine ee = *e;
    const char *ns = sp_json_str(record, "namespace");
    if (ns)
        ee.ns = (char *)ns; /* where it was made, whatever the engine says now */
    sp_kube *k = NULL;
    int rc = open_client(&k, &ee, err);
    if (rc < 0)
        return rc;
    *out = remote_new(k, pod);
    const char *ep = sp_json_str(record, "egress_pod");
    if (ep)
        (*out)->egress_pod = sp_xstrdup(ep);
    return 0;
}

/* ------------------------------------------------------- the peer rpc -- */

/* The stream is gone (or going): every waiting request is sent again on
 * the next one, under its key. With mu held. */
static void peer_drop(sp_remote *r)
{
    sp_ws_free(r->peer);
    r->peer = NULL;
    r->in.len = 0;
    r->gen++;
    for (rpc_call *c = r->calls; c; c = c->next)
        if (!c->msg)
            c->resend = true;
    pthread_cond_broadcast(&r->cv);
}

static int peer_send(sp_remote *r, const char *line, sp_error **err)
{
    sp_buf b = {0};
    sp_buf_printf(&b, "%s\n", line);
    int rc = sp_kube_exec_write(r->peer, b.data, b.len, err);
    sp_buf_dispose(&b);
    return rc;
}

/* The next whole line from the peer (a JSON-RPC message), waiting up to
 * timeout_ms; 1 when none came in time. */
static int peer_line(sp_remote *r, char **line, int timeout_ms, sp_error **err)
{
    int64_t end = sp_now_ms() + timeout_ms;
    bool tried = false; /* timeout 0 still reads what has come */
    for (;;) {
        char *nl = r->in.len ? memchr(r->in.data, '\n', r->in.len) : NULL;
        if (nl) {
            size_t n = (size_t)(nl - r->in.data);
            *line = sp_xstrndup(r->in.data, n);
            memmove(r->in.data, nl + 1, r->in.len - n - 1);
            r->in.len -= n + 1;
            return 0;
        }
        int left = (int)(end - sp_now_ms());
        if (left <= 0 && tried)
            return 1;
        tried = true;
        sp_ws_msg m;
        sp_error *e = NULL;
        int rc = sp_ws_recv(r->peer, &m, left > 0 ? left : 0, &e);
        if (rc == SP_ETIMEOUT) {
            sp_error_free(e);
            return 1;
        }
        if (rc < 0) {
            if (err)
                *err = e;
            else
                sp_error_free(e);
            return rc;
        }
        if (m.opcode == SP_WS_CLOSE)
            return sp_err_set(err, SP_ERROR, 0, "the connection to the peer closed");
        int ch;
        const uint8_t *d;
        size_t dl;
        if ((rc = sp_kube_exec_split(&ch, &d, &dl, m.data, m.len, err)) < 0)
            return rc;
        if (ch == SP_KUBE_STDOUT) {
            sp_buf_add(&r->in, d, dl);
        } else if (ch == SP_KUBE_STDERR) {
            if (r->perr.len < 4096)
                sp_buf_add(&r->perr, d, dl);
        } else if (ch == SP_KUBE_STATUS) {
            int code = 0;
            sp_error *se = NULL;
            if (sp_kube_exec_status(&code, (const char *)d, dl, &se) < 0) {
                int src = sp_err_set(err, SP_ERROR, 0, "the peer relay ended: %s", se->message);
                sp_error_free(se);
                return src;
            }
            return sp_err_set(err, SP_ERROR, 0, "the peer relay ended (exit %d)%s%.*s", code,
                              r->perr.len ? ": " : "", (int)r->perr.len,
                              r->perr.data ? r->perr.data : "");
        }
    }
}

/* The answer to request id (initialize's, on a fresh stream): 0 with *msg
 * the whole message, skipping notifications and other ids; timeout_ms < 0:
 * wait as long as it takes. */
static int peer_wait(sp_remote *r, int64_t id, int timeout_ms, cJSON **msg, sp_error **err)
{
    int64_t give_up = timeout_ms < 0 ? -1 : sp_now_ms() + timeout_ms;
    for (;;) {
        char *line = NULL;
        int rc = peer_line(r, &line, 200, err);
        if (rc < 0)
            return rc;
        if (rc == 1) {
            if (give_up >= 0 && sp_now_ms() > give_up)
                return sp_err_set(err, SP_ETIMEOUT, 0,
                                  "the sandpod peer in %s did not answer in %d s", r->where,
                                  timeout_ms / 1000);
            continue;
        }
        cJSON *j = sp_json_parse_exact(line, strlen(line));
        free(line);
        const cJSON *jid = j ? cJSON_GetObjectItemCaseSensitive(j, "id") : NULL;
        if (jid && cJSON_IsNumber(jid) && (int64_t)jid->valuedouble == id &&
            !cJSON_GetObjectItemCaseSensitive(j, "method")) {
            *msg = j;
            return 0;
        }
        cJSON_Delete(j); /* progress, log, or an answer nobody waits for */
    }
}

static int peer_request(sp_remote *r, const char *method, const char *params, int timeout_ms,
                        cJSON **msg, sp_error **err)
{
    int64_t id = r->next++;
    cleanup_free char *line =
        sp_xasprintf("{\"jsonrpc\":\"2.0\",\"id\":%" PRId64 ",\"method\":\"%s\",\"params\":%s}", id,
                     method, params && *params ? params : "{}");
    int rc = peer_send(r, line, err);
    return rc < 0 ? rc : peer_wait(r, id, timeout_ms, msg, err);
}

static int peer_connect(sp_remote *r, sp_error **err)
{
    if (r->peer)
        return 0;
    const char *argv[] = {SP_KUBE_SANDPOD_BIN, "peer", "connect", "--socket",
                          SP_KUBE_PEER_SOCKET, NULL};
    sp_kube_exec_spec s = {.pod = r->pod, .container = "peer", .argv = argv, .stdin_open = true};
    r->in.len = r->perr.len = 0;
    int rc = sp_kube_exec_connect(&r->peer, r->k, &s, err);
    if (rc < 0)
        return sp_err_wrap(err, rc, "reaching the sandpod peer in %s", r->where);
    cJSON *msg = NULL;
    rc = peer_request(r, "initialize",
                      "{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},"
                      "\"clientInfo\":{\"name\":\"sandpod\",\"version\":\"" SANDPOD_VERSION "\"}}",
                      PEER_HELLO_MS, &msg, err);
    cJSON_Delete(msg);
    if (rc == 0)
        rc = peer_send(r, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", err);
    if (rc < 0) {
        peer_drop(r);
        return sp_err_wrap(err, rc, "starting a session with the sandpod peer in %s", r->where);
    }
    return 0;
}

/* params with _meta["sandpod/call"] = key added. */
static char *with_key(const char *params, const char *key, sp_error **err)
{
    cJSON *p =
        sp_json_parse(params && *params ? params : "{}", params && *params ? strlen(params) : 2);
    if (!p || !cJSON_IsObject(p)) {
        cJSON_Delete(p);
        sp_err_set(err, SP_EINVAL, 0, "the parameters of a peer call must be a JSON object");
        return NULL;
    }
    cJSON *meta = cJSON_GetObjectItemCaseSensitive(p, "_meta");
    if (!cJSON_IsObject(meta)) {
        cJSON_DeleteItemFromObjectCaseSensitive(p, "_meta");
        meta = cJSON_AddObjectToObject(p, "_meta");
    }
    cJSON_AddStringToObject(meta, "sandpod/call", key);
    char *s = cJSON_PrintUnformatted(p);
    cJSON_Delete(p);
    return s;
}

/* Hand each whole line read so far to the request it answers. */
static void peer_dispatch(sp_remote *r, char *line)
{
    cJSON *j = sp_json_parse_exact(line, strlen(line));
    free(line);
    const cJSON *jid = j ? cJSON_GetObjectItemCaseSensitive(j, "id") : NULL;
    if (jid && cJSON_IsNumber(jid) && !cJSON_GetObjectItemCaseSensitive(j, "method")) {
        for (rpc_call *c = r->calls; c; c = c->next) {
            if (!c->msg && !c->resend && c->id == (int64_t)jid->valuedouble) {
                c->msg = j;
                pthread_cond_broadcast(&r->cv);
                return;
            }
        }
    }
    cJSON_Delete(j); /* progress, a log line, an answer nobody waits for */
}

/* Read the stream for up to 200 ms as the one reader, with mu held on
 * entry and exit (released while waiting for bytes). */
static void peer_read_some(sp_remote *r)
{
    r->reading = true;
    uint64_t gen = r->gen;
    int fd = sp_ws_fd(r->peer);
    bool ready = sp_ws_buffered(r->peer) || r->in.len;
    pthread_mutex_unlock(&r->mu);
    if (!ready) {
        struct pollfd p = {fd, POLLIN, 0};
        ready = poll(&p, 1, 200) > 0;
    }
    pthread_mutex_lock(&r->mu);
    if (ready && gen == r->gen && r->peer) {
        for (;;) {
            char *line = NULL;
            sp_error *e = NULL;
            int rc = peer_line(r, &line, 0, &e);
            sp_error_free(e);
            if (rc < 0) {
                peer_drop(r); /* the waiting requests go again */
                break;
            }
            if (rc == 1)
                break;
            peer_dispatch(r, line);
        }
    }
    r->reading = false;
    pthread_cond_broadcast(&r->cv);
}

static void call_unlink(sp_remote *r, rpc_call *me)
{
    for (rpc_call **pp = &r->calls; *pp; pp = &(*pp)->next) {
        if (*pp == me) {
            *pp = me->next;
            return;
        }
    }
}

static int kr_rpc(sp_remote *r, const char *method, const char *params, const char *given,
                  char **result, sp_error **err)
{
    *result = NULL;
    char key[SP_RPC_KEY_MAX + 1];
    if (given && (!*given || strlen(given) > SP_RPC_KEY_MAX))
        return sp_err_set(err, SP_EINVAL, 0, "a request key is 1 to %d bytes", SP_RPC_KEY_MAX);
    if (given)
        snprintf(key, sizeof(key), "%s", given);
    else
        key_hex(key);
    cleanup_free char *keyed = with_key(params, key, err);
    if (!keyed)
        return SP_EINVAL;
    rpc_call me = {.resend = true, .key = key};
    int rc = 0, sends = 0;
    int64_t give_up = -1;
    sp_error *last = NULL;
    pthread_mutex_lock(&r->mu);
    me.next = r->calls;
    r->calls = &me;
    if (r->cancelled_key[0] && strcmp(r->cancelled_key, key) == 0) {
        me.cancel = true; /* cancelled before it came */
        r->cancelled_key[0] = '\0';
    }
    while (!me.msg) {
        if (me.cancel && !me.cancel_sent && (me.resend || !me.id)) {
            /* Never sent (or lost with its stream): nothing to tell. */
            sp_error_free(last);
            last = NULL;
            rc =
                sp_err_set(&last, SP_ERROR, 0, "the call was cancelled before it reached the peer");
            break;
        }
        if (me.resend) {
            /* First, or again after the stream dropped: under the same key
             * the peer runs it once. */
            if (sends++ == 3) {
                rc = SP_ERROR;
                break;
            }
            sp_error_free(last);
            last = NULL;
            me.resend = false;
            rc = peer_connect(r, &last);
            if (rc == 0) {
                me.id = r->next++;
                cleanup_free char *line = sp_xasprintf("{\"jsonrpc\":\"2.0\",\"id\":%" PRId64
                                                       ",\"method\":\"%s\",\"params\":%s}",
                                                       me.id, method, keyed);
                rc = peer_send(r, line, &last);
            }
            if (rc < 0)
                peer_drop(r);
            continue;
        }
        if (me.cancel && !me.cancel_sent) {
            me.cancel_sent = true;
            give_up = sp_now_ms() + 10000;
            cleanup_free char *c = sp_xasprintf("{\"jsonrpc\":\"2.0\",\"method\":"
                                                "\"notifications/cancelled\",\"params\":"
                                                "{\"requestId\":%" PRId64 "}}",
                                                me.id);
            if (peer_send(r, c, NULL) < 0)
                peer_drop(r);
        }
        /* A cancelled call gets no answer (MCP): stop waiting once the peer
         * has had time to end it. */
        if (give_up >= 0 && sp_now_ms() > give_up) {
            sp_error_free(last);
            last = NULL;
            rc = sp_err_set(&last, SP_ERROR, 0, "the call was cancelled");
            break;
        }
        if (!r->reading && r->peer) {
            peer_read_some(r);
        } else {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 200 * 1000000L;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&r->cv, &r->mu, &ts);
        }
    }
    call_unlink(r, &me);
    pthread_mutex_unlock(&r->mu);
    if (!me.msg) {
        if (rc >= 0)
            rc = SP_ERROR;
        if (!last)
            sp_err_set(&last, rc, 0, "the stream to the sandpod peer in %s kept dropping",
                       r->where);
        if (err)
            *err = last;
        else
            sp_error_free(last);
        return rc;
    }
    sp_error_free(last);
    const cJSON *res = cJSON_GetObjectItemCaseSensitive(me.msg, "result");
    const cJSON *jerr = cJSON_GetObjectItemCaseSensitive(me.msg, "error");
    rc = 0;
    if (res) {
        *result = cJSON_PrintUnformatted(res);
    } else {
        rc = sp_err_set(err, SP_ERROR, 0, "the sandpod peer in %s: %s", r->where,
                        sp_json_str_or(jerr, "message", "an error without a message"));
    }
    cJSON_Delete(me.msg);
    return rc;
}

/* Cancel the request with this key (NULL: every request of the handle).
 * A key no request has yet is kept for the request that comes with it. */
static void kr_cancel(sp_remote *r, const char *key)
{
    pthread_mutex_lock(&r->mu);
    bool found = false;
    for (rpc_call *c = r->calls; c; c = c->next) {
        if (!key || strcmp(c->key, key) == 0) {
            c->cancel = true;
            found = true;
        }
    }
    if (!found && key && strlen(key) <= SP_RPC_KEY_MAX)
        snprintf(r->cancelled_key, sizeof(r->cancelled_key), "%s", key);
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

/* --------------------------------------------------------- exec, tars -- */

/* Run io->argv in container ctr of the sandbox's Pod (pod NULL), or of
 * Pod pod. */
static int run_in_pod(sp_remote *r, const char *pod, const char *ctr, const sp_remote_cmd *io,
                      int *exit_code, bool *timed_out, sp_error **err)
{
    *exit_code = -1;
    *timed_out = false;
    sp_ws *ws = NULL;
    bool has_in = io->stdin_fd >= 0 || io->stdin_data;
    sp_kube_exec_spec s = {.pod = pod ? pod : r->pod,
                           .container = ctr,
                           .argv = io->argv,
                           .stdin_open = has_in,
                           .tty = io->tty};
    int rc = sp_kube_exec_connect(&ws, r->k, &s, err);
    if (rc < 0)
        return sp_err_wrap(err, rc, "running a command in %s", r->where);
    if (io->tty && io->rows && io->cols)
        sp_kube_exec_resize(ws, io->cols, io->rows, NULL);
    bool v5 = strcmp(sp_ws_protocol(ws), SP_KUBE_PROTO_V5) == 0;
    bool in_open = io->stdin_fd >= 0;
    if (io->stdin_data) {
        if (io->stdin_len)
            rc = sp_kube_exec_write(ws, io->stdin_data, io->stdin_len, err);
        /* v4 has no way to say end of input: the command keeps its stdin
         * until it ends by itself. */
        if (rc == 0 && v5)
            rc = sp_kube_exec_close_stdin(ws, err);
    }
    int64_t deadline = io->timeout_ms > 0 ? sp_now_ms() + io->timeout_ms : -1;
    bool done = false;
    char buf[65536];
    while (!done && rc == 0) {
        int wait = 1000;
        if (deadline >= 0) {
            int64_t left = deadline - sp_now_ms();
            if (left <= 0) {
                *timed_out = true;
                break;
            }
            wait = left < wait ? (int)left : wait;
        }
        struct pollfd p[2] = {{sp_ws_fd(ws), POLLIN, 0}, {in_open ? io->stdin_fd : -1, POLLIN, 0}};
        if (!sp_ws_buffered(ws) && poll(p, 2, wait) < 0 && errno != EINTR) {
            rc = sp_err_errno(err, errno, "poll", NULL);
            break;
        }
        if (in_open && (p[1].revents & (POLLIN | POLLHUP | POLLERR))) {
            ssize_t n = read(io->stdin_fd, buf, sizeof(buf));
            if (n > 0) {
                rc = sp_kube_exec_write(ws, buf, (size_t)n, err);
            } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
                in_open = false;
                if (v5)
                    rc = sp_kube_exec_close_stdin(ws, err);
            }
        }
        if (rc < 0 || !(sp_ws_buffered(ws) || (p[0].revents & (POLLIN | POLLHUP | POLLERR))))
            continue;
        sp_ws_msg m;
        if ((rc = sp_ws_recv(ws, &m, 30000, err)) < 0)
            break;
        if (m.opcode == SP_WS_CLOSE) {
            rc = sp_err_set(err, SP_ERROR, 0,
                            "the command's stream in %s closed before it said how it ended",
                            r->where);
            break;
        }
        int ch;
        const uint8_t *d;
        size_t dl;
        if ((rc = sp_kube_exec_split(&ch, &d, &dl, m.data, m.len, err)) < 0)
            break;
        if (ch == SP_KUBE_STATUS) {
            rc = sp_kube_exec_status(exit_code, (const char *)d, dl, err);
            done = true;
        } else if (ch == SP_KUBE_STDOUT && io->out_fd >= 0) {
            if (sp_write_all(io->out_fd, d, dl) < 0)
                rc = sp_err_errno(err, errno, "writing the output", NULL);
        } else if (io->out) {
            io->out(io->ud, ch, d, dl);
        }
    }
    if (rc < 0 && !done)
        explain_down(r, rc, err);
    else if (rc == 0 && *exit_code >= 128 && (rc = explain_down(r, 0, err)) < 0)
        *exit_code = -1; /* killed with its Pod: no exit of its own */
    sp_ws_free(ws);
    return rc;
}

static int run_in(sp_remote *r, const char *ctr, const sp_remote_cmd *io, int *exit_code,
                  bool *timed_out, sp_error **err)
{
    return run_in_pod(r, NULL, ctr, io, exit_code, timed_out, err);
}

static int kr_exec(sp_remote *r, const sp_remote_cmd *x, int *exit_code, bool *timed_out,
                   sp_error **err)
{
    return run_in(r, "workload", x, exit_code, timed_out, err);
}

/* ------------------------------------------------------------ streams -- */

typedef struct kube_stream {
    sp_remote *r;
    sp_ws *ws;
    bool v5;
    bool ended;
    int exit_code;
    int pend_stream; /* a message handed out in parts */
    sp_buf pend;
    size_t pend_off;
} kube_stream;

static int ks_fd(const void *impl)
{
    return sp_ws_fd(((const kube_stream *)impl)->ws);
}

static bool ks_buffered(const void *impl)
{
    const kube_stream *s = impl;
    return s->pend.len > s->pend_off || sp_ws_buffered(s->ws);
}

static int ks_read(size_t *n, int *stream, void *impl, void *buf, size_t cap, int timeout_ms,
                   sp_error **err)
{
    kube_stream *s = impl;
    *n = 0;
    if (stream)
        *stream = SP_EXEC_STDOUT;
    int64_t end = timeout_ms < 0 ? -1 : sp_now_ms() + timeout_ms;
    while (s->pend.len == s->pend_off) {
        if (s->ended)
            return 0;
        int left = end < 0 ? -1 : (int)(end - sp_now_ms());
        if (end >= 0 && left < 0)
            left = 0;
        sp_ws_msg m;
        int rc = sp_ws_recv(s->ws, &m, left, err);
        if (rc < 0) {
            if (rc != SP_ETIMEOUT)
                explain_down(s->r, rc, err);
            return rc;
        }
        if (m.opcode == SP_WS_CLOSE)
            return sp_err_set(err, SP_ERROR, 0,
                              "the command's stream in %s closed before it said how it ended",
                              s->r->where);
        int ch;
        const uint8_t *d;
        size_t dl;
        if ((rc = sp_kube_exec_split(&ch, &d, &dl, m.data, m.len, err)) < 0)
            return rc;
        if (ch == SP_KUBE_STATUS) {
            s->ended = true;
            rc = sp_kube_exec_status(&s->exit_code, (const char *)d, dl, err);
            if (rc == 0 && s->exit_code >= 128 && (rc = explain_down(s->r, 0, err)) < 0)
                s->exit_code = -1;
            return rc;
        }
        s->pend.len = s->pend_off = 0;
        s->pend_stream = ch == SP_KUBE_STDERR ? SP_EXEC_STDERR : SP_EXEC_STDOUT;
        sp_buf_add(&s->pend, d, dl);
    }
    size_t k = s->pend.len - s->pend_off;
    k = k < cap ? k : cap;
    memcpy(buf, s->pend.data + s->pend_off, k);
    s->pend_off += k;
    *n = k;
    if (stream)
        *stream = s->pend_stream;
    return 0;
}

static int ks_write(void *impl, const void *data, size_t len, sp_error **err)
{
    return sp_kube_exec_write(((kube_stream *)impl)->ws, data, len, err);
}

static int ks_close_stdin(void *impl, sp_error **err)
{
    kube_stream *s = impl;
    /* v4 has no end of input: the command keeps its stdin open. */
    return s->v5 ? sp_kube_exec_close_stdin(s->ws, err) : 0;
}

static int ks_resize(void *impl, unsigned rows, unsigned cols, sp_error **err)
{
    return sp_kube_exec_resize(((kube_stream *)impl)->ws, cols, rows, err);
}

/* The status comes on the stream: nothing to wait for past its end. */
static int ks_exited(int *code, void *impl, int wait_ms, sp_error **err)
{
    kube_stream *s = impl;
    (void)wait_ms;
    *code = s->exit_code;
    if (!s->ended)
        return sp_err_set(err, SP_ERROR, 0, "the command in %s has not ended", s->r->where);
    return 0;
}

static int ks_noexec(const void *impl)
{
    (void)impl;
    return 0;
}

static int ks_host_pid(void *impl)
{
    (void)impl;
    return 0;
}

static void ks_free(void *impl)
{
    kube_stream *s = impl;
    if (!s)
        return;
    sp_ws_free(s->ws);
    sp_buf_dispose(&s->pend);
    free(s);
}

static const sp_stream_ops kube_stream_ops = {
    .fd = ks_fd,
    .buffered = ks_buffered,
    .read = ks_read,
    .write = ks_write,
    .close_stdin = ks_close_stdin,
    .resize = ks_resize,
    .exited = ks_exited,
    .noexec = ks_noexec,
    .host_pid = ks_host_pid,
    .signal = sp_stream_no_signal, /* the caller reaches the process group */
    .kill = sp_stream_no_kill,
    .free = ks_free,
};

static int ks_open(sp_stream *out, sp_remote *r, const sp_remote_cmd *x, sp_error **err)
{
    *out = (sp_stream){0};
    sp_ws *ws = NULL;
    sp_kube_exec_spec s = {.pod = r->pod,
                           .container = "workload",
                           .argv = x->argv,
                           .stdin_open = x->stdin_fd >= 0,
                           .tty = x->tty};
    int rc = sp_kube_exec_connect(&ws, r->k, &s, err);
    if (rc < 0)
        return sp_err_wrap(err, rc, "running a command in %s", r->where);
    if (x->tty && x->rows && x->cols)
        sp_kube_exec_resize(ws, x->cols, x->rows, NULL);
    kube_stream *st = sp_xcalloc(1, sizeof(*st));
    st->r = r;
    st->ws = ws;
    st->v5 = strcmp(sp_ws_protocol(ws), SP_KUBE_PROTO_V5) == 0;
    st->exit_code = -1;
    *out = (sp_stream){&kube_stream_ops, st};
    return 0;
}

/* -------------------------------------------------------------- bulk -- */

static void keep_output(void *ud, int stream, const void *data, size_t len)
{
    bulk_out *b = ud;
    if (stream == SP_KUBE_STDOUT && b->out && b->out->len < (1u << 20))
        sp_buf_add(b->out, data, len);
    else if (stream == SP_KUBE_STDERR && b->err.len < 8192)
        sp_buf_add(&b->err, data, len);
}

/* A peer subcommand with raw data on stdin (in_fd) and on stdout (to
 * out_fd, or kept in *out). */
static int peer_bulk(sp_remote *r, const char *const *argv, int in_fd, int out_fd, sp_buf *out,
                     sp_error **err)
{
    bulk_out b = {.out = out};
    int code = -1;
    sp_remote_cmd io = {
        .argv = argv, .stdin_fd = in_fd, .out_fd = out ? -1 : out_fd, .out = keep_output, .ud = &b};
    bool timed_out = false;
    int rc = run_in(r, "peer", &io, &code, &timed_out, err);
    if (rc == 0 && code != 0) {
        cleanup_free char *m = bulk_message(&b);
        rc = sp_err_set(err, SP_ERROR, 0, "%s (in %s, exit %d)", m, r->where, code);
    }
    sp_buf_dispose(&b.err);
    return rc;
}

static void to_fd(void *ud, int stream, const void *data, size_t len)
{
    (void)stream; /* only stderr comes here */
    sp_write_all(*(int *)ud, data, len);
}

static int kr_peer_command_in(sp_remote *r, const char *const *args, int in_fd, int out_fd,
                              int err_fd, int *exit_code, sp_error **err)
{
    sp_strv argv = {0};
    sp_strv_push(&argv, sp_xstrdup(SP_KUBE_SANDPOD_BIN));
    for (size_t i = 0; args[i]; i++)
        sp_strv_push(&argv, sp_xstrdup(args[i]));
    sp_remote_cmd io = {.argv = (const char *const *)argv.v,
                        .stdin_fd = in_fd,
                        .out_fd = out_fd,
                        .out = to_fd,
                        .ud = &err_fd};
    bool timed_out = false;
    int rc = run_in(r, "peer", &io, exit_code, &timed_out, err);
    sp_strv_dispose(&argv);
    return rc;
}

static int kr_peer_command(sp_remote *r, const char *const *args, int out_fd, int err_fd,
                           int *exit_code, sp_error **err)
{
    return kr_peer_command_in(r, args, -1, out_fd, err_fd, exit_code, err);
}

typedef struct log_sink {
    sp_logs_fn fn;
    void *ud;
} log_sink;

static int log_data(const char *data, size_t len, void *ud, sp_error **err)
{
    (void)err;
    log_sink *k = ud;
    return k->fn(SP_EXEC_STDOUT, data, len, k->ud);
}

/* The workload container's log from GET pods/NAME/log: the API merges
 * stdout and stderr. */
static int kr_logs(sp_remote *r, const sp_logs_opts *o, sp_logs_fn fn, void *ud, sp_error **err)
{
    sp_kube_log_query q = {.container = "workload",
                           .follow = o->follow,
                           .tail_lines = o->tail,
                           .timestamps = o->timestamps};
    char when[32];
    if (o->since) {
        /* Unix seconds become the RFC 3339 time the API takes; anything
         * else is passed on as RFC 3339 (the API refuses what is not). */
        const char *p = o->since;
        int64_t v = 0;
        while (*p >= '0' && *p <= '9' && v < INT64_MAX / 10)
            v = v * 10 + (*p++ - '0');
        struct tm tm;
        time_t t = (time_t)v;
        if (p != o->since && !*p && gmtime_r(&t, &tm) &&
            strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm))
            q.since_time = when;
        else
            q.since_time = o->since;
    }
    log_sink k = {fn, ud};
    return sp_kube_pod_log(r->k, r->pod, &q, log_data, &k, err);
}

static int kr_import(sp_remote *r, int fd, const char *tag, bool restore, char **result,
                     sp_error **err)
{
    if (result)
        *result = NULL;
    const char *argv[11] = {SP_KUBE_SANDPOD_BIN, "peer",    "import",          "--root",
                            SP_KUBE_WORKSPACE,   "--store", SP_KUBE_STORE_DIR, NULL};
    size_t n = 7;
    if (tag) {
        argv[n++] = "--tag";
        argv[n++] = tag;
    }
    if (!restore)
        argv[n++] = "--no-restore";
    sp_buf out = {0};
    int rc = peer_bulk(r, argv, fd, -1, &out, err);
    if (rc == 0 && result) {
        while (out.len && out.data[out.len - 1] == '\n')
            out.data[--out.len] = '\0';
        *result = out.data ? sp_buf_steal(&out) : sp_xstrdup("{}");
    }
    sp_buf_dispose(&out);
    return rc;
}

static int kr_export(sp_remote *r, const char *ref, bool gzip, int fd, sp_error **err)
{
    const char *argv[10] = {SP_KUBE_SANDPOD_BIN, "peer",    "export",          "--root",
                            SP_KUBE_WORKSPACE,   "--store", SP_KUBE_STORE_DIR, NULL};
    size_t n = 7;
    if (gzip)
        argv[n++] = "--gzip";
    if (ref)
        argv[n++] = ref;
    return peer_bulk(r, argv, -1, fd, NULL, err);
}

static int kr_export_now(sp_remote *r, int fd, sp_error **err)
{
    const char *argv[] = {
        SP_KUBE_SANDPOD_BIN, "peer",        "export", "--root", SP_KUBE_WORKSPACE, "--store",
        SP_KUBE_STORE_DIR,   "--transient", NULL};
    return peer_bulk(r, argv, -1, fd, NULL, err);
}

/* ------------------------------------------------------- state, remove -- */

static const char *phase_name(const sp_kube_pod_state *s)
{
    if (s->deleting)
        return "removing";
    switch (s->phase) {
    case SP_KUBE_POD_RUNNING:
        return s->ready ? "running" : "starting";
    case SP_KUBE_POD_PENDING:
        return "pending";
    case SP_KUBE_POD_SUCCEEDED:
        return "exited";
    case SP_KUBE_POD_FAILED:
        return "failed";
    default:
        return "unknown";
    }
}

static int kr_state(sp_remote *r, char **state, char **why, sp_error **err)
{
    *state = NULL;
    if (why)
        *why = NULL;
    cJSON *pod = NULL;
    sp_error *e = NULL;
    int rc = sp_kube_pod_get(r->k, r->pod, &pod, &e);
    if (rc == SP_ENOTFOUND) {
        sp_error_free(e);
        *state = sp_xstrdup("missing");
        if (why)
            *why = sp_xasprintf("its %s is gone", r->where);
        return 0;
    }
    if (rc < 0) {
        if (err)
            *err = e;
        else
            sp_error_free(e);
        return rc;
    }
    sp_kube_pod_state s;
    rc = sp_kube_pod_state_of(&s, pod, err);
    cJSON_Delete(pod);
    if (rc < 0)
        return rc;
    *state = sp_xstrdup(phase_name(&s));
    if (why && strcmp(*state, "running") != 0) {
        if (s.reason[0])
            *why = sp_xasprintf("%s: %s", s.reason, s.message);
        else
            *why = pod_why(r);
    }
    return 0;
}

static int kr_remove(sp_remote *r, sp_error **err)
{
    pthread_mutex_lock(&r->mu);
    peer_drop(r);
    pthread_mutex_unlock(&r->mu);
    sp_error *e = NULL;
    int rc = sp_kube_pod_delete(r->k, r->pod, 0, &e);
    if (r->egress_pod && (rc == 0 || rc == SP_ENOTFOUND))
        egress_remove(r->k, r->egress_pod);
    if (rc == SP_ENOTFOUND) {
        sp_error_free(e);
        return 0;
    }
    if (rc < 0 && err)
        *err = e;
    else
        sp_error_free(e);
    return rc;
}

static const char *kr_where(const sp_remote *r)
{
    return r->where;
}

static int kr_list(cJSON **out, const sp_engine *e, const char *owner, sp_error **err)
{
    *out = NULL;
    sp_kube *k = NULL;
    int rc = open_client(&k, e, err);
    if (rc < 0)
        return rc;
    cleanup_free char *sel = sp_xasprintf("sandpod=1,sandpod.owner=%s", owner);
    cJSON *list = NULL;
    rc = sp_kube_pod_list(k, sel, &list, err);
    sp_kube_free(k);
    if (rc < 0)
        return rc;
    cJSON *arr = cJSON_CreateArray();
    const cJSON *items = sp_json_get(list, "items");
    const cJSON *it;
    cJSON_ArrayForEach(it, items)
    {
        const cJSON *md = sp_json_get(it, "metadata");
        sp_kube_pod_state s;
        if (sp_kube_pod_state_of(&s, it, NULL) < 0)
            continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name",
                                sp_json_str_or(sp_json_get(md, "labels"), "sandpod.name", ""));
        cJSON_AddStringToObject(o, "id", sp_json_str_or(md, "name", ""));
        cJSON_AddStringToObject(o, "state", phase_name(&s));
        cJSON_AddItemToArray(arr, o);
    }
    cJSON_Delete(list);
    *out = arr;
    return 0;
}

static int kr_remove_id(const sp_engine *e, const char *id, sp_error **err)
{
    sp_kube *k = NULL;
    int rc = open_client(&k, e, err);
    if (rc < 0)
        return rc;
    rc = sp_kube_pod_delete(k, id, 0, err);
    /* An egress proxy's Pod takes its NetworkPolicies along. */
    if ((rc == 0 || rc == SP_ENOTFOUND) && strncmp(id, "spe-", 4) == 0)
        egress_remove(k, id);
    sp_kube_free(k);
    return rc;
}

/* ------------------------------------------------------------- egress -- */

/* `sandpod peer egress-OP` in the proxy's Pod: stdin from policy (may be
 * NULL), stdout to out_fd; *code its exit status. */
static int egress_command(sp_remote *r, const char *op, const char *policy, int out_fd, int *code,
                          sp_error **err)
{
    if (!r->egress_pod)
        return sp_err_set(err, SP_EINVAL, 0, "%s was made without egress rules: it has no proxy",
                          r->where);
    bool set = strcmp(op, "egress-policy") == 0;
    const char *argv[] = {SP_KUBE_SANDPOD_BIN,
                          "peer",
                          op,
                          set ? SP_KUBE_EGRESS_POLICY_DIR : SP_KUBE_EGRESS_RUN_DIR,
                          set ? SP_KUBE_EGRESS_RUN_DIR : NULL,
                          NULL};
    bulk_out b = {0};
    sp_remote_cmd io = {.argv = argv,
                        .stdin_fd = -1,
                        .stdin_data = policy,
                        .stdin_len = policy ? strlen(policy) : 0,
                        .out_fd = out_fd,
                        .out = keep_output,
                        .ud = &b};
    bool timed_out = false;
    int rc = run_in_pod(r, r->egress_pod, "proxy", &io, code, &timed_out, err);
    if (rc == 0 && *code != 0 && !(*code == SP_KUBE_EGRESS_NO_LOG && !set)) {
        cleanup_free char *m = bulk_message(&b);
        rc = sp_err_set(err, SP_ERROR, 0, "the egress proxy (pod %s): %s (exit %d)", r->egress_pod,
                        m, *code);
    }
    sp_buf_dispose(&b.err);
    return rc;
}

static int kr_egress_set(sp_remote *r, const char *policy, sp_error **err)
{
    int code = -1;
    return egress_command(r, "egress-policy", policy, -1, &code, err);
}

static int kr_egress_log(sp_remote *r, int fd, sp_error **err)
{
    int code = -1;
    int rc = egress_command(r, "egress-log", NULL, fd, &code, err);
    if (rc == 0 && code == SP_KUBE_EGRESS_NO_LOG)
        return sp_err_set(err, SP_ENOTFOUND, ENOENT, "no connection log yet");
    return rc;
}

const sp_remote_ops sp_kube_remote_ops = {
    .kind = "kubernetes",
    .create = kr_create,
    .open = kr_open,
    .rpc = kr_rpc,
    .cancel = kr_cancel,
    .exec = kr_exec,
    .stream_open = ks_open,
    .peer_command = kr_peer_command,
    .peer_command_in = kr_peer_command_in,
    .logs = kr_logs,
    .import_tar = kr_import,
    .export_tar = kr_export,
    .export_now = kr_export_now,
    .state = kr_state,
    .remove = kr_remove,
    .where = kr_where,
    .free = remote_free,
    .list = kr_list,
    .remove_id = kr_remove_id,
    .egress_set = kr_egress_set,
    .egress_log = kr_egress_log,
};
