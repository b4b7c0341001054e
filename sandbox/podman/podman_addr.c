/* Where the Podman service is (a unix socket or tcp URL, parsed), and the
 * libcurl setup every connection to it shares: loaded on first use and
 * initialised once, with its failures said in one line. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/un.h>

#include "podman_internal.h"

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void curl_init_once(void)
{
    /* Never paired with curl_global_cleanup(): the library cannot know when
     * the last user is gone, and the process exit releases it anyway. */
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* libcurl is loaded here, on first use (lazy.h), then initialised once. */
int sp_podman_curl_init(sp_error **err)
{
    int r = sp_curl_load(err);
    if (r == 0)
        pthread_once(&curl_once, curl_init_once);
    return r;
}

void sp_podman_addr_dispose(sp_podman_addr *a)
{
    free(a->url);
    free(a->socket_path);
    free(a->host);
    memset(a, 0, sizeof(*a));
}

int sp_podman_addr_parse(sp_podman_addr *out, const char *url, sp_error **err)
{
    memset(out, 0, sizeof(*out));
    if (!url || !*url)
        return sp_err_set(err, SP_EINVAL, 0, "podman url is empty");
    const char *path = NULL;
    if (strncmp(url, "unix://", 7) == 0)
        path = url + 7;
    else if (strncmp(url, "unix:", 5) == 0)
        path = url + 5;
    else if (url[0] == '/')
        path = url;
    if (path) {
        if (path[0] != '/')
            return sp_err_set(err, SP_EINVAL, 0, "podman url must name an absolute socket path: %s",
                              url);
        if (strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
            return sp_err_set(err, SP_ETOOBIG, ENAMETOOLONG, "podman socket path is too long: %s",
                              path);
        out->socket_path = sp_xstrdup(path);
        out->url = sp_xasprintf("unix://%s", path);
        return 0;
    }
    if (strncmp(url, "tcp://", 6) == 0) {
        const char *hp = url + 6;
        const char *end = hp + strcspn(hp, "/");
        const char *colon = NULL;
        if (*hp == '[') { /* [v6]:port */
            const char *rb = memchr(hp, ']', (size_t)(end - hp));
            if (!rb || rb + 1 >= end || rb[1] != ':')
                return sp_err_set(err, SP_EINVAL, 0, "podman url has no port: %s", url);
            out->host = sp_xstrndup(hp + 1, (size_t)(rb - hp - 1));
            colon = rb + 1;
        } else {
            for (const char *c = hp; c < end; c++)
                if (*c == ':')
                    colon = c;
            if (!colon || colon == hp)
                return sp_err_set(err, SP_EINVAL, 0, "podman url needs host:port: %s", url);
            out->host = sp_xstrndup(hp, (size_t)(colon - hp));
        }
        long port = 0;
        const char *d = colon + 1;
        if (d == end)
            port = -1;
        for (; d < end; d++) {
            if (*d < '0' || *d > '9' || port > 65535) {
                port = -1;
                break;
            }
            port = port * 10 + (*d - '0');
        }
        if (port <= 0 || port > 65535) {
            sp_podman_addr_dispose(out);
            return sp_err_set(err, SP_EINVAL, 0, "podman url has a bad port: %s", url);
        }
        out->port = (int)port;
        if (strchr(out->host, ':'))
            out->url = sp_xasprintf("tcp://[%s]:%d", out->host, out->port);
        else
            out->url = sp_xasprintf("tcp://%s:%d", out->host, out->port);
        return 0;
    }
    return sp_err_set(err, SP_EINVAL, 0,
                      "unsupported podman url (want unix:///path or tcp://host:port): %s", url);
}

char *sp_podman_curl_detail(CURL *c, int rc, const char *ebuf)
{
    long os_errno = 0;
    /* For a unix socket curl's own text names a made-up host ("failed to
     * connect to d port 80"); the errno says what is wrong. */
    if (rc == CURLE_COULDNT_CONNECT &&
        curl_easy_getinfo(c, CURLINFO_OS_ERRNO, &os_errno) == CURLE_OK && os_errno > 0) {
        char *s = sp_xstrdup(strerror((int)os_errno));
        if (s[0] >= 'A' && s[0] <= 'Z')
            s[0] = (char)(s[0] - 'A' + 'a');
        return s;
    }
    return sp_xstrdup(ebuf && *ebuf ? ebuf : curl_easy_strerror((CURLcode)rc));
}
