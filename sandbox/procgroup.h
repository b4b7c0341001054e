/* A command in a process group of its own, killed whole (procgroup.c):
 * how both kinds of sandbox run a batch command so that a timeout or an
 * end leaves nothing behind. Internal. */
#ifndef SANDPOD_PROCGROUP_H
#define SANDPOD_PROCGROUP_H

/* 16 random hex digits naming one command (its pid file, its marker). */
char *sp_cmd_token(void);
/* sh -c SP_GROUP_WRAPPER sandpod TOKEN ARGV...: ARGV in a process group of
 * its own (setsid), its pgid in /tmp/.sandpod-TOKEN.pgid while it runs,
 * the group killed when it ends (nothing left behind) or on TERM/INT/HUP.
 * stdin reaches it on fd 3, since sh gives background jobs /dev/null. */
#define SP_GROUP_WRAPPER                                                                           \
    "t=$1; shift; exec 3<&0; "                                                                     \
    "setsid \"$@\" <&3 3<&- & p=$!; "                                                              \
    "echo $p > /tmp/.sandpod-$t.pgid 2>/dev/null; "                                                \
    "trap 'kill -TERM -$p 2>/dev/null' TERM INT HUP; "                                             \
    "wait $p; r=$?; kill -KILL -$p 2>/dev/null; rm -f /tmp/.sandpod-$t.pgid; exit $r"
/* The sh script that kills the group of the command run under TOKEN. */
char *sp_group_kill_script(const char *token);

#endif
