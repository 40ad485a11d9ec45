// SPDX-License-Identifier: MIT OR GPL-2.0
/* Another XDP program for cases_xdp_shared.py: drops ICMP echo requests to
 * DROP_ADDR (an IPv4 address in network byte order, given with -D) and
 * passes every other frame, so a test can see that it still runs beside
 * ustack's program. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

SEC("xdp")
int no_ping(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	__u8 *ip = (__u8 *)(eth + 1);
	__u32 dst;

	if ((void *)(ip + 21) > end || eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	__builtin_memcpy(&dst, ip + 16, 4);
	if (ip[9] == IPPROTO_ICMP && dst == DROP_ADDR && (ip[0] & 0xf) == 5 && ip[20] == 8)
		return XDP_DROP;
	return XDP_PASS;
}

char _license[] SEC("license") = "Dual MIT/GPL";
