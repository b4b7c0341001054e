/* Brokered secrets: what the egress proxy holds for a sandbox whose
 * workload has only stand-ins. Pure: no I/O. Internal to the library and
 * the proxy.
 *
 * A secret has a name (the variable the workload sees), a stand-in (a
 * random value unique to the sandbox, what the variable holds), the real
 * value (never in the sandbox), the places it is put in a request
 * (headers always; the query string and the body when asked for) and the
 * hosts it is for (scopes):
 *   api.example.com[:PORT]       that name, over TLS the proxy terminates,
 *                                port 443 when none is given
 *   *.example.com[:PORT]         the names below example.com, the same way
 *   http://HOST[:PORT]           HOST (a name, *.suffix, or an address) over
 *                                plain HTTP, port 80 when none is given
 *
 * The proxy's file (egress_dir.h's folder, "secrets", mode 0600):
 *   # sandpod secrets 1
 *   secret NAME STANDIN WHERE VALUE-HEX SCOPE[,SCOPE...]
 * WHERE is "h", "hq", "hb" or "hqb" (headers, query, body). */
#ifndef SANDPOD_EGRESS_SECRETS_H
#define SANDPOD_EGRESS_SECRETS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "egress_policy.h"
#include "sandpod/error.h"

#define SP_SECRET_STANDIN_PREFIX "sandpod-standin-"
/* The prefix and 40 hex digits (160 random bits). */
#define SP_SECRET_STANDIN_LEN (sizeof(SP_SECRET_STANDIN_PREFIX) - 1 + 40)
#define SP_SECRET_VALUE_MAX   16384
#define SP_SECRET_NAME_MAX    128

typedef struct sp_egress_scope {
    sp_egress_rule rule; /* a name, *.suffix or network; ports as given or the default */
    bool plain;          /* http://: plain HTTP; else TLS */
} sp_egress_scope;

typedef struct sp_egress_secret {
    char *name;
    char *standin;
    unsigned char *value;
    size_t value_len;
    bool in_query, in_body;
    sp_egress_scope *scopes;
    size_t n_scopes;
} sp_egress_secret;

typedef struct sp_egress_secrets {
    sp_egress_secret *v;
    size_t n;
} sp_egress_secrets;

/* Whether `name` may name a secret: a shell variable name ([A-Za-z_]
 * then [A-Za-z0-9_]), at most SP_SECRET_NAME_MAX bytes, and none the
 * sandbox sets itself (the proxy variables, PATH, HOME). */
bool sp_egress_secret_name_ok(const char *name);

/* One scope as the user wrote it (the forms above) into *out (dispose of
 * out->rule). @return 0; SP_EINVAL naming it ("--secret-for 'K=...': ...") */
int sp_egress_scope_parse(sp_egress_scope *out, const char *text, sp_error **err);

/* A file's text into *s (appended). @return 0; SP_EINVAL naming the line */
int sp_egress_secrets_parse(sp_egress_secrets *s, const char *text, size_t len, sp_error **err);
/* The file's text for s (the caller frees it). */
char *sp_egress_secrets_text(const sp_egress_secrets *s);
void sp_egress_secrets_dispose(sp_egress_secrets *s);
/* Whether a secret of s has a scope over TLS (the proxy then ends HTTPS
 * to that host with a CA of its own). */
bool sp_egress_secrets_over_tls(const sp_egress_secrets *s);
/* Take secret i out of s. */
void sp_egress_secrets_remove(sp_egress_secrets *s, size_t i);

/* Whether the secret is for a connection to host (as the client named it:
 * a name or an address literal) on port, over TLS or plain HTTP. */
bool sp_egress_secret_for(const sp_egress_secret *s, const char *host, uint16_t port, bool tls);

/* The first secret whose stand-in occurs in buf, or NULL. */
const sp_egress_secret *sp_egress_secrets_find(const sp_egress_secrets *s, const void *buf,
                                               size_t len);

/* buf with every stand-in of a secret for (host, port, tls) replaced by its
 * value, into a new buffer (*out, *out_len; the caller frees it); `query`
 * limits it to secrets that go in the query string, `body` to those that
 * go in the body (neither: all, as headers take every secret). Returns how
 * many were replaced. */
size_t sp_egress_secrets_replace(const sp_egress_secrets *s, const char *host, uint16_t port,
                                 bool tls, bool query, bool body, const void *buf, size_t len,
                                 unsigned char **out, size_t *out_len);

/* A new stand-in (SP_SECRET_STANDIN_LEN bytes and a NUL) from the kernel's
 * random source. @return 0; -1 when there is none */
int sp_egress_standin_new(char out[SP_SECRET_STANDIN_LEN + 1]);

#endif
