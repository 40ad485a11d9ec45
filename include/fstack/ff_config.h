/*
 * ff_config.h: F-Stack's configuration header, for programs that include
 * it.  The configuration itself (an F-Stack style config.ini, --conf FILE)
 * is read by ff_init; ustack keeps it to itself, so F-Stack's
 * struct ff_config and ff_global_cfg are not offered.
 */
#ifndef USTACK_FF_CONFIG_H
#define USTACK_FF_CONFIG_H

#define MAX_PKT_BURST     32  /* frames per receive or transmit burst */
#define BURST_TX_DRAIN_US 100 /* default [dpdk] pkt_tx_delay */

#endif /* USTACK_FF_CONFIG_H */
