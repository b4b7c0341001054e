/* The tool table: names, descriptions written for a model, JSON Schemas of
 * the arguments, tiers, handlers.
 *
 * The schema texts are the single source of truth: the dispatcher checks
 * arguments against the very text the specs (tools_specs.c) print. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fs_json.h"
#include "tools_internal.h"

/* clang-format off */
#define PATH_PROP(what)                                                                            \
    "\"path\": {\"type\": \"string\", \"minLength\": 1, \"description\": \"" what                  \
    " Relative to the workspace; /workspace/... is accepted.\"}"
/* clang-format on */

static const char LIST_DIR_DESC[] =
    "List a folder as an indented tree, sorted by name. Markers: '/' folder, '*' executable "
    "file, '@' symlink (shown with its target, never followed), '?' other. Entries are "
    "numbered from 1 in tree order; when more exist than `limit`, the answer says which "
    "`offset` continues. Use `depth` 1 for a quick look, more to see nested folders. Below "
    "the listed folder, .git, node_modules, __pycache__, .venv/venv, other tool caches and "
    "folders holding a CACHEDIR.TAG (Cargo's target/) are shown but not entered; `ignore` "
    "replaces that list ([] lists everything).";

static const char LIST_DIR_SCHEMA[] =
    "{\"type\": \"object\", \"properties\": {"
    "\"path\": {\"type\": \"string\", \"default\": \".\", \"description\": "
    "\"Folder to list, relative to the workspace (default: the workspace itself).\"},"
    "\"depth\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 10, \"default\": 2, "
    "\"description\": \"Levels to descend: 1 = direct children only.\"},"
    "\"offset\": {\"type\": \"integer\", \"minimum\": 0, \"default\": 1, \"description\": "
    "\"Entry number to start from, 1-based (0 is read as 1).\"},"
    "\"limit\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 5000, \"default\": 200, "
    "\"description\": \"Most entries to return.\"},"
    "\"ignore\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}, \"description\": "
    "\"Globs of what not to list (a folder: shown, not entered; a file: left out), e.g. "
    "['*.pyc', 'build']. Replaces the default list; [] skips nothing. No '!' here: '\\\\!' "
    "matches a name starting with '!'.\"}"
    "}, \"additionalProperties\": false}";

static const char READ_FILE_DESC[] =
    "Read a UTF-8 text file. Each line is shown as 'L<n>: text' (n is the 1-based line "
    "number, which edit_file and insert refer to). mode 'slice' (default) returns `limit` "
    "lines from line `offset`; mode 'indentation' returns the code block around line "
    "`offset` by indentation level (the enclosing header and its body; `max_levels` "
    "widens it to outer blocks). Lines longer than 500 bytes are cut with a marker. When "
    "more lines follow, the answer gives the offset to continue. A file that is not UTF-8 "
    "text is returned whole as base64 with its media type (value.mime, value.base64), up to "
    "the read limit (4 MiB unless configured).";

static const char READ_FILE_SCHEMA[] = "{\"type\": \"object\", \"properties\": {" PATH_PROP(
    "File to read.") ","
                     "\"offset\": {\"type\": \"integer\", \"minimum\": 0, \"default\": 1, "
                     "\"description\": "
                     "\"First line, 1-based (0 is read as 1); the anchor line in indentation "
                     "mode.\"},"
                     "\"limit\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 5000, "
                     "\"default\": 400, "
                     "\"description\": \"Most lines to return.\"},"
                     "\"mode\": {\"type\": \"string\", \"enum\": [\"slice\", \"indentation\"], "
                     "\"default\": "
                     "\"slice\", \"description\": \"slice: lines from offset; indentation: the "
                     "block around "
                     "line offset.\"},"
                     "\"max_levels\": {\"type\": \"integer\", \"minimum\": 0, \"maximum\": 20, "
                     "\"default\": 0, "
                     "\"description\": \"Indentation mode: enclosing levels to include above the "
                     "anchor's own "
                     "block (0 = the anchor's block only).\"}"
                     "}, \"required\": [\"path\"], \"additionalProperties\": false}";

static const char WRITE_FILE_DESC[] =
    "Create a file or replace its whole content (atomically: the old content stays whole if "
    "anything fails). Missing parent folders are created. mode 'create' fails when the file "
    "exists, 'append' adds to its end. Content is UTF-8 text without NUL characters, or, with "
    "encoding 'base64', the bytes of a binary file (strict padded base64). To change part of "
    "a file prefer edit_file or apply_patch.";

static const char WRITE_FILE_SCHEMA[] = "{\"type\": \"object\", \"properties\": {" PATH_PROP(
    "File to write.") ","
                      "\"content\": {\"type\": \"string\", \"description\": \"The full text to "
                      "write.\"},"
                      "\"mode\": {\"type\": \"string\", \"enum\": [\"overwrite\", \"create\", "
                      "\"append\"], "
                      "\"default\": \"overwrite\", \"description\": \"overwrite (create or "
                      "replace), create "
                      "(fail if it exists) or append.\"},"
                      "\"encoding\": {\"type\": \"string\", \"enum\": [\"utf-8\", "
                      "\"base64\"], \"default\": \"utf-8\", \"description\": \"utf-8: content "
                      "is the text; base64: content is the file's bytes in base64.\"}"
                      "}, \"required\": [\"path\", \"content\"], \"additionalProperties\": false}";

static const char EDIT_FILE_DESC[] =
    "Replace an exact string in a text file. old_string must match exactly, whitespace and "
    "indentation included, and occur exactly once unless replace_all is true. When it is "
    "not found, read the file again and copy the text exactly; when it occurs several times "
    "(the error lists the lines), include more surrounding lines to make it unique.";

static const char EDIT_FILE_SCHEMA[] = "{\"type\": \"object\", \"properties\": {" PATH_PROP(
    "File to edit.") ","
                     "\"old_string\": {\"type\": \"string\", \"minLength\": 1, \"description\": "
                     "\"The exact "
                     "text to replace.\"},"
                     "\"new_string\": {\"type\": \"string\", \"description\": \"The text to put in "
                     "its "
                     "place (may be empty to delete).\"},"
                     "\"replace_all\": {\"type\": \"boolean\", \"default\": false, "
                     "\"description\": "
                     "\"Replace every occurrence instead of exactly one.\"}"
                     "}, \"required\": [\"path\", \"old_string\", \"new_string\"], "
                     "\"additionalProperties\": "
                     "false}";

static const char INSERT_DESC[] =
    "Insert text into a text file after line `line` (1-based, as read_file shows them; 0 = "
    "at the start, -1 = at the end). A missing final newline on the text is added. Line "
    "numbers shift after an insert: read the file again before the next one.";

static const char INSERT_SCHEMA[] = "{\"type\": \"object\", \"properties\": {" PATH_PROP(
    "File to insert into.") ","
                            "\"line\": {\"type\": \"integer\", \"minimum\": -1, \"description\": "
                            "\"Insert after this "
                            "line; 0 = at the start, -1 = at the end.\"},"
                            "\"text\": {\"type\": \"string\", \"description\": \"The lines to "
                            "insert.\"}"
                            "}, \"required\": [\"path\", \"line\", \"text\"], "
                            "\"additionalProperties\": false}";

static const char DELETE_DESC[] =
    "Delete a file, a symlink (never its target) or, with recursive true, a folder and "
    "everything in it. The workspace root itself cannot be deleted. A snapshot taken before "
    "(snapshot tool) can bring deleted files back.";

static const char DELETE_SCHEMA[] = "{\"type\": \"object\", \"properties\": {" PATH_PROP(
    "What to delete.") ","
                       "\"recursive\": {\"type\": \"boolean\", \"default\": false, "
                       "\"description\": \"Required "
                       "to delete a non-empty folder.\"}"
                       "}, \"required\": [\"path\"], \"additionalProperties\": false}";

static const char MKDIR_DESC[] =
    "Create a folder. With parents true (the default) missing parent folders are created and "
    "an existing folder is fine; with parents false the parent must exist and the folder "
    "must not.";

static const char MKDIR_SCHEMA[] = "{\"type\": \"object\", \"properties\": {" PATH_PROP(
    "Folder to create.") ","
                         "\"parents\": {\"type\": \"boolean\", \"default\": true, \"description\": "
                         "\"Create "
                         "missing parents; accept an existing folder.\"}"
                         "}, \"required\": [\"path\"], \"additionalProperties\": false}";

static const char STAT_DESC[] =
    "Show what a path is: type (file, dir, symlink, other), size, permission bits, "
    "modification time and, for a symlink, its target (a final symlink is not followed). "
    "A missing path is an error with code not_found.";

static const char STAT_SCHEMA[] = "{\"type\": \"object\", \"properties\": {" PATH_PROP(
    "Path to look at.") "},"
                        "\"required\": [\"path\"], \"additionalProperties\": false}";

static const char GLOB_DESC[] =
    "Find paths by name pattern, sorted. '*' matches within one name, '**' any number of "
    "folders, '?' one character, [abc] a class ([[:digit:]] and other POSIX classes), {a,b} "
    "alternatives; a trailing '/' matches folders only. The pattern is matched against paths "
    "relative to `path`: use '**/*.c' to search at any depth. As in bash, wildcards do not "
    "match names starting with '.' (so .git is not searched) unless the pattern spells the "
    "dot ('.*', '**/.env', '.github/**'). There is no '!' exclusion here (grep's include has "
    "it); '\\!' matches a name starting with '!'. Symlinks are listed, never followed.";

static const char GLOB_SCHEMA[] =
    "{\"type\": \"object\", \"properties\": {"
    "\"pattern\": {\"type\": \"string\", \"minLength\": 1, \"description\": \"The glob, e.g. "
    "'src/**/*.h'.\"},"
    "\"path\": {\"type\": \"string\", \"default\": \".\", \"description\": \"Folder to search "
    "below (default: the workspace).\"},"
    "\"limit\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 10000, \"default\": 200, "
    "\"description\": \"Most paths to return.\"},"
    "\"hidden\": {\"type\": \"boolean\", \"default\": false, \"description\": \"Let "
    "wildcards match names starting with '.' too (bash's dotglob); .git still only when "
    "spelled.\"}"
    "}, \"required\": [\"pattern\"], \"additionalProperties\": false}";

static const char GREP_DESC[] =
    "Search file contents with a regular expression (PCRE2) and answer 'path:line:text' for "
    "each matching line. `include` (or `glob`, rg's name for it) limits the search to files "
    "matching a glob ('*.py' by name at any depth, 'src/**/*.c' by path) or several, as rg's "
    "-g: a '!' glob excludes ('!*.min.js', '!vendor'; with only '!' globs every other file is "
    "searched; '\\!' is a literal '!'), and the last glob that matches decides. As rg does, hidden "
    "files and what .gitignore/.ignore name are skipped unless hidden / no_ignore is true. "
    "\\w, \\d and \\b are Unicode-aware. Binary files and .git folders are skipped; "
    "symlinks are not followed. Use fixed_string for literal text with regex characters.";

static const char GREP_SCHEMA[] =
    "{\"type\": \"object\", \"properties\": {"
    "\"pattern\": {\"type\": \"string\", \"minLength\": 1, \"description\": \"The regular "
    "expression (PCRE2 syntax).\"},"
    "\"path\": {\"type\": \"string\", \"default\": \".\", \"description\": \"Folder or file to "
    "search (default: the workspace).\"},"
    "\"include\": {\"anyOf\": [{\"type\": \"string\"}, {\"type\": \"array\", \"items\": "
    "{\"type\": \"string\"}}], \"description\": \"Only files matching this glob, or these "
    "globs ('!' excludes; the last match wins).\"},"
    "\"glob\": {\"anyOf\": [{\"type\": \"string\"}, {\"type\": \"array\", \"items\": "
    "{\"type\": \"string\"}}], \"description\": \"The same as include (rg's --glob); give "
    "one of the two.\"},"
    "\"hidden\": {\"type\": \"boolean\", \"default\": false, \"description\": \"Also "
    "search files and folders whose names start with '.'.\"},"
    "\"no_ignore\": {\"type\": \"boolean\", \"default\": false, \"description\": \"Also "
    "search what .gitignore, .ignore and .git/info/exclude name.\"},"
    "\"case_insensitive\": {\"type\": \"boolean\", \"default\": false},"
    "\"fixed_string\": {\"type\": \"boolean\", \"default\": false, \"description\": \"Treat "
    "the pattern as literal text.\"},"
    "\"limit\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 10000, \"default\": 200, "
    "\"description\": \"Stop after this many matches.\"}"
    "}, \"required\": [\"pattern\"], \"additionalProperties\": false}";

static const char APPLY_PATCH_DESC[] =
    "Use the `apply_patch` tool to edit files. The patch is a small file-oriented diff "
    "language wrapped in an envelope:\n"
    "\n"
    "*** Begin Patch\n"
    "[ one or more file operations ]\n"
    "*** End Patch\n"
    "\n"
    "Each operation starts with one of three headers (paths relative to the workspace):\n"
    "*** Add File: <path> - create a file; every following line starts with + and is a line "
    "of it.\n"
    "*** Delete File: <path> - remove a file; nothing follows.\n"
    "*** Update File: <path> - change a file in place, optionally followed by "
    "*** Move to: <new path> to rename it.\n"
    "An update holds one or more hunks, each introduced by @@ (optionally followed by a line "
    "of the file, such as a class or function header, that comes before the change and "
    "locates it). In a hunk, a line starting with a space is context, - is a line to "
    "remove and + a line to add. Show 3 lines of context above and below each change; when "
    "that is not unique, add @@ lines to jump to the right class or function. "
    "*** End of File after a hunk pins it to the end of the file.\n"
    "\n"
    "Example:\n"
    "*** Begin Patch\n"
    "*** Add File: docs/hello.txt\n"
    "+Hello world\n"
    "*** Update File: src/app.py\n"
    "*** Move to: src/main.py\n"
    "@@ def greet():\n"
    "-    print(\"Hi\")\n"
    "+    print(\"Hello, world!\")\n"
    "*** Delete File: obsolete.txt\n"
    "*** End Patch\n"
    "\n"
    "Context and removed lines must match the file. The whole patch applies or nothing "
    "changes: when a hunk does not match, read the file again and rebuild the patch. A "
    "unified diff (git diff) is accepted too.";

static const char APPLY_PATCH_SCHEMA[] =
    "{\"type\": \"object\", \"properties\": {"
    "\"input\": {\"type\": \"string\", \"description\": \"The entire contents of the "
    "apply_patch command: the patch, from '*** Begin Patch' to '*** End Patch'.\"}"
    "}, \"required\": [\"input\"], \"additionalProperties\": false}";

static const char SHELL_DESC[] =
    "Run a command line with /bin/sh -c in the sandbox's container (working folder "
    "/workspace unless `workdir` says otherwise) and return its exit code, stdout and "
    "stderr. Each stream is capped (about 8 KiB or 200 lines; the head and the tail are "
    "kept, with a marker saying what was left out): filter long output with grep, head or "
    "tail. The command is killed after timeout_ms, with everything it started. It has no "
    "stdin and usually no network. For interactive or long-running programs use "
    "exec_command.";

static const char SHELL_SCHEMA[] =
    "{\"type\": \"object\", \"properties\": {"
    "\"command\": {\"type\": \"string\", \"minLength\": 1, \"description\": \"The command "
    "line, e.g. 'make test 2>&1 | tail -n 50'.\"},"
    "\"workdir\": {\"type\": \"string\", \"description\": \"Working folder in the container "
    "(absolute, or relative to /workspace).\"},"
    "\"timeout_ms\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 3600000, "
    "\"default\": 60000, \"description\": \"Kill the command after this many ms.\"}"
    "}, \"required\": [\"command\"], \"additionalProperties\": false}";

static const char EXEC_COMMAND_DESC[] =
    "Start a command in the container as a session (on a terminal unless tty is false) and "
    "return what it printed within yield_time_ms. If it is still running, the answer gives "
    "a session_id: use write_stdin to send input, to poll for more output (empty chars), "
    "or to end it. Use this for servers, REPLs, and commands that take long or ask "
    "questions. Output is capped to max_output_tokens (about 4 bytes each).";

static const char EXEC_COMMAND_SCHEMA[] =
    "{\"type\": \"object\", \"properties\": {"
    "\"cmd\": {\"type\": \"string\", \"minLength\": 1, \"description\": \"The command line "
    "(run with /bin/sh -c).\"},"
    "\"workdir\": {\"type\": \"string\", \"description\": \"Working folder in the "
    "container.\"},"
    "\"tty\": {\"type\": \"boolean\", \"default\": true, \"description\": \"Run on a "
    "pseudo-terminal (false: plain pipes, stdout and stderr merged).\"},"
    "\"yield_time_ms\": {\"type\": \"integer\", \"minimum\": 0, \"maximum\": 30000, "
    "\"default\": 250, \"description\": \"How long to collect output before answering.\"},"
    "\"max_output_tokens\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 262144, "
    "\"default\": 8000}"
    "}, \"required\": [\"cmd\"], \"additionalProperties\": false}";

static const char WRITE_STDIN_DESC[] =
    "Send characters to a session that exec_command started and return the output since the "
    "last call. Empty chars only polls. \"\\u0003\" interrupts (Ctrl-C), \"\\u0004\" at the "
    "start of a line is end-of-file on a terminal. kill true ends the session and everything "
    "it started. Once the command has exited the answer gives its exit code and the session "
    "is gone.";

static const char WRITE_STDIN_SCHEMA[] =
    "{\"type\": \"object\", \"properties\": {"
    "\"session_id\": {\"type\": \"integer\", \"minimum\": 1, \"description\": \"The id "
    "exec_command returned.\"},"
    "\"chars\": {\"type\": \"string\", \"default\": \"\", \"description\": \"Bytes to send; "
    "include \\\"\\\\n\\\" to press Enter.\"},"
    "\"close_stdin\": {\"type\": \"boolean\", \"default\": false, \"description\": \"Close "
    "stdin after the characters.\"},"
    "\"kill\": {\"type\": \"boolean\", \"default\": false, \"description\": \"End the "
    "session.\"},"
    "\"yield_time_ms\": {\"type\": \"integer\", \"minimum\": 0, \"maximum\": 30000, "
    "\"default\": 250},"
    "\"max_output_tokens\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 262144, "
    "\"default\": 8000}"
    "}, \"required\": [\"session_id\"], \"additionalProperties\": false}";

static const char SNAPSHOT_DESC[] =
    "Take an exact snapshot of the whole workspace (every file, permission bits, symlinks, "
    "empty folders) and return its id. Take one before risky changes; restore brings the "
    "workspace back to it. Only what changed since the last snapshot is read.";

static const char SNAPSHOT_SCHEMA[] =
    "{\"type\": \"object\", \"properties\": {"
    "\"tag\": {\"type\": \"string\", \"minLength\": 1, \"maxLength\": 200, \"description\": "
    "\"An optional label to find it by.\"}"
    "}, \"additionalProperties\": false}";

static const char RESTORE_DESC[] =
    "Make the workspace exactly what it was at a snapshot: changed files are put back and "
    "files created since are deleted. `snapshot` is an id, a tag, or a prefix of at least 4 "
    "characters of an id. The answer lists the paths that changed. Running programs are "
    "not restarted.";

static const char RESTORE_SCHEMA[] =
    "{\"type\": \"object\", \"properties\": {"
    "\"snapshot\": {\"type\": \"string\", \"minLength\": 1, \"description\": \"Id, tag or id "
    "prefix (see list_snapshots).\"}"
    "}, \"required\": [\"snapshot\"], \"additionalProperties\": false}";

static const char LIST_SNAPSHOTS_DESC[] =
    "List the workspace's snapshots, oldest first: id, time, tag, and file counts.";

static const char LIST_SNAPSHOTS_SCHEMA[] =
    "{\"type\": \"object\", \"properties\": {}, \"additionalProperties\": false}";

const tool_def tool_defs[] = {
    {"list_dir", "List a folder", SP_TOOL_SAFE, 0, LIST_DIR_DESC, LIST_DIR_SCHEMA, tool_list_dir,
     "path", HINT_READ_ONLY | HINT_IDEMPOTENT},
    {"read_file", "Read a text file", SP_TOOL_SAFE, 0, READ_FILE_DESC, READ_FILE_SCHEMA,
     tool_read_file, "path", HINT_READ_ONLY | HINT_IDEMPOTENT},
    {"write_file", "Write a file", SP_TOOL_DANGEROUS, NEED_WRITE, WRITE_FILE_DESC,
     WRITE_FILE_SCHEMA, tool_write_file, "path", HINT_DESTRUCTIVE},
    {"edit_file", "Replace text in a file", SP_TOOL_DANGEROUS, NEED_WRITE, EDIT_FILE_DESC,
     EDIT_FILE_SCHEMA, tool_edit_file, "path", HINT_DESTRUCTIVE},
    {"insert", "Insert lines into a file", SP_TOOL_DANGEROUS, NEED_WRITE, INSERT_DESC,
     INSERT_SCHEMA, tool_insert, "path", HINT_DESTRUCTIVE},
    {"delete", "Delete a path", SP_TOOL_DANGEROUS, NEED_WRITE, DELETE_DESC, DELETE_SCHEMA,
     tool_delete, "path", HINT_DESTRUCTIVE | HINT_IDEMPOTENT},
    {"mkdir", "Create a folder", SP_TOOL_CAUTIOUS, NEED_WRITE, MKDIR_DESC, MKDIR_SCHEMA, tool_mkdir,
     "path", HINT_IDEMPOTENT},
    {"stat", "Describe a path", SP_TOOL_SAFE, 0, STAT_DESC, STAT_SCHEMA, tool_stat, "path",
     HINT_READ_ONLY | HINT_IDEMPOTENT},
    {"glob", "Find paths by pattern", SP_TOOL_SAFE, 0, GLOB_DESC, GLOB_SCHEMA, tool_glob, "pattern",
     HINT_READ_ONLY | HINT_IDEMPOTENT},
    {"grep", "Search file contents", SP_TOOL_SAFE, 0, GREP_DESC, GREP_SCHEMA, tool_grep, "pattern",
     HINT_READ_ONLY | HINT_IDEMPOTENT},
    {"apply_patch", "Apply a patch", SP_TOOL_DANGEROUS, NEED_WRITE | NEED_PATCH, APPLY_PATCH_DESC,
     APPLY_PATCH_SCHEMA, tool_apply_patch, "input", HINT_DESTRUCTIVE},
    {"shell", "Run a shell command", SP_TOOL_DANGEROUS, NEED_SANDBOX, SHELL_DESC, SHELL_SCHEMA,
     tool_shell, "command", HINT_DESTRUCTIVE | HINT_OPEN_WORLD},
    {"exec_command", "Start an interactive command", SP_TOOL_DANGEROUS, NEED_SANDBOX,
     EXEC_COMMAND_DESC, EXEC_COMMAND_SCHEMA, tool_exec_command, "cmd",
     HINT_DESTRUCTIVE | HINT_OPEN_WORLD},
    {"write_stdin", "Talk to a running command", SP_TOOL_DANGEROUS, NEED_SANDBOX, WRITE_STDIN_DESC,
     WRITE_STDIN_SCHEMA, tool_write_stdin, "chars", HINT_DESTRUCTIVE | HINT_OPEN_WORLD},
    {"snapshot", "Snapshot the workspace", SP_TOOL_CAUTIOUS, NEED_STORE, SNAPSHOT_DESC,
     SNAPSHOT_SCHEMA, tool_snapshot, "tag", 0},
    {"restore", "Restore a snapshot", SP_TOOL_DANGEROUS, NEED_STORE | NEED_WRITE, RESTORE_DESC,
     RESTORE_SCHEMA, tool_restore, "snapshot", HINT_DESTRUCTIVE | HINT_IDEMPOTENT},
    {"list_snapshots", "List snapshots", SP_TOOL_SAFE, NEED_STORE, LIST_SNAPSHOTS_DESC,
     LIST_SNAPSHOTS_SCHEMA, tool_list_snapshots, NULL, HINT_READ_ONLY | HINT_IDEMPOTENT},
};

const size_t n_tool_defs = sizeof(tool_defs) / sizeof(tool_defs[0]);

static const char *const tool_names[] = {
    "list_dir",     "read_file",   "write_file", "edit_file", "insert",         "delete",
    "mkdir",        "stat",        "glob",       "grep",      "apply_patch",    "shell",
    "exec_command", "write_stdin", "snapshot",   "restore",   "list_snapshots", NULL,
};

const char *const *sp_tools_names(void)
{
    return tool_names;
}

const tool_def *tool_find(const char *name)
{
    if (!name)
        return NULL;
    for (size_t i = 0; i < n_tool_defs; i++)
        if (strcmp(tool_defs[i].name, name) == 0)
            return &tool_defs[i];
    return NULL;
}

static cJSON *parsed_schemas[sizeof(tool_defs) / sizeof(tool_defs[0])];
static pthread_once_t schemas_once = PTHREAD_ONCE_INIT;

sp_tool_tier tool_tier_of(unsigned hints)
{
    if (hints & HINT_READ_ONLY)
        return SP_TOOL_SAFE;
    if (hints & (HINT_DESTRUCTIVE | HINT_OPEN_WORLD))
        return SP_TOOL_DANGEROUS;
    return SP_TOOL_CAUTIOUS;
}

bool tool_concurrent(const tool_def *d)
{
    return (d->hints & HINT_READ_ONLY) && !(d->needs & (NEED_SANDBOX | NEED_STORE));
}

static void parse_schemas(void)
{
    for (size_t i = 0; i < n_tool_defs; i++) {
        parsed_schemas[i] = cJSON_Parse(tool_defs[i].schema);
        /* A broken schema literal, or a tier the annotations do not give:
         * a bug, caught by every test. */
        if (!parsed_schemas[i] || tool_defs[i].tier != tool_tier_of(tool_defs[i].hints))
            abort();
    }
}

const cJSON *tool_schema(const tool_def *d)
{
    pthread_once(&schemas_once, parse_schemas);
    return parsed_schemas[d - tool_defs];
}

const char *sp_tool_tier_name(sp_tool_tier t)
{
    switch (t) {
    case SP_TOOL_SAFE:
        return "safe";
    case SP_TOOL_CAUTIOUS:
        return "cautious";
    case SP_TOOL_DANGEROUS:
        return "dangerous";
    }
    return "unknown";
}
