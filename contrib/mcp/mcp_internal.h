/* Internals of the MCP server shared by its files. Not installed. */
#ifndef SANDPOD_MCP_INTERNAL_H
#define SANDPOD_MCP_INTERNAL_H

#include <cJSON.h>

#include <stdbool.h>

/* The tools/call result for a tools result object (text, consumed):
 * {content: [{type: text, text: message}], isError, and the object without
 * its message as structuredContent when `structured`, else as
 * _meta["sandpod/result"]}. NULL when memory ran out. */
cJSON *mcp_call_result(char *result_text, bool structured);

/* The same shapes for a call refused before it reached the tools. */
cJSON *mcp_refused_result(const char *message, bool structured);

/* A tools/list result (text) for clients that get no structured output:
 * each tool's outputSchema moved to _meta["sandpod/outputSchema"]
 * (malloc'd; NULL when memory ran out). */
char *mcp_unstructured_list(const char *list);

#endif
