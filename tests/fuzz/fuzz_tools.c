/* Fuzz target: tool argument JSON through the dispatcher (sp_tools_call,
 * sp_tools_call_freeform) over a bare folder whose links point at canary
 * files outside it.
 *
 * Input: byte 0 picks the tool (from sp_tools_names()), byte 1 bit 0 picks
 * a freeform call; the rest is the argument text. Properties: no crash,
 * leak or hang; every call answers with a result text; no result holds a
 * canary; nothing outside the folder changes. */
#include "fuzz_tree.h"
#include "tools.h"

static ft_tree tree;
static sp_tools *tools;

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
    ft_rmtree(tree.base);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!tools) {
        ft_init(&tree, "tools");
        open_tools();
        atexit(cleanup);
    }
    if (size < 2 || size > 16384)
        return 0;
    const char *const *names = sp_tools_names();
    size_t n = 0;
    while (names[n])
        n++;
    const char *name = data[0] == 0xff ? "no_such_tool" : names[data[0] % n];
    const char *args = (const char *)data + 2;
    size_t len = size - 2;
    char *result = NULL;
    if (data[1] & 1)
        (void)sp_tools_call_freeform(&result, tools, name, args, len);
    else
        (void)sp_tools_call(&result, tools, name, args, len);
    FZ_ASSERT(result, "%s: no result text", name);
    ft_no_canary(result, strlen(result), data, size, name);
    free(result);
    ft_check_and_reset(&tree);
    open_tools();
    return 0;
}
