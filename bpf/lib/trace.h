/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Trace notifications (Cilium's trace.h): a forwarded packet reported at
 * its observation point, with the packet's first bytes. From
 * monitor-aggregation medium on, only the packets that open or close a
 * connection are reported; lower levels report every packet (this datapath
 * has no from-* points for them to suppress).
 */
#ifndef __LIB_TRACE_H_
#define __LIB_TRACE_H_

#include "maps.h"
#include "conntrack.h"
#include "runtime_config.h"
#include "notify.h"

/* `source` is the endpoint whose program reports (Cilium's EVENT_SOURCE:
 * one object serves every endpoint here, so the caller names it). */
static __always_inline void send_trace_notify(struct __sk_buff *ctx, __u8 obs_point,
					      __u16 source, __u32 src, __u32 dst, __u16 dst_id,
					      __u32 ifindex, __u8 ct_status, __u8 tcp_flags)
{
	struct trace_notify msg;
	__u32 cap_len;

	/* decided first: a suppressed packet costs no hash or record */
	if (runtime_config(RUNTIME_CONFIG_MONITOR_AGGREGATION) >= MONITOR_AGGREGATION_MEDIUM &&
	    ct_status != CT_NEW && !(tcp_flags & (TCP_FLAG_FIN | TCP_FLAG_RST)))
		return;
	cap_len = notify_cap_len(ctx);
	msg = (struct trace_notify){
		NOTIFY_CAPTURE_HDR(ctx, CILIUM_NOTIFY_TRACE, obs_point, source, cap_len),
		.src_label = src,
		.dst_label = dst,
		.dst_id = dst_id,
		.reason = ct_status,
		.ifindex = ifindex,
	};

	notify_output(ctx, &msg, sizeof(msg), cap_len);
}

#endif /* __LIB_TRACE_H_ */
