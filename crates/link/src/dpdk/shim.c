/*
 * ustack's thin shim over libdpdk (22.11).
 *
 * DPDK's fast path (rte_eth_rx_burst, rte_eth_tx_burst, rte_pktmbuf_alloc,
 * rte_pktmbuf_free, rte_pktmbuf_mtod, the mbuf's lengths and offload flags)
 * is made of static inline functions and struct fields that Rust cannot
 * call or lay out without copying DPDK's headers.  This file is the only
 * place that knows those layouts: Rust sees plain structs of fixed-size
 * integers and pointers (declared again in ffi.rs, checked by size there)
 * and opaque mbuf/mempool pointers.
 *
 * Every burst call moves a whole burst across the language boundary, so the
 * cost of not inlining is one call per burst, not per packet.
 */

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <rte_config.h>
#include <rte_dev.h>
#include <rte_devargs.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_ether.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mbuf_pool_ops.h>
#include <rte_memory.h>
#include <rte_mempool.h>

/* The largest burst (link::MAX_BURST). */
#define USTACK_MAX_BURST 32

/* Receive flags handed to Rust (UstackRx::flags). */
#define USTACK_RX_L4_CSUM_VERIFIED 1u /* GOOD: the NIC checked the L4 checksum */
#define USTACK_RX_L4_CSUM_PARTIAL 2u  /* NONE: data intact, checksum field not final */
#define USTACK_RX_L4_CSUM_BAD 4u      /* BAD: the NIC found the L4 checksum wrong */
#define USTACK_RX_VLAN_REINSERTED 8u  /* the NIC had stripped a tag; it is back */
#define USTACK_RX_VLAN_LOST 16u       /* a stripped tag could not be put back */
#define USTACK_RX_CHAINED 32u         /* several segments: len is the whole frame's */
#define USTACK_RX_IP_CSUM_BAD 64u     /* the NIC found the IPv4 header checksum wrong */
#define USTACK_RX_LRO 128u            /* segments joined by the NIC (LRO): seg_size says their size */

/* Transmit requests from Rust (UstackTx::offload). */
#define USTACK_TX_TCP_CSUM 1u
#define USTACK_TX_UDP_CSUM 2u
#define USTACK_TX_IPV6 4u /* the frame is IPv6 (else IPv4) */
#define USTACK_TX_TSO 8u  /* a TCP super-frame to cut into tso_segsz segments */

int ustack_dpdk_errno(void) { return rte_errno; }

const char *ustack_dpdk_strerror(int err) { return rte_strerror(err); }

int ustack_dpdk_eal_init(int argc, char **argv) { return rte_eal_init(argc, argv); }

const char *ustack_dpdk_runtime_dir(void) { return rte_eal_get_runtime_dir(); }

int ustack_dpdk_dev_probe(const char *devargs) { return rte_dev_probe(devargs); }

int ustack_dpdk_port_by_name(const char *name, uint16_t *port) {
    return rte_eth_dev_get_port_by_name(name, port);
}

uint16_t ustack_dpdk_port_count(void) { return rte_eth_dev_count_avail(); }

int ustack_dpdk_port_is_valid(uint16_t port) { return rte_eth_dev_is_valid_port(port); }

/* What a port offers. */
struct ustack_port_info {
    char name[64];
    char driver[32];
    uint8_t mac[6];
    uint16_t mtu;
    uint16_t max_rx_queues;
    uint16_t max_tx_queues;
    int32_t socket_id;
    uint32_t max_rx_pktlen;
    uint64_t rx_offload_capa;
    uint64_t tx_offload_capa;
    uint64_t flow_type_rss_offloads;
    /* The device's arguments (`iface=veth0,framesz=16384` for a vdev). */
    char devargs[256];
};

int ustack_dpdk_port_info(uint16_t port, struct ustack_port_info *out) {
    struct rte_eth_dev_info info;
    struct rte_ether_addr mac;
    int rc;

    memset(out, 0, sizeof(*out));
    rc = rte_eth_dev_info_get(port, &info);
    if (rc != 0)
        return rc;
    rc = rte_eth_macaddr_get(port, &mac);
    if (rc != 0)
        return rc;
    rc = rte_eth_dev_get_mtu(port, &out->mtu);
    if (rc != 0)
        return rc;
    rc = rte_eth_dev_get_name_by_port(port, out->name);
    if (rc != 0)
        return rc;
    if (info.driver_name != NULL)
        snprintf(out->driver, sizeof(out->driver), "%s", info.driver_name);
    memcpy(out->mac, mac.addr_bytes, 6);
    out->max_rx_queues = info.max_rx_queues;
    out->max_tx_queues = info.max_tx_queues;
    out->socket_id = rte_eth_dev_socket_id(port);
    out->max_rx_pktlen = info.max_rx_pktlen;
    out->rx_offload_capa = info.rx_offload_capa;
    out->tx_offload_capa = info.tx_offload_capa;
    out->flow_type_rss_offloads = info.flow_type_rss_offloads;
    if (info.device != NULL) {
        const struct rte_devargs *da = rte_dev_devargs(info.device);
        if (da != NULL && da->args != NULL)
            snprintf(out->devargs, sizeof(out->devargs), "%s", da->args);
    }
    return 0;
}

/* How to set a port up (filled by Rust from [dpdk] and [portN]). */
struct ustack_port_conf {
    uint64_t rx_offloads;
    uint64_t tx_offloads;
    /* Hash functions for RSS (0: no RSS) and its 40-byte key. */
    uint64_t rss_hf;
    const uint8_t *rss_key;
    uint16_t nb_queues;
    uint16_t nb_rxd;
    uint16_t nb_txd;
    /* 0: keep the port's MTU (also the largest frame asked of the port,
     * rxmode.mtu, plus its Ethernet overhead). */
    uint16_t mtu;
    uint8_t promiscuous;
    /* Non-NULL: set this Ethernet address. */
    const uint8_t *mac;
    /* With RTE_ETH_RX_OFFLOAD_TCP_LRO: the largest frame the port's LRO
     * makes (kept within what the port says it can). */
    uint32_t max_lro_pkt_size;
    uint32_t pad;
};

/*
 * Configures, sets up nb_queues RX/TX queue pairs (queue q receives into
 * pools[q]) and starts the port.  Returns 0 or a negative errno; `*step`
 * names the call that failed.  nb_rxd/nb_txd are in-out: the driver may
 * adjust them.
 */
int ustack_dpdk_port_start(uint16_t port, struct ustack_port_conf *conf, void *const *pools,
                           const char **step) {
    struct rte_eth_conf ec;
    struct rte_eth_dev_info info;
    uint16_t q;
    int rc;
    int socket = rte_eth_dev_socket_id(port);

    memset(&ec, 0, sizeof(ec));
    ec.rxmode.offloads = conf->rx_offloads;
    ec.txmode.offloads = conf->tx_offloads;
    /* The largest frame the port is to take (0: ethdev's 1500), so a NIC
     * that filters by length drops and counts what is longer. */
    ec.rxmode.mtu = conf->mtu;
    if (conf->rss_hf != 0) {
        ec.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
        ec.rx_adv_conf.rss_conf.rss_key = (uint8_t *)conf->rss_key;
        ec.rx_adv_conf.rss_conf.rss_key_len = conf->rss_key ? 40 : 0;
        ec.rx_adv_conf.rss_conf.rss_hf = conf->rss_hf;
    }
    *step = "rte_eth_dev_info_get";
    rc = rte_eth_dev_info_get(port, &info);
    if (rc != 0)
        return rc;
    if (conf->rx_offloads & RTE_ETH_RX_OFFLOAD_TCP_LRO) {
        ec.rxmode.max_lro_pkt_size = conf->max_lro_pkt_size;
        if (info.max_lro_pkt_size != 0 && ec.rxmode.max_lro_pkt_size > info.max_lro_pkt_size)
            ec.rxmode.max_lro_pkt_size = info.max_lro_pkt_size;
    }
    *step = "rte_eth_dev_configure";
    rc = rte_eth_dev_configure(port, conf->nb_queues, conf->nb_queues, &ec);
    if (rc != 0)
        return rc;
    *step = "rte_eth_dev_adjust_nb_rx_tx_desc";
    rc = rte_eth_dev_adjust_nb_rx_tx_desc(port, &conf->nb_rxd, &conf->nb_txd);
    if (rc != 0)
        return rc;
    if (conf->mtu != 0) {
        *step = "rte_eth_dev_set_mtu";
        rc = rte_eth_dev_set_mtu(port, conf->mtu);
        if (rc != 0)
            return rc;
    }
    if (conf->mac != NULL) {
        struct rte_ether_addr mac;
        memcpy(mac.addr_bytes, conf->mac, 6);
        *step = "rte_eth_dev_default_mac_addr_set";
        rc = rte_eth_dev_default_mac_addr_set(port, &mac);
        if (rc != 0)
            return rc;
    }
    for (q = 0; q < conf->nb_queues; q++) {
        struct rte_eth_rxconf rxc = info.default_rxconf;
        struct rte_eth_txconf txc = info.default_txconf;
        rxc.offloads = conf->rx_offloads;
        txc.offloads = conf->tx_offloads;
        *step = "rte_eth_rx_queue_setup";
        rc = rte_eth_rx_queue_setup(port, q, conf->nb_rxd, socket, &rxc,
                                    (struct rte_mempool *)pools[q]);
        if (rc != 0)
            return rc;
        *step = "rte_eth_tx_queue_setup";
        rc = rte_eth_tx_queue_setup(port, q, conf->nb_txd, socket, &txc);
        if (rc != 0)
            return rc;
    }
    *step = "rte_eth_dev_start";
    rc = rte_eth_dev_start(port);
    if (rc != 0)
        return rc;
    if (conf->promiscuous) {
        *step = "rte_eth_promiscuous_enable";
        rc = rte_eth_promiscuous_enable(port);
        /* A port that cannot be promiscuous still works for its own MAC. */
        if (rc != 0 && rc != -ENOTSUP)
            return rc;
    }
    return 0;
}

/* Stops and closes a port: the mbufs its rings held go back to their pool. */
void ustack_dpdk_port_close(uint16_t port) {
    rte_eth_dev_stop(port);
    rte_eth_dev_close(port);
}

/* The most indirection table entries handled (RETA sizes are 64..512 on
 * most NICs, 2048 on a few). */
#define USTACK_RETA_MAX 4096

/* The size of the port's RSS indirection table (0: none, or no info). */
uint16_t ustack_dpdk_reta_size(uint16_t port) {
    struct rte_eth_dev_info info;
    if (rte_eth_dev_info_get(port, &info) != 0)
        return 0;
    return info.reta_size;
}

/* Writes (set != 0) or reads the port's indirection table: entry i names
 * queue reta[i], n the table's size (a multiple of 64).  Returns 0 or a
 * negative errno (-ENOTSUP: the driver does not allow it). */
int ustack_dpdk_reta(uint16_t port, uint16_t *reta, uint16_t n, int set) {
    struct rte_eth_rss_reta_entry64 conf[USTACK_RETA_MAX / RTE_ETH_RETA_GROUP_SIZE];
    uint16_t i;
    int rc;
    if (n == 0 || n > USTACK_RETA_MAX || n % RTE_ETH_RETA_GROUP_SIZE != 0)
        return -EINVAL;
    memset(conf, 0, sizeof(conf));
    for (i = 0; i < n; i++) {
        conf[i / RTE_ETH_RETA_GROUP_SIZE].mask |= 1ULL << (i % RTE_ETH_RETA_GROUP_SIZE);
        if (set)
            conf[i / RTE_ETH_RETA_GROUP_SIZE].reta[i % RTE_ETH_RETA_GROUP_SIZE] = reta[i];
    }
    if (set)
        return rte_eth_dev_rss_reta_update(port, conf, n);
    rc = rte_eth_dev_rss_reta_query(port, conf, n);
    if (rc != 0)
        return rc;
    for (i = 0; i < n; i++)
        reta[i] = conf[i / RTE_ETH_RETA_GROUP_SIZE].reta[i % RTE_ETH_RETA_GROUP_SIZE];
    return 0;
}

/* The port's RSS key (into key, *len bytes of room; *len becomes the
 * key's length) and its hash functions. */
int ustack_dpdk_rss_conf(uint16_t port, uint8_t *key, uint8_t *len, uint64_t *rss_hf) {
    struct rte_eth_rss_conf c;
    int rc;
    memset(&c, 0, sizeof(c));
    c.rss_key = key;
    c.rss_key_len = *len;
    rc = rte_eth_dev_rss_hash_conf_get(port, &c);
    if (rc != 0)
        return rc;
    *len = c.rss_key_len;
    *rss_hf = c.rss_hf;
    return 0;
}

int ustack_dpdk_promiscuous_get(uint16_t port) { return rte_eth_promiscuous_get(port); }

/* Port counters: ipackets, opackets, ibytes, obytes, imissed, ierrors,
 * oerrors, rx_nombuf. */
int ustack_dpdk_port_stats(uint16_t port, uint64_t out[8]) {
    struct rte_eth_stats st;
    int rc = rte_eth_stats_get(port, &st);
    if (rc != 0)
        return rc;
    out[0] = st.ipackets;
    out[1] = st.opackets;
    out[2] = st.ibytes;
    out[3] = st.obytes;
    out[4] = st.imissed;
    out[5] = st.ierrors;
    out[6] = st.oerrors;
    out[7] = st.rx_nombuf;
    return 0;
}

/* ---- mempools ------------------------------------------------------------ */

/*
 * A pktmbuf pool.  `packed`: its objects lie end to end, none left out of a
 * page boundary (RTE_MEMPOOL_F_NO_IOVA_CONTIG), in one chunk of memory.
 * DPDK's af_xdp driver registers a pool as its UMEM by taking the first
 * chunk's start and `populated_size * object size` bytes from there; in a
 * pool whose objects skip page boundaries (every pool without hugepages:
 * one 2.4 KB mbuf per 4 KB page) the later mbufs lie past that end, and
 * the kernel refuses each frame sent or received in them (invalid
 * descriptors), silently.
 */
void *ustack_dpdk_pool_create(const char *name, unsigned n, unsigned cache, uint16_t data_room,
                              int socket, int packed) {
    struct rte_pktmbuf_pool_private priv;
    struct rte_mempool *mp;
    int rc;

    if (!packed)
        return rte_pktmbuf_pool_create(name, n, cache, 0, data_room, socket);
    memset(&priv, 0, sizeof(priv));
    priv.mbuf_data_room_size = data_room;
    priv.mbuf_priv_size = 0;
    mp = rte_mempool_create_empty(name, n, sizeof(struct rte_mbuf) + data_room, cache,
                                  sizeof(struct rte_pktmbuf_pool_private), socket,
                                  RTE_MEMPOOL_F_NO_IOVA_CONTIG);
    if (mp == NULL)
        return NULL;
    rc = rte_mempool_set_ops_byname(mp, rte_mbuf_best_mempool_ops(), NULL);
    if (rc != 0)
        goto fail;
    rte_pktmbuf_pool_init(mp, &priv);
    rc = rte_mempool_populate_default(mp);
    if (rc < 0)
        goto fail;
    if (mp->nb_mem_chunks != 1) {
        rc = -ENOMEM;
        goto fail;
    }
    rte_mempool_obj_iter(mp, rte_pktmbuf_init, NULL);
    return mp;
fail:
    rte_mempool_free(mp);
    rte_errno = -rc;
    return NULL;
}

void ustack_dpdk_pool_free(void *pool) { rte_mempool_free((struct rte_mempool *)pool); }

unsigned ustack_dpdk_pool_avail(const void *pool) {
    return rte_mempool_avail_count((const struct rte_mempool *)pool);
}

unsigned ustack_dpdk_pool_size(const void *pool) {
    return ((const struct rte_mempool *)pool)->size;
}

struct contains_arg {
    const uint8_t *addr;
    int found;
};

static void contains_cb(struct rte_mempool *mp, void *opaque, struct rte_mempool_memhdr *memhdr,
                        unsigned idx) {
    struct contains_arg *a = opaque;
    const uint8_t *start = memhdr->addr;
    (void)mp;
    (void)idx;
    if (a->addr >= start && a->addr < start + memhdr->len)
        a->found = 1;
}

/* Whether `addr` lies in the memory of `pool`'s objects. */
int ustack_dpdk_pool_contains(void *pool, const void *addr) {
    struct contains_arg a = {addr, 0};
    rte_mempool_mem_iter((struct rte_mempool *)pool, contains_cb, &a);
    return a.found;
}

/* The size of the page (4 KiB or a hugepage) that holds `addr` in DPDK's
 * memory, 0 if DPDK does not know the address. */
uint64_t ustack_dpdk_page_size_of(const void *addr) {
    struct rte_memseg *ms = rte_mem_virt2memseg(addr, NULL);
    return ms == NULL ? 0 : ms->hugepage_sz;
}

/* ---- fast path ----------------------------------------------------------- */

/* A received frame as Rust sees it. */
struct ustack_rx {
    void *mbuf;
    uint8_t *data;
    uint32_t len;
    /* Room from `data` to the end of the buffer. */
    uint32_t room;
    uint32_t flags;
    /* With USTACK_RX_LRO: the size of the segments the NIC joined
     * (tso_segsz), 0 when it does not say. */
    uint32_t seg_size;
};

/* A frame to send: its mbuf, length and offload request; l2/l3 lengths
 * are needed for checksum offload only. */
struct ustack_tx {
    void *mbuf;
    uint32_t len;
    uint16_t l2_len;
    uint16_t l3_len;
    uint32_t offload;
    uint16_t tso_segsz; /* with USTACK_TX_TSO: each segment's payload */
    uint16_t l4_len;    /* with USTACK_TX_TSO: the TCP header's length */
};

/* A fresh buffer for transmit: mbuf, data pointer and room. */
struct ustack_buf {
    void *mbuf;
    uint8_t *data;
    uint32_t room;
    uint32_t pad;
};

uint16_t ustack_dpdk_rx_burst(uint16_t port, uint16_t queue, struct ustack_rx *out, uint16_t n) {
    struct rte_mbuf *pkts[USTACK_MAX_BURST];
    uint16_t got, i;

    if (n > USTACK_MAX_BURST)
        n = USTACK_MAX_BURST;
    got = rte_eth_rx_burst(port, queue, pkts, n);
    for (i = 0; i < got; i++) {
        struct rte_mbuf *m = pkts[i];
        uint64_t ol = m->ol_flags;
        uint32_t flags = 0;

        if ((ol & RTE_MBUF_F_RX_IP_CKSUM_MASK) == RTE_MBUF_F_RX_IP_CKSUM_BAD)
            flags |= USTACK_RX_IP_CSUM_BAD;
        if (ol & RTE_MBUF_F_RX_LRO)
            flags |= USTACK_RX_LRO;
        switch (ol & RTE_MBUF_F_RX_L4_CKSUM_MASK) {
        case RTE_MBUF_F_RX_L4_CKSUM_GOOD:
            flags |= USTACK_RX_L4_CSUM_VERIFIED;
            break;
        case RTE_MBUF_F_RX_L4_CKSUM_NONE:
            flags |= USTACK_RX_L4_CSUM_PARTIAL;
            break;
        case RTE_MBUF_F_RX_L4_CKSUM_BAD:
            flags |= USTACK_RX_L4_CSUM_BAD;
            break;
        default:
            break;
        }
        /* The stack strips VLAN tags itself (its VLAN interfaces): a tag
         * the NIC stripped goes back into the frame so the stack sees what
         * was on the wire. */
        if (ol & RTE_MBUF_F_RX_VLAN_STRIPPED) {
            if (rte_vlan_insert(&m) == 0) {
                flags |= USTACK_RX_VLAN_REINSERTED;
                m->ol_flags &= ~(RTE_MBUF_F_RX_VLAN | RTE_MBUF_F_RX_VLAN_STRIPPED);
            } else {
                flags |= USTACK_RX_VLAN_LOST;
            }
        }
        out[i].mbuf = m;
        out[i].data = rte_pktmbuf_mtod(m, uint8_t *);
        /* A frame longer than one mbuf comes chained (scatter): `len` is
         * then the whole frame's, which the caller gathers into one buffer
         * (ustack_dpdk_chain_copy); the first segment alone is never taken
         * for the frame. */
        if (m->nb_segs == 1) {
            out[i].len = m->data_len;
        } else {
            out[i].len = m->pkt_len;
            flags |= USTACK_RX_CHAINED;
        }
        out[i].room = m->buf_len - m->data_off;
        out[i].flags = flags;
        out[i].seg_size = (flags & USTACK_RX_LRO) ? (uint32_t)m->tso_segsz : 0;
    }
    return got;
}

/*
 * Copies every segment of the chained frame `mbuf` into `dst` (`room`
 * bytes).  Returns the frame's length, or -1 when it does not fit or its
 * segments do not add up to its pkt_len (a malformed chain: nothing is
 * trusted beyond what the segments hold).
 */
int32_t ustack_dpdk_chain_copy(const void *mbuf, uint8_t *dst, uint32_t room) {
    const struct rte_mbuf *m = mbuf;
    uint32_t total = m->pkt_len;
    uint32_t off = 0;
    uint32_t segs = 0;

    if (total > room)
        return -1;
    for (; m != NULL; m = m->next) {
        if (++segs > RTE_MBUF_MAX_NB_SEGS || m->data_len > total - off)
            return -1;
        memcpy(dst + off, rte_pktmbuf_mtod(m, const uint8_t *), m->data_len);
        off += m->data_len;
    }
    return off == total ? (int32_t)total : -1;
}

int ustack_dpdk_alloc(void *pool, struct ustack_buf *out) {
    struct rte_mbuf *m = rte_pktmbuf_alloc((struct rte_mempool *)pool);
    if (m == NULL)
        return -ENOBUFS;
    out->mbuf = m;
    out->data = rte_pktmbuf_mtod(m, uint8_t *);
    out->room = rte_pktmbuf_tailroom(m);
    out->pad = 0;
    return 0;
}

void ustack_dpdk_free(void *mbuf) { rte_pktmbuf_free((struct rte_mbuf *)mbuf); }

/* Sets each frame's length and offload flags and queues the burst.
 * Returns how many the driver took (from the front). */
uint16_t ustack_dpdk_tx_burst(uint16_t port, uint16_t queue, const struct ustack_tx *in,
                              uint16_t n) {
    struct rte_mbuf *pkts[USTACK_MAX_BURST];
    uint16_t i;

    if (n > USTACK_MAX_BURST)
        n = USTACK_MAX_BURST;
    for (i = 0; i < n; i++) {
        struct rte_mbuf *m = in[i].mbuf;
        m->data_len = (uint16_t)in[i].len;
        m->pkt_len = in[i].len;
        m->ol_flags &= RTE_MBUF_F_INDIRECT | RTE_MBUF_F_EXTERNAL;
        if (in[i].offload != 0) {
            m->l2_len = in[i].l2_len;
            m->l3_len = in[i].l3_len;
            m->ol_flags |=
                (in[i].offload & USTACK_TX_IPV6) ? RTE_MBUF_F_TX_IPV6 : RTE_MBUF_F_TX_IPV4;
            m->ol_flags |= (in[i].offload & USTACK_TX_TCP_CSUM) ? RTE_MBUF_F_TX_TCP_CKSUM
                                                                : RTE_MBUF_F_TX_UDP_CKSUM;
            if (in[i].offload & USTACK_TX_TSO) {
                /* TSO: the IPv4 header's checksum is the port's to make
                 * for each segment too (rte_mbuf_core.h). */
                m->ol_flags |= RTE_MBUF_F_TX_TCP_SEG;
                if (!(in[i].offload & USTACK_TX_IPV6))
                    m->ol_flags |= RTE_MBUF_F_TX_IP_CKSUM;
                m->tso_segsz = in[i].tso_segsz;
                m->l4_len = in[i].l4_len;
            }
        }
        pkts[i] = m;
    }
    return rte_eth_tx_burst(port, queue, pkts, n);
}
