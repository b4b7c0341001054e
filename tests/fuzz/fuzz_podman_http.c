/* Fuzz target: the Podman client's own parsers that need no socket: the
 * HTTP/1.x head parser and chunked decoder of hijacked streams, the error
 * body mapper, the service URL parser and the JSON getters.
 *
 * Input: byte 0 picks the parser, the rest is its input. */
#include <stdbool.h>

#include "fuzz.h"
#include "podman_internal.h"

static void check_error(int rc, sp_error *err)
{
    FZ_ASSERT(rc < 0 && err && err->message, "error path without an error");
    for (const char *c = err->message; *c; c++)
        FZ_ASSERT(*c != '\n' && *c != '\r', "multi-line error message: %s", err->message);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 65536)
        return 0;
    unsigned op = data[0] % 5;
    const char *in = (const char *)data + 1;
    size_t len = size - 1;
    sp_error *err = NULL;

    switch (op) {
    case 0: {
        sp_http1_head h;
        int r = sp_http1_parse_head(&h, in, len, &err);
        if (r > 0) {
            FZ_ASSERT((size_t)r <= len, "head length %d beyond %zu bytes", r, len);
            FZ_ASSERT(h.status >= 100 && h.status <= 599, "status %d", h.status);
            FZ_ASSERT(h.content_length >= -1, "content length %lld", (long long)h.content_length);
        } else if (r < 0) {
            check_error(r, err);
        }
        break;
    }
    case 1: {
        char *buf = malloc(len ? len : 1);
        if (!buf)
            abort();
        memcpy(buf, in, len);
        size_t out = 0;
        int r = sp_http1_dechunk(buf, len, &out, &err);
        if (r == 0)
            FZ_ASSERT(out <= len, "dechunked %zu bytes out of %zu", out, len);
        else if (r < 0)
            check_error(r, err);
        free(buf);
        break;
    }
    case 2: {
        static const long statuses[] = {400, 404, 409, 500, 503, 418, 200, 0};
        long status = statuses[len ? (unsigned char)in[0] % 8 : 0];
        int r = sp_podman_http_error(&err, status, len ? in + 1 : NULL, len ? len - 1 : 0, "fuzz");
        check_error(r, err);
        FZ_ASSERT(strlen(err->message) < 1200, "error message of %zu bytes", strlen(err->message));
        break;
    }
    case 3: {
        char *url = fz_cstr((const uint8_t *)in, len);
        sp_podman_addr a;
        memset(&a, 0, sizeof(a));
        if (sp_podman_addr_parse(&a, url, &err) == 0) {
            FZ_ASSERT(a.url && (a.socket_path || a.host), "parsed url without an address");
            sp_podman_addr_dispose(&a);
        }
        free(url);
        break;
    }
    case 4: {
        sp_buf b = SP_BUF_INIT;
        sp_buf_add(&b, in, len);
        cJSON *j = NULL;
        if (sp_podman_json(&j, &b, "fuzz", &err) == 0) {
            (void)sp_json_str(j, "Id");
            free(sp_json_strdup(j, "Name"));
            (void)sp_json_int(j, "ExitCode", -1);
            (void)sp_json_bool(j, "Running", false);
            cJSON_Delete(j);
        }
        sp_buf_dispose(&b);
        break;
    }
    }
    sp_error_free(err);
    return 0;
}
