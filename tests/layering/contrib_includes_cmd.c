/* contrib is below cmd: must not compile with contrib's include dirs. */
#include "cli.h"
