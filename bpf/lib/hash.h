/* SPDX-License-Identifier: Apache-2.0 */
/* The flow hash Maglev selects by: the kernel's jhash over the tuple
 * without its destination address (Cilium's hash_from_tuple_v4 and _v6). */
#ifndef __LIB_HASH_H_
#define __LIB_HASH_H_

#include "common.h"

#define JHASH_INITVAL	0xdeadbeef

static __always_inline __u32 rol32(__u32 word, unsigned int shift)
{
	return (word << shift) | (word >> ((-shift) & 31));
}

static __always_inline __u32 jhash_3words(__u32 a, __u32 b, __u32 c, __u32 initval)
{
	initval += JHASH_INITVAL + (3 << 2);
	a += initval;
	b += initval;
	c += initval;
	c ^= b; c -= rol32(b, 14);
	a ^= c; a -= rol32(c, 11);
	b ^= a; b -= rol32(a, 25);
	c ^= b; c -= rol32(b, 16);
	a ^= c; a -= rol32(c, 4);
	b ^= a; b -= rol32(a, 14);
	c ^= b; c -= rol32(b, 24);
	return c;
}

static __always_inline __u32 hash_from_tuple_v4(const struct ipv4_ct_tuple *tuple, __u32 seed)
{
	return jhash_3words(tuple->saddr, ((__u32)tuple->dport << 16) | tuple->sport,
			    tuple->nexthdr, seed);
}

/* The kernel's __jhash_mix and __jhash_final, for IPv6's longer tuple. */
#define JHASH_MIX(a, b, c)						\
	do {								\
		a -= c; a ^= rol32(c, 4); c += b;			\
		b -= a; b ^= rol32(a, 6); a += c;			\
		c -= b; c ^= rol32(b, 8); b += a;			\
		a -= c; a ^= rol32(c, 16); c += b;			\
		b -= a; b ^= rol32(a, 19); a += c;			\
		c -= b; c ^= rol32(b, 4); b += a;			\
	} while (0)

#define JHASH_FINAL(a, b, c)						\
	do {								\
		c ^= b; c -= rol32(b, 14);				\
		a ^= c; a -= rol32(c, 11);				\
		b ^= a; b -= rol32(a, 25);				\
		c ^= b; c -= rol32(b, 16);				\
		a ^= c; a -= rol32(c, 4);				\
		b ^= a; b -= rol32(a, 14);				\
		c ^= b; c -= rol32(b, 24);				\
	} while (0)

/* Cilium's hash_from_tuple_v6: the source address's four words, the
 * ports and the protocol, mixed in two rounds. */
static __always_inline __u32 hash_from_tuple_v6(const struct ipv6_ct_tuple *tuple, __u32 seed)
{
	__u32 a = tuple->saddr.p[0], b = tuple->saddr.p[1], c = tuple->saddr.p[2];

	JHASH_MIX(a, b, c);
	a += tuple->saddr.p[3];
	b += ((__u32)tuple->dport << 16) | tuple->sport;
	c += tuple->nexthdr;
	JHASH_MIX(a, b, c);
	a += seed;
	JHASH_FINAL(a, b, c);
	return c;
}

#endif /* __LIB_HASH_H_ */
