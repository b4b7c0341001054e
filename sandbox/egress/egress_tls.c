/* The egress proxy's TLS (egress_tls.h): a CA in memory, leaves per host,
 * both ends of a terminated connection. */
#include "egress_tls.h"

#include "egress_policy.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LEAVES_MAX 256
#define CA_DAYS    365
#define LEAF_DAYS  30
#define CA_SUBJECT "sandpod egress proxy CA"
#define HOST_MAX   256

typedef struct leaf {
    char host[HOST_MAX];
    X509 *cert;
} leaf;

struct sp_egress_tls {
    EVP_PKEY *ca_key, *leaf_key;
    X509 *ca;
    SSL_CTX *server, *client;
    pthread_mutex_t mu;
    leaf leaves[LEAVES_MAX];
    size_t n_leaves;
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* why = what: OpenSSL's first queued error (or `fallback`). */
static void ossl_why(char *why, size_t cap, const char *what, const char *fallback)
{
    unsigned long e = ERR_get_error();
    char buf[256];
    if (e)
        ERR_error_string_n(e, buf, sizeof(buf));
    snprintf(why, cap, "%s: %s", what, e ? buf : fallback);
    ERR_clear_error();
}

static bool add_ext(X509 *cert, X509 *issuer, int nid, const char *value)
{
    X509V3_CTX ctx;
    X509V3_set_ctx(&ctx, issuer, cert, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    bool ok = ext && X509_add_ext(cert, ext, -1) == 1;
    X509_EXTENSION_free(ext);
    return ok;
}

/* A certificate for key under subject cn (NULL: none), valid from an hour
 * ago for `days` (but not past not_after, when given), with a random
 * 128-bit serial; issuer NULL: self-signed. */
static X509 *cert_new(EVP_PKEY *key, const char *cn, X509 *issuer, long days,
                      const ASN1_TIME *not_after)
{
    X509 *x = X509_new();
    unsigned char serial[16];
    BIGNUM *bn = NULL;
    bool ok = x && X509_set_version(x, 2) == 1 && RAND_bytes(serial, sizeof(serial)) == 1;
    if (ok) {
        serial[0] &= 0x7f; /* positive */
        bn = BN_bin2bn(serial, sizeof(serial), NULL);
        ok = bn && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x));
    }
    BN_free(bn);
    ok = ok && X509_gmtime_adj(X509_getm_notBefore(x), -3600) &&
         X509_gmtime_adj(X509_getm_notAfter(x), days * 86400L);
    if (ok && not_after && ASN1_TIME_compare(X509_get0_notAfter(x), not_after) > 0)
        ok = X509_set1_notAfter(x, not_after) == 1;
    X509_NAME *name = X509_get_subject_name(x);
    if (ok && cn)
        ok = X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)cn, -1,
                                        -1, 0) == 1;
    ok = ok && X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : name) == 1 &&
         X509_set_pubkey(x, key) == 1;
    if (!ok) {
        X509_free(x);
        return NULL;
    }
    return x;
}

static X509 *make_ca(EVP_PKEY *key)
{
    X509 *x = cert_new(key, CA_SUBJECT, NULL, CA_DAYS, NULL);
    bool ok = x && add_ext(x, x, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") &&
              add_ext(x, x, NID_key_usage, "critical,keyCertSign,cRLSign") &&
              add_ext(x, x, NID_subject_key_identifier, "hash") &&
              add_ext(x, x, NID_authority_key_identifier, "keyid:always") &&
              X509_sign(x, key, EVP_sha256()) > 0;
    if (!ok) {
        X509_free(x);
        return NULL;
    }
    return x;
}

/* A leaf for host (a DNS name, or an address when literal). */
static X509 *make_leaf(sp_egress_tls *t, const char *host, bool literal)
{
    /* A subject CN holds 64 characters at most; the SAN is what counts. */
    X509 *x = cert_new(t->leaf_key, strlen(host) <= 64 ? host : NULL, t->ca, LEAF_DAYS,
                       X509_get0_notAfter(t->ca));
    if (!x)
        return NULL;
    GENERAL_NAMES *gens = sk_GENERAL_NAME_new_null();
    GENERAL_NAME *gn = GENERAL_NAME_new();
    bool ok = gens && gn;
    if (ok && literal) {
        ASN1_OCTET_STRING *ip = a2i_IPADDRESS(host);
        ok = ip != NULL;
        if (ok)
            GENERAL_NAME_set0_value(gn, GEN_IPADD, ip);
    } else if (ok) {
        ASN1_IA5STRING *dns = ASN1_IA5STRING_new();
        ok = dns && ASN1_STRING_set(dns, host, (int)strlen(host)) == 1;
        if (ok)
            GENERAL_NAME_set0_value(gn, GEN_DNS, dns);
        else
            ASN1_IA5STRING_free(dns);
    }
    if (ok) {
        ok = sk_GENERAL_NAME_push(gens, gn) > 0;
        if (ok)
            gn = NULL;
    }
    ok = ok && X509_add1_ext_i2d(x, NID_subject_alt_name, gens, 0, X509V3_ADD_DEFAULT) == 1 &&
         add_ext(x, t->ca, NID_basic_constraints, "critical,CA:FALSE") &&
         add_ext(x, t->ca, NID_key_usage, "critical,digitalSignature") &&
         add_ext(x, t->ca, NID_ext_key_usage, "serverAuth") &&
         add_ext(x, t->ca, NID_subject_key_identifier, "hash") &&
         add_ext(x, t->ca, NID_authority_key_identifier, "keyid:always") &&
         X509_sign(x, t->ca_key, EVP_sha256()) > 0;
    GENERAL_NAME_free(gn);
    GENERAL_NAMES_free(gens);
    if (!ok) {
        X509_free(x);
        return NULL;
    }
    return x;
}

/* The leaf for host, made on first use and again a day before it
 * expires (a proxy may run for longer than a leaf is valid); a reference
 * the caller frees. */
static X509 *leaf_for(sp_egress_tls *t, const char *host, bool literal)
{
    pthread_mutex_lock(&t->mu);
    X509 *x = NULL;
    time_t soon = time(NULL) + 86400;
    for (size_t i = 0; i < t->n_leaves && !x; i++) {
        if (strcmp(t->leaves[i].host, host) != 0)
            continue;
        if (X509_cmp_time(X509_get0_notAfter(t->leaves[i].cert), &soon) > 0) {
            x = t->leaves[i].cert;
        } else {
            X509_free(t->leaves[i].cert);
            t->leaves[i] = t->leaves[--t->n_leaves];
        }
        break;
    }
    if (!x && strlen(host) < HOST_MAX && (x = make_leaf(t, host, literal)) != NULL) {
        if (t->n_leaves == LEAVES_MAX) {
            for (size_t i = 0; i < t->n_leaves; i++)
                X509_free(t->leaves[i].cert);
            t->n_leaves = 0;
        }
        snprintf(t->leaves[t->n_leaves].host, HOST_MAX, "%s", host);
        t->leaves[t->n_leaves++].cert = x;
    }
    if (x)
        X509_up_ref(x);
    pthread_mutex_unlock(&t->mu);
    return x;
}

/* ALPN: HTTP/1.1 or nothing (the proxy reads HTTP/1 requests only). */
static int alpn_select(SSL *s, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned int inlen, void *arg)
{
    (void)s;
    (void)arg;
    for (unsigned i = 0; i < inlen;) {
        unsigned l = in[i];
        if (i + 1 + l > inlen)
            break;
        if (l == 8 && memcmp(in + i + 1, "http/1.1", 8) == 0) {
            *out = in + i + 1;
            *outlen = (unsigned char)l;
            return SSL_TLSEXT_ERR_OK;
        }
        i += 1 + l;
    }
    return SSL_TLSEXT_ERR_NOACK;
}

sp_egress_tls *sp_egress_tls_new(const char *upstream_ca, char *why, size_t cap)
{
    sp_egress_tls *t = calloc(1, sizeof(*t));
    if (!t) {
        snprintf(why, cap, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&t->mu, NULL);
    const char *step = "make the CA key";
    bool ok = (t->ca_key = EVP_EC_gen("P-256")) != NULL;
    if (ok) {
        step = "make the leaf key";
        ok = (t->leaf_key = EVP_EC_gen("P-256")) != NULL;
    }
    if (ok) {
        step = "make the CA certificate";
        ok = (t->ca = make_ca(t->ca_key)) != NULL;
    }
    if (ok) {
        step = "the server context";
        t->server = SSL_CTX_new(TLS_server_method());
        ok = t->server && SSL_CTX_set_min_proto_version(t->server, TLS1_2_VERSION) == 1;
    }
    if (ok) {
        SSL_CTX_set_mode(t->server,
                         SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
        SSL_CTX_set_alpn_select_cb(t->server, alpn_select, NULL);
        /* No resumption (each connection is one request, and a ticket
         * would outlive a rotated CA), no renegotiation. */
        SSL_CTX_set_session_cache_mode(t->server, SSL_SESS_CACHE_OFF);
        SSL_CTX_set_options(t->server, SSL_OP_NO_TICKET | SSL_OP_NO_RENEGOTIATION);
        SSL_CTX_set_num_tickets(t->server, 0);
        step = "the client context";
        t->client = SSL_CTX_new(TLS_client_method());
        ok = t->client && SSL_CTX_set_min_proto_version(t->client, TLS1_2_VERSION) == 1;
    }
    if (ok) {
        static const unsigned char alpn[] = "\x08http/1.1";
        SSL_CTX_set_mode(t->client,
                         SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
        SSL_CTX_set_verify(t->client, SSL_VERIFY_PEER, NULL);
        ok = SSL_CTX_set_alpn_protos(t->client, alpn, sizeof(alpn) - 1) == 0;
    }
    if (ok) {
        step = "load the upstream CAs";
        if (upstream_ca && access(upstream_ca, R_OK) == 0)
            ok = SSL_CTX_load_verify_locations(t->client, upstream_ca, NULL) == 1;
        else
            ok = SSL_CTX_set_default_verify_paths(t->client) == 1;
    }
    if (!ok) {
        ossl_why(why, cap, step, "failed");
        sp_egress_tls_free(t);
        return NULL;
    }
    return t;
}

void sp_egress_tls_free(sp_egress_tls *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->n_leaves; i++)
        X509_free(t->leaves[i].cert);
    SSL_CTX_free(t->server);
    SSL_CTX_free(t->client);
    X509_free(t->ca);
    EVP_PKEY_free(t->ca_key);
    EVP_PKEY_free(t->leaf_key);
    pthread_mutex_destroy(&t->mu);
    free(t);
}

char *sp_egress_tls_ca_pem(const sp_egress_tls *t)
{
    BIO *b = BIO_new(BIO_s_mem());
    char *out = NULL;
    if (b && PEM_write_bio_X509(b, t->ca) == 1) {
        char *data;
        long n = BIO_get_mem_data(b, &data);
        out = malloc((size_t)n + 1);
        if (out) {
            memcpy(out, data, (size_t)n);
            out[n] = '\0';
        }
    }
    BIO_free(b);
    return out;
}

/* Wait for fd to be ready for ev by the deadline. */
static bool wait_fd(int fd, short ev, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - now_ms();
        if (left <= 0)
            return false;
        struct pollfd p = {fd, ev, 0};
        int r = poll(&p, 1, left > 1000 ? 1000 : (int)left);
        if (r > 0)
            return true;
        if (r < 0 && errno != EINTR)
            return false;
    }
}

/* Drive a handshake to its end by the deadline. */
static bool handshake(SSL *s, int64_t deadline, const char *what, char *why, size_t cap)
{
    for (;;) {
        ERR_clear_error();
        int r = SSL_do_handshake(s);
        if (r == 1)
            return true;
        int e = SSL_get_error(s, r);
        short ev = e == SSL_ERROR_WANT_READ ? POLLIN : e == SSL_ERROR_WANT_WRITE ? POLLOUT : 0;
        if (!ev) {
            long v = SSL_get_verify_result(s);
            if (v != X509_V_OK) {
                snprintf(why, cap, "%s: the certificate: %s", what,
                         X509_verify_cert_error_string(v));
                ERR_clear_error();
            } else {
                ossl_why(why, cap, what,
                         e == SSL_ERROR_SYSCALL || e == SSL_ERROR_ZERO_RETURN
                             ? "the connection closed during the handshake"
                             : "failed");
            }
            return false;
        }
        if (!wait_fd(SSL_get_fd(s), ev, deadline)) {
            snprintf(why, cap, "%s: no handshake in time", what);
            return false;
        }
    }
}

SSL *sp_egress_tls_accept(sp_egress_tls *t, int fd, const char *host, bool literal,
                          int64_t deadline_ms, char *why, size_t cap)
{
    X509 *x = leaf_for(t, host, literal);
    if (!x) {
        ossl_why(why, cap, "make a certificate for the host", "failed");
        return NULL;
    }
    SSL *s = SSL_new(t->server);
    bool ok = s && SSL_use_certificate(s, x) == 1 && SSL_use_PrivateKey(s, t->leaf_key) == 1 &&
              SSL_set_fd(s, fd) == 1;
    X509_free(x);
    if (!ok) {
        ossl_why(why, cap, "the TLS server side", "failed");
        SSL_free(s);
        return NULL;
    }
    SSL_set_accept_state(s);
    if (!handshake(s, deadline_ms, "TLS with the client", why, cap)) {
        SSL_free(s);
        return NULL;
    }
    /* The name the client asked for is the one the tunnel was asked for;
     * a tunnel to an address takes none. */
    const char *sni = SSL_get_servername(s, TLSEXT_NAMETYPE_host_name);
    if (sni && (literal || !sp_egress_same_host(sni, host))) {
        snprintf(why, cap, "refused: the TLS server name %.200s is not the host asked for", sni);
        SSL_free(s);
        return NULL;
    }
    return s;
}

SSL *sp_egress_tls_connect(sp_egress_tls *t, int fd, const char *host, bool literal,
                           int64_t deadline_ms, char *why, size_t cap)
{
    SSL *s = SSL_new(t->client);
    bool ok = s && SSL_set_fd(s, fd) == 1;
    if (ok && literal)
        ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(s), host) == 1;
    else if (ok)
        ok = SSL_set_tlsext_host_name(s, host) == 1 && SSL_set1_host(s, host) == 1;
    if (!ok) {
        ossl_why(why, cap, "the TLS client side", "failed");
        SSL_free(s);
        return NULL;
    }
    SSL_set_connect_state(s);
    if (!handshake(s, deadline_ms, "TLS with the upstream", why, cap)) {
        SSL_free(s);
        return NULL;
    }
    return s;
}

ssize_t sp_egress_tls_step(SSL *s, bool write, void *buf, size_t n, bool *want_read,
                           bool *want_write)
{
    ERR_clear_error();
    size_t done = 0;
    int r = write ? SSL_write_ex(s, buf, n, &done) : SSL_read_ex(s, buf, n, &done);
    if (r == 1)
        return (ssize_t)done;
    int e = SSL_get_error(s, r);
    if (e == SSL_ERROR_WANT_READ) {
        *want_read = true;
        return -2;
    }
    if (e == SSL_ERROR_WANT_WRITE) {
        *want_write = true;
        return -2;
    }
    ERR_clear_error();
    /* A clean close_notify, or (as many servers do) a bare TCP close. */
    if (!write && (e == SSL_ERROR_ZERO_RETURN || e == SSL_ERROR_SYSCALL || e == SSL_ERROR_SSL))
        return e == SSL_ERROR_SSL ? -1 : 0;
    return -1;
}

ssize_t sp_egress_tls_read(SSL *s, void *buf, size_t n, int64_t deadline_ms)
{
    for (;;) {
        bool wr = false, ww = false;
        ssize_t r = sp_egress_tls_step(s, false, buf, n, &wr, &ww);
        if (r != -2)
            return r;
        if (!wait_fd(SSL_get_fd(s), wr ? POLLIN : POLLOUT, deadline_ms))
            return -1;
    }
}

bool sp_egress_tls_write(SSL *s, const void *buf, size_t n, int64_t deadline_ms)
{
    size_t at = 0;
    while (at < n) {
        bool wr = false, ww = false;
        ssize_t r = sp_egress_tls_step(s, true, (char *)buf + at, n - at, &wr, &ww);
        if (r > 0)
            at += (size_t)r;
        else if (r != -2 || !wait_fd(SSL_get_fd(s), wr ? POLLIN : POLLOUT, deadline_ms))
            return false;
    }
    return true;
}

bool sp_egress_tls_pending(SSL *s)
{
    return SSL_pending(s) > 0;
}

void sp_egress_tls_close(SSL *s)
{
    if (!s)
        return;
    ERR_clear_error();
    SSL_shutdown(s);
    ERR_clear_error();
    SSL_free(s);
}
