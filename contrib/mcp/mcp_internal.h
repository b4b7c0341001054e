/* Internals of the MCP server shared by its files. Not installed. */
#ifndef SANDPOD_MCP_INTERNAL_H
#define SANDPOD_MCP_INTERNAL_H

#include <cJSON.h>

/* The tools/call result for a tools result object (text, consumed):
 * {content: [{type: text, text: message}], structuredContent: the object
 * without its message, isError}. NULL when memory ran out. */
cJSON *mcp_call_result(char *result_text);

/* The same shapes for a call refused before it reached the tools. */
cJSON *mcp_refused_result(const char *message);

#endif
