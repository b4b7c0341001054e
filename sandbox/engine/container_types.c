/* The engine-neutral container types' destructors (sandpod/container.h),
 * and what the neutral code builds on the local engine's table. */
#include <stdlib.h>

#include "engine/local.h"
#include "sandpod/container.h"

static void info_dispose(sp_container_info *i)
{
    free(i->id);
    free(i->name);
    free(i->image);
    free(i->state);
    free(i->started_at);
    free(i->finished_at);
    free(i->error);
    for (char **l = i->labels; l && *l; l++)
        free(*l);
    free(i->labels);
}

void sp_container_info_free(sp_container_info *info)
{
    if (!info)
        return;
    info_dispose(info);
    free(info);
}

void sp_containers_free(sp_containers *list)
{
    if (!list)
        return;
    for (size_t i = 0; i < list->n; i++)
        info_dispose(&list->items[i]);
    free(list->items);
    free(list);
}

int sp_local_exec(sp_stream *out, const sp_local_ops *ops, sp_local *l, const char *container,
                  const sp_exec_spec *spec, sp_error **err)
{
    *out = (sp_stream){0};
    char *id = NULL;
    int r = ops->exec_create(&id, l, container, spec, err);
    if (r == 0)
        r = ops->exec_start(out, l, id, spec->tty, false, err);
    free(id);
    return r;
}
