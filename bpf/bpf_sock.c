/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Socket-level load balancing (Cilium's bpf_sock.c): a connect() or an
 * unconnected sendmsg() to a service frontend is given a backend address
 * before any packet exists, so the flow never needs per-packet DNAT or a
 * SERVICE conntrack entry. The frontend is remembered per socket in
 * cilium_lb4_reverse_sk, and getpeername()/recvmsg() show it again.
 *
 * Attached to the cgroup v2 root the node owns (cgroup-root); a process
 * outside it is not load-balanced here and falls back to the tc path.
 * The node's own sockets (those in its network namespace) also reach
 * NodePorts and HostPorts through loopback, which no packet path sees.
 */
#define SOURCE_FILE SOURCE_FILE_BPF_SOCK

#include <linux/errno.h>
#include "lib/common.h"
#include "lib/maps.h"
#include "lib/metrics.h"
#include "lib/endpoint.h"
#include "lib/lb.h"
#include "lib/nodeport.h"
#include "lib/trace_sock.h"

#define SYS_REJECT	0
#define SYS_PROCEED	1

static __always_inline int sock_proto_balanced(const struct bpf_sock_addr *ctx)
{
	return ctx->protocol == IPPROTO_TCP || ctx->protocol == IPPROTO_UDP;
}

static __always_inline void sock_metric(__u8 reason)
{
	update_metrics(0, METRIC_EGRESS, reason, __LINE__, SOURCE_FILE);
}

/* Whether the socket lives in the node's own network namespace (the
 * agent's), not a pod's. */
static __always_inline int sock_in_hostns(struct bpf_sock_addr *ctx)
{
	__u64 host = runtime_config(RUNTIME_CONFIG_HOST_NETNS_COOKIE);

	if (!host)
		host = bpf_get_netns_cookie(NULL);
	return bpf_get_netns_cookie(ctx) == host;
}

static __always_inline int is_v4_loopback(__u32 address)
{
	/* 127.0.0.0/8, network order */
	return (address & bpf_htonl(0xff000000)) == bpf_htonl(0x7f000000);
}

/* The surrogate 0.0.0.0 entry that stands for address:port, as Cilium's
 * wildcard lookup finds it: a NodePort through any node's address (this
 * node's or another's, per the ipcache) or, from the node itself, a
 * loopback address; a HostPort only through this node's own addresses or
 * loopback, and one made for hostIP 127.0.0.1 through loopback alone. */
static __always_inline struct lb4_service *sock4_wildcard(struct bpf_sock_addr *ctx,
							   __u32 address, __u16 port, __u8 proto,
							   struct lb4_frontend *fe)
{
	/* the netns check only for loopback, the rare case */
	int loopback = is_v4_loopback(address) && sock_in_hostns(ctx);
	__u32 identity = ip4_identity(address);
	struct lb4_service *svc;

	if (nodeport_port_in_range(port)) {
		if (!loopback && identity != IDENTITY_HOST && identity != IDENTITY_REMOTE_NODE)
			return NULL;
		svc = lb4_lookup_service_internal(0, port, proto, fe);
		return svc && (svc->flags & SVC_FLAG_NODEPORT) ? svc : NULL;
	}
	if (!loopback && identity != IDENTITY_HOST)
		return NULL;
	svc = lb4_lookup_service_internal(0, port, proto, fe);
	if (!svc || !(svc->flags & SVC_FLAG_HOSTPORT))
		return NULL;
	if ((svc->flags2 & SVC_FLAG_LOOPBACK) && !loopback)
		return NULL;
	return svc;
}

/* The service of address:port for the socket's protocol, as the
 * cluster's own clients see it: its own frontend, else the surrogate standing for it. A HostPort is
 * only this node's: through another address it is left alone (Cilium's
 * sock4_skip_xlate). fe names the entry found. */
static __always_inline struct lb4_service *sock4_service(struct bpf_sock_addr *ctx,
							  __u32 address, __u16 port,
							  struct lb4_frontend *fe)
{
	__u8 proto = (__u8)ctx->protocol;
	struct lb4_service *svc = lb4_lookup_service_internal(address, port, proto, fe);

	if (!svc)
		return sock4_wildcard(ctx, address, port, proto, fe);
	if ((svc->flags & SVC_FLAG_HOSTPORT) && ip4_identity(address) != IDENTITY_HOST)
		return NULL;
	return svc;
}

static __always_inline int sock4_remember(struct bpf_sock_addr *ctx,
					  const struct lb4_backend *backend, __u32 address,
					  __u16 port, __u16 rev_nat_index)
{
	struct ipv4_revnat_tuple key = {
		.cookie = bpf_get_socket_cookie(ctx),
		.address = backend->address,
		.port = backend->port,
	};
	struct ipv4_revnat_entry val = {
		.address = address,
		.port = port,
		.rev_nat_index = rev_nat_index,
	};
	struct ipv4_revnat_entry *old = bpf_map_lookup_elem(&cilium_lb4_reverse_sk, &key);

	if (old && old->address == address && old->port == port &&
	    old->rev_nat_index == rev_nat_index)
		return 0;
	return bpf_map_update_elem(&cilium_lb4_reverse_sk, &key, &val, BPF_ANY);
}

/* Turns a frontend destination into a backend. 0 when done or when the
 * destination is no service; -EHOSTUNREACH when the service has no backend
 * (the caller fails fast instead of sending into nothing). */
static __always_inline int sock4_xlate_fwd(struct bpf_sock_addr *ctx)
{
	__u32 address = ctx->user_ip4, id = 0;
	__u16 port = (__u16)ctx->user_port;
	struct lb4_backend *backend = NULL;
	struct lb4_frontend fe;
	struct lb4_service *svc;
	__u64 netns;

	if (!sock_proto_balanced(ctx))
		return 0;
	svc = sock4_service(ctx, address, port, &fe);
	if (!svc)
		return 0;
	if (svc->count == 0) {
		sock_metric(REASON_LB_NO_BACKEND_SLOT);
		return -EHOSTUNREACH;
	}
	send_trace_sock_notify4(ctx, XLATE_PRE_DIRECTION_FWD, address, bpf_ntohs(port));
	netns = bpf_get_netns_cookie(ctx);
	if (svc->flags & SVC_FLAG_AFFINITY)
		backend = lb4_affinity_backend(netns, 1, svc, &id);
	if (!backend)
		backend = lb4_backend_of_slot(&fe, (__u16)(bpf_get_prandom_u32() % svc->count) + 1,
					      &id);
	if (!backend) {
		sock_metric(REASON_LB_NO_BACKEND);
		return -EHOSTUNREACH;
	}
	if (svc->flags & SVC_FLAG_AFFINITY)
		lb4_affinity_update(netns, 1, svc, id);
	if (sock4_remember(ctx, backend, address, port, svc->rev_nat_index) < 0) {
		sock_metric(REASON_LB_REVNAT_UPDATE);
		return -ENOMEM;
	}
	ctx->user_ip4 = backend->address;
	ctx->user_port = backend->port;
	send_trace_sock_notify4(ctx, XLATE_POST_DIRECTION_FWD, backend->address,
				bpf_ntohs(backend->port));
	return 0;
}

/* Shows the frontend a socket was balanced from instead of its backend,
 * unless that service is gone or was rebuilt since (stale entry). Traced
 * only for sockets that were balanced (Cilium traces every call). */
static __always_inline void sock4_xlate_rev(struct bpf_sock_addr *ctx)
{
	struct ipv4_revnat_tuple key = {
		.cookie = bpf_get_socket_cookie(ctx),
		.address = ctx->user_ip4,
		.port = (__u16)ctx->user_port,
	};
	struct ipv4_revnat_entry *val;
	struct lb4_frontend fe;
	struct lb4_service *svc;

	val = bpf_map_lookup_elem(&cilium_lb4_reverse_sk, &key);
	if (!val)
		return;
	svc = sock4_service(ctx, val->address, val->port, &fe);
	if (!svc || svc->rev_nat_index != val->rev_nat_index) {
		bpf_map_delete_elem(&cilium_lb4_reverse_sk, &key);
		sock_metric(REASON_LB_REVNAT_STALE);
		return;
	}
	send_trace_sock_notify4(ctx, XLATE_PRE_DIRECTION_REV, ctx->user_ip4,
				bpf_ntohs((__u16)ctx->user_port));
	ctx->user_ip4 = val->address;
	ctx->user_port = val->port;
	send_trace_sock_notify4(ctx, XLATE_POST_DIRECTION_REV, val->address, bpf_ntohs(val->port));
}

static __always_inline int sock4_verdict(int err)
{
	if (err == -EHOSTUNREACH || err == -ENOMEM) {
		bpf_set_retval(err);
		return SYS_REJECT;
	}
	return SYS_PROCEED;
}

SEC("cgroup/connect4")
int cil_sock4_connect(struct bpf_sock_addr *ctx)
{
	return sock4_verdict(sock4_xlate_fwd(ctx));
}

SEC("cgroup/sendmsg4")
int cil_sock4_sendmsg(struct bpf_sock_addr *ctx)
{
	return sock4_verdict(sock4_xlate_fwd(ctx));
}

SEC("cgroup/recvmsg4")
int cil_sock4_recvmsg(struct bpf_sock_addr *ctx)
{
	sock4_xlate_rev(ctx);
	return SYS_PROCEED;
}

SEC("cgroup/getpeername4")
int cil_sock4_getpeername(struct bpf_sock_addr *ctx)
{
	sock4_xlate_rev(ctx);
	return SYS_PROCEED;
}

char __license[] SEC("license") = "Dual BSD/GPL";
