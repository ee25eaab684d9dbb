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

#endif /* __LIB_RUNTIME_CONFIG_H_ */
