/* SPDX-License-Identifier: Apache-2.0 */
/* Socket LB's translations as cilium_events records (trace_sock_notify),
 * for Hubble's SOCK flows: the frontend a socket asked for and the backend
 * it got, and the reverse. Off with the other trace events
 * (bpf-events-trace-enabled) and under the same rate limit. */
#ifndef __LIB_TRACE_SOCK_H_
#define __LIB_TRACE_SOCK_H_

#include "maps.h"
#include "runtime_config.h"
#include "ratelimit.h"

static __always_inline __u8 trace_sock_l4(const struct bpf_sock_addr *ctx)
{
	if (ctx->protocol == IPPROTO_TCP)
		return TRACE_SOCK_L4_TCP;
	if (ctx->protocol == IPPROTO_UDP)
		return TRACE_SOCK_L4_UDP;
	return TRACE_SOCK_L4_UNKNOWN;
}

static __always_inline void send_trace_sock_notify(struct bpf_sock_addr *ctx,
						   struct trace_sock_notify *msg)
{
	__u64 disabled = runtime_config(RUNTIME_CONFIG_EVENTS_DISABLED);

	if (disabled & ((1ULL << CILIUM_NOTIFY_TRACE_SOCK) | (1ULL << CILIUM_NOTIFY_TRACE)))
		return;
	if (!ratelimit_take(RATELIMIT_USAGE_EVENTS_MAP, 0,
			    runtime_config(RUNTIME_CONFIG_EVENTS_RATE_LIMIT),
			    runtime_config(RUNTIME_CONFIG_EVENTS_BURST_LIMIT)))
		return;
	msg->type = CILIUM_NOTIFY_TRACE_SOCK;
	msg->l4_proto = trace_sock_l4(ctx);
	msg->sock_cookie = bpf_get_socket_cookie(ctx);
	msg->cgroup_id = bpf_get_current_cgroup_id();
	bpf_perf_event_output(ctx, &cilium_events, BPF_F_CURRENT_CPU, msg, sizeof(*msg));
}

/* dst_ip in network order, dst_port in host order (as Cilium writes it). */
static __always_inline void send_trace_sock_notify4(struct bpf_sock_addr *ctx, __u8 point,
						    __u32 dst_ip, __u16 dst_port)
{
	struct trace_sock_notify msg = {
		.xlate_point = point,
		.dst_ip = { dst_ip, 0, 0, 0 },
		.dst_port = dst_port,
	};

	send_trace_sock_notify(ctx, &msg);
}

static __always_inline void send_trace_sock_notify6(struct bpf_sock_addr *ctx, __u8 point,
						    const union v6addr *dst_ip, __u16 dst_port)
{
	struct trace_sock_notify msg = {
		.xlate_point = point,
		.dst_port = dst_port,
		.flags = TRACE_SOCK_FLAG_IPV6,
	};

	__builtin_memcpy(msg.dst_ip, dst_ip, sizeof(msg.dst_ip));
	send_trace_sock_notify(ctx, &msg);
}

#endif /* __LIB_TRACE_SOCK_H_ */
