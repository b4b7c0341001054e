/* Fuzz target: the Kubernetes REST client's JSON parsers: a Pod's status,
 * a watch event, a Status error body, an Events list, kubectl's
 * kubeconfig JSON and an exec credential plugin's ExecCredential.
 *
 * Input: a selector byte (mod 6), then the JSON. Properties: nothing
 * crashes or leaks; errors and every extracted line are one line; a
 * parsed kubeconfig names an http(s) server and a namespace, and has a
 * client certificate exactly when it has its key; a failed one leaves the
 * credentials empty; a parsed ExecCredential has a token without control
 * characters or a certificate with its key, and a failed one nothing. */
#include "fuzz.h"
#include "kube.h"

static void one_line(const char *s)
{
    FZ_ASSERT(s && !strchr(s, '\n') && !strchr(s, '\r'), "multi-line text: %s", s ? s : "(null)");
}

static void check_error(int rc, sp_error *err)
{
    FZ_ASSERT(rc < 0 && err && err->message, "error path without an error");
    one_line(err->message);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 1 << 20)
        return 0;
    int which = data[0] % 6;
    const char *json = (const char *)data + 1;
    size_t len = size - 1;
    sp_error *err = NULL;
    int rc = 0;
    if (which == 4) {
        sp_kube_creds c;
        rc = sp_kube_creds_parse_kubeconfig(&c, json, len, &err);
        if (rc < 0) {
            check_error(rc, err);
            FZ_ASSERT(!c.server && !c.ns && !c.token && !c.ca_pem.len, "creds left on failure");
        } else {
            FZ_ASSERT(c.server && (strncmp(c.server, "https://", 8) == 0 ||
                                   strncmp(c.server, "http://", 7) == 0),
                      "server %s", c.server ? c.server : "(null)");
            FZ_ASSERT(c.ns && *c.ns, "no namespace");
            FZ_ASSERT(!c.cert_pem.len == !c.key_pem.len, "a certificate without its key");
        }
        sp_kube_creds_dispose(&c);
        sp_error_free(err);
        return 0;
    }
    if (which == 5) {
        sp_kube_plugin_cred pc;
        rc = sp_kube_plugin_parse(&pc, "client.authentication.k8s.io/v1", json, len, &err);
        if (rc < 0) {
            check_error(rc, err);
            FZ_ASSERT(!pc.token && !pc.cert_pem.len && !pc.key_pem.len, "a credential on failure");
        } else {
            FZ_ASSERT(pc.token || (pc.cert_pem.len && pc.key_pem.len), "no credential");
            if (pc.token)
                one_line(pc.token);
        }
        sp_kube_plugin_cred_dispose(&pc);
        sp_error_free(err);
        return 0;
    }
    if (which == 2) {
        rc = sp_kube_status_error(&err, 400 + (long)(len % 200), json, len, "fuzz");
        check_error(rc, err);
        sp_error_free(err);
        return 0;
    }
    cJSON *j = sp_json_parse(json, len);
    if (which == 0) {
        sp_kube_pod_state st;
        rc = sp_kube_pod_state_of(&st, j, &err);
        if (rc < 0) {
            check_error(rc, err);
        } else {
            one_line(st.reason);
            one_line(st.message);
            one_line(st.resource_version);
            FZ_ASSERT(st.phase <= SP_KUBE_POD_FAILED, "phase %d", (int)st.phase);
        }
    } else if (which == 1) {
        sp_kube_event_type t;
        const cJSON *o = NULL;
        rc = sp_kube_watch_event_parse(&t, &o, j, &err);
        if (rc < 0)
            check_error(rc, err);
        else
            FZ_ASSERT(t <= SP_KUBE_ERROR && cJSON_IsObject(o), "event %d", (int)t);
    } else {
        char *line = sp_kube_events_pick(j);
        if (line)
            one_line(line);
        free(line);
    }
    sp_error_free(err);
    cJSON_Delete(j);
    return 0;
}
