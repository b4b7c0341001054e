/* Fuzz target: MCP framing. The input is what a client writes on the
 * server's stdin (newline-delimited JSON-RPC); sp_mcp_serve runs over it
 * until the input ends, against a bare folder whose links point at canary
 * files. Properties: no crash, leak or hang; the server returns at the end
 * of the input; its output holds no canary; nothing outside changes. */
#define _GNU_SOURCE 1
#include <sys/mman.h>

#include "fuzz_tree.h"
#include "mcp.h"
#include "tools.h"

static ft_tree tree;
static sp_tools *tools;
static int out_fd = -1;

static void open_tools(void)
{
    sp_tools_free(tools);
    tools = NULL;
    sp_tools_opts o = SP_TOOLS_OPTS_INIT;
    o.events_path = "";
    sp_error *err = NULL;
    if (sp_tools_open_root(&tools, tree.root, &o, &err) < 0) {
        fprintf(stderr, "tools: %s\n", err->message);
        abort();
    }
}

static void cleanup(void)
{
    sp_tools_free(tools);
    if (out_fd >= 0)
        close(out_fd);
    ft_rmtree(tree.base);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!tools) {
        ft_init(&tree, "mcp");
        open_tools();
        out_fd = memfd_create("mcp-out", MFD_CLOEXEC);
        if (out_fd < 0)
            abort();
        atexit(cleanup);
    }
    /* The whole input must fit in a pipe so the writer never blocks. */
    if (size > 60000)
        return 0;
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        abort();
    if (size && write(p[1], data, size) != (ssize_t)size)
        abort();
    close(p[1]);
    if (ftruncate(out_fd, 0) < 0 || lseek(out_fd, 0, SEEK_SET) < 0)
        abort();
    sp_mcp_opts o = SP_MCP_OPTS_INIT;
    sp_error *err = NULL;
    int r = sp_mcp_serve(tools, p[0], out_fd, &o, &err);
    FZ_ASSERT(r == 0, "serve: %d %s", r, err ? err->message : "");
    sp_error_free(err);
    close(p[0]);

    off_t len = lseek(out_fd, 0, SEEK_END);
    if (len > 0) {
        char *out = malloc((size_t)len + 1);
        if (!out || pread(out_fd, out, (size_t)len, 0) != len)
            abort();
        out[len] = '\0';
        ft_no_canary(out, (size_t)len, data, size, "mcp");
        free(out);
    }
    ft_check_and_reset(&tree);
    open_tools();
    return 0;
}
