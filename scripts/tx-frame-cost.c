/*
 * The kernel's cost per frame sent through an AF_PACKET TX ring
 * (TPACKET_V2, PACKET_VNET_HDR, PACKET_QDISC_BYPASS, as ustack's link
 * opens it), in the sending thread's CPU time: bursts of BURST frames,
 * one zero-length send() each, a pause between bursts so that the peer
 * keeps up (no ENOBUFS).  HDR_LEN 0: the virtio_net_hdr's hdr_len is 0,
 * so the kernel copies the Ethernet header and attaches the rest of the
 * frame as ring pages; 1: hdr_len is the whole frame, copied into the
 * socket buffer.  Run by scripts/tx-frame-cost.sh.
 *
 *   tx-frame-cost IFACE HDR_LEN(0|1) FRAME_BYTES BURSTS [BURST]
 *
 * Prints the mean, median and 10th percentile of the per-frame cost of a
 * burst (the first tenth of the bursts is a warm-up) and how many sends
 * failed.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <linux/virtio_net.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SLOT 2048
#define MAX_SAMPLES 100000

static double thread_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static int sockopt(int fd, int level, int name, int value)
{
	return setsockopt(fd, level, name, &value, sizeof value);
}

/* An IPv4/UDP frame of `len` bytes to the discard port, 10.99.150.2 ->
 * 10.99.150.1, to the peer MAC 02:00:00:00:00:01. */
static void make_frame(unsigned char *f, int len)
{
	memset(f, 0, len);
	memcpy(f, "\x02\x00\x00\x00\x00\x01\x02\x00\x00\x00\x00\x02\x08\x00", 14);
	unsigned char *ip = f + 14;
	int ip_len = len - 14;
	ip[0] = 0x45;
	ip[2] = ip_len >> 8;
	ip[3] = ip_len & 0xff;
	ip[8] = 64;
	ip[9] = 17;
	memcpy(ip + 12, "\x0a\x63\x96\x02\x0a\x63\x96\x01", 8);
	unsigned sum = 0;
	for (int i = 0; i < 20; i += 2)
		sum += (ip[i] << 8) | ip[i + 1];
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	sum = ~sum & 0xffff;
	ip[10] = sum >> 8;
	ip[11] = sum & 0xff;
	unsigned char *udp = ip + 20;
	udp[1] = 9;
	udp[3] = 9;
	udp[4] = (ip_len - 20) >> 8;
	udp[5] = (ip_len - 20) & 0xff;
}

int main(int argc, char **argv)
{
	if (argc < 5) {
		fprintf(stderr, "usage: %s IFACE HDR_LEN(0|1) FRAME_BYTES BURSTS [BURST]\n", argv[0]);
		return 2;
	}
	const char *ifname = argv[1];
	int whole = atoi(argv[2]);
	int len = atoi(argv[3]);
	int bursts = atoi(argv[4]);
	int burst = argc > 5 ? atoi(argv[5]) : 32;
	if (len < 42 || len > 1514 || bursts < 10 || burst < 1 || burst > 1024) {
		fprintf(stderr, "FRAME_BYTES 42..1514, BURSTS >= 10, BURST 1..1024\n");
		return 2;
	}
	int fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
	if (fd < 0) {
		perror("socket");
		return 1;
	}
	if (sockopt(fd, SOL_PACKET, PACKET_VERSION, TPACKET_V2) ||
	    sockopt(fd, SOL_PACKET, PACKET_VNET_HDR, 1) ||
	    sockopt(fd, SOL_PACKET, PACKET_QDISC_BYPASS, 1) ||
	    sockopt(fd, SOL_PACKET, PACKET_LOSS, 1)) {
		perror("setsockopt");
		return 1;
	}
	struct tpacket_req req = {
		.tp_block_size = 1 << 16,
		.tp_block_nr = 64,
		.tp_frame_size = SLOT,
		.tp_frame_nr = (1 << 16) / SLOT * 64,
	};
	if (setsockopt(fd, SOL_PACKET, PACKET_TX_RING, &req, sizeof req)) {
		perror("PACKET_TX_RING");
		return 1;
	}
	if (sockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, 1 << 24))
		perror("SO_SNDBUFFORCE");
	struct sockaddr_ll sll = {
		.sll_family = AF_PACKET,
		.sll_protocol = htons(ETH_P_ALL),
		.sll_ifindex = if_nametoindex(ifname),
	};
	if (!sll.sll_ifindex || bind(fd, (struct sockaddr *)&sll, sizeof sll)) {
		perror(ifname);
		return 1;
	}
	size_t ring_len = (size_t)req.tp_block_size * req.tp_block_nr;
	char *ring = mmap(NULL, ring_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (ring == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	unsigned char frame[1514];
	make_frame(frame, len);
	struct virtio_net_hdr vnet = { 0 };
	if (whole)
		vnet.hdr_len = len;
	static double samples[MAX_SAMPLES];
	int nsamples = 0, failed = 0, next = 0;
	double total = 0;
	long frames = 0;
	for (int b = 0; b < bursts; b++) {
		for (int i = 0; i < burst; i++) {
			struct tpacket2_hdr *h = (void *)(ring + (size_t)next * SLOT);
			while (__atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE) != TP_STATUS_AVAILABLE)
				;
			char *data = (char *)h + TPACKET2_HDRLEN - sizeof(struct sockaddr_ll);
			memcpy(data, &vnet, sizeof vnet);
			memcpy(data + sizeof vnet, frame, len);
			h->tp_len = len + sizeof vnet;
			h->tp_snaplen = h->tp_len;
			__atomic_store_n(&h->tp_status, TP_STATUS_SEND_REQUEST, __ATOMIC_RELEASE);
			next = (next + 1) % req.tp_frame_nr;
		}
		double t0 = thread_ns();
		if (send(fd, NULL, 0, MSG_DONTWAIT) < 0)
			failed++;
		double t1 = thread_ns();
		struct timespec pause = { 0, 300000 };
		nanosleep(&pause, NULL);
		if (b >= bursts / 10 && nsamples < MAX_SAMPLES)
			samples[nsamples++] = (t1 - t0) / burst;
		total += t1 - t0;
		frames += burst;
	}
	qsort(samples, nsamples, sizeof samples[0], cmp_double);
	printf("hdr_len=%s frame=%d burst=%d: mean %.0f ns/frame, median %.0f, p10 %.0f, failed sends %d\n",
	       whole ? "whole" : "0", len, burst, total / frames, samples[nsamples / 2],
	       samples[nsamples / 10], failed);
	return 0;
}
