/* SPDX-License-Identifier: Apache-2.0 */
/* The IPv6 header's definitions and the node's IPv6 router address. */
#ifndef __LIB_IPV6_H_
#define __LIB_IPV6_H_

#include <linux/ipv6.h>
#include "runtime_config.h"

#define NEXTHDR_ICMP	58

/* The router address (1.16's ROUTER_IP for IPv6) from the runtime config,
 * its two halves as the agent stored them; false while IPv6 is off. */
static __always_inline int ipv6_router(union v6addr *router)
{
	router->d[0] = runtime_config(RUNTIME_CONFIG_ROUTER_IPV6_HI);
	router->d[1] = runtime_config(RUNTIME_CONFIG_ROUTER_IPV6_LO);
	return router->d[0] || router->d[1];
}

static __always_inline int ipv6_addr_equals(const union v6addr *a, const union v6addr *b)
{
	return a->d[0] == b->d[0] && a->d[1] == b->d[1];
}

#endif /* __LIB_IPV6_H_ */
