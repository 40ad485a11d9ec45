/*
 * A TPACKET_V2 RX ring laid out as ustack's link lays it (PACKET_VNET_HDR,
 * slots of SLOT_BYTES, as many as fit whole in blocks of BLOCK_BYTES),
 * read by a busy-polling reader that gives each slot back at once, for
 * SECONDS.  Run by scripts/rx-frame-cost.sh, which measures the kernel's
 * receive softirq time per frame on the reader's core while a sender
 * on the other core fills the ring.
 *
 *   rx-frame-cost IFACE SLOT_BYTES SLOTS SECONDS [BLOCK_BYTES]
 *
 * Prints the frames read and the ring's drops (a reader that fell behind:
 * the figure is then not comparable).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>

int main(int argc, char **argv)
{
	if (argc < 5) {
		fprintf(stderr, "usage: %s IFACE SLOT_BYTES SLOTS SECONDS [BLOCK_BYTES]\n", argv[0]);
		return 2;
	}
	const char *ifname = argv[1];
	int slot = atoi(argv[2]), slots = atoi(argv[3]), secs = atoi(argv[4]);
	int block = argc > 5 ? atoi(argv[5]) : 65536;
	if (slot < 2048 || slot % 16 || slots < 1 || secs < 1 || block % 4096) {
		fprintf(stderr, "SLOT_BYTES >= 2048 and a multiple of 16, BLOCK_BYTES a multiple of 4096\n");
		return 2;
	}
	if (block < slot)
		block = (slot + 4095) / 4096 * 4096;
	int per_block = block / slot, blocks = (slots + per_block - 1) / per_block;
	int fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
	int v2 = TPACKET_V2, one = 1;
	if (fd < 0 || setsockopt(fd, SOL_PACKET, PACKET_VERSION, &v2, sizeof v2) ||
	    setsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof one)) {
		perror("packet socket");
		return 1;
	}
	struct tpacket_req req = {
		.tp_block_size = block,
		.tp_block_nr = blocks,
		.tp_frame_size = slot,
		.tp_frame_nr = blocks * per_block,
	};
	if (setsockopt(fd, SOL_PACKET, PACKET_RX_RING, &req, sizeof req)) {
		perror("PACKET_RX_RING");
		return 1;
	}
	struct sockaddr_ll sll = {
		.sll_family = AF_PACKET,
		.sll_protocol = htons(ETH_P_ALL),
		.sll_ifindex = if_nametoindex(ifname),
	};
	if (!sll.sll_ifindex || bind(fd, (struct sockaddr *)&sll, sizeof sll)) {
		perror(ifname);
		return 1;
	}
	char *ring = mmap(NULL, (size_t)block * blocks, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (ring == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	long frames = 0;
	unsigned touched = 0;
	int next = 0, total = blocks * per_block;
	time_t end = time(NULL) + secs;
	while (time(NULL) < end) {
		for (int spin = 0; spin < 1000; spin++) {
			char *at = ring + (size_t)(next / per_block) * block + (size_t)(next % per_block) * slot;
			struct tpacket2_hdr *h = (struct tpacket2_hdr *)at;
			if (!(__atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE) & TP_STATUS_USER))
				continue;
			/* A reader looks at the frame (its IP header). */
			touched += (unsigned char)at[h->tp_mac + 14];
			frames++;
			__atomic_store_n(&h->tp_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
			next = (next + 1) % total;
		}
	}
	struct tpacket_stats st = { 0 };
	socklen_t len = sizeof st;
	getsockopt(fd, SOL_PACKET, PACKET_STATISTICS, &st, &len);
	printf("slot=%d slots=%d: %ld frames read, %u dropped (%u)\n", slot, total, frames, st.tp_drops,
	       touched & 1);
	return 0;
}
