/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Programs on the host side of pod veths. One object serves every endpoint:
 * per-endpoint facts come from maps, never from per-pod compiled constants.
 */
#define SOURCE_FILE SOURCE_FILE_BPF_LXC

#include "lib/common.h"
#include "lib/maps.h"
#include "lib/conntrack_map.h"
#include "lib/metrics.h"
#include "lib/drop.h"
#include "lib/eth.h"
#include "lib/ipv4.h"

/* Packets leaving the pod (tc ingress of the host-side veth). */
__section_entry
int cil_from_container(struct __sk_buff *ctx)
{
	__u16 proto = 0;
	int ret;

	ret = validate_ethertype(ctx, &proto);
	if (IS_ERR(ret))
		return send_drop_notify(ctx, IDENTITY_UNKNOWN, IDENTITY_UNKNOWN, 0,
					ret, METRIC_EGRESS, 0);

	switch (proto) {
	case ETH_P_IP:
		if (!ipv4_hdr(ctx))
			return send_drop_notify(ctx, IDENTITY_UNKNOWN,
						IDENTITY_UNKNOWN, 0,
						-DROP_INVALID, METRIC_EGRESS, 0);
		update_metrics(ctx->len, METRIC_EGRESS, REASON_FORWARDED, 0, 0);
		return CTX_ACT_OK;
	case ETH_P_ARP:
		return CTX_ACT_OK;
	default:
		return send_drop_notify(ctx, IDENTITY_UNKNOWN, IDENTITY_UNKNOWN, 0,
					-DROP_UNKNOWN_L3, METRIC_EGRESS, 0);
	}
}

char __license[] SEC("license") = "Dual BSD/GPL";
