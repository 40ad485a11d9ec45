//! Per-engine counters, named after what they count.  Plain increments on the
//! fast path; read by walking them with [`Counters::visit`].
//!
//! Every received frame ends in exactly one *outcome* counter: an `rx_drop_*`
//! reason or an `rx_accept_*` kind.  [`Counters::rx_outcomes`] sums them so a
//! test can check that nothing was lost without a count.

macro_rules! counters {
    (
        outcomes { $($(#[$om:meta])* $outcome:ident,)* }
        others { $($(#[$cm:meta])* $other:ident,)* }
    ) => {
        /// The stack's counters. See the module documentation.
        #[derive(Debug, Clone, Default, PartialEq, Eq)]
        pub struct Counters {
            $($(#[$om])* pub $outcome: u64,)*
            $($(#[$cm])* pub $other: u64,)*
        }

        impl Counters {
            /// Calls `f` with each counter's name and value, in a fixed order.
            pub fn visit(&self, mut f: impl FnMut(&'static str, u64)) {
                $(f(stringify!($outcome), self.$outcome);)*
                $(f(stringify!($other), self.$other);)*
            }

            /// The sum of all per-frame outcome counters.
            pub fn rx_outcomes(&self) -> u64 {
                0 $(+ self.$outcome)*
            }

            /// The sum of the per-frame drop counters (`rx_drop_*`).
            pub fn rx_drops(&self) -> u64 {
                let mut sum = 0;
                $(if stringify!($outcome).starts_with("rx_drop_") { sum += self.$outcome; })*
                sum
            }

            /// Adds another engine's counters to these.
            pub fn add(&mut self, other: &Counters) {
                $(self.$outcome += other.$outcome;)*
                $(self.$other += other.$other;)*
            }
        }
    };
}

counters! {
    outcomes {
        // Ethernet and VLAN
        rx_drop_eth_truncated,
        rx_drop_eth_not_for_us,
        rx_drop_eth_src_multicast,
        rx_drop_eth_unknown_type,
        rx_drop_vlan_truncated,
        rx_drop_vlan_unknown_id,
        /// A frame of a VLAN interface taken down alone.
        rx_drop_vlan_down,
        rx_drop_vlan_nested,
        /// An 802.1ad service tag (0x88a8) outermost: no interface takes them.
        rx_drop_vlan_service_tag,
        /// An untagged (or priority-tagged) frame on a port that only
        /// carries VLAN interfaces.
        rx_drop_untagged_no_address,
        // ARP
        rx_drop_arp_malformed,
        rx_drop_arp_unsupported,
        rx_drop_arp_bad_sender,
        rx_drop_arp_not_for_us,
        rx_accept_arp_request,
        rx_accept_arp_reply,
        // IPv4
        rx_drop_ipv4_truncated,
        rx_drop_ipv4_malformed,
        rx_drop_ipv4_bad_checksum,
        rx_drop_ipv4_bad_src,
        rx_drop_ipv4_not_for_us,
        rx_drop_ipv4_multicast,
        rx_drop_ipv4_frag_malformed,
        rx_drop_ipv4_frag_overlap,
        rx_drop_ipv4_frag_too_big,
        rx_drop_ipv4_frag_no_room,
        rx_drop_ipv4_frag_too_many,
        rx_drop_ipv4_unknown_protocol,
        rx_accept_ipv4_fragment,
        // ICMPv4
        rx_drop_icmp_malformed,
        rx_drop_icmp_bad_checksum,
        rx_drop_icmp_to_broadcast,
        rx_drop_icmp_rate_limited,
        rx_accept_icmp_echo_request,
        rx_accept_icmp_echo_reply,
        rx_accept_icmp_error,
        rx_accept_icmp_other,
        // UDP
        rx_drop_udp_malformed,
        rx_drop_udp_bad_checksum,
        rx_drop_udp_no_socket,
        rx_drop_udp_socket_full,
        rx_accept_udp,
        // TCP
        rx_drop_tcp_malformed,
        rx_drop_tcp_bad_checksum,
        rx_drop_tcp_no_socket,
        rx_drop_tcp_to_broadcast,
        rx_drop_tcp_listen_overflow,
        /// A handshake that would make a connection while the socket table
        /// is full (`kern.ipc.maxsockets`): a SYN, or the ACK of a SYN
        /// cookie.
        rx_drop_tcp_table_full,
        /// A handshake that would take TCP's connections past their memory
        /// budget (`net.inet.tcp.memory_budget_mb`): a SYN (no SYN-ACK is
        /// sent, not even a cookie's) or the ACK of a SYN cookie.
        rx_drop_tcp_memory_budget,
        rx_drop_tcp_listen_unexpected,
        /// Segments handed over by another process of the group that are
        /// not this one's either (see `Stack::set_flow_handoff`).
        rx_drop_tcp_handoff_unclaimed,
        /// SYNs offered to the group and taken by nobody, to a port whose
        /// listener this stack closed while sharing it: dropped, not
        /// refused (see `Stack::receive_unclaimed`).
        rx_drop_tcp_syn_listener_moved,
        rx_accept_tcp,
        // IPv6
        /// IPv6 on an interface where it is not enabled (no `addr6`).
        rx_drop_ipv6_disabled,
        rx_drop_ipv6_truncated,
        rx_drop_ipv6_malformed,
        rx_drop_ipv6_bad_src,
        rx_drop_ipv6_not_for_us,
        /// Extension headers running past the packet or misplaced.
        rx_drop_ipv6_ext_malformed,
        /// Extension headers we must refuse: a routing header with segments
        /// left (type 0 among them, RFC 5095), an option whose type says
        /// discard, more headers than `MAX_EXTENSION_HEADERS`.
        rx_drop_ipv6_ext_unsupported,
        rx_drop_ipv6_frag_malformed,
        rx_drop_ipv6_frag_overlap,
        rx_drop_ipv6_frag_too_big,
        rx_drop_ipv6_frag_no_room,
        rx_drop_ipv6_frag_too_many,
        /// A first fragment without the whole header chain (RFC 7112).
        rx_drop_ipv6_frag_chain_split,
        rx_drop_ipv6_unknown_protocol,
        rx_accept_ipv6_fragment,
        rx_accept_ipv6_no_next_header,
        // ICMPv6 and NDP
        rx_drop_icmpv6_malformed,
        rx_drop_icmpv6_bad_checksum,
        /// NDP not sent with hop limit 255 (RFC 4861 7.1.1): from off the link.
        rx_drop_ndp_bad_hop_limit,
        /// A solicitation for an address that is not ours (or tentative).
        rx_drop_ndp_not_for_us,
        rx_accept_icmpv6_echo_request,
        rx_accept_icmpv6_echo_reply,
        rx_accept_icmpv6_pkt_too_big,
        rx_accept_icmpv6_error,
        rx_accept_icmpv6_other,
        rx_accept_ndp_neighbor_solicit,
        rx_accept_ndp_neighbor_advert,
        rx_accept_ndp_router_solicit,
        rx_accept_ndp_router_advert,
        /// Redirects, taken or (`net.inet6.icmp6.rediraccept=0`, or not
        /// from the destination's router) ignored; see
        /// `ndp_redirects_applied`.
        rx_accept_ndp_redirect,
    }
    others {
        // Frames before bytes: a frame's two counts are then not side by
        // side, which keeps the compiler from pairing their increments in
        // vector registers (three instructions more each, on every frame).
        /// Frames handed to the stack.
        rx_frames,
        tx_frames,
        rx_bytes,
        tx_bytes,
        /// A frame could not be sent: the link had no buffer.
        tx_drop_no_buffer,
        /// A frame sink lent a buffer shorter than the frame it was asked
        /// for (a broken sink): the frame was left unwritten rather than
        /// written past the buffer's end.
        tx_sink_short_buffer,
        /// A packet had no route.
        tx_drop_no_route,
        /// Packets dropped because their neighbor never answered.
        tx_drop_no_neighbor,
        /// A packet was too large for the link and could not be fragmented.
        tx_drop_too_big,
        arp_requests_sent,
        arp_replies_sent,
        arp_gratuitous_sent,
        /// A resolution gave up after its retries; its held packets dropped.
        arp_resolution_failed,
        /// Packets held waiting for a neighbor.
        arp_held,
        /// A held packet was dropped because `maxhold` were already waiting.
        arp_hold_overflow,
        /// The neighbor cache was full; an entry was evicted.
        arp_cache_evictions,
        /// A learned neighbor changed its link address.
        arp_address_changed,
        /// A packet had no usable source address (IPv6 before duplicate
        /// address detection ended).
        tx_drop_no_source,
        /// IPv6 packets held waiting for neighbor discovery.
        ndp_held,
        ndp_hold_overflow,
        ndp_neighbor_solicits_sent,
        ndp_neighbor_adverts_sent,
        /// Unicast solicitations checking a known neighbor (PROBE).
        ndp_neighbor_probes_sent,
        ndp_router_solicits_sent,
        ndp_dad_probes_sent,
        /// Addresses that passed duplicate address detection.
        ndp_dad_completed,
        /// Addresses another node holds (RFC 4862 5.4.5): never used.
        ndp_dad_duplicates,
        /// Another node advertised an address we hold.
        ndp_address_conflicts,
        ndp_default_routers_learned,
        /// Redirects that set a destination's first hop (RFC 4861 8.3).
        ndp_redirects_applied,
        ndp_resolution_failed,
        /// Neighbors confirmed reachable by TCP's forward progress (new
        /// data acknowledged, RFC 4861 7.3.1) rather than by probing.
        ndp_reachable_by_upper_layer,
        ipv6_reassembled,
        ipv6_reassembly_timeout,
        ipv6_fragments_sent,
        /// Packet too big lowered a destination's path MTU.
        ipv6_path_mtu_lowered,
        /// Packet too big quoting a packet we did not send.
        icmpv6_pkt_too_big_ignored,
        icmpv6_echo_replies_sent,
        icmpv6_errors_sent,
        ipv4_reassembled,
        ipv4_reassembly_timeout,
        ipv4_fragments_sent,
        icmp_echo_replies_sent,
        icmp_errors_sent,
        icmp_errors_rate_limited,
        udp_datagrams_sent,
        udp_datagrams_received,
        tcp_segments_received,
        tcp_segments_sent,
        /// Segments taken by header prediction (`tcp/fast_input.rs`).
        tcp_predicted_segments,
        /// Segments written straight into their frame (`tcp/fast_output.rs`).
        tcp_direct_segments,
        tcp_retransmitted_segments,
        /// Connections whose segments shrank to a lowered path MTU.
        tcp_path_mtu_lowered,
        /// Neighbors forgotten on a connection's negative advice (R1
        /// retransmissions unanswered, RFC 9293 MUST-20).
        neighbor_negative_advice,
        /// Fragmentation needed lowered an IPv4 destination's path MTU.
        ipv4_path_mtu_lowered,
        /// ICMP errors about TCP that name no connection of ours or quote
        /// too little of the segment.
        tcp_icmp_errors_ignored,
        /// ICMP errors whose quoted sequence number is outside SND.UNA..
        /// SND.NXT of their connection (RFC 5927 4.1), or about TIME-WAIT.
        tcp_icmp_errors_out_of_window,
        /// Connections in SYN-SENT that port or protocol unreachable
        /// refused (ECONNREFUSED).
        tcp_icmp_connects_refused,
        /// ICMP errors kept as a connection's soft error.
        tcp_icmp_soft_errors,
        tcp_resets_sent,
        tcp_resets_received,
        /// Connections reset for data that came after the application
        /// closed them or shut them both ways (RFC 1122 4.2.2.13; Linux's
        /// TCPAbortOnData).
        tcp_aborts_on_data,
        /// ICMP errors about a UDP datagram to a connected socket's peer,
        /// kept as its error (ECONNREFUSED).
        udp_icmp_errors_reported,
        /// ICMP errors about UDP datagrams that no connected socket hears
        /// (soft errors, unconnected sockets, quotes naming no socket).
        udp_icmp_errors_ignored,
        tcp_active_opens,
        tcp_passive_opens,
        tcp_accepted,
        tcp_syncookies_sent,
        tcp_syncookies_accepted,
        /// TIME-WAIT connections ended early to make room in a full socket
        /// table or under the memory budget (as Linux past
        /// `tcp_max_tw_buckets`).
        tcp_time_wait_recycled,
        /// Connects refused with ENOBUFS: the connection would take TCP's
        /// connections past their memory budget.
        tcp_connects_refused_memory_budget,
        /// Segments of no connection of ours offered to the other processes
        /// of the group (`Stack::set_flow_handoff`).
        tcp_handoff_offered,
        /// Segments another process of the group handed over that a
        /// connection of ours took.
        tcp_handoff_taken,
        tcp_challenge_acks_sent,
        tcp_paws_rejected,
        tcp_out_of_window,
        tcp_invalid_acks_rate_limited,
        tcp_rx_out_of_order,
        /// New urgent pointers taken in (marks set, RFC 9293 3.8.5).
        tcp_urgent_marks_received,
        /// Data segments that arrived Congestion Experienced on connections
        /// using ECN (RFC 3168).
        tcp_ecn_ce_received,
        /// Congestion windows reduced for an ECN-Echo (once per window).
        tcp_ecn_reductions,
        /// URG segments whose urgent pointer was zero, ignored.
        tcp_urgent_pointer_zero,
        tcp_rx_trimmed_bytes,
        /// Receive buffers doubled by auto-tuning (the peer filled more than
        /// 3/8 of one within a round trip).
        tcp_rcvbuf_grown,
        /// In-order segments whose payload stayed in its received frame,
        /// which the socket holds (zero copy, `lend.rs`).
        tcp_rx_zero_copy_segments,
        /// Segments whose payload was copied into the socket's ring.
        tcp_rx_copied_segments,
        /// Copies made because a frame could have been held but the
        /// interface's or the connection's bound on held frames was reached.
        tcp_rx_hold_limited,
        /// Received frames the sockets hold now (a gauge).
        tcp_rx_frames_held,
        tcp_dupacks_received,
        tcp_fast_retransmits,
        tcp_rto_timeouts,
        tcp_window_probes,
        tcp_keepalive_timeouts,
        tcp_fin_wait_2_timeouts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visit_names_every_counter_once() {
        let c = Counters {
            rx_drop_eth_truncated: 2,
            rx_accept_udp: 3,
            tx_frames: 5,
            ..Default::default()
        };
        let mut names = Vec::new();
        let mut total = 0;
        c.visit(|n, v| {
            names.push(n);
            total += v;
        });
        assert_eq!(total, 10);
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), names.len());
        assert_eq!(c.rx_outcomes(), 5);
        assert_eq!(c.rx_drops(), 2);
    }
}
