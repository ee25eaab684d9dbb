/* SPDX-License-Identifier: Apache-2.0 */
/* Writing a notification (drop, trace) with the packet's first bytes into
 * cilium_events. */
#ifndef __LIB_NOTIFY_H_
#define __LIB_NOTIFY_H_

#include "maps.h"
#include "runtime_config.h"
#include "ratelimit.h"

/* The fields every capture-style record starts with: the common header and
 * the capture lengths (designated initializers for any record type). */
#define NOTIFY_CAPTURE_HDR(ctx, msg_type, msg_subtype, msg_source, cap_len)	\
	.hdr = {								\
		.type = (msg_type),						\
		.subtype = (msg_subtype),					\
		.source = (msg_source),						\
		.hash = bpf_get_hash_recalc(ctx),				\
	},									\
	.len_orig = (ctx)->len,							\
	.len_cap = (__u16)(cap_len),						\
	.version = NOTIFY_CAPTURE_VER

/* How much of the packet a notification carries. */
static __always_inline __u32 notify_cap_len(const struct __sk_buff *ctx)
{
	return ctx->len < TRACE_PAYLOAD_LEN ? ctx->len : TRACE_PAYLOAD_LEN;
}

/* Without a reader on this CPU the output fails; callers count what they
 * report by other means, so the result is deliberately ignored. A type
 * turned off, or an event over the rate limit, is not written at all. */
static __always_inline void notify_output(struct __sk_buff *ctx, const void *msg, __u32 size,
					  __u32 cap_len)
{
	__u8 type = ((const struct notify_common_hdr *)msg)->type;

	if (runtime_config(RUNTIME_CONFIG_EVENTS_DISABLED) & (1ULL << (type & 63)))
		return;
	if (!ratelimit_take(RATELIMIT_USAGE_EVENTS_MAP, 0,
			    runtime_config(RUNTIME_CONFIG_EVENTS_RATE_LIMIT),
			    runtime_config(RUNTIME_CONFIG_EVENTS_BURST_LIMIT)))
		return;
	bpf_perf_event_output(ctx, &cilium_events, ((__u64)cap_len << 32) | BPF_F_CURRENT_CPU,
			      (void *)msg, size);
}

#endif /* __LIB_NOTIFY_H_ */
