/* sandpod exec: run a command in a sandbox with this process's stdio
 * attached, and exit with the command's own code.
 *
 * This file also holds the attached-session machinery `sandpod run` uses:
 * signals into a self-pipe, the local terminal in raw mode, and one poll
 * loop that forwards stdin to the exec stream and its output to stdout and
 * stderr. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "cli.h"

/* Bytes of stdin sent per write: small enough that a socket that polled
 * writable takes them without blocking, so a command that does not read its
 * stdin can never stall the forwarding of its output. */
#define STDIN_CHUNK 4096
/* Attempts, 100 ms apart, to set the terminal size of a session that was
 * not ready for it yet. */
#define RESIZE_TRIES 10
/* How long the exit code may take to be recorded after the stream ends. */
#define WAIT_EXIT_MS 10000

/* -------------------------------------------------------------- signals -- */

static int sig_pipe[2] = {-1, -1};
static volatile sig_atomic_t sig_term;  /* first SIGINT/SIGTERM/SIGHUP */
static volatile sig_atomic_t sig_winch; /* a resize is due */

static void on_signal(int signo)
{
    int saved = errno;
    if (signo == SIGWINCH)
        sig_winch = 1;
    else if (!sig_term)
        sig_term = signo;
    if (sig_pipe[1] >= 0)
        (void)!write(sig_pipe[1], "s", 1);
    errno = saved;
}

void cli_signals_catch(void)
{
    if (sig_pipe[0] >= 0)
        return;
    if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
        sig_pipe[0] = sig_pipe[1] = -1;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    /* The library's own waits retry on EINTR; restarting keeps the rest
     * (libcurl, file I/O) unaware of us. poll() is never restarted. */
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sigaction(SIGWINCH, &sa, NULL);
    /* A reader of our stdout that goes away is an EPIPE to handle, not a
     * death that would leave a `run` sandbox behind. */
    signal(SIGPIPE, SIG_IGN);
}

int cli_signal_caught(void)
{
    return (int)sig_term;
}

static void drain_sig_pipe(void)
{
    char buf[64];
    while (sig_pipe[0] >= 0 && read(sig_pipe[0], buf, sizeof(buf)) > 0)
        ;
}

/* ------------------------------------------------------------- terminal -- */

static struct termios saved_tio;
static bool tio_saved;

static void tty_restore(void)
{
    if (tio_saved) {
        tcsetattr(STDIN_FILENO, TCSADRAIN, &saved_tio);
        tio_saved = false;
    }
}

static void tty_raw(void)
{
    static bool registered;
    struct termios t;
    if (tcgetattr(STDIN_FILENO, &t) < 0)
        return;
    saved_tio = t;
    cfmakeraw(&t);
    if (tcsetattr(STDIN_FILENO, TCSADRAIN, &t) < 0)
        return;
    tio_saved = true;
    /* Every path restores it; this covers an exit() we did not foresee. */
    if (!registered && atexit(tty_restore) == 0)
        registered = true;
}

/* The local terminal's size, from whichever of stdout and stdin is one. */
static bool tty_size(unsigned *rows, unsigned *cols)
{
    struct winsize ws;
    if ((ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 || ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == 0) &&
        ws.ws_row && ws.ws_col) {
        *rows = ws.ws_row;
        *cols = ws.ws_col;
        return true;
    }
    return false;
}

/* --------------------------------------------------------------- session -- */

/* Write all of buf to fd (which a caller may have made non-blocking).
 * Returns 0 or -1 with errno set. */
static int write_all(int fd, const char *buf, size_t len)
{
    while (len) {
        ssize_t n = write(fd, buf, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                struct pollfd p = {fd, POLLOUT, 0};
                poll(&p, 1, -1);
                continue;
            }
            return -1;
        }
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

struct session {
    sp_attach *a;
    bool stdin_open;
    char in[STDIN_CHUNK];
    size_t in_len;
    char in_last; /* the last byte sent; '\n' before any */
    bool tty;
    bool ended;
    int broken_pipe; /* our stdout went away */
    unsigned resize_tries;
};

static void resize(struct session *s)
{
    unsigned rows, cols;
    if (!s->tty || !tty_size(&rows, &cols)) {
        s->resize_tries = 0;
        return;
    }
    if (sp_attach_resize(s->a, rows, cols, NULL) == 0)
        s->resize_tries = 0;
}

/* Read what the stream has without waiting and pass it on. Returns 0, or a
 * library error code with *err set. */
static int pump_output(struct session *s, sp_error **err)
{
    char buf[65536];
    for (;;) {
        size_t n = 0;
        int stream = SP_EXEC_STDOUT;
        sp_error *e = NULL;
        int r = sp_attach_read(&n, &stream, s->a, buf, sizeof(buf), 0, &e);
        if (r == SP_ETIMEOUT) {
            sp_error_free(e);
            return 0;
        }
        if (r < 0) {
            if (err)
                *err = e;
            else
                sp_error_free(e);
            return r;
        }
        if (n == 0) {
            s->ended = true;
            return 0;
        }
        int fd = stream == SP_EXEC_STDOUT ? STDOUT_FILENO : STDERR_FILENO;
        if (write_all(fd, buf, n) < 0 && fd == STDOUT_FILENO && errno == EPIPE) {
            s->broken_pipe = 1;
            return 0;
        }
    }
}

/* Forward the pending chunk of stdin. A command that closed its stdin or
 * exited makes the write fail: stop forwarding and keep the output. */
static void push_input(struct session *s)
{
    if (sp_attach_write(s->a, s->in, s->in_len, NULL) < 0)
        s->stdin_open = false;
    s->in_last = s->in[s->in_len - 1];
    s->in_len = 0;
}

static void read_input(struct session *s)
{
    ssize_t n = read(STDIN_FILENO, s->in, sizeof(s->in));
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
        return;
    if (n > 0) {
        s->in_len = (size_t)n;
        return;
    }
    /* EOF, or stdin cannot be read: the command sees the end of its input.
     * A terminal has no end of its own (closing our side does not reach
     * the reader): there it is ^D at the start of a line, so a ^D ends a
     * partial line first. A local terminal never gets here: raw, it sends
     * the user's own ^D as a byte. */
    s->stdin_open = false;
    if (s->tty) {
        static const char eot[2] = {4, 4};
        sp_attach_write(s->a, eot, s->in_last == '\n' ? 1 : 2, NULL);
    }
    sp_attach_close_stdin(s->a, NULL);
}

/* An error of our own, in the library's form (sp_error_free() frees it). */
static int set_errno(sp_error **err, const char *what)
{
    int e = errno;
    if (err) {
        *err = calloc(1, sizeof(**err));
        if (*err) {
            (*err)->code = SP_ERROR;
            (*err)->sys_errno = e;
            size_t n = strlen(what) + strlen(strerror(e)) + 3;
            (*err)->message = malloc(n);
            if ((*err)->message)
                snprintf((*err)->message, n, "%s: %s", what, strerror(e));
        }
    }
    return SP_ERROR;
}

static int session_loop(struct session *s, int *signo, sp_error **err)
{
    for (;;) {
        if (sp_attach_buffered(s->a)) {
            int r = pump_output(s, err);
            if (r < 0)
                return r;
        }
        if (s->ended || s->broken_pipe)
            return 0;

        struct pollfd fds[3];
        nfds_t nfds = 0;
        fds[nfds++] = (struct pollfd){sp_attach_fd(s->a), POLLIN | (s->in_len ? POLLOUT : 0), 0};
        int in_ix = -1, sig_ix = -1;
        if (s->stdin_open && !s->in_len) {
            in_ix = (int)nfds;
            fds[nfds++] = (struct pollfd){STDIN_FILENO, POLLIN, 0};
        }
        if (sig_pipe[0] >= 0) {
            sig_ix = (int)nfds;
            fds[nfds++] = (struct pollfd){sig_pipe[0], POLLIN, 0};
        }
        int n = poll(fds, nfds, s->resize_tries ? 100 : -1);
        if (n < 0 && errno != EINTR)
            return set_errno(err, "poll");
        if (sig_ix >= 0 && n > 0 && fds[sig_ix].revents)
            drain_sig_pipe();
        if (sig_term) {
            *signo = (int)sig_term;
            return 0;
        }
        if (sig_winch) {
            sig_winch = 0;
            s->resize_tries = RESIZE_TRIES;
        }
        if (s->resize_tries) {
            s->resize_tries--;
            resize(s);
        }
        if (n <= 0)
            continue;
        if (fds[0].revents & POLLOUT && s->in_len)
            push_input(s);
        if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            int r = pump_output(s, err);
            if (r < 0)
                return r;
        }
        if (in_ix >= 0 && fds[in_ix].revents)
            read_input(s);
    }
}

int cli_attach_run(int *exit_code, sp_sandbox *sb, const struct cli_attach *a, sp_error **err)
{
    *exit_code = -1;
    cli_signals_catch();

    sp_attach_opts o = SP_ATTACH_OPTS_INIT;
    o.env = a->env;
    o.workdir = a->workdir;
    o.user = a->user;
    o.tty = a->tty;
    o.stdin_open = a->interactive;
    if (a->tty)
        tty_size(&o.rows, &o.cols);
    struct session s;
    memset(&s, 0, sizeof(s));
    s.tty = a->tty;
    s.stdin_open = a->interactive;
    s.in_last = '\n';
    int r = sp_sandbox_attach(&s.a, sb, a->argv, &o, err);
    if (r < 0)
        return r;
    if (a->tty && a->interactive && isatty(STDIN_FILENO))
        tty_raw();
    if (a->tty) {
        /* The session has just started; retry when it is not ready yet. */
        s.resize_tries = RESIZE_TRIES;
        resize(&s);
    }
    /* Output comes through write(2) from here on. */
    fflush(stdout);

    int signo = 0;
    r = session_loop(&s, &signo, err);
    tty_restore();
    if (r == 0) {
        if (signo)
            *exit_code = 128 + signo;
        else if (s.broken_pipe)
            *exit_code = 128 + SIGPIPE;
        else
            r = sp_attach_wait(exit_code, s.a, WAIT_EXIT_MS, err);
    }
    /* The runtime's own lines were held back: one line of ours instead,
     * and a shell's codes (127 not found, 126 cannot run). */
    int noexec = r == 0 && !signo ? sp_attach_noexec(s.a) : 0;
    if (noexec == ENOENT)
        cli_error("command not found in the sandbox: %s", a->argv[0]);
    else if (noexec)
        cli_error("command cannot be run in the sandbox: %s: %s", a->argv[0], strerror(noexec));
    sp_attach_free(s.a);
    return r;
}

int cli_require_running(sp_sandbox *sb, bool json)
{
    sp_sandbox_status *st = NULL;
    sp_error *err = NULL;
    int r = sp_sandbox_status_get(&st, sb, &err);
    if (r < 0)
        return cli_fail(json, r, err);
    int rc = 0;
    if (!st->running) {
        const char *name = sp_sandbox_name(sb);
        char msg[512];
        if (st->oom_killed)
            snprintf(msg, sizeof(msg),
                     "sandbox %s is not running: its container was killed for using too much "
                     "memory; run 'sandpod start %s'",
                     name, name);
        else
            snprintf(msg, sizeof(msg), "sandbox %s is not running (%s); run 'sandpod start %s'",
                     name, st->state ? st->state : "unknown", name);
        sp_error e = {.code = SP_EPODMAN, .message = msg};
        rc = json ? cli_json_error(SP_EPODMAN, &e) : cli_sp_error(SP_EPODMAN, &e);
    }
    sp_sandbox_status_free(st);
    return rc;
}

/* ----------------------------------------------------------- the command -- */

const struct cli_spec cli_spec_exec = {
    .name = "exec",
    .fn = cmd_exec,
    .summary = "Run a command in a sandbox with stdio attached (-i, -t)",
    .usage = CLI_USAGE("[OPTIONS] NAME [--] COMMAND [ARG...]"),
    .description =
        "Run COMMAND in sandbox NAME with stdout and stderr attached, and exit with its\n"
        "exit code. No shell is involved (use 'sandpod sh' for a shell command line).",
    .groups = CLI_GROUPS(
        CLI_TITLE("Options (before NAME):"),
        CLI_OWN(CLI_FLAG("interactive", 'i', 'i',
                         "forward stdin to the command (EOF closes its stdin)"),
                CLI_FLAG("tty", 't', 't',
                         "allocate a terminal; the local one is put in raw mode while the "
                         "command runs when stdin is a terminal; from a pipe or file, the end of "
                         "stdin is sent as ^D")),
        &cli_group_command,
        CLI_OWN(CLI_VALUE("user", 'u', "USER", 'u', CLI_COMP_NONE,
                          "user to run as, UID[:GID] (default: the sandbox's)")),
        &cli_group_conn),
    .operands = CLI_OPERANDS({"NAME", CLI_COMP_SANDBOX, NULL}, {"COMMAND...", CLI_COMP_NONE, NULL}),
    .stop = true,
    .exit_status = "the command's; 127 when COMMAND is not found in the sandbox, 126 when it "
                   "cannot be run, 125 when sandpod itself fails, 2 on bad usage, 128+N when "
                   "sandpod is stopped by signal N.",
};

int cmd_exec(int argc, char **argv)
{
    struct cli_conn conn = {0};
    struct cli_attach a = {0};
    const char **env = calloc((size_t)argc + 1, sizeof(*env));
    size_t n_env = 0;
    sp_sandbox *sb = NULL;
    int rc = 0;
    if (!env)
        return cli_error("out of memory");

    optind = 0;
    int opt;
    while ((opt = cli_next(&cli_spec_exec, argc, argv, 0)) != -1) {
        if (opt == CLI_GETOPT_HELP)
            goto done;
        int took = cli_conn_option(&conn, "exec", opt, optarg);
        if (took < 0) {
            rc = CLI_EXIT_USAGE;
            goto done;
        }
        if (took)
            continue;
        switch (opt) {
        case 'i':
            a.interactive = true;
            break;
        case 't':
            a.tty = true;
            break;
        case 'w':
            a.workdir = optarg;
            break;
        case 'e':
            if (!strchr(optarg, '=') || optarg[0] == '=') {
                rc = cli_usage("exec", "--env takes KEY=VALUE: '%s'", optarg);
                goto done;
            }
            env[n_env++] = optarg;
            break;
        case 'u':
            a.user = optarg;
            break;
        default:
            rc = CLI_EXIT_USAGE;
            goto done;
        }
    }
    if (optind >= argc) {
        rc = cli_usage("exec", "missing sandbox NAME");
        goto done;
    }
    const char *name = argv[optind++];
    if (optind < argc && strcmp(argv[optind], "--") == 0)
        optind++;
    if (optind >= argc) {
        rc = cli_usage("exec", "missing COMMAND; usage: sandpod exec NAME -- COMMAND [ARG...]");
        goto done;
    }
    a.argv = (const char *const *)(argv + optind);
    a.env = n_env ? env : NULL;

    if ((rc = cli_sandbox_open(&sb, name, &conn, false)) != 0)
        goto own;
    if ((rc = cli_require_running(sb, false)) != 0)
        goto own;
    int code = -1;
    sp_error *err = NULL;
    int r = cli_attach_run(&code, sb, &a, &err);
    if (r < 0) {
        rc = cli_fail(false, r, err);
        goto own;
    }
    if (code < 0) {
        rc = cli_error("podman did not report the exit code of the command");
        goto own;
    }
    rc = code > 255 ? 255 : code;
    goto done;

own:
    /* sandpod's own failure, told apart from any code of the command as
     * docker does: 125 (126 and 127 stay the command's: cannot run, not
     * found). Usage errors stay 2. */
    if (rc == CLI_EXIT_ERROR)
        rc = CLI_EXIT_OWN_FAILURE;
done:
    cli_event(sb, "exec", a.argv, rc);
    sp_sandbox_free(sb);
    cli_conn_dispose(&conn);
    free(env);
    return rc;
}
