/* The Kubernetes REST client: credentials (in-cluster, kubeconfig through
 * kubectl, explicit), Pods (create, get, list, delete, watch, wait) and the
 * Events that explain a Pod that does not start. Internal to kube/: libcurl
 * and cJSON, no Podman, no sandbox module.
 *
 * Every call honours 429/503 with Retry-After (bounded retries inside the
 * call's deadline), re-reads a token file on each request and once more
 * after a 401 (bound service-account tokens rotate), verifies TLS unless
 * the kubeconfig itself says insecure-skip-tls-verify, and turns a
 * Kubernetes Status body into one sp_error line (reason, message, code).
 * Secrets (tokens, keys) never reach an error or the log. */
#ifndef SANDPOD_KUBE_H
#define SANDPOD_KUBE_H

#include <stdbool.h>
#include <stddef.h>

#include "base.h"
#include "json.h"
#include "sandpod/engine.h"
#include "ws.h"

/* An exec credential plugin (a kubeconfig user's `exec`), run by the
 * client when it needs a credential (see sp_kube_plugin_run). */
typedef struct sp_kube_plugin {
    char *api_version;  /* client.authentication.k8s.io/v1 or v1beta1 */
    char **argv;        /* command, then args; NULL-terminated */
    char **env;         /* "NAME=value" added to ours; NULL-terminated */
    char *install_hint; /* one line, or NULL */
    bool cluster_info;  /* provideClusterInfo: the cluster goes to the plugin */
} sp_kube_plugin;

/* Where the API server is and who we are. Every string is owned. */
typedef struct sp_kube_creds {
    char *server;     /* https://host:port (no trailing slash) */
    char *ns;         /* the namespace; "default" when none was given */
    char *token;      /* a bearer token, or NULL */
    char *token_file; /* read on every request instead of token, or NULL */
    char *ca_file;    /* a PEM bundle, or NULL */
    sp_buf ca_pem;    /* or the bundle itself (certificate-authority-data) */
    sp_buf cert_pem;  /* a client certificate and its key (both or neither) */
    sp_buf key_pem;
    bool insecure; /* insecure-skip-tls-verify: only from a kubeconfig */
    /* Run for a token or a client certificate (a fixed token above wins,
     * as with kubectl), or NULL. */
    sp_kube_plugin *plugin;
} sp_kube_creds;

void sp_kube_creds_dispose(sp_kube_creds *c);

/* What an exec credential plugin returned. */
typedef struct sp_kube_plugin_cred {
    char *token;     /* or NULL */
    sp_buf cert_pem; /* a client certificate and its key, or empty */
    sp_buf key_pem;
    int64_t expires_ms; /* wall clock (ms since the epoch); 0: never */
} sp_kube_plugin_cred;

void sp_kube_plugin_cred_dispose(sp_kube_plugin_cred *c);

/* Run c->plugin as kubectl does: argv[0] looked up in PATH (never a
 * shell), our environment plus its env and KUBERNETES_EXEC_INFO (an
 * ExecCredential with spec.interactive false, and spec.cluster when it
 * asks for cluster info), stdin /dev/null, its stderr passed to ours only
 * when show_stderr (debug), killed after timeout_ms. Errors: a missing
 * command SP_ENOTFOUND (with its installHint), a non-zero exit SP_ERROR, no
 * valid ExecCredential on stdout SP_EINVAL, timeout SP_ETIMEOUT. Nothing
 * it printed reaches the message. */
int sp_kube_plugin_run(sp_kube_plugin_cred *out, const sp_kube_creds *c, int timeout_ms,
                       bool show_stderr, sp_error **err);

/* The parser behind sp_kube_plugin_run: json is the plugin's stdout,
 * api_version the one it was configured with (the answer must match). */
int sp_kube_plugin_parse(sp_kube_plugin_cred *out, const char *api_version, const char *json,
                         size_t len, sp_error **err);

/* The defaults of an in-cluster Pod. */
#define SP_KUBE_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

/* In-cluster credentials: dir/{token,ca.crt,namespace} (dir NULL:
 * SP_KUBE_SA_DIR) and KUBERNETES_SERVICE_HOST/PORT. The token is kept as a
 * file name, re-read on each request. SP_ENOTFOUND when not in a Pod. */
int sp_kube_creds_incluster(sp_kube_creds *out, const char *dir, sp_error **err);

/* Credentials from a kubeconfig: runs `kubectl config view --raw --minify
 * --flatten -o json` (kubectl NULL: "kubectl" on PATH; kubeconfig and
 * context NULL: kubectl's defaults) with posix_spawn, then parses it. */
int sp_kube_creds_kubeconfig(sp_kube_creds *out, const char *kubectl, const char *kubeconfig,
                             const char *context, sp_error **err);

/* The parser behind sp_kube_creds_kubeconfig, for kubectl's JSON. Auth
 * providers, basic auth and an exec plugin that wants a terminal
 * (interactiveMode Always) or speaks another apiVersion are SP_EINVAL
 * naming the user. */
int sp_kube_creds_parse_kubeconfig(sp_kube_creds *out, const char *json, size_t len,
                                   sp_error **err);

/* Explicit credentials (the fallback when kubectl is absent): server is
 * required; token_file, ca_file and ns may be NULL. */
int sp_kube_creds_explicit(sp_kube_creds *out, const char *server, const char *token_file,
                           const char *ca_file, const char *ns, sp_error **err);

typedef void (*sp_kube_log_fn)(const char *line, void *userdata);

typedef struct sp_kube_opts {
    unsigned version;
    int timeout_ms;         /* one call, retries included; 0: 30 s */
    int connect_timeout_ms; /* 0: 5 s */
    int max_retries;        /* on 429/503; 0: 5, -1: none */
    int max_retry_after_ms; /* the longest wait a Retry-After gets; 0: 10 s */
    /* Debug log: one line per request (method, path with query values
     * elided, status, bytes, duration). NULL: none. */
    sp_kube_log_fn log;
    void *log_userdata;
    int plugin_timeout_ms; /* an exec credential plugin's run; 0: 60 s */
} sp_kube_opts;
#define SP_KUBE_OPTS_VERSION 1
#define SP_KUBE_OPTS_INIT                                                                          \
    {                                                                                              \
        SP_KUBE_OPTS_VERSION, 0, 0, 0, 0, NULL, NULL, 0                                            \
    }

/* A client holds one libcurl handle (connections are reused): one thread
 * at a time. */
typedef struct sp_kube sp_kube;

/* A client for creds, which it takes over (*creds is emptied, also on
 * failure). */
int sp_kube_open(sp_kube **out, sp_kube_creds *creds, const sp_kube_opts *opts, sp_error **err);
void sp_kube_free(sp_kube *k);
const char *sp_kube_namespace(const sp_kube *k);
const char *sp_kube_server(const sp_kube *k);

/* One request: path from the server's root ("/api/v1/..."), body JSON or
 * NULL. *out (may be NULL) gets the parsed answer of a 2xx. Errors are the
 * Status the server sent: 404 SP_ENOTFOUND, 409 SP_EEXISTS, 401/403
 * SP_EDENIED, 400/422 SP_EINVAL, throttling past the deadline SP_ETIMEOUT,
 * anything else SP_ERROR. */
int sp_kube_call(sp_kube *k, const char *method, const char *path, const char *body, cJSON **out,
                 const char *what, sp_error **err);

/* An error from an HTTP status and a body that may be a metav1.Status. */
int sp_kube_status_error(sp_error **err, long http_status, const char *body, size_t len,
                         const char *what);

/* Pods in the client's namespace. */
int sp_kube_pod_create(sp_kube *k, const char *pod_json, cJSON **out, sp_error **err);
int sp_kube_pod_get(sp_kube *k, const char *name, cJSON **out, sp_error **err);
/* What GET pods/NAME/log asks for (-1 / 0 / NULL: not asked). */
typedef struct sp_kube_log_query {
    const char *container;
    bool follow;
    int64_t tail_lines;     /* -1: all */
    const char *since_time; /* RFC 3339, or NULL */
    bool timestamps;
} sp_kube_log_query;

/* Return 0 to go on; anything else stops the stream and is returned. */
typedef int (*sp_kube_data_fn)(const char *data, size_t len, void *ud, sp_error **err);

/* The log of container q->container of Pod name, handed to fn as it comes
 * (stdout and stderr as one stream: the API keeps no difference); with
 * q->follow until the container ends. No deadline bounds it: without
 * follow, only a server silent for the client's timeout_ms fails it
 * (SP_ETIMEOUT). */
int sp_kube_pod_log(sp_kube *k, const char *name, const sp_kube_log_query *q, sp_kube_data_fn fn,
                    void *userdata, sp_error **err);
/* grace_seconds < 0: the Pod's own. A Pod already gone is SP_ENOTFOUND. */
int sp_kube_pod_delete(sp_kube *k, const char *name, int grace_seconds, sp_error **err);
/* NetworkPolicies (networking.k8s.io/v1) in the client's namespace: made
 * from JSON text, deleted by name (gone already is SP_ENOTFOUND). */
int sp_kube_netpol_create(sp_kube *k, const char *json, sp_error **err);
int sp_kube_netpol_delete(sp_kube *k, const char *name, sp_error **err);
/* A PodList; label_selector may be NULL. */
int sp_kube_pod_list(sp_kube *k, const char *label_selector, cJSON **out, sp_error **err);

/* What a Pod's status says, parsed from a Pod object. */
typedef enum sp_kube_pod_phase {
    SP_KUBE_POD_UNKNOWN,
    SP_KUBE_POD_PENDING,
    SP_KUBE_POD_RUNNING,
    SP_KUBE_POD_SUCCEEDED,
    SP_KUBE_POD_FAILED,
} sp_kube_pod_phase;

typedef struct sp_kube_pod_state {
    sp_kube_pod_phase phase;
    bool ready;    /* condition Ready is True */
    bool deleting; /* metadata.deletionTimestamp is set */
    /* Why it cannot start, when it says so: a container waiting with
     * ErrImagePull, ImagePullBackOff, CrashLoopBackOff, ..., or
     * PodScheduled False with Unschedulable. "" otherwise. */
    char reason[64];
    char message[256]; /* one line */
    char resource_version[64];
} sp_kube_pod_state;

/* Parse a Pod object's metadata and status. SP_ERROR when pod is not one. */
int sp_kube_pod_state_of(sp_kube_pod_state *out, const cJSON *pod, sp_error **err);

/* A watch event: its type and object (borrowed from ev). */
typedef enum sp_kube_event_type {
    SP_KUBE_ADDED,
    SP_KUBE_MODIFIED,
    SP_KUBE_DELETED,
    SP_KUBE_BOOKMARK,
    SP_KUBE_ERROR, /* object is a Status */
} sp_kube_event_type;
int sp_kube_watch_event_parse(sp_kube_event_type *type, const cJSON **object, const cJSON *ev,
                              sp_error **err);

/* Called for each watch event of the Pod (and once with the Pod as it is
 * when the watch starts, as SP_KUBE_ADDED; after a relist too). Return 0 to
 * go on, 1 to stop the watch with success, < 0 to stop with that error. */
typedef int (*sp_kube_watch_fn)(sp_kube_event_type type, const cJSON *pod, void *userdata,
                                sp_error **err);

/* Watch one Pod until fn stops it or timeout_ms passes (SP_ETIMEOUT). A
 * 410 Gone (as a status or an ERROR event) relists and rewatches from the
 * new resourceVersion; a dropped stream rewatches from the last one seen.
 * The Pod missing at (re)list is reported as SP_KUBE_DELETED with
 * pod NULL. */
int sp_kube_pod_watch(sp_kube *k, const char *name, int timeout_ms, sp_kube_watch_fn fn,
                      void *userdata, sp_error **err);

/* Wait until the Pod is Running and Ready. A Pod that cannot start (image
 * pull failure, unschedulable, Failed, deleted) is SP_ERROR with one line
 * from its Events; timeout SP_ETIMEOUT (with the latest event, if any). */
int sp_kube_pod_wait_ready(sp_kube *k, const char *name, int timeout_ms, sp_error **err);

/* The line that best explains the Pod: the latest Warning event
 * ("Reason: message"), else the latest event. *out NULL when there is none. */
int sp_kube_pod_events_line(sp_kube *k, const char *name, char **out, sp_error **err);
/* The same from an EventList object. */
char *sp_kube_events_pick(const cJSON *list);

/* A client for a kubernetes engine: credentials by the rule of
 * sandpod/engine.h (server with token_file/ca_file; else kubeconfig/context
 * through kubectl; else in-cluster; else kubectl's defaults), the
 * engine's namespace over the credentials'. SP_EINVAL for another kind. */
int sp_kube_open_engine(sp_kube **out, const sp_engine *e, const sp_kube_opts *ko, sp_error **err);

/* pods/exec: a command in a container of a Pod, over a WebSocket with
 * the exec channel protocol (kube_exec.h). */
typedef struct sp_kube_exec_spec {
    const char *pod;
    const char *container;        /* NULL: the Pod's only one */
    const char *const *argv;      /* NULL-terminated, required */
    bool stdin_open;              /* the command gets a stdin (channel 0) */
    bool tty;                     /* a terminal: stdout only, resizable */
    int timeout_ms;               /* the handshake; 0: the client's */
    const char *const *protocols; /* NULL: v5 then v4 */
} sp_kube_exec_spec;

/* Open the stream with the client's credentials and TLS settings (a 401
 * with a token file re-reads it once, with an exec plugin runs it once
 * more). Errors as sp_ws_connect(). */
int sp_kube_exec_connect(sp_ws **out, sp_kube *k, const sp_kube_exec_spec *s, sp_error **err);

#endif
