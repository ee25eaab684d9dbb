/* SPDX-License-Identifier: Apache-2.0 */
/* Types, helpers and return codes every program needs. */
#ifndef __LIB_COMMON_H_
#define __LIB_COMMON_H_

#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "abi.h"

#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif

/* aya recognises tc programs by the "classifier" section; Cilium uses "tc".
 * Programs are found by symbol name either way. */
#define __section_entry SEC("classifier")

#define CTX_ACT_OK	TC_ACT_OK
#define CTX_ACT_DROP	TC_ACT_SHOT

/* Drop reasons travel as negative return codes inside the datapath. */
#define IS_ERR(x)	((x) < 0)

/* A checksum from bpf_csum_diff's 32-bit sum, folded and complemented,
 * ready to store as it lies in memory. */
static __always_inline __u16 csum_fold32(__s64 sum)
{
	__u32 c = (__u32)sum;

	c = (c & 0xffff) + (c >> 16);
	c = (c & 0xffff) + (c >> 16);
	return (__u16)~c;
}

#endif /* __LIB_COMMON_H_ */
