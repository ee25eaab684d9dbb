/* SPDX-License-Identifier: Apache-2.0 */
/* Facts the agent learns at run time (one object serves every node, so they
 * cannot be compiled in). */
#ifndef __LIB_RUNTIME_CONFIG_H_
#define __LIB_RUNTIME_CONFIG_H_

#include "maps.h"

static __always_inline __u64 runtime_config(__u32 index)
{
	__u64 *value = bpf_map_lookup_elem(&cilium_runtime_config, &index);

	return value ? *value : 0;
}

/* An IPv6 address the agent stores as two values (its bytes 0-7 and 8-15
 * as they lie in memory); false while both are 0 (not set). */
static __always_inline int runtime_config_ipv6(__u32 hi, __u32 lo, union v6addr *out)
{
	out->d[0] = runtime_config(hi);
	out->d[1] = runtime_config(lo);
	return out->d[0] || out->d[1];
}

#endif /* __LIB_RUNTIME_CONFIG_H_ */
