/* What hydration keeps out of a workspace (overlay/secrets.c,
 * overlay/gitconfig_scrub.c): the file rules, the git config reader and
 * its rewrite (checked against git itself where it is installed), URLs,
 * .npmrc, .pypirc and .docker/config.json. */
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base.h"
#include "secrets.h"

/* ------------------------------------------------------------ helpers -- */

/* Scrub `in` of kind k: the return code, and *out the bytes a copy holds
 * (the rewrite, or `in` itself when nothing was removed). */
static int scrub(sp_secret_kind k, const char *in, char **out)
{
    sp_buf b = SP_BUF_INIT;
    sp_buf_add(&b, "", 0);
    int rc = sp_secret_scrub(&b, k, in, strlen(in));
    if (rc == 0) {
        assert_int_equal(b.len, 0);
        sp_buf_adds(&b, in);
    }
    if (rc < 0)
        assert_int_equal(b.len, 0);
    *out = sp_buf_steal(&b);
    return rc;
}

static void check_scrub(sp_secret_kind k, const char *in, int want_rc, const char *want, int line)
{
    char *out = NULL;
    int rc = scrub(k, in, &out);
    if (rc != want_rc)
        fail_msg("line %d: rc %d, wanted %d, for:\n%s", line, rc, want_rc, in);
    if (want && strcmp(out, want) != 0)
        fail_msg("line %d: got\n---\n%s---\nwanted\n---\n%s---", line, out, want);
    free(out);
}
#define GIT(in, rc, want)  check_scrub(SP_SECRET_GITCONFIG, (in), (rc), (want), __LINE__)
#define NPM(in, rc, want)  check_scrub(SP_SECRET_NPMRC, (in), (rc), (want), __LINE__)
#define PYPI(in, rc, want) check_scrub(SP_SECRET_PYPIRC, (in), (rc), (want), __LINE__)
#define GIT_BAD(in)        GIT((in), -1, NULL)
#define GIT_SAME(in)       GIT((in), 0, (in))

static void check_url(const char *in, const char *want, int line)
{
    sp_buf b = SP_BUF_INIT;
    sp_buf_add(&b, "", 0);
    bool changed = sp_url_strip_userinfo(&b, in, strlen(in));
    if (strcmp(b.data, want) != 0 || changed != (strcmp(in, want) != 0))
        fail_msg("line %d: '%s' -> '%s' (changed %d), wanted '%s'", line, in, b.data, changed,
                 want);
    sp_buf_dispose(&b);
}
#define URL(in, want) check_url((in), (want), __LINE__)

static void check_kind(const char *path, sp_secret_kind want, const char *want_detail, int line)
{
    const char *detail = NULL;
    sp_secret_kind k = sp_secret_classify(path, &detail);
    if (k != want)
        fail_msg("line %d: %s is kind %d, wanted %d", line, path, k, want);
    if (want_detail && (!detail || strcmp(detail, want_detail) != 0))
        fail_msg("line %d: %s: detail '%s', wanted '%s'", line, path, detail ? detail : "(none)",
                 want_detail);
}
#define KIND(p, k, d) check_kind((p), (k), (d), __LINE__)

/* ------------------------------------------------------------- rules -- */

static void test_classify(void **state)
{
    (void)state;
    KIND(".env", SP_SECRET_LEAVE_OUT, ".env file");
    KIND("app/.env.local", SP_SECRET_LEAVE_OUT, ".env file");
    KIND(".env.production", SP_SECRET_LEAVE_OUT, ".env file");
    KIND(".env.example.local", SP_SECRET_LEAVE_OUT, ".env file");
    KIND(".env.example", SP_SECRET_NONE, NULL);
    KIND("a/.env.sample", SP_SECRET_NONE, NULL);
    KIND(".env.template", SP_SECRET_NONE, NULL);
    KIND(".env.dist", SP_SECRET_NONE, NULL);
    KIND(".envrc", SP_SECRET_NONE, NULL);
    KIND("x.env", SP_SECRET_NONE, NULL);
    KIND(".netrc", SP_SECRET_LEAVE_OUT, "netrc credentials");
    KIND("home/_netrc", SP_SECRET_LEAVE_OUT, "netrc credentials");
    KIND(".git-credentials", SP_SECRET_LEAVE_OUT, "git credentials");
    KIND("id_rsa", SP_SECRET_LEAVE_OUT, "private key");
    KIND(".ssh/id_ed25519", SP_SECRET_LEAVE_OUT, "private key");
    KIND("keys/id_ecdsa", SP_SECRET_LEAVE_OUT, "private key");
    KIND("id_dsa", SP_SECRET_LEAVE_OUT, "private key");
    KIND("id_deploy", SP_SECRET_LEAVE_OUT, "private key");
    KIND("id_rsa.old", SP_SECRET_LEAVE_OUT, "private key");
    KIND("id_ed25519_sk", SP_SECRET_LEAVE_OUT, "private key");
    KIND("id_ed25519.pub", SP_SECRET_NONE, NULL);
    KIND("id_deploy.PUB", SP_SECRET_NONE, NULL);
    KIND("src/id_map.c", SP_SECRET_NONE, NULL);
    KIND("id_test.go", SP_SECRET_NONE, NULL);
    KIND("id_", SP_SECRET_NONE, NULL);
    KIND("certs/server.pem", SP_SECRET_LEAVE_OUT, "key or certificate file");
    KIND("TLS.KEY", SP_SECRET_LEAVE_OUT, "key or certificate file");
    KIND("c.p12", SP_SECRET_LEAVE_OUT, "key or certificate file");
    KIND("c.pfx", SP_SECRET_LEAVE_OUT, "key or certificate file");
    KIND("keyboard.c", SP_SECRET_NONE, NULL);
    KIND("pem", SP_SECRET_NONE, NULL);
    KIND(".git/config", SP_SECRET_GITCONFIG, NULL);
    KIND("vendor/lib/.git/config", SP_SECRET_GITCONFIG, NULL);
    KIND(".git/modules/sub/config", SP_SECRET_GITCONFIG, NULL);
    KIND(".git/worktrees/w/config.worktree", SP_SECRET_GITCONFIG, NULL);
    KIND("config", SP_SECRET_NONE, NULL);
    KIND("src/config", SP_SECRET_NONE, NULL);
    KIND("my.git/config", SP_SECRET_NONE, NULL);
    KIND(".git/configs", SP_SECRET_NONE, NULL);
    KIND(".npmrc", SP_SECRET_NPMRC, NULL);
    KIND("web/.npmrc", SP_SECRET_NPMRC, NULL);
    KIND(".pypirc", SP_SECRET_PYPIRC, NULL);
    KIND(".docker/config.json", SP_SECRET_DOCKER, NULL);
    KIND("home/.docker/config.json", SP_SECRET_DOCKER, NULL);
    KIND("my.docker/config.json", SP_SECRET_NONE, NULL);
    KIND("config.json", SP_SECRET_NONE, NULL);
}

/* --------------------------------------------------------------- URLs -- */

static void test_urls(void **state)
{
    (void)state;
    URL("https://user:tok@host/x.git", "https://host/x.git");
    URL("https://ghp_abc123@github.com/o/r.git", "https://github.com/o/r.git");
    URL("HTTP://tok@h:8080/p", "HTTP://h:8080/p");
    URL("ftp://u@h/p", "ftp://h/p");
    URL("https://host/x.git", "https://host/x.git");
    URL("https://host/path@v1", "https://host/path@v1");
    URL("https://a@b:c@host/x", "https://host/x"); /* the last '@' ends the userinfo */
    URL("https://u:p@host", "https://host");
    URL("https://u:p@host?q=1", "https://host?q=1");
    URL("git@github.com:x/y.git", "git@github.com:x/y.git");
    URL("ssh://git@host/x.git", "ssh://git@host/x.git");
    URL("git+ssh://git@host/x.git", "git+ssh://git@host/x.git");
    URL("ssh://git:pw@host/x.git", "ssh://host/x.git");
    URL("user:pass@host:path/x.git", "host:path/x.git");
    URL("persistent-https::https://tok@h/x", "persistent-https::https://h/x");
    URL("/srv/git/x@1.git", "/srv/git/x@1.git");
    URL("../sibling.git", "../sibling.git");
    URL("file:///srv/u@x.git", "file:///srv/u@x.git");
    URL("", "");
}

/* --------------------------------------------------------- git config -- */

static void test_gitconfig_credentials(void **state)
{
    (void)state;
    /* The tricky inputs of issue 28. */
    GIT("[remote \"origin\"]\n\turl = https://user:tok@host/x.git\n"
        "\tfetch = +refs/heads/*:refs/remotes/origin/*\n",
        1,
        "[remote \"origin\"]\n\turl = https://host/x.git\n"
        "\tfetch = +refs/heads/*:refs/remotes/origin/*\n");
    GIT("[http \"https://h/\"]\n\textraHeader = Authorization: Bearer x\n\tsslVerify = true\n", 1,
        "[http \"https://h/\"]\n\tsslVerify = true\n");
    GIT("[core]\n\tbare = false\n[Credential]\n\thelper = store\n\tusername = bob\n"
        "# a comment in the dropped section\n[user]\n\tname = A\n",
        1, "[core]\n\tbare = false\n[user]\n\tname = A\n");
    GIT("[credential \"https://h\"]\n\tusername = bob\n[core]\n\tx = 1\n", 1, "[core]\n\tx = 1\n");
    GIT_SAME("[remote \"origin\"]\n\turl = git@github.com:x/y.git\n");
    GIT_SAME("[remote \"o\"]\n\turl = ssh://git@host/x.git\n\tpushurl = git@host:x.git\n");
    GIT("[remote \"o\"]\n\turl = https://ghp_xxx@github.com/o/r.git\n", 1,
        "[remote \"o\"]\n\turl = https://github.com/o/r.git\n");
    /* Names in any case; the old [section.sub] form. */
    GIT("[HTTP]\n\tEXTRAHEADER = Authorization: Basic Zm9v\n\tpostBuffer = 1\n", 1,
        "[HTTP]\n\tpostBuffer = 1\n");
    GIT("[Remote.origin]\n\tURL = https://t@h/x\n", 1, "[Remote.origin]\n\tURL = https://h/x\n");
    GIT("[http.https://h/]\n\tx = 1\n", -1, NULL); /* ':' is no name character: git refuses */
    /* [url "..."] names and their values; pushurl, pushInsteadOf, proxy. */
    GIT("[url \"https://tok@github.com/\"]\n\tinsteadOf = https://github.com/\n", 1,
        "[url \"https://github.com/\"]\n\tinsteadOf = https://github.com/\n");
    GIT("[url \"git@h:\"]\n\tpushInsteadOf = https://u:p@h/\n", 1,
        "[url \"git@h:\"]\n\tpushInsteadOf = https://h/\n");
    GIT("[http]\n\tproxy = http://u:p@proxy:3128\n", 1, "[http]\n\tproxy = http://proxy:3128\n");
    GIT("[http \"https://u:p@h/\"] # old\n\tsslVerify = false\n", 1,
        "[http \"https://h/\"]\n\tsslVerify = false\n");
    GIT("[sendemail]\n\tsmtpServer = s\n\tsmtpPass = hunter2\n", 1,
        "[sendemail]\n\tsmtpServer = s\n");
    /* A key named url elsewhere is a URL too (submodules). */
    GIT("[submodule \"lib\"]\n\tpath = lib\n\turl = https://x:y@h/lib.git\n", 1,
        "[submodule \"lib\"]\n\tpath = lib\n\turl = https://h/lib.git\n");
    /* Only userinfo goes: the rest of the file is byte for byte. */
    GIT("; top\n\n[core]\n  repositoryformatversion = 0 ; c\n[remote \"o\"]   # trailing\n"
        "\turl = https://t@h/x\n\n# end",
        1,
        "; top\n\n[core]\n  repositoryformatversion = 0 ; c\n[remote \"o\"]   # trailing\n"
        "\turl = https://h/x\n\n# end");
}

static void test_gitconfig_syntax(void **state)
{
    (void)state;
    /* A continuation line: the value is read whole, the rewrite is one line. */
    GIT("[remote \"o\"]\n\turl = https://u:p@h/\\\nrest.git\n\tfetch = f\n", 1,
        "[remote \"o\"]\n\turl = https://h/rest.git\n\tfetch = f\n");
    GIT("[http]\n\textraHeader = Authorization: \\\n  Bearer secret\n\tx = 1\n", 1,
        "[http]\n\tx = 1\n");
    /* A continued line that is kept stays as it was. */
    GIT_SAME("[alias]\n\tlg = log \\\n  --oneline\n");
    /* Quotes: '#' inside is no comment; the rewrite is quoted again. */
    GIT("[remote \"o\"]\n\turl = \"https://tok@h/a#b\" # tok in a comment\n", 1,
        "[remote \"o\"]\n\turl = \"https://h/a#b\"\n");
    GIT("[remote \"o\"]\n\turl = \"https://t@h/a\\\"b\"\n", 1,
        "[remote \"o\"]\n\turl = \"https://h/a\\\"b\"\n");
    GIT_SAME("[alias]\n\tx = \"!echo '#not a comment'; true\" ; a comment\n");
    /* Subsections with escapes; one that holds a '"' is written back so. */
    GIT_SAME("[remote \"a\\\"b\"]\n\turl = x\n");
    GIT("[url \"https://t@h/\\\"q\"]\n\tinsteadOf = y\n", 1,
        "[url \"https://h/\\\"q\"]\n\tinsteadOf = y\n");
    /* Booleans without '=', CRLF, a byte order mark. */
    GIT_SAME("[core]\n\tbare\n\tfilemode ; c\n");
    GIT("\xef\xbb\xbf[remote \"o\"]\r\n\turl = https://t@h/x\r\n\tfetch = f\r\n", 1,
        "\xef\xbb\xbf[remote \"o\"]\r\n\turl = https://h/x\r\n\tfetch = f\r\n");
    GIT_SAME("");
    GIT_SAME("\n\n  \t\n");
    GIT_SAME("[core]");
    GIT_SAME("[core]\n\tx = 1"); /* no final newline */
    /* What the reader does not model leaves the file out. */
    GIT_BAD("[core] bare = true\n");
    GIT_BAD("[core\n");
    GIT_BAD("[]\n");
    GIT_BAD("[remote \"o]\n");
    GIT_BAD("[remote \"o\" ]\n");
    GIT_BAD("[remote o]\n");
    GIT_BAD("[core]\n\tx = \"unterminated\n");
    GIT_BAD("[core]\n\tx = \\q\n");
    GIT_BAD("[core]\n\t=x\n");
    GIT_BAD("[core]\n\t1x = y\n");
    GIT_BAD("[core]\n\tx y\n");
    GIT_BAD("[core]\n\tx_y = 1\n");
    char nul[] = "[core]\n\tx = a\0b\n";
    sp_buf b = SP_BUF_INIT;
    assert_int_equal(sp_gitconfig_scrub(&b, nul, sizeof(nul) - 1), -1);
    assert_int_equal(b.len, 0);
    sp_buf_dispose(&b);
}

/* git itself reads the rewrite as we meant: every value but the
 * credentials the same, and none of the secrets. */
static void test_gitconfig_against_git(void **state)
{
    (void)state;
    if (!tu_have_git()) {
        print_message("note: git is not installed; skipped\n");
        return;
    }
    const char *in =
        "[core]\n\trepositoryformatversion = 0\n\tbare = false\n"
        "[remote \"origin\"]\n\turl = https://user:SECRET1@host/x.git\n"
        "\tfetch = +refs/heads/*:refs/remotes/origin/*\n"
        "[remote \"up\"]\n\turl = \"https://SECRET2@h/a#b\" ; c\n\tpushurl = git@h:p.git\n"
        "[http \"https://h/\"]\n\textraHeader = Authorization: Bearer SECRET3\n"
        "\tsslVerify = true\n"
        "[Credential]\n\thelper = store\n\tusername = SECRET4\n"
        "[url \"https://SECRET5@github.com/\"]\n\tinsteadOf = https://github.com/\n"
        "[alias]\n\tlg = log \\\n\t--oneline \"#x\"\n"
        "[branch \"main\"]\n\tremote = origin\n";
    char *out = NULL;
    assert_int_equal(scrub(SP_SECRET_GITCONFIG, in, &out), 1);
    for (int i = 1; i <= 5; i++) {
        char s[16];
        snprintf(s, sizeof(s), "SECRET%d", i);
        if (strstr(out, s))
            fail_msg("%s is still in:\n%s", s, out);
    }
    char *dir = tu_mkdtemp();
    tu_write(dir, "in", in, 0644);
    tu_write(dir, "out", out, 0644);
    char *in_list = tu_join(dir, "in.list"), *out_list = tu_join(dir, "out.list");
    assert_int_equal(tu_git_in(dir, in_list, "config", "-f", "in", "--list"), 0);
    assert_int_equal(tu_git_in(dir, out_list, "config", "-f", "out", "--list"), 0);
    char *got = tu_read(dir, "out.list", NULL);
    assert_string_equal(got, "core.repositoryformatversion=0\n"
                             "core.bare=false\n"
                             "remote.origin.url=https://host/x.git\n"
                             "remote.origin.fetch=+refs/heads/*:refs/remotes/origin/*\n"
                             "remote.up.url=https://h/a#b\n"
                             "remote.up.pushurl=git@h:p.git\n"
                             "http.https://h/.sslverify=true\n"
                             "url.https://github.com/.insteadof=https://github.com/\n"
                             "alias.lg=log  --oneline #x\n"
                             "branch.main.remote=origin\n");
    free(got);
    free(in_list);
    free(out_list);
    free(out);
    tu_rmtree(dir);
    free(dir);
}

/* ------------------------------------------- .npmrc, .pypirc, docker -- */

static void test_npmrc(void **state)
{
    (void)state;
    NPM("registry=https://registry.npmjs.org/\n"
        "//registry.npmjs.org/:_authToken=XYZ\n"
        "email=me@example.com\n"
        "_auth = dXNlcjpwYXNz\n"
        "//h/:_password=cGFzcw==\n"
        "//h/:username=bob\n"
        "  \"//q/:_authToken\" = \"QQQ\"\n"
        "always-auth=true\n"
        "//ci/:_authToken=${NPM_TOKEN}\n"
        "; //x/:_authToken=commented\n"
        "@scope:registry=https://npm.pkg.github.com\n",
        1,
        "registry=https://registry.npmjs.org/\n"
        "email=me@example.com\n"
        "always-auth=true\n"
        "//ci/:_authToken=${NPM_TOKEN}\n"
        "; //x/:_authToken=commented\n"
        "@scope:registry=https://npm.pkg.github.com\n");
    NPM("registry=https://r/\nsave-exact=true", 0, "registry=https://r/\nsave-exact=true");
    NPM("//r/:_authToken=T\r\nfund=false", 1, "fund=false");
}

static void test_pypirc(void **state)
{
    (void)state;
    PYPI("[distutils]\nindex-servers =\n    pypi\n    test\n\n"
         "[pypi]\nusername = __token__\npassword = pypi-AgEIcHlwaS\n    continued\n\n"
         "[test]\nrepository = https://test.pypi.org/legacy/\nPassword: abc\n"
         "# password = in a comment\n",
         1,
         "[distutils]\nindex-servers =\n    pypi\n    test\n\n"
         "[pypi]\nusername = __token__\n\n"
         "[test]\nrepository = https://test.pypi.org/legacy/\n"
         "# password = in a comment\n");
    PYPI("[pypi]\nusername = u\n", 0, "[pypi]\nusername = u\n");
    PYPI("[pypi]\n  password = x\n  username = u\n", 1, "[pypi]\n  username = u\n");
}

static void test_docker_config(void **state)
{
    (void)state;
    const char *in = "{\"auths\": {\"https://index.docker.io/v1/\": {\"auth\": \"dXNlcjpwYXNz\", "
                     "\"email\": \"a@b\"}, \"r.io\": {\"IdentityToken\": \"IDTOK\", "
                     "\"registrytoken\": \"RTOK\", \"password\": \"PW\"}}, "
                     "\"credsStore\": \"desktop\", \"credHelpers\": {\"gcr.io\": \"gcloud\"}}";
    char *out = NULL;
    assert_int_equal(scrub(SP_SECRET_DOCKER, in, &out), 1);
    assert_null(strstr(out, "dXNlcjpwYXNz"));
    assert_null(strstr(out, "IDTOK"));
    assert_null(strstr(out, "RTOK"));
    assert_null(strstr(out, "\"PW\""));
    assert_non_null(strstr(out, "\"credsStore\":\t\"desktop\""));
    assert_non_null(strstr(out, "\"gcr.io\":\t\"gcloud\""));
    assert_non_null(strstr(out, "\"email\":\t\"a@b\""));
    assert_non_null(strstr(out, "\"r.io\":\t{"));
    free(out);
    const char *plain = "{\"credsStore\": \"desktop\"}";
    assert_int_equal(scrub(SP_SECRET_DOCKER, plain, &out), 0);
    assert_string_equal(out, plain);
    free(out);
    assert_int_equal(scrub(SP_SECRET_DOCKER, "{\"auths\": {", &out), -1);
    free(out);
    assert_int_equal(scrub(SP_SECRET_DOCKER, "[1]", &out), -1);
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_classify),
        cmocka_unit_test(test_urls),
        cmocka_unit_test(test_gitconfig_credentials),
        cmocka_unit_test(test_gitconfig_syntax),
        cmocka_unit_test(test_gitconfig_against_git),
        cmocka_unit_test(test_npmrc),
        cmocka_unit_test(test_pypirc),
        cmocka_unit_test(test_docker_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
