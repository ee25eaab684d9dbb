/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The ICMPv4 header and the types the datapath tells apart. Spelled here,
 * not taken from <linux/icmp.h>: that header pulls <linux/if.h> and with it
 * glibc's <sys/socket.h>, which for -target bpf asks for the i386 libc's
 * gnu/stubs-32.h. The BPF objects must build from linux-libc-dev alone.
 */
#ifndef __LIB_ICMP_H_
#define __LIB_ICMP_H_

#include <linux/types.h>

#define ICMP_ECHOREPLY		0
#define ICMP_DEST_UNREACH	3
#define ICMP_ECHO		8
#define ICMP_TIME_EXCEEDED	11
#define ICMP_PARAMETERPROB	12

struct icmphdr {
	__u8 type;
	__u8 code;
	__sum16 checksum;
	union {
		struct {
			__be16 id;
			__be16 sequence;
		} echo;
		__be32 gateway;
		struct {
			__be16 __unused;
			__be16 mtu;
		} frag;
		__u8 reserved[4];
	} un;
};

#endif /* __LIB_ICMP_H_ */
