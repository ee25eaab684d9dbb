/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Token buckets in cilium_rs_ratelimit (Cilium 1.17's ratelimit.h): a usage
 * may spend `rate` tokens a second and save up to `burst`; what it cannot
 * pay for is refused and counted in cilium_rs_ratelimit_metrics.
 */
#ifndef __LIB_RATELIMIT_H_
#define __LIB_RATELIMIT_H_

#include "maps.h"

#define NSEC_PER_SEC	1000000000ULL

static __always_inline void ratelimit_count_refused(__u32 usage)
{
	struct rs_ratelimit_metrics_key key = { .usage = usage };
	struct rs_ratelimit_metrics_value *v, one = { .dropped = 1 };

	v = bpf_map_lookup_elem(&cilium_rs_ratelimit_metrics, &key);
	if (v)
		__sync_fetch_and_add(&v->dropped, 1);
	else
		bpf_map_update_elem(&cilium_rs_ratelimit_metrics, &key, &one, BPF_NOEXIST);
}

/* May `usage` spend a token now? rate 0 means unlimited. The bucket is
 * shared by all CPUs without a lock: a race lets an extra event through,
 * never refuses one wrongly. */
static __always_inline int ratelimit_take(__u32 usage, __u32 key_id, __u64 rate, __u64 burst)
{
	struct rs_ratelimit_key key = { .usage = usage, .key = key_id };
	struct rs_ratelimit_value *v, fresh;
	__u64 now, elapsed, earned;

	if (!rate)
		return 1;
	if (!burst)
		burst = rate;
	now = bpf_ktime_get_ns();
	v = bpf_map_lookup_elem(&cilium_rs_ratelimit, &key);
	if (!v) {
		fresh.last_topup = now;
		fresh.tokens = burst - 1;
		bpf_map_update_elem(&cilium_rs_ratelimit, &key, &fresh, BPF_ANY);
		return 1;
	}
	elapsed = now - v->last_topup;
	if (elapsed >= NSEC_PER_SEC) {
		v->tokens = burst;
		v->last_topup = now;
	} else {
		/* elapsed < 2^30 and rate < 2^32: no overflow */
		earned = elapsed * rate / NSEC_PER_SEC;
		if (earned) {
			v->tokens = v->tokens + earned > burst ? burst : v->tokens + earned;
			v->last_topup = now;
		}
	}
	if (!v->tokens) {
		ratelimit_count_refused(usage);
		return 0;
	}
	v->tokens--;
	return 1;
}

#endif /* __LIB_RATELIMIT_H_ */
