/* The option groups several commands share: one row each, so that every
 * command that takes --state-root says the same thing about it. */
#include "cli.h"

static const struct cli_optdesc conn_opts[] = {
    CLI_STATE_ROOT_ROW,
    CLI_VALUE("url", 0, "URL", CLI_OPT_URL, CLI_COMP_NONE,
              "Podman service (default $SANDPOD_URL, else found or started)"),
    CLI_OPTS_END,
};

const struct cli_optgroup cli_group_conn = {NULL, conn_opts, NULL, false};

static const struct cli_optdesc create_opts[] = {
    CLI_VALUE("name", 0, "NAME", CLI_OPT_NAME, CLI_COMP_NONE,
              "the sandbox's name (default: a generated sp-xxxxxxxx)"),
    CLI_VALUE("image", 0, "IMG", CLI_OPT_IMAGE, CLI_COMP_NONE,
              "image to run (default " SP_PODMAN_DEFAULT_IMAGE ", built offline when missing)"),
    CLI_VALUE("engine", 0, "NAME", CLI_OPT_ENGINE, CLI_COMP_NONE,
              "where it runs: an engine of `sandpod engine ls` (default: the default engine, "
              "normally local Podman)"),
    CLI_CHOICE("pull", 0, "POLICY", CLI_OPT_PULL, "missing|always|never",
               "pull the image from its registry: missing (default for a reference with a "
               "registry host), always, never (default for localhost/ and short names)"),
    CLI_VALUE("tls-verify", 0, "BOOL", CLI_OPT_TLS_VERIFY, CLI_COMP_NONE,
              "false: pull over plain HTTP or without TLS verification (a trusted registry "
              "only)"),
    CLI_VALUE("mount", 0, "SPEC", CLI_OPT_MOUNT, CLI_COMP_DIR,
              "copy a host folder into the workspace (repeatable): PATH, or "
              "src=PATH[,dst=DIR] [,include=GLOB]... [,exclude=GLOB]... [,max-bytes=SIZE] "
              "[,follow-symlinks] [,gitignore] [,secrets=strip|keep] (strip, the default, "
              "leaves out and reports files that hold credentials: see `sandpod hydrate "
              "--help`)"),
    CLI_VALUE("allowed-root", 0, "DIR", CLI_OPT_ALLOWED_ROOT, CLI_COMP_DIR,
              "host folder every mount must stay inside (repeatable; default: each mount's own "
              "folder)"),
    CLI_VALUE("env", 'e', "K=V", 'e', CLI_COMP_NONE,
              "environment of every command (repeatable); a bare K passes the caller's value at "
              "each command, stored nowhere"),
    CLI_VALUE("workdir", 'w', "DIR", 'w', CLI_COMP_NONE,
              "working folder of commands (default /workspace)"),
    CLI_VALUE("user", 'u', "UID:GID", 'u', CLI_COMP_NONE,
              "user commands run as (default " SP_SANDBOX_DEFAULT_USER ")"),
    CLI_CHOICE("network", 0, "MODE", CLI_OPT_NETWORK, "none|default|host",
               "none (default), default (Podman's bridge) or host"),
    CLI_VALUE("memory", 0, "SIZE", CLI_OPT_MEMORY, CLI_COMP_NONE, "memory limit (default 1G)"),
    CLI_VALUE("cpus", 0, "N", CLI_OPT_CPUS, CLI_COMP_NONE,
              "CPU limit, decimals allowed (default 1)"),
    CLI_VALUE("pids", 0, "N", CLI_OPT_PIDS, CLI_COMP_NONE, "process limit (default 256)"),
    CLI_VALUE("tmpfs-size", 0, "SIZE", CLI_OPT_TMPFS_SIZE, CLI_COMP_NONE,
              "size of the tmpfs on /tmp (default 64M)"),
    CLI_FLAG("read-write-root", 0, CLI_OPT_RW_ROOT,
             "keep the root filesystem writable (default read-only)"),
    CLI_VALUE("cap-add", 0, "CAP", CLI_OPT_CAP_ADD, CLI_COMP_NONE,
              "add a capability back, e.g. CHOWN (repeatable; default: all dropped)"),
    CLI_CHOICE("userns", 0, "MODE", CLI_OPT_USERNS, "private|host",
               "private (default: ids no host account has, or the caller under rootless Podman) "
               "or host (the workload shares host uids: on purpose only)"),
    CLI_CHOICE("seccomp", 0, "PROFILE", CLI_OPT_SECCOMP, "sandpod|podman|unconfined",
               "sandpod (default: Podman's less keyctl and new user namespaces), podman or "
               "unconfined"),
    CLI_VALUE("setup", 0, "CMD", CLI_OPT_SETUP, CLI_COMP_NONE,
              "run `sh -c CMD` once after hydration, as the sandbox's user in its workdir "
              "(repeatable, in order; output on stderr); a failure removes the sandbox"),
    CLI_FLAG("setup-network", 0, CLI_OPT_SETUP_NETWORK,
             "network on for the setup commands only (the container is then made anew "
             "without it; only the workspace keeps what setup wrote)"),
    CLI_VALUE("setup-timeout", 0, "SECONDS", CLI_OPT_SETUP_TIMEOUT, CLI_COMP_NONE,
              "deadline of each setup command (default 600)"),
    CLI_OPTS_END,
};

const struct cli_optgroup cli_group_create = {
    NULL, create_opts,
    "SIZE is a whole number with an optional K, M, G or T suffix (powers of 1024).", false};

/* Apart from create's other options: `mcp` takes those too, and its
 * --deny is the tools' (paths). */
static const struct cli_optdesc egress_opts[] = {
    CLI_VALUE("allow", 0, "RULE", CLI_OPT_ALLOW, CLI_COMP_NONE,
              "let the workload reach RULE through the sandbox's egress proxy, its only network "
              "then (repeatable): HOST[:PORT], '*.DOMAIN'[:PORT] (the names below DOMAIN), "
              "CIDR[:PORT] or [IPv6-CIDR]:PORT; PORT may be a range (8000-8999); everything no "
              "rule allows is refused"),
    CLI_VALUE("deny", 0, "RULE", CLI_OPT_DENY, CLI_COMP_NONE,
              "refuse RULE even where an --allow rule matches (repeatable; same forms)"),
    CLI_VALUE("setup-allow", 0, "RULE", CLI_OPT_SETUP_ALLOW, CLI_COMP_NONE,
              "an allow rule in force only while the --setup commands run (repeatable; needs "
              "--allow or --deny)"),
    CLI_VALUE("egress-hosts", 0, "FILE", CLI_OPT_EGRESS_HOSTS, CLI_COMP_FILE,
              "a hosts(5) file whose names the proxy resolves before DNS (copied)"),
    CLI_VALUE("secret", 0, "NAME=SOURCE", CLI_OPT_SECRET, CLI_COMP_NONE,
              "a brokered secret (repeatable): SOURCE is env:VAR (this environment's) or "
              "file:PATH; the workload's $NAME holds a stand-in, and the egress proxy puts the "
              "value in its place on requests to the hosts the secret is for (needs egress "
              "rules)"),
    CLI_VALUE("secret-for", 0, "NAME=HOST", CLI_OPT_SECRET_FOR, CLI_COMP_NONE,
              "a host secret NAME is for (repeatable; at least one): HOST[:PORT] or "
              "'*.DOMAIN'[:PORT] over HTTPS (port 443 when none), http://HOST[:PORT] over plain "
              "HTTP (port 80 when none); a request carrying the stand-in anywhere else is "
              "refused"),
    CLI_VALUE("secret-in", 0, "NAME=WHERE", CLI_OPT_SECRET_IN, CLI_COMP_NONE,
              "put secret NAME's value in the URL's query string (query), the request body "
              "(body; taken whole, at most 1 MiB) or both (query,body), not only in headers"),
    CLI_VALUE("egress-ca", 0, "FILE", CLI_OPT_EGRESS_CA, CLI_COMP_FILE,
              "CA certificates (PEM) the egress proxy trusts, besides the host's, for the HTTPS "
              "hosts secrets go to (copied)"),
    CLI_OPTS_END,
};

const struct cli_optgroup cli_group_egress = {
    NULL, egress_opts,
    "With --allow or --deny, loopback, link-local (cloud metadata), private ranges and this "
    "host's own addresses stay refused unless a rule names them by network (CIDR); "
    "`sandpod network NAME` shows and changes the rules and its log.",
    false};

static const struct cli_optdesc snap_opts[] = {
    CLI_VALUE("root", 0, "DIR", CLI_OPT_SNAP_ROOT, CLI_COMP_DIR,
              "work on the folder DIR instead of a sandbox"),
    CLI_VALUE("store", 0, "DIR", CLI_OPT_SNAP_STORE, CLI_COMP_DIR,
              "the snapshot store of --root (created when missing; must be outside DIR)"),
    CLI_OPTS_END,
};

const struct cli_optgroup cli_group_snap = {NULL, snap_opts, NULL, false};

static const struct cli_optdesc tools_opts[] = {
    CLI_VALUE("root", 0, "DIR", CLI_OPT_TOOLS_ROOT, CLI_COMP_DIR,
              "work on the folder DIR (filesystem tools only, no container) instead of a "
              "sandbox"),
    CLI_VALUE("store", 0, "DIR", CLI_OPT_TOOLS_STORE, CLI_COMP_DIR,
              "with --root: a snapshot store (outside DIR) for the snapshot, restore and "
              "list_snapshots tools"),
    CLI_CHOICE("approval", 0, "POLICY", CLI_OPT_TOOLS_APPROVAL, "never|untrusted|on-request",
               "never (default: every call runs), untrusted (only read-only tools run without "
               "asking) or on-request (tools that overwrite, delete or run commands ask)"),
    CLI_CHOICE("fs-mode", 0, "MODE", CLI_OPT_TOOLS_FS_MODE, "restricted|unrestricted",
               "restricted (default: paths stay in the workspace) or, with --root only, "
               "unrestricted (any absolute host path; for trusted use)"),
    CLI_VALUE("disable", 0, "TOOL", CLI_OPT_TOOLS_DISABLE, CLI_COMP_NONE,
              "leave a tool out (repeatable)"),
    CLI_VALUE("deny", 0, "GLOB", CLI_OPT_TOOLS_DENY, CLI_COMP_NONE,
              "make matching paths invisible to the tools (repeatable)"),
    CLI_FLAG("read-only", 0, CLI_OPT_TOOLS_READ_ONLY,
             "refuse every change to files (write tools left out)"),
    CLI_VALUE("max-read-bytes", 0, "SIZE", CLI_OPT_TOOLS_MAX_READ, CLI_COMP_NONE,
              "largest binary file read_file returns as base64 (default 4M)"),
    CLI_VALUE("max-write-bytes", 0, "SIZE", CLI_OPT_TOOLS_MAX_WRITE, CLI_COMP_NONE,
              "largest file the write tools leave (default 4M)"),
    CLI_VALUE("max-output-bytes", 0, "SIZE", CLI_OPT_TOOLS_MAX_OUTPUT, CLI_COMP_NONE,
              "cap per output stream of a shell call, head and tail kept (default 8K)"),
    CLI_VALUE("max-text-bytes", 0, "SIZE", CLI_OPT_TOOLS_MAX_TEXT, CLI_COMP_NONE,
              "cap on the text of one file tool answer (default 64K)"),
    CLI_VALUE("timeout", 0, "MS", CLI_OPT_TOOLS_TIMEOUT, CLI_COMP_NONE,
              "timeout of a shell call that names none, in milliseconds (default 60000)"),
    CLI_FLAG("no-stale-check", 0, CLI_OPT_TOOLS_NO_STALE,
             "let edits change a file that changed on disk since the model read it"),
    CLI_OPTS_END,
};

const struct cli_optgroup cli_group_tools = {
    NULL, tools_opts,
    "SIZE is a whole number with an optional K, M, G or T suffix (powers of 1024).", false};

static const struct cli_optdesc command_opts[] = {
    CLI_VALUE("workdir", 'w', "DIR", 'w', CLI_COMP_NONE,
              "working folder (default: the sandbox's, /workspace)"),
    CLI_VALUE("env", 'e', "K=V", 'e', CLI_COMP_NONE, "extra environment (repeatable)"),
    CLI_OPTS_END,
};

const struct cli_optgroup cli_group_command = {NULL, command_opts, NULL, false};
