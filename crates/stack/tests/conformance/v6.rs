//! Every script again over IPv6: the same segments must be sent and taken
//! whatever the family underneath (the scripts name hosts by IPv4 address;
//! `harness::over_ipv6` maps each to an IPv6 one).

use std::net::Ipv4Addr;

use crate::harness::{over_ipv6, seg, Script};

/// Every IPv4 script has its IPv6 run below (a script added later must be
/// added there too).
#[test]
fn every_script_runs_over_ipv6_too() {
    let files = [
        ("ack", include_str!("ack.rs")),
        ("addresses", include_str!("addresses.rs")),
        ("close", include_str!("close.rs")),
        ("ecn", include_str!("ecn.rs")),
        ("icmp", include_str!("icmp.rs")),
        ("isn", include_str!("isn.rs")),
        ("listen", include_str!("listen.rs")),
        ("options", include_str!("options.rs")),
        ("recovery", include_str!("recovery.rs")),
        ("rfc5961", include_str!("rfc5961.rs")),
        ("rfc9293", include_str!("rfc9293.rs")),
        ("rto", include_str!("rto.rs")),
        ("sack", include_str!("sack.rs")),
        ("timers", include_str!("timers.rs")),
        ("urgent", include_str!("urgent.rs")),
        ("window", include_str!("window.rs")),
    ];
    let here = include_str!("v6.rs");
    for (module, text) in files {
        for part in text.split("#[test]\n").skip(1) {
            let Some(rest) = part.trim_start().strip_prefix("pub fn ") else {
                continue;
            };
            let name = rest.split('(').next().unwrap_or_default();
            let call = format!("over_ipv6(crate::{module}::{name})");
            assert!(here.contains(&call), "{module}::{name} has no IPv6 run");
        }
    }
}

/// RFC 8201 4, 5.4 (and RFC 1191's "retransmit at once"): a packet too
/// big from a router lowers the path MTU; the segment it quoted is sent
/// again at once in the new size, and so are the segments after it.
#[test]
fn packet_too_big_shrinks_segments_and_resends_at_once() {
    over_ipv6(|| {
        let mut s = Script::new();
        let (_, c) = s.passive_open();
        s.send_n(c, 3000);
        s.expect(seg().ack(1).seq(1).len(1460));
        s.expect(seg().ack(1).seq(1461).len(1460));
        // A router answers the second; the first was surely lost too.
        s.inject_packet_too_big(Ipv4Addr::new(10, 99, 1, 254), 1300);
        // 1300 - 40 (IPv6) - 20 (TCP), from SND.UNA on.
        s.expect(seg().ack(1).seq(1).len(1240));
        s.expect(seg().ack(1).seq(1241).len(1240));
        s.inject(seg().ack(2481).seq(1));
        s.expect(seg().ack(1).seq(2481).len(520));
        s.inject(seg().ack(3001).seq(1));
        s.expect_silence(1000);
    });
}

#[test]
fn ack_delayed_ack_every_second_segment() {
    over_ipv6(crate::ack::delayed_ack_every_second_segment);
}

#[test]
fn ack_delayed_ack_timeout() {
    over_ipv6(crate::ack::delayed_ack_timeout);
}

#[test]
fn ack_delayed_ack_disabled() {
    over_ipv6(crate::ack::delayed_ack_disabled);
}

#[test]
fn ack_immediate_ack_for_out_of_order_and_gap_fill() {
    over_ipv6(crate::ack::immediate_ack_for_out_of_order_and_gap_fill);
}

#[test]
fn ack_ack_piggybacked_on_data() {
    over_ipv6(crate::ack::ack_piggybacked_on_data);
}

#[test]
fn ack_nagle_holds_small_segments() {
    over_ipv6(crate::ack::nagle_holds_small_segments);
}

#[test]
fn ack_nagle_sends_full_segments() {
    over_ipv6(crate::ack::nagle_sends_full_segments);
}

#[test]
fn ack_nodelay_sends_at_once() {
    over_ipv6(crate::ack::nodelay_sends_at_once);
}

#[test]
fn close_close_sends_fin_after_data() {
    over_ipv6(crate::close::close_sends_fin_after_data);
}

#[test]
fn close_linger_zero_close_sends_rst() {
    over_ipv6(crate::close::linger_zero_close_sends_rst);
}

#[test]
fn close_close_with_unread_data_sends_rst() {
    over_ipv6(crate::close::close_with_unread_data_sends_rst);
}

#[test]
fn close_data_after_close_sends_rst() {
    over_ipv6(crate::close::data_after_close_sends_rst);
}

#[test]
fn close_fin_retransmitted_on_timeout() {
    over_ipv6(crate::close::fin_retransmitted_on_timeout);
}

#[test]
fn isn_isn_per_four_tuple() {
    over_ipv6(crate::isn::isn_per_four_tuple);
}

#[test]
fn isn_ephemeral_ports() {
    over_ipv6(crate::isn::ephemeral_ports);
}

#[test]
fn listen_syn_queue_bounded_by_backlog() {
    over_ipv6(crate::listen::syn_queue_bounded_by_backlog);
}

#[test]
fn listen_accept_queue_bounded_by_backlog() {
    over_ipv6(crate::listen::accept_queue_bounded_by_backlog);
}

#[test]
fn listen_handshake_ack_dropped_while_accept_queue_full() {
    over_ipv6(crate::listen::handshake_ack_dropped_while_accept_queue_full);
}

#[test]
fn listen_syn_queue_entry_expires() {
    over_ipv6(crate::listen::syn_queue_entry_expires);
}

#[test]
fn listen_somaxconn_caps_backlog() {
    over_ipv6(crate::listen::somaxconn_caps_backlog);
}

#[test]
fn listen_syn_cookie_when_syn_queue_full() {
    over_ipv6(crate::listen::syn_cookie_when_syn_queue_full);
}

#[test]
fn listen_syn_cookie_without_timestamps_and_bad_cookie() {
    over_ipv6(crate::listen::syn_cookie_without_timestamps_and_bad_cookie);
}

#[test]
fn options_mss_from_interface_mtu() {
    over_ipv6(crate::options::mss_from_interface_mtu);
}

#[test]
fn options_peer_mss_limits_segments() {
    over_ipv6(crate::options::peer_mss_limits_segments);
}

#[test]
fn options_default_send_mss() {
    over_ipv6(crate::options::default_send_mss);
}

#[test]
fn options_timestamps_reduce_payload() {
    over_ipv6(crate::options::timestamps_reduce_payload);
}

#[test]
fn options_syn_ack_answers_offered_options() {
    over_ipv6(crate::options::syn_ack_answers_offered_options);
}

#[test]
fn options_no_window_scale_unless_offered() {
    over_ipv6(crate::options::no_window_scale_unless_offered);
}

#[test]
fn options_windows_scaled_after_handshake() {
    over_ipv6(crate::options::windows_scaled_after_handshake);
}

#[test]
fn options_large_buffer_offered_unscaled_then_whole_without_an_ack_for_the_ack() {
    over_ipv6(crate::options::large_buffer_offered_unscaled_then_whole_without_an_ack_for_the_ack);
}

#[test]
fn options_timestamp_echo_rules() {
    over_ipv6(crate::options::timestamp_echo_rules);
}

#[test]
fn options_rtt_measured_from_timestamps() {
    over_ipv6(crate::options::rtt_measured_from_timestamps);
}

#[test]
fn options_paws_drops_old_timestamps() {
    over_ipv6(crate::options::paws_drops_old_timestamps);
}

#[test]
fn options_syn_ack_window_not_scaled() {
    over_ipv6(crate::options::syn_ack_window_not_scaled);
}

#[test]
fn options_window_scale_above_14_is_14() {
    over_ipv6(crate::options::window_scale_above_14_is_14);
}

#[test]
fn recovery_fast_retransmit_on_third_dupack() {
    over_ipv6(crate::recovery::fast_retransmit_on_third_dupack);
}

#[test]
fn recovery_limited_transmit() {
    over_ipv6(crate::recovery::limited_transmit);
}

#[test]
fn recovery_newreno_partial_ack() {
    over_ipv6(crate::recovery::newreno_partial_ack);
}

#[test]
fn recovery_cubic_is_default() {
    over_ipv6(crate::recovery::cubic_is_default);
}

#[test]
fn recovery_newreno_selectable() {
    over_ipv6(crate::recovery::newreno_selectable);
}

#[test]
fn recovery_fast_recovery_inflates_window() {
    over_ipv6(crate::recovery::fast_recovery_inflates_window);
}

#[test]
fn rfc5961_challenge_ack_for_rst_not_at_rcv_nxt() {
    over_ipv6(crate::rfc5961::challenge_ack_for_rst_not_at_rcv_nxt);
}

#[test]
fn rfc5961_challenge_ack_for_syn_in_established() {
    over_ipv6(crate::rfc5961::challenge_ack_for_syn_in_established);
}

#[test]
fn rfc5961_challenge_ack_for_ack_too_old() {
    over_ipv6(crate::rfc5961::challenge_ack_for_ack_too_old);
}

#[test]
fn rfc5961_ack_for_unsent_data_dropped() {
    over_ipv6(crate::rfc5961::ack_for_unsent_data_dropped);
}

#[test]
fn rfc5961_challenge_acks_rate_limited() {
    over_ipv6(crate::rfc5961::challenge_acks_rate_limited);
}

#[test]
fn rfc9293_active_open() {
    over_ipv6(crate::rfc9293::active_open);
}

#[test]
fn rfc9293_passive_open() {
    over_ipv6(crate::rfc9293::passive_open);
}

#[test]
fn rfc9293_simultaneous_open() {
    over_ipv6(crate::rfc9293::simultaneous_open);
}

#[test]
fn rfc9293_simultaneous_close() {
    over_ipv6(crate::rfc9293::simultaneous_close);
}

#[test]
fn rfc9293_half_close_local() {
    over_ipv6(crate::rfc9293::half_close_local);
}

#[test]
fn rfc9293_half_close_remote() {
    over_ipv6(crate::rfc9293::half_close_remote);
}

#[test]
fn rfc9293_time_wait_lasts_two_msl() {
    over_ipv6(crate::rfc9293::time_wait_lasts_two_msl);
}

#[test]
fn rfc9293_time_wait_acks_retransmitted_fin() {
    over_ipv6(crate::rfc9293::time_wait_acks_retransmitted_fin);
}

#[test]
fn rfc9293_rst_at_rcv_nxt_resets() {
    over_ipv6(crate::rfc9293::rst_at_rcv_nxt_resets);
}

#[test]
fn rfc9293_rst_outside_window_dropped() {
    over_ipv6(crate::rfc9293::rst_outside_window_dropped);
}

#[test]
fn rfc9293_rst_in_syn_sent() {
    over_ipv6(crate::rfc9293::rst_in_syn_sent);
}

#[test]
fn rfc9293_syn_sent_bad_ack_gets_reset() {
    over_ipv6(crate::rfc9293::syn_sent_bad_ack_gets_reset);
}

#[test]
fn rfc9293_rst_in_syn_received_returns_to_listen() {
    over_ipv6(crate::rfc9293::rst_in_syn_received_returns_to_listen);
}

#[test]
fn rfc9293_closed_port_rst_for_ack() {
    over_ipv6(crate::rfc9293::closed_port_rst_for_ack);
}

#[test]
fn rfc9293_closed_port_rst_for_no_ack() {
    over_ipv6(crate::rfc9293::closed_port_rst_for_no_ack);
}

#[test]
fn rfc9293_closed_port_ignores_rst() {
    over_ipv6(crate::rfc9293::closed_port_ignores_rst);
}

#[test]
fn rfc9293_listen_rejects_ack_ignores_rst() {
    over_ipv6(crate::rfc9293::listen_rejects_ack_ignores_rst);
}

#[test]
fn rfc9293_syn_received_bad_ack_gets_reset() {
    over_ipv6(crate::rfc9293::syn_received_bad_ack_gets_reset);
}

#[test]
fn rfc9293_duplicate_syn_resends_syn_ack() {
    over_ipv6(crate::rfc9293::duplicate_syn_resends_syn_ack);
}

#[test]
fn rfc9293_rst_in_simultaneous_open_refuses() {
    over_ipv6(crate::rfc9293::rst_in_simultaneous_open_refuses);
}

#[test]
fn rfc9293_rst_while_closing() {
    over_ipv6(crate::rfc9293::rst_while_closing);
}

#[test]
fn rfc9293_data_in_syn_ack_taken() {
    over_ipv6(crate::rfc9293::data_in_syn_ack_taken);
}

#[test]
fn rto_syn_rto_initial_and_backoff() {
    over_ipv6(crate::rto::syn_rto_initial_and_backoff);
}

#[test]
fn rto_connect_times_out() {
    over_ipv6(crate::rto::connect_times_out);
}

#[test]
fn rto_data_rto_minimum_and_backoff() {
    over_ipv6(crate::rto::data_rto_minimum_and_backoff);
}

#[test]
fn rto_rto_restarted_by_new_ack() {
    over_ipv6(crate::rto::rto_restarted_by_new_ack);
}

#[test]
fn rto_rto_three_seconds_after_syn_retransmission() {
    over_ipv6(crate::rto::rto_three_seconds_after_syn_retransmission);
}

#[test]
fn rto_rto_three_seconds_after_syn_ack_retransmission() {
    over_ipv6(crate::rto::rto_three_seconds_after_syn_ack_retransmission);
}

#[test]
fn rto_retransmissions_give_up() {
    over_ipv6(crate::rto::retransmissions_give_up);
}

#[test]
fn rto_timeout_restarts_from_one_segment() {
    over_ipv6(crate::rto::timeout_restarts_from_one_segment);
}

#[test]
fn rto_no_rtt_sample_from_retransmission() {
    over_ipv6(crate::rto::no_rtt_sample_from_retransmission);
}

#[test]
fn sack_sack_blocks_for_out_of_order_data() {
    over_ipv6(crate::sack::sack_blocks_for_out_of_order_data);
}

#[test]
fn sack_sack_recovery_retransmits_only_holes() {
    over_ipv6(crate::sack::sack_recovery_retransmits_only_holes);
}

#[test]
fn sack_sack_loss_detected_before_three_dupacks() {
    over_ipv6(crate::sack::sack_loss_detected_before_three_dupacks);
}

#[test]
fn timers_zero_window_probes() {
    over_ipv6(crate::timers::zero_window_probes);
}

#[test]
fn timers_zero_window_probes_never_give_up() {
    over_ipv6(crate::timers::zero_window_probes_never_give_up);
}

#[test]
fn timers_window_closes_mid_transfer() {
    over_ipv6(crate::timers::window_closes_mid_transfer);
}

#[test]
fn timers_keepalive_probes_then_reset() {
    over_ipv6(crate::timers::keepalive_probes_then_reset);
}

#[test]
fn timers_keepalive_answered() {
    over_ipv6(crate::timers::keepalive_answered);
}

#[test]
fn timers_keepalive_off_by_default() {
    over_ipv6(crate::timers::keepalive_off_by_default);
}

#[test]
fn window_receive_window_and_update() {
    over_ipv6(crate::window::receive_window_and_update);
}

#[test]
fn window_read_in_place_sends_the_window_update() {
    over_ipv6(crate::window::read_in_place_sends_the_window_update);
}

#[test]
fn window_larger_receive_buffer_opens_the_window_with_the_next_ack() {
    over_ipv6(crate::window::larger_receive_buffer_opens_the_window_with_the_next_ack);
}

#[test]
fn window_zero_window_accepts_acks_only() {
    over_ipv6(crate::window::zero_window_accepts_acks_only);
}

#[test]
fn window_data_beyond_window_trimmed() {
    over_ipv6(crate::window::data_beyond_window_trimmed);
}

#[test]
fn window_fin_after_gap_waits() {
    over_ipv6(crate::window::fin_after_gap_waits);
}

#[test]
fn window_data_on_handshake_ack() {
    over_ipv6(crate::window::data_on_handshake_ack);
}

#[test]
fn window_sender_sws_avoidance() {
    over_ipv6(crate::window::sender_sws_avoidance);
}

#[test]
fn icmp_port_unreachable_refuses_connect() {
    over_ipv6(crate::icmp::port_unreachable_refuses_connect);
}

#[test]
fn icmp_protocol_unreachable_refuses_connect() {
    over_ipv6(crate::icmp::protocol_unreachable_refuses_connect);
}

#[test]
fn icmp_host_unreachable_is_soft_and_reported_at_timeout() {
    over_ipv6(crate::icmp::host_unreachable_is_soft_and_reported_at_timeout);
}

#[test]
fn icmp_errors_on_established_connection_are_soft() {
    over_ipv6(crate::icmp::errors_on_established_connection_are_soft);
}

#[test]
fn icmp_soft_error_forgotten_when_peer_answers() {
    over_ipv6(crate::icmp::soft_error_forgotten_when_peer_answers);
}

#[test]
fn icmp_error_about_acknowledged_segment_ignored() {
    over_ipv6(crate::icmp::error_about_acknowledged_segment_ignored);
}

#[test]
fn icmp_frag_needed_shrinks_segments_and_resends_at_once() {
    over_ipv6(crate::icmp::frag_needed_shrinks_segments_and_resends_at_once);
}

#[test]
fn options_unknown_options_ignored() {
    over_ipv6(crate::options::unknown_options_ignored);
}

#[test]
fn options_unaligned_options_read() {
    over_ipv6(crate::options::unaligned_options_read);
}

#[test]
fn options_illegal_option_length_dropped() {
    over_ipv6(crate::options::illegal_option_length_dropped);
}

#[test]
fn options_local_mtu_bounds_segments() {
    over_ipv6(crate::options::local_mtu_bounds_segments);
}

#[test]
fn window_rst_processed_with_zero_window() {
    over_ipv6(crate::window::rst_processed_with_zero_window);
}

#[test]
fn rfc9293_bad_checksum_dropped() {
    over_ipv6(crate::rfc9293::bad_checksum_dropped);
}

#[test]
fn addresses_syn_to_broadcast_or_multicast_dropped() {
    over_ipv6(crate::addresses::syn_to_broadcast_or_multicast_dropped);
}

#[test]
fn addresses_syn_from_invalid_source_dropped() {
    over_ipv6(crate::addresses::syn_from_invalid_source_dropped);
}

#[test]
fn addresses_active_open_keeps_its_source_address() {
    over_ipv6(crate::addresses::active_open_keeps_its_source_address);
}

#[test]
fn addresses_passive_open_answers_from_the_address_called() {
    over_ipv6(crate::addresses::passive_open_answers_from_the_address_called);
}

#[test]
fn recovery_congestion_avoidance_grows_one_segment_per_window() {
    over_ipv6(crate::recovery::congestion_avoidance_grows_one_segment_per_window);
}

#[test]
fn rto_user_timeout_ends_retransmissions() {
    over_ipv6(crate::rto::user_timeout_ends_retransmissions);
}

#[test]
fn rto_user_timeout_bounds_connect() {
    over_ipv6(crate::rto::user_timeout_bounds_connect);
}

#[test]
fn rto_syn_retries_per_connection() {
    over_ipv6(crate::rto::syn_retries_per_connection);
}

#[test]
fn addresses_listens_on_one_port_per_address() {
    over_ipv6(crate::addresses::listens_on_one_port_per_address);
}

#[test]
fn addresses_connect_to_broadcast_or_multicast_refused() {
    over_ipv6(crate::addresses::connect_to_broadcast_or_multicast_refused);
}

#[test]
fn icmp_source_quench_ignored() {
    over_ipv6(crate::icmp::source_quench_ignored);
}

#[test]
fn rfc9293_rst_with_data_resets() {
    over_ipv6(crate::rfc9293::rst_with_data_resets);
}

#[test]
fn rto_negative_advice_after_r1_retransmissions() {
    over_ipv6(crate::rto::negative_advice_after_r1_retransmissions);
}

#[test]
fn timers_user_timeout_bounds_zero_window_probes() {
    over_ipv6(crate::timers::user_timeout_bounds_zero_window_probes);
}

#[test]
fn timers_user_timeout_replaces_the_keepalive_count() {
    over_ipv6(crate::timers::user_timeout_replaces_the_keepalive_count);
}

#[test]
fn urgent_urgent_pointer_after_the_urgent_data() {
    over_ipv6(crate::urgent::urgent_pointer_after_the_urgent_data);
}

#[test]
fn urgent_urgent_data_longer_than_a_segment() {
    over_ipv6(crate::urgent::urgent_data_longer_than_a_segment);
}

#[test]
fn urgent_urgent_octet_read_out_of_band() {
    over_ipv6(crate::urgent::urgent_octet_read_out_of_band);
}

#[test]
fn urgent_read_past_the_mark_skips_the_octet() {
    over_ipv6(crate::urgent::read_past_the_mark_skips_the_octet);
}

#[test]
fn urgent_urgent_pointer_into_a_later_segment() {
    over_ipv6(crate::urgent::urgent_pointer_into_a_later_segment);
}

#[test]
fn urgent_oob_inline_keeps_the_octet_in_the_stream() {
    over_ipv6(crate::urgent::oob_inline_keeps_the_octet_in_the_stream);
}

#[test]
fn urgent_newer_urgent_pointer_moves_the_mark() {
    over_ipv6(crate::urgent::newer_urgent_pointer_moves_the_mark);
}

#[test]
fn ecn_ecn_agreed_when_the_peer_asks() {
    over_ipv6(crate::ecn::ecn_agreed_when_the_peer_asks);
}

#[test]
fn ecn_ecn_refused_when_off() {
    over_ipv6(crate::ecn::ecn_refused_when_off);
}

#[test]
fn ecn_ecn_asked_on_connect() {
    over_ipv6(crate::ecn::ecn_asked_on_connect);
}

#[test]
fn ecn_ce_echoed_until_cwr() {
    over_ipv6(crate::ecn::ce_echoed_until_cwr);
}

#[test]
fn ecn_ece_reduces_the_window_once_per_window() {
    over_ipv6(crate::ecn::ece_reduces_the_window_once_per_window);
}
