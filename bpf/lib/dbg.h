/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Debug captures (Cilium's dbg.h): a packet at a capture point (Cilium
 * 1.16's DBG_CAPTURE_* numbers; here only the delivery to an endpoint, as
 * 1.16 captures it), with its first bytes, for `cilium monitor --type
 * capture`. Cilium compiles them in with DEBUG; one object serves every
 * node here, so a runtime-config flag turns them on instead, and they cost
 * a map lookup when off.
 */
#ifndef __LIB_DBG_H_
#define __LIB_DBG_H_

#include "runtime_config.h"
#include "notify.h"

static __always_inline void send_debug_capture(struct __sk_buff *ctx, __u8 point, __u16 source,
					       __u32 ifindex)
{
	__u32 cap_len;
	struct debug_capture_msg msg;

	if (!runtime_config(RUNTIME_CONFIG_DEBUG_DATAPATH))
		return;
	cap_len = notify_cap_len(ctx);
	msg = (struct debug_capture_msg){
		NOTIFY_CAPTURE_HDR(ctx, CILIUM_NOTIFY_DBG_CAPTURE, point, source, cap_len),
		.arg1 = ifindex,
	};
	notify_output(ctx, &msg, sizeof(msg), cap_len);
}

#endif /* __LIB_DBG_H_ */
