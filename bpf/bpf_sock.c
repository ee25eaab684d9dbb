/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Socket-level load balancing (Cilium's bpf_sock.c): a connect() or an
 * unconnected sendmsg() to a service frontend is given a backend address
 * before any packet exists, so the flow never needs per-packet DNAT or a
 * SERVICE conntrack entry. The frontend is remembered per socket in
 * cilium_lb4_reverse_sk (cilium_lb6_reverse_sk), and getpeername()/recvmsg()
 * show it again. The dual-stack build adds the IPv6 hooks.
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
#include "lib/lb6.h"
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

/* Turns a frontend destination (address, port) into a backend, in place.
 * 1 when translated, 0 when the destination is no service; -EHOSTUNREACH
 * when the service has no backend (the caller fails fast instead of
 * sending into nothing). ctx is the socket's, for its protocol, cookies
 * and netns; the address may be one it holds IPv4-mapped. */
static __always_inline int sock4_xlate_fwd(struct bpf_sock_addr *ctx, __u32 *address,
					   __u16 *port)
{
	struct lb4_backend *backend = NULL;
	struct lb4_frontend fe;
	struct lb4_service *svc;
	__u32 id = 0;
	__u64 netns;

	if (!sock_proto_balanced(ctx))
		return 0;
	svc = sock4_service(ctx, *address, *port, &fe);
	if (!svc)
		return 0;
	if (svc->count == 0) {
		sock_metric(REASON_LB_NO_BACKEND_SLOT);
		return -EHOSTUNREACH;
	}
	send_trace_sock_notify4(ctx, XLATE_PRE_DIRECTION_FWD, *address, bpf_ntohs(*port));
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
	if (sock4_remember(ctx, backend, *address, *port, svc->rev_nat_index) < 0) {
		sock_metric(REASON_LB_REVNAT_UPDATE);
		return -ENOMEM;
	}
	*address = backend->address;
	*port = backend->port;
	send_trace_sock_notify4(ctx, XLATE_POST_DIRECTION_FWD, backend->address,
				bpf_ntohs(backend->port));
	return 1;
}

/* Shows the frontend a socket was balanced from instead of its backend,
 * in place, unless that service is gone or was rebuilt since (stale
 * entry). 1 when translated. Traced only for sockets that were balanced
 * (Cilium traces every call). */
static __always_inline int sock4_xlate_rev(struct bpf_sock_addr *ctx, __u32 *address,
					   __u16 *port)
{
	struct ipv4_revnat_tuple key = {
		.cookie = bpf_get_socket_cookie(ctx),
		.address = *address,
		.port = *port,
	};
	struct ipv4_revnat_entry *val;
	struct lb4_frontend fe;
	struct lb4_service *svc;

	val = bpf_map_lookup_elem(&cilium_lb4_reverse_sk, &key);
	if (!val)
		return 0;
	svc = sock4_service(ctx, val->address, val->port, &fe);
	if (!svc || svc->rev_nat_index != val->rev_nat_index) {
		bpf_map_delete_elem(&cilium_lb4_reverse_sk, &key);
		sock_metric(REASON_LB_REVNAT_STALE);
		return 0;
	}
	send_trace_sock_notify4(ctx, XLATE_PRE_DIRECTION_REV, *address, bpf_ntohs(*port));
	*address = val->address;
	*port = val->port;
	send_trace_sock_notify4(ctx, XLATE_POST_DIRECTION_REV, val->address, bpf_ntohs(val->port));
	return 1;
}

static __always_inline int sock_verdict(int err)
{
	if (err == -EHOSTUNREACH || err == -ENOMEM) {
		bpf_set_retval(err);
		return SYS_REJECT;
	}
	return SYS_PROCEED;
}

static __always_inline int sock4_fwd(struct bpf_sock_addr *ctx)
{
	__u32 address = ctx->user_ip4;
	__u16 port = (__u16)ctx->user_port;
	int ret = sock4_xlate_fwd(ctx, &address, &port);

	if (ret > 0) {
		ctx->user_ip4 = address;
		ctx->user_port = port;
	}
	return sock_verdict(ret);
}

static __always_inline int sock4_rev(struct bpf_sock_addr *ctx)
{
	__u32 address = ctx->user_ip4;
	__u16 port = (__u16)ctx->user_port;

	if (sock4_xlate_rev(ctx, &address, &port)) {
		ctx->user_ip4 = address;
		ctx->user_port = port;
	}
	return SYS_PROCEED;
}

SEC("cgroup/connect4")
int cil_sock4_connect(struct bpf_sock_addr *ctx)
{
	return sock4_fwd(ctx);
}

SEC("cgroup/sendmsg4")
int cil_sock4_sendmsg(struct bpf_sock_addr *ctx)
{
	return sock4_fwd(ctx);
}

SEC("cgroup/recvmsg4")
int cil_sock4_recvmsg(struct bpf_sock_addr *ctx)
{
	return sock4_rev(ctx);
}

SEC("cgroup/getpeername4")
int cil_sock4_getpeername(struct bpf_sock_addr *ctx)
{
	return sock4_rev(ctx);
}

#ifdef ENABLE_IPV6
/* IPv6 sockets: a frontend in the cilium_lb6 maps, and, as in 1.16, an
 * IPv4-mapped address (::ffff:a.b.c.d, a dual-stack socket reaching an
 * IPv4 service) balanced by the IPv4 maps and kept mapped. */

static __always_inline void sock6_addr(const struct bpf_sock_addr *ctx, union v6addr *addr)
{
	addr->p[0] = ctx->user_ip6[0];
	addr->p[1] = ctx->user_ip6[1];
	addr->p[2] = ctx->user_ip6[2];
	addr->p[3] = ctx->user_ip6[3];
}

static __always_inline void sock6_set_addr(struct bpf_sock_addr *ctx, const union v6addr *addr)
{
	ctx->user_ip6[0] = addr->p[0];
	ctx->user_ip6[1] = addr->p[1];
	ctx->user_ip6[2] = addr->p[2];
	ctx->user_ip6[3] = addr->p[3];
}

static __always_inline int is_v4_in_v6(const union v6addr *addr)
{
	return addr->p[0] == 0 && addr->p[1] == 0 && addr->p[2] == bpf_htonl(0xffff);
}

/* The key has 4 bytes of tail padding, which must be zero to match. */
static __always_inline void sock6_revnat_key(struct bpf_sock_addr *ctx,
					     struct ipv6_revnat_tuple *key,
					     const union v6addr *backend, __u16 port)
{
	__builtin_memset(key, 0, sizeof(*key));
	key->cookie = bpf_get_socket_cookie(ctx);
	key->address = *backend;
	key->port = port;
}

static __always_inline int sock6_remember(struct bpf_sock_addr *ctx,
					  const struct lb6_backend *backend,
					  const union v6addr *address, __u16 port,
					  __u16 rev_nat_index)
{
	struct ipv6_revnat_tuple key;
	struct ipv6_revnat_entry val = {
		.address = *address,
		.port = port,
		.rev_nat_index = rev_nat_index,
	};
	struct ipv6_revnat_entry *old;

	sock6_revnat_key(ctx, &key, &backend->address, backend->port);
	old = bpf_map_lookup_elem(&cilium_lb6_reverse_sk, &key);
	if (old && ipv6_addr_equals(&old->address, address) && old->port == port &&
	    old->rev_nat_index == rev_nat_index)
		return 0;
	return bpf_map_update_elem(&cilium_lb6_reverse_sk, &key, &val, BPF_ANY);
}

/* sock4_xlate_fwd for an IPv6 frontend (ClusterIPs; IPv6 NodePorts and
 * HostPorts are not balanced at the socket yet). */
static __always_inline int sock6_xlate_fwd(struct bpf_sock_addr *ctx, union v6addr *address,
					   __u16 *port)
{
	struct lb6_backend *backend = NULL;
	union v6addr client = {};
	struct lb6_frontend fe;
	struct lb6_service *svc;
	__u32 id = 0;

	if (!sock_proto_balanced(ctx))
		return 0;
	svc = lb6_lookup_service_internal(address, *port, (__u8)ctx->protocol, &fe);
	if (!svc || (svc->flags & SVC_FLAG_HOSTPORT))
		return 0;
	if (svc->count == 0) {
		sock_metric(REASON_LB_NO_BACKEND_SLOT);
		return -EHOSTUNREACH;
	}
	send_trace_sock_notify6(ctx, XLATE_PRE_DIRECTION_FWD, address, bpf_ntohs(*port));
	client.d[0] = bpf_get_netns_cookie(ctx);
	if (svc->flags & SVC_FLAG_AFFINITY)
		backend = lb6_affinity_backend(&client, 1, svc, &id);
	if (!backend)
		backend = lb6_backend_of_slot(&fe, (__u16)(bpf_get_prandom_u32() % svc->count) + 1,
					      &id);
	if (!backend) {
		sock_metric(REASON_LB_NO_BACKEND);
		return -EHOSTUNREACH;
	}
	if (svc->flags & SVC_FLAG_AFFINITY)
		lb6_affinity_update(&client, 1, svc, id);
	if (sock6_remember(ctx, backend, address, *port, svc->rev_nat_index) < 0) {
		sock_metric(REASON_LB_REVNAT_UPDATE);
		return -ENOMEM;
	}
	*address = backend->address;
	*port = backend->port;
	send_trace_sock_notify6(ctx, XLATE_POST_DIRECTION_FWD, address, bpf_ntohs(*port));
	return 1;
}

static __always_inline int sock6_xlate_rev(struct bpf_sock_addr *ctx, union v6addr *address,
					   __u16 *port)
{
	struct ipv6_revnat_tuple key;
	struct ipv6_revnat_entry *val;
	struct lb6_frontend fe;
	struct lb6_service *svc;

	sock6_revnat_key(ctx, &key, address, *port);
	val = bpf_map_lookup_elem(&cilium_lb6_reverse_sk, &key);
	if (!val)
		return 0;
	svc = lb6_lookup_service_internal(&val->address, val->port, (__u8)ctx->protocol, &fe);
	if (!svc || svc->rev_nat_index != val->rev_nat_index) {
		bpf_map_delete_elem(&cilium_lb6_reverse_sk, &key);
		sock_metric(REASON_LB_REVNAT_STALE);
		return 0;
	}
	send_trace_sock_notify6(ctx, XLATE_PRE_DIRECTION_REV, address, bpf_ntohs(*port));
	*address = val->address;
	*port = val->port;
	send_trace_sock_notify6(ctx, XLATE_POST_DIRECTION_REV, address, bpf_ntohs(*port));
	return 1;
}

/* fwd (connect, sendmsg) or rev (recvmsg, getpeername) of an IPv6 socket. */
static __always_inline int sock6_xlate(struct bpf_sock_addr *ctx, int fwd)
{
	__u16 port = (__u16)ctx->user_port;
	union v6addr address;
	int ret;

	sock6_addr(ctx, &address);
	if (is_v4_in_v6(&address)) {
		__u32 v4 = address.p[3];

		ret = fwd ? sock4_xlate_fwd(ctx, &v4, &port) : sock4_xlate_rev(ctx, &v4, &port);
		address.p[3] = v4;
	} else {
		ret = fwd ? sock6_xlate_fwd(ctx, &address, &port) :
			    sock6_xlate_rev(ctx, &address, &port);
	}
	if (ret > 0) {
		sock6_set_addr(ctx, &address);
		ctx->user_port = port;
	}
	return fwd ? sock_verdict(ret) : SYS_PROCEED;
}

SEC("cgroup/connect6")
int cil_sock6_connect(struct bpf_sock_addr *ctx)
{
	return sock6_xlate(ctx, 1);
}

SEC("cgroup/sendmsg6")
int cil_sock6_sendmsg(struct bpf_sock_addr *ctx)
{
	return sock6_xlate(ctx, 1);
}

SEC("cgroup/recvmsg6")
int cil_sock6_recvmsg(struct bpf_sock_addr *ctx)
{
	return sock6_xlate(ctx, 0);
}

SEC("cgroup/getpeername6")
int cil_sock6_getpeername(struct bpf_sock_addr *ctx)
{
	return sock6_xlate(ctx, 0);
}
#endif /* ENABLE_IPV6 */

char __license[] SEC("license") = "Dual BSD/GPL";
