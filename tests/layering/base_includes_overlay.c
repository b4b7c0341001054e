/* base is below overlay: this must not compile with base's include dirs. */
#include "sandpod/fs.h"
