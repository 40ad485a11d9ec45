// SPDX-License-Identifier: MIT OR GPL-2.0
/*
 * ustack's XDP program for libxdp's multi-program dispatcher
 * (`[portN] xdp_program=libxdp`; crates/link/src/af_xdp/dispatched.rs loads
 * it).  It decides per frame who serves it:
 *
 * - frames for ustack's addresses (the `ustack_addrs4`/`ustack_addrs6` maps
 *   ustack fills and keeps current), ARP, neighbour solicitations and
 *   advertisements whose target is one of them, IPv4 broadcast and
 *   multicast, and 802.1Q/802.1ad tagged frames (ustack's VLANs) go to the
 *   AF_XDP socket of the frame's queue; other IPv6 multicast (router
 *   advertisements, MLD, the kernel's own solicitations) is the kernel's;
 * - of those, TCP and UDP to the `[kni]` port lists (`ustack_kni`: method
 *   accept sends the listed ports to the kernel, reject the unlisted ones)
 *   go to the kernel; so do the later fragments of a datagram whose first
 *   fragment went there (`ustack_kernel_frags`, below: the ports are in the
 *   first fragment only);
 * - everything else (the kernel's own addresses, other protocols) goes to
 *   the kernel: XDP_PASS, which the dispatcher hands on to the programs
 *   after this one (the chain-call metadata below).
 *
 * Two entry points share that decision: ustack_xsk, for libxdp (in its
 * dispatcher, or alone), whose XDP_PASS goes to the kernel or down the
 * dispatcher's chain; and ustack_xsk_chain, put in front of a program the
 * interface already ran alone where the dispatcher cannot run
 * (crates/link/src/af_xdp/chained.rs), which tail-calls that program with
 * every frame ustack does not take.
 *
 * Nothing is copied: the verdict is a redirect or a pass of the frame as it
 * lies.  Every read is bounds-checked against data_end (the verifier
 * insists); a frame too short to classify goes to the kernel.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include <xdp/xdp_helpers.h>

#define MAX_QUEUES 256
#define IPPROTO_ICMPV6 58
#define MAX_ADDRS 1024

/* How the `[kni]` port lists send ustack's own traffic to the kernel. */
#define KNI_OFF 0      /* no exception path: all of it is ustack's */
#define KNI_ACCEPT 1   /* listed ports to the kernel */
#define KNI_REJECT 2   /* unlisted ports (and other protocols) to the kernel */
#define KNI_ALL 3      /* kni_action=alltokni */

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, MAX_QUEUES);
	__type(key, __u32);
	__type(value, __u32);
} ustack_xsks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_ADDRS);
	__type(key, __u32); /* network order */
	__type(value, __u8);
} ustack_addrs4 SEC(".maps");

struct in6_key {
	__u8 b[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_ADDRS);
	__type(key, struct in6_key);
	__type(value, __u8);
} ustack_addrs6 SEC(".maps");

/*
 * Entry 0: the KNI_* mode.  Entries 1..1024: the TCP port bitmap (port p at
 * entry 1 + p / 64, bit p % 64); entries 1025..2048 the UDP one.
 */
#define KNI_TCP_BASE 1
#define KNI_UDP_BASE 1025
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2049);
	__type(key, __u32);
	__type(value, __u64);
} ustack_kni SEC(".maps");

/*
 * The program that ran on the interface before ustack's, when ustack chains
 * to it rather than joining libxdp's dispatcher (the kernel refuses the
 * dispatcher's freplace programs, and another program holds the interface
 * alone): ustack_xsk_chain tail-calls it with every frame ustack does not
 * take. Empty otherwise (the tail call falls through).
 */
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} ustack_next SEC(".maps");

/*
 * The process that loaded this program: its pid and its start time (field
 * 22 of /proc/PID/stat, clock ticks after boot), written by ustack once the
 * program is loaded. The program never reads it; a later ustack (or `ustack
 * xdp detach`) finding the program still on the interface reads it to tell
 * a live owner from a crashed one (crates/link/src/af_xdp/stale.rs).
 */
struct ustack_owner_rec {
	__u32 pid;
	__u32 pad;
	__u64 start_ticks;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ustack_owner_rec);
} ustack_owner SEC(".maps");

/*
 * Datagrams whose first fragment went to the kernel (a `[kni]` port): the
 * later fragments carry no ports, so they follow by (family, protocol,
 * source, destination, identification). A first fragment puts its datagram
 * here; the last fragment takes it out; LRU evicts what was never
 * finished. The guarantee: fragments arriving after their first fragment
 * follow it; one arriving before it goes to ustack (which drops it at
 * reassembly time-out), as the sender's order is the usual one (Linux sends
 * a datagram's fragments in order).
 */
struct frag_key {
	__u8 src[16];
	__u8 dst[16];
	__u32 id;
	__u8 family; /* 4 or 6 */
	__u8 proto;
	__u16 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct frag_key);
	__type(value, __u8);
} ustack_kernel_frags SEC(".maps");

/* Runs after programs of the default priority (50): a firewall or load
 * balancer sees frames first; what ustack passes goes on down the chain. */
struct {
	__uint(priority, 60);
	__uint(XDP_PASS, 1);
} XDP_RUN_CONFIG(ustack_xsk);

static __always_inline __u64 kni_word(__u32 key)
{
	__u64 *w = bpf_map_lookup_elem(&ustack_kni, &key);
	return w ? *w : 0;
}

/* Whether a frame for one of ustack's addresses goes to the kernel. */
static __always_inline int kni_to_kernel(__u8 proto, __u16 dport_host, int has_port)
{
	__u64 mode = kni_word(0);
	int listed = 0;

	if (mode == KNI_OFF)
		return 0;
	if (mode == KNI_ALL)
		return 1;
	if (has_port && proto == IPPROTO_TCP)
		listed = (kni_word(KNI_TCP_BASE + dport_host / 64) >> (dport_host % 64)) & 1;
	else if (has_port && proto == IPPROTO_UDP)
		listed = (kni_word(KNI_UDP_BASE + dport_host / 64) >> (dport_host % 64)) & 1;
	return mode == KNI_ACCEPT ? listed : !listed;
}

/* Verdicts of the classifiers below. */
#define KERNEL 0
#define USTACK 1

/* The destination port (host order) of the TCP or UDP header at `l4`. */
static __always_inline int dest_port(void *l4, void *end, __u16 *port)
{
	__u16 *p = (__u16 *)l4 + 1;

	if ((void *)(p + 1) > end)
		return 0;
	*port = bpf_ntohs(*p);
	return 1;
}

/*
 * A fragment's verdict: the first (`first`) decides from its ports and
 * records a kernel verdict for the later ones; a later one follows the
 * record; the last one (`last`) clears it.
 */
static __always_inline int fragment(struct frag_key *key, int first, int last, int first_verdict)
{
	__u8 one = 1;

	if (first) {
		if (first_verdict == KERNEL)
			bpf_map_update_elem(&ustack_kernel_frags, key, &one, BPF_ANY);
		return first_verdict;
	}
	if (!bpf_map_lookup_elem(&ustack_kernel_frags, key))
		return USTACK;
	if (last)
		bpf_map_delete_elem(&ustack_kernel_frags, key);
	return KERNEL;
}

static __always_inline int ipv4(void *l3, void *end)
{
	__u8 *h = l3;
	__u32 dst;
	__u16 frag, port = 0, offset;
	int has_port = 0, more, verdict;

	if ((void *)(h + 20) > end)
		return KERNEL;
	__builtin_memcpy(&dst, h + 16, 4);
	/* Broadcast and multicast: ustack's, as with the program that takes
	 * everything (the kernel sees none of them). */
	if (dst == 0xffffffff || (bpf_ntohl(dst) >> 28) == 0xe)
		return USTACK;
	if (!bpf_map_lookup_elem(&ustack_addrs4, &dst)) {
		/* A subnet broadcast ustack registered is in the map too. */
		return KERNEL;
	}
	__builtin_memcpy(&frag, h + 6, 2);
	offset = bpf_ntohs(frag) & 0x1fff;
	more = (bpf_ntohs(frag) & 0x2000) != 0;
	/* The first (or only) fragment carries the ports. */
	if (offset == 0) {
		__u32 ihl = (h[0] & 0xf) * 4;

		if (ihl >= 20 && ihl <= 60 && (h[9] == IPPROTO_TCP || h[9] == IPPROTO_UDP))
			has_port = dest_port(h + ihl, end, &port);
	}
	verdict = (offset == 0 && kni_to_kernel(h[9], port, has_port)) ? KERNEL : USTACK;
	if (offset != 0 || more) {
		struct frag_key key = {};

		__builtin_memcpy(key.src, h + 12, 4);
		__builtin_memcpy(key.dst, h + 16, 4);
		key.id = ((__u32)h[4] << 8) | h[5];
		key.family = 4;
		key.proto = h[9];
		return fragment(&key, offset == 0, !more, verdict);
	}
	return verdict;
}

#define IPPROTO_FRAGMENT6 44

/* Whether ICMPv6 message `l4` (NS 135 or NA 136, no extension header) is
 * about one of ustack's addresses (its target, at byte 8). */
static __always_inline int nd_for_ustack(__u8 *l4, void *end)
{
	struct in6_key target;

	if ((void *)(l4 + 24) > end || (l4[0] != 135 && l4[0] != 136))
		return 0;
	__builtin_memcpy(&target, l4 + 8, 16);
	return bpf_map_lookup_elem(&ustack_addrs6, &target) != 0;
}

static __always_inline int ipv6(void *l3, void *end)
{
	__u8 *h = l3;
	struct in6_key dst;
	__u16 port = 0;
	__u8 proto;
	int has_port = 0;

	if ((void *)(h + 40) > end)
		return KERNEL;
	__builtin_memcpy(&dst, h + 24, 16);
	if (dst.b[0] == 0xff) {
		/* Multicast: neighbour discovery about ustack's addresses (a
		 * solicitation for them, an advertisement defending one under
		 * duplicate address detection) is ustack's; the rest (router
		 * advertisements, MLD, solicitations for the kernel's
		 * addresses) is the kernel's, which owns the interface. */
		if (h[6] == IPPROTO_ICMPV6 && nd_for_ustack(h + 40, end))
			return USTACK;
		return KERNEL;
	}
	if (!bpf_map_lookup_elem(&ustack_addrs6, &dst))
		return KERNEL;
	proto = h[6];
	if (proto == IPPROTO_FRAGMENT6) {
		/* A fragment header right after the fixed one (where Linux and
		 * the usual senders put it): next header, reserved, offset and
		 * flags, identification. */
		__u8 *f = h + 40;
		struct frag_key key = {};
		__u16 off_flags;
		int first, more, verdict = USTACK;

		if ((void *)(f + 8) > end)
			return USTACK;
		__builtin_memcpy(&off_flags, f + 2, 2);
		first = (bpf_ntohs(off_flags) & 0xfff8) == 0;
		more = bpf_ntohs(off_flags) & 1;
		proto = f[0];
		if (first) {
			if (proto == IPPROTO_TCP || proto == IPPROTO_UDP)
				has_port = dest_port(f + 8, end, &port);
			if (kni_to_kernel(proto, port, has_port))
				verdict = KERNEL;
		}
		__builtin_memcpy(key.src, h + 8, 16);
		__builtin_memcpy(key.dst, h + 24, 16);
		__builtin_memcpy(&key.id, f + 4, 4);
		key.family = 6;
		/* Only the first fragment names the protocol: the key leaves
		 * it out. */
		return fragment(&key, first, !more, verdict);
	}
	if (proto == IPPROTO_TCP || proto == IPPROTO_UDP)
		has_port = dest_port(h + 40, end, &port);
	if (kni_to_kernel(proto, port, has_port))
		return KERNEL;
	return USTACK;
}

static __always_inline int arp(void *l3, void *end)
{
	__u8 *a = l3;
	__u32 target;

	/* Ethernet/IPv4 ARP: the target protocol address at byte 24. */
	if ((void *)(a + 28) > end)
		return KERNEL;
	__builtin_memcpy(&target, a + 24, 4);
	if (bpf_map_lookup_elem(&ustack_addrs4, &target))
		return USTACK;
	return KERNEL;
}

/* Who serves the frame at [data, end). */
static __always_inline int classify(void *data, void *end)
{
	struct ethhdr *eth = data;
	__u16 type;

	if ((void *)(eth + 1) > end)
		return KERNEL;
	type = bpf_ntohs(eth->h_proto);
	if (type == ETH_P_8021Q || type == ETH_P_8021AD)
		return USTACK;
	if (type == ETH_P_IP)
		return ipv4(eth + 1, end);
	if (type == ETH_P_IPV6)
		return ipv6(eth + 1, end);
	if (type == ETH_P_ARP)
		return arp(eth + 1, end);
	return KERNEL;
}

/* The socket of the frame's queue; XDP_PASS when that queue has none. */
static __always_inline int to_socket(struct xdp_md *ctx)
{
	return bpf_redirect_map(&ustack_xsks, ctx->rx_queue_index, XDP_PASS);
}

/* In libxdp's dispatcher, or alone: XDP_PASS for the kernel (the
 * dispatcher then runs the next program). */
SEC("xdp")
int ustack_xsk(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;

	if (classify(data, end) == USTACK)
		return to_socket(ctx);
	return XDP_PASS;
}

/* Chained in front of the interface's previous program: what ustack does
 * not take goes to that program, which decides. */
SEC("xdp")
int ustack_xsk_chain(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;

	if (classify(data, end) == USTACK) {
		int verdict = to_socket(ctx);

		if (verdict != XDP_PASS)
			return verdict;
	}
	bpf_tail_call(ctx, &ustack_next, 0);
	return XDP_PASS;
}

char _license[] SEC("license") = "Dual MIT/GPL";
