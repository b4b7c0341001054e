/* `sandpod peer egress-*`: the proxy Pod of a Kubernetes sandbox with
 * egress rules (sandbox/kube/render.c lays it out). */
#ifndef SANDPOD_CMD_PEER_EGRESS_H
#define SANDPOD_CMD_PEER_EGRESS_H

/* Where sandpod-agent is: $SANDPOD_AGENT, else beside this program. */
char *peer_agent_source(void);

/* op is "egress-serve", "egress-policy" or "egress-log"; argv its
 * operands. @return the exit status. */
int peer_egress(const char *op, int argc, char **argv);

#endif
