/* SPDX-License-Identifier: Apache-2.0 */
/* Writing a notification (drop, trace) with the packet's first bytes into
 * cilium_events. */
#ifndef __LIB_NOTIFY_H_
#define __LIB_NOTIFY_H_

#include "maps.h"

/* How much of the packet a notification carries. */
static __always_inline __u32 notify_cap_len(const struct __sk_buff *ctx)
{
	return ctx->len < TRACE_PAYLOAD_LEN ? ctx->len : TRACE_PAYLOAD_LEN;
}

/* Without a reader on this CPU the output fails; callers count what they
 * report by other means, so the result is deliberately ignored. */
static __always_inline void notify_output(struct __sk_buff *ctx, const void *msg, __u32 size,
					  __u32 cap_len)
{
	bpf_perf_event_output(ctx, &cilium_events, ((__u64)cap_len << 32) | BPF_F_CURRENT_CPU,
			      (void *)msg, size);
}

#endif /* __LIB_NOTIFY_H_ */
