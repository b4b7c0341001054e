/* What hydration keeps out of a workspace by default: files that hold
 * credentials are left out, and configuration files that mix credentials
 * with settings are copied with the credentials taken out (secrets.c,
 * gitconfig_scrub.c). Internal to overlay/; the rules are listed in
 * sandpod/hydrate.h (sp_mount.keep_secrets) and the README. */
#ifndef SANDPOD_SECRETS_H
#define SANDPOD_SECRETS_H

#include <stdbool.h>
#include <stddef.h>

#include "base.h"

/* Files larger than this are not parsed: one that needs a rewrite is left
 * out instead ("too large to check"). */
#define SP_SECRET_MAX_SCRUB ((size_t)4 << 20)

typedef enum sp_secret_kind {
    SP_SECRET_NONE = 0,
    SP_SECRET_LEAVE_OUT, /* held back whole */
    SP_SECRET_GITCONFIG, /* a repository's git config: rewritten */
    SP_SECRET_NPMRC,
    SP_SECRET_PYPIRC,
    SP_SECRET_DOCKER, /* .docker/config.json */
} sp_secret_kind;

/* What to do with the regular file at `path` (relative, '/'-separated; only
 * its last two components and its folders' names matter). For
 * SP_SECRET_LEAVE_OUT, *detail receives a static description (".env file",
 * "private key", ...); it is left alone otherwise. */
sp_secret_kind sp_secret_classify(const char *path, const char **detail);

/* Rewrite `in` (len bytes) of kind k without its credentials.
 * Returns 1 when something was removed (*out holds the new content), 0 when
 * nothing was (out is left empty: copy `in` as it is), -1 when `in` could
 * not be parsed (the file must be left out; out is left empty). */
int sp_secret_scrub(sp_buf *out, sp_secret_kind k, const char *in, size_t len);

/* A static description of a rewrite of kind k, for the hydration result:
 * "credentials removed from .git/config", ... */
const char *sp_secret_rewrite_detail(sp_secret_kind k);

/* A static description of a file of kind k that could not be parsed. */
const char *sp_secret_unparsed_detail(sp_secret_kind k);

/* Git's config syntax (sections, quoted subsections with escapes,
 * continuation lines, comments, case-insensitive names), rewritten
 * without credentials and otherwise byte for byte:
 *   - every [credential] and [credential "..."] section is dropped whole;
 *   - http.extraHeader and http.<url>.extraHeader lines are dropped, as are
 *     sendemail.smtpPass lines;
 *   - userinfo is taken out of the values of url, pushurl, insteadOf,
 *     pushInsteadOf and proxy keys (any section), and of the subsection
 *     names of [url "..."] and [http "..."] (sp_url_strip_userinfo());
 *     a changed line or header loses its trailing comment.
 * A header followed by a key on the same line, a bad escape, an
 * unterminated quote or a NUL byte is "cannot parse".
 * Returns as sp_secret_scrub(). */
int sp_gitconfig_scrub(sp_buf *out, const char *in, size_t len);

/* Take the userinfo out of a URL, appending the result to `out` (always,
 * changed or not). A userinfo with a password (`user:pass@`) always goes;
 * a bare `user@` goes in http, https, ftp and ftps URLs (a token, by
 * GitHub's convention: https://ghp_x@github.com/) and stays in ssh and
 * scp-like ones (git@github.com:x/y.git). A `helper::` prefix is kept.
 * Returns true when something was taken out. */
bool sp_url_strip_userinfo(sp_buf *out, const char *url, size_t len);

#endif
