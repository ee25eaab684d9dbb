/* SPDX-License-Identifier: Apache-2.0 */
/* Per-CPU packet and byte counters keyed by reason and direction. */
#ifndef __LIB_METRICS_H_
#define __LIB_METRICS_H_

#include "maps.h"

static __always_inline void update_metrics(__u64 bytes, __u8 dir, __u8 reason,
					   __u16 line, __u8 file)
{
	struct metrics_key key = {
		.reason = reason,
		.dir = dir & 0x3,
		.line = line,
		.file = file,
	};
	struct metrics_value *entry;

	entry = bpf_map_lookup_elem(&cilium_metrics, &key);
	if (entry) {
		entry->count += 1;
		entry->bytes += bytes;
	} else {
		struct metrics_value fresh = { .count = 1, .bytes = bytes };

		bpf_map_update_elem(&cilium_metrics, &key, &fresh, BPF_ANY);
	}
}

#endif /* __LIB_METRICS_H_ */
