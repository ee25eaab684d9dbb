/* SPDX-License-Identifier: Apache-2.0 */
/* The one way a packet is dropped: count it, report it, return TC_ACT_SHOT. */
#ifndef __LIB_DROP_H_
#define __LIB_DROP_H_

#include "maps.h"
#include "metrics.h"
#include "notify.h"

/* Each object defines SOURCE_FILE before including this header. */
#ifndef SOURCE_FILE
#error "SOURCE_FILE must name the including object's file id"
#endif

static __always_inline int __send_drop_notify(struct __sk_buff *ctx, __u32 src,
					      __u32 dst, __u32 dst_id,
					      int reason, __u8 dir,
					      __u16 line, __u16 source)
{
	__u8 code = (__u8)(-reason);
	__u32 cap_len = notify_cap_len(ctx);
	struct drop_notify msg = {
		NOTIFY_CAPTURE_HDR(ctx, CILIUM_NOTIFY_DROP, code, source, cap_len),
		.src_label = src,
		.dst_label = dst,
		.dst_id = dst_id,
		.line = line,
		.file = SOURCE_FILE,
		.ifindex = ctx->ingress_ifindex,
	};

	update_metrics(ctx->len, dir, code, line, SOURCE_FILE);
	notify_output(ctx, &msg, sizeof(msg), cap_len);
	return CTX_ACT_DROP;
}

/* reason is a negative DROP_* code */
#define send_drop_notify(ctx, src, dst, dst_id, reason, dir, source) \
	__send_drop_notify(ctx, src, dst, dst_id, reason, dir, __LINE__, source)

#endif /* __LIB_DROP_H_ */
