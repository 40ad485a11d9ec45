//! RFC 9293's requirement list (Appendix B, Table 8): every MUST and
//! SHOULD, with the scripts that check it, or why none does (met and
//! checked by another test, not applicable, or not met).  A script named
//! here is a path the compiler checks.

use crate::*;

/// How a requirement stands.
pub enum Status {
    /// Checked by these scripts.
    Scripts(&'static [(&'static str, fn())]),
    /// Met, and checked elsewhere (the test named) or by construction.
    Met(&'static str),
    /// Does not apply to ustack, with the reason.
    NotApplicable(&'static str),
    /// Not met, with the reason.
    NotMet(&'static str),
}

/// One requirement of Appendix B.
pub struct Req {
    pub id: &'static str,
    pub what: &'static str,
    pub status: Status,
}

/// `scripts![module::test, ...]`: the scripts, their names and paths.
macro_rules! scripts {
    ($($module:ident :: $test:ident),+ $(,)?) => {
        Status::Scripts(&[$((concat!(stringify!($module), "::", stringify!($test)), $module::$test as fn())),+])
    };
}

macro_rules! reqs {
    ($($id:literal $what:literal => $status:expr;)*) => {
        pub const REQUIREMENTS: &[Req] = &[$(Req { id: $id, what: $what, status: $status }),*];
    };
}

use Status::{Met, NotApplicable, NotMet};

reqs! {
    "MUST-1" "window is an unsigned number" => scripts![options::windows_scaled_after_handshake, window::receive_window_and_update];
    "MUST-2" "sender computes the checksum" => scripts![rfc9293::active_open, rfc9293::passive_open];
    "MUST-3" "receiver checks the checksum" => scripts![rfc9293::bad_checksum_dropped];
    "MUST-4" "mandatory options (EOL, NOP, MSS)" => scripts![options::unaligned_options_read, options::unknown_options_ignored, options::mss_from_interface_mtu];
    "MUST-5" "options received in any segment" => scripts![options::unknown_options_ignored, options::timestamp_echo_rules];
    "MUST-6" "unknown options ignored" => scripts![options::unknown_options_ignored];
    "MUST-7" "illegal option length coped with" => scripts![options::illegal_option_length_dropped];
    "MUST-8" "ISN generator with a clock" => scripts![isn::isn_per_four_tuple];
    "MUST-9" "ISN PRF not computable from outside (MUST NOT)" => scripts![isn::isn_per_four_tuple];
    "MUST-10" "simultaneous open" => scripts![rfc9293::simultaneous_open];
    "MUST-11" "SYN-RECEIVED remembers where it came from" => scripts![rfc9293::rst_in_syn_received_returns_to_listen, rfc9293::rst_in_simultaneous_open_refuses];
    "MUST-12" "application told of an aborted connection" => scripts![rfc9293::rst_at_rcv_nxt_resets, rto::retransmissions_give_up];
    "MUST-13" "TIME-WAIT lasts 2 MSL" => scripts![rfc9293::time_wait_lasts_two_msl];
    "MUST-14" "MSS option sent and received" => scripts![options::mss_from_interface_mtu, options::peer_mss_limits_segments];
    "MUST-15" "send MSS default 536 (IPv4), 1220 (IPv6)" => scripts![options::default_send_mss];
    "MUST-16" "effective send segment size" => scripts![options::local_mtu_bounds_segments, options::peer_mss_limits_segments, options::timestamps_reduce_payload, icmp::frag_needed_shrinks_segments_and_resends_at_once];
    "MUST-17" "application can disable Nagle" => scripts![ack::nodelay_sends_at_once];
    "MUST-18" "Karn's algorithm" => scripts![rto::no_rtt_sample_from_retransmission];
    "MUST-19" "exponential backoff, slow start, congestion avoidance" => scripts![rto::data_rto_minimum_and_backoff, rto::timeout_restarts_from_one_segment, recovery::congestion_avoidance_grows_one_segment_per_window];
    "MUST-20" "negative advice to IP at R1, close at R2 retransmissions" => scripts![rto::negative_advice_after_r1_retransmissions, rto::retransmissions_give_up, rto::connect_times_out];
    "MUST-21" "application can set R2" => scripts![rto::user_timeout_ends_retransmissions, rto::syn_retries_per_connection, timers::user_timeout_bounds_zero_window_probes, timers::user_timeout_replaces_the_keepalive_count];
    "MUST-22" "same mechanism for SYNs" => scripts![rto::connect_times_out, rto::user_timeout_bounds_connect, rto::syn_retries_per_connection];
    "MUST-23" "R2 for a SYN at least 3 minutes" => NotMet("by default a SYN is given up after 127 s (net.inet.tcp.syn_retries=6: 1+2+4+8+16+32+64 s), as Linux does, so that a connect fails as fast as on the kernel the programs were written for; syn_retries=7 (255 s), TCP_SYNCNT or TCP_USER_TIMEOUT meet it");
    "MUST-24" "application can ask for keep-alives" => scripts![timers::keepalive_probes_then_reset];
    "MUST-25" "keep-alives off by default" => scripts![timers::keepalive_off_by_default];
    "MUST-26" "keep-alives only when idle for the interval" => scripts![timers::keepalive_probes_then_reset, timers::keepalive_answered];
    "MUST-27" "keep-alive interval configurable" => scripts![timers::keepalive_probes_then_reset];
    "MUST-28" "keep-alive interval default at least 2 hours" => Met("net.inet.tcp.keepidle defaults to 7200000 ms (TcpConfig::default, config/example.ini); no script waits two hours");
    "MUST-29" "keep-alives tolerant of lost ACKs" => scripts![timers::keepalive_probes_then_reset];
    "MUST-30" "urgent pointer supported" => scripts![urgent::urgent_pointer_after_the_urgent_data, urgent::urgent_octet_read_out_of_band, urgent::read_past_the_mark_skips_the_octet, urgent::urgent_pointer_into_a_later_segment];
    "MUST-31" "urgent data of any length" => scripts![urgent::urgent_data_longer_than_a_segment];
    "MUST-32" "application told of urgent data asynchronously" => scripts![urgent::urgent_octet_read_out_of_band, urgent::urgent_pointer_into_a_later_segment];
    "MUST-33" "application can learn if and how much urgent data is queued" => scripts![urgent::urgent_octet_read_out_of_band, urgent::urgent_pointer_into_a_later_segment];
    "MUST-34" "robust against a shrinking window" => scripts![timers::window_closes_mid_transfer];
    "MUST-35" "standard zero-window probing" => scripts![timers::zero_window_probes];
    "MUST-36" "sender probes a zero window" => scripts![timers::zero_window_probes];
    "MUST-37" "a zero window may stay closed indefinitely" => scripts![timers::zero_window_probes_never_give_up];
    "MUST-38" "sender SWS avoidance" => scripts![window::sender_sws_avoidance];
    "MUST-39" "receiver SWS avoidance" => scripts![window::receive_window_and_update];
    "MUST-40" "ACK delay under 0.5 s" => scripts![ack::delayed_ack_timeout];
    "MUST-41" "a passive OPEN does not disturb other connections (MUST NOT)" => scripts![addresses::listens_on_one_port_per_address, listen::syn_queue_bounded_by_backlog];
    "MUST-42" "simultaneous LISTENs on one port" => scripts![addresses::listens_on_one_port_per_address];
    "MUST-43" "optional local address in OPEN" => scripts![addresses::active_open_keeps_its_source_address];
    "MUST-44" "IP chooses the source address of a SYN when none is given" => scripts![addresses::active_open_keeps_its_source_address];
    "MUST-45" "otherwise the connection's local address is used" => scripts![addresses::active_open_keeps_its_source_address, addresses::passive_open_answers_from_the_address_called];
    "MUST-46" "OPEN to a broadcast or multicast address refused" => scripts![addresses::connect_to_broadcast_or_multicast_refused];
    "MUST-47" "error report mechanism" => scripts![icmp::host_unreachable_is_soft_and_reported_at_timeout, rfc9293::rst_in_syn_sent];
    "MUST-48" "application can set the Diffserv field" => Met("IP_TOS / IPV6_TCLASS: crates/stack/tests/socket_options.rs ttl_and_tos_reach_the_headers, crates/api/tests/posix_vs_linux.rs");
    "MUST-49" "configurable TTL" => Met("IP_TTL and net.inet.ip.ttl: crates/stack/tests/socket_options.rs ttl_and_tos_reach_the_headers, interop cases_capi (IP_TTL 33)");
    "MUST-50" "IP options TCP does not understand are ignored" => Met("IPv4 input skips options by the header length: wire::ipv4 options_are_skipped; the scripts' harness sends no IP options");
    "MUST-51" "application can give a source route" => NotMet("IP source routing is not implemented: ustack sends no source route options (RFC 7126 4.3, 4.4 advise hosts against them)");
    "MUST-52" "a given source route overrides one in the datagram" => NotMet("no source routes (see MUST-51)");
    "MUST-53" "a return route is built from a received source route" => NotMet("no source routes (see MUST-51): received route options are ignored");
    "MUST-54" "ICMP errors acted on" => scripts![icmp::port_unreachable_refuses_connect, icmp::frag_needed_shrinks_segments_and_resends_at_once, icmp::error_about_acknowledged_segment_ignored];
    "MUST-55" "source quench silently discarded" => scripts![icmp::source_quench_ignored];
    "MUST-56" "no abort on unreachable 0, 1, 5, time exceeded, parameter problem (MUST NOT)" => scripts![icmp::host_unreachable_is_soft_and_reported_at_timeout, icmp::errors_on_established_connection_are_soft];
    "MUST-57" "segments to broadcast or multicast addresses silently discarded" => scripts![addresses::syn_to_broadcast_or_multicast_dropped];
    "MUST-58" "ACKs aggregated whenever possible" => scripts![ack::delayed_ack_every_second_segment];
    "MUST-59" "all queued segments processed before an ACK is sent" => Met("with ACKs per receive burst (Stack::set_ack_per_burst): crates/stack/tests/tcp_basic.rs acks_wait_for_the_end_of_the_receive_burst_when_asked; the scripts inject one frame at a time");
    "MUST-60" "data never buffered indefinitely for lack of a PUSH (MUST NOT)" => scripts![ack::nagle_holds_small_segments, ack::nodelay_sends_at_once];
    "MUST-61" "PSH set on the last segment of what was sent" => scripts![rfc9293::active_open];
    "MUST-62" "urgent pointer points at the first non-urgent octet" => scripts![urgent::urgent_pointer_after_the_urgent_data, urgent::urgent_octet_read_out_of_band];
    "MUST-63" "SYN from an invalid source address rejected" => scripts![addresses::syn_from_invalid_source_dropped];
    "MUST-64" "options processed regardless of word alignment" => scripts![options::unaligned_options_read];
    "MUST-65" "no MSS option outside SYNs (MUST NOT)" => scripts![options::peer_mss_limits_segments];
    "MUST-66" "RST (and URG) processed with a zero window" => scripts![window::rst_processed_with_zero_window];
    "MUST-67" "MSS sent from the MMS_R" => scripts![options::mss_from_interface_mtu];
    "MUST-68" "every option but EOL and NOP has a length" => scripts![options::syn_ack_answers_offered_options, options::unknown_options_ignored];
    "MUST-69" "header padding is zeros" => NotApplicable("the options ustack emits are aligned with NOPs and fill the header exactly, so it never emits padding");
    "SHLD-1" "ISN generator with a PRF over the four-tuple and a secret" => scripts![isn::isn_per_four_tuple];
    "SHLD-2" "a RST may carry data" => scripts![rfc9293::rst_with_data_resets];
    "SHLD-3" "RST to tell the peer data was lost" => scripts![close::close_with_unread_data_sends_rst, close::data_after_close_sends_rst];
    "SHLD-4" "timestamps to reduce TIME-WAIT (a newer SYN opens a new incarnation)" => Met("RFC 6191 in Stack::time_wait_yields: checked by the simulation's reuse scenario (crates/stack/tests/tcp_sim/scenarios.rs), not by a script");
    "SHLD-5" "MSS option sent (unless the default)" => scripts![options::mss_from_interface_mtu];
    "SHLD-6" "MSS follows a varying MTU" => scripts![icmp::frag_needed_shrinks_segments_and_resends_at_once, options::local_mtu_bounds_segments];
    "SHLD-7" "Nagle algorithm" => scripts![ack::nagle_holds_small_segments, ack::nagle_sends_full_segments];
    "SHLD-8" "ECN" => scripts![ecn::ecn_agreed_when_the_peer_asks, ecn::ecn_asked_on_connect, ecn::ce_echoed_until_cwr, ecn::ece_reduces_the_window_once_per_window];
    "SHLD-9" "application told when R1 <= retransmissions < R2" => NotMet("no notice at R1 (Linux gives none either); TCP_INFO's retransmits shows the count");
    "SHLD-10" "R1 at least 3 retransmissions" => scripts![rto::negative_advice_after_r1_retransmissions];
    "SHLD-11" "R2 at least 100 s" => Met("net.inet.tcp.max_retries defaults to 15 (about 15 minutes with the RTO ceiling of 60 s, Linux's tcp_retries2); the mechanism: rto::retransmissions_give_up");
    "SHLD-12" "keep-alive without data" => scripts![timers::keepalive_probes_then_reset];
    "SHLD-13" "applications avoid the urgent mechanism" => NotApplicable("advice to applications");
    "SHLD-14" "window not shrunk from the right (SHOULD NOT)" => scripts![window::receive_window_and_update];
    "SHLD-15" "no new data sent into a shrunk window (SHOULD NOT)" => scripts![timers::window_closes_mid_transfer];
    "SHLD-16" "old unacknowledged data within the window retransmitted" => scripts![rto::timeout_restarts_from_one_segment];
    "SHLD-17" "no timeout for data past the right edge (SHOULD NOT)" => scripts![timers::zero_window_probes_never_give_up];
    "SHLD-18" "delayed ACKs" => scripts![ack::delayed_ack_timeout];
    "SHLD-19" "an ACK for every second full-sized segment" => scripts![ack::delayed_ack_every_second_segment];
    "SHLD-20" "application can turn error reports off" => NotApplicable("errors are reported only when asked for (SO_ERROR, a failing call), so there is nothing to turn off");
    "SHLD-21" "application can change the Diffserv field on a connection" => Met("IP_TOS on a connected socket reaches its next segments: crates/stack/tests/socket_options.rs ttl_and_tos_reach_the_headers");
    "SHLD-22" "Diffserv passed unchanged to IP" => Met("the DSCP bits as set, the ECN bits TCP's own: crates/api/tests/posix_vs_linux.rs (IP_TOS 0x13)");
    "SHLD-23" "applications avoid changing the Diffserv field (SHOULD NOT)" => NotApplicable("advice to applications");
    "SHLD-24" "a later source route overrides" => NotMet("no source routes (see MUST-51)");
    "SHLD-25" "unreachable 0, 1, 5 reported to the application" => scripts![icmp::host_unreachable_is_soft_and_reported_at_timeout, icmp::soft_error_forgotten_when_peer_answers];
    "SHLD-26" "unreachable 2-4 abort the connection" => scripts![icmp::port_unreachable_refuses_connect, icmp::protocol_unreachable_refuses_connect, icmp::errors_on_established_connection_are_soft];
    "SHLD-27" "successive PSH bits collapsed" => Met("PSH marks the last segment of the data queued, however many sends queued it (tcp/output.rs); not scripted");
    "SHLD-28" "maximum-sized segments when possible" => scripts![ack::nagle_sends_full_segments, options::peer_mss_limits_segments];
    "SHLD-29" "first zero-window probe after an RTO" => scripts![timers::zero_window_probes];
    "SHLD-30" "zero-window probes back off exponentially" => scripts![timers::zero_window_probes, timers::zero_window_probes_never_give_up];
    "SHLD-31" "out-of-order segments queued" => scripts![ack::immediate_ack_for_out_of_order_and_gap_fill, sack::sack_blocks_for_out_of_order_data];
}

/// The status of a requirement for the table, and its class.
fn cell(s: &Status) -> (&'static str, String) {
    match s {
        Status::Scripts(list) => (
            "checked",
            list.iter()
                .map(|(n, _)| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", "),
        ),
        Met(why) => ("met", (*why).to_string()),
        NotApplicable(why) => ("not applicable", (*why).to_string()),
        NotMet(why) => ("not met", (*why).to_string()),
    }
}

/// Counts per class of the requirements whose id starts with `kind`.
pub fn counts(kind: &str) -> String {
    let of = |class: &str| {
        REQUIREMENTS
            .iter()
            .filter(|r| r.id.starts_with(kind) && cell(&r.status).0 == class)
            .count()
    };
    let total = REQUIREMENTS
        .iter()
        .filter(|r| r.id.starts_with(kind))
        .count();
    format!(
        "{total} {kind}s: {} checked by scripts, {} met and checked elsewhere, {} not applicable, {} not met",
        of("checked"),
        of("met"),
        of("not applicable"),
        of("not met")
    )
}

/// The requirement table of the generated document.
pub fn table() -> String {
    let mut t = format!(
        "{}.\n\n{}.\n\n| requirement | what | status | scripts, or why |\n|---|---|---|---|\n",
        counts("MUST"),
        counts("SHLD")
    );
    for r in REQUIREMENTS {
        let (class, detail) = cell(&r.status);
        t.push_str(&format!(
            "| {} | {} | {class} | {} |\n",
            r.id,
            r.what,
            detail.replace('|', "\\|")
        ));
    }
    t
}

/// Every MUST-1..69 and SHLD-1..31 once, in order; every script named is
/// in the coverage list.
#[test]
fn every_requirement_listed_once() {
    let want: Vec<String> = (1..=69)
        .map(|n| format!("MUST-{n}"))
        .chain((1..=31).map(|n| format!("SHLD-{n}")))
        .collect();
    let have: Vec<&str> = REQUIREMENTS.iter().map(|r| r.id).collect();
    assert_eq!(have, want, "Appendix B's MUSTs and SHOULDs, in order");
    for r in REQUIREMENTS {
        if let Status::Scripts(list) = &r.status {
            assert!(!list.is_empty(), "{}: no script", r.id);
            for (name, _) in *list {
                let (module, test) = name.split_once("::").unwrap();
                assert!(
                    crate::coverage::COVERAGE
                        .iter()
                        .any(|c| c.module == module && c.test == test),
                    "{}: {name} is not in COVERAGE",
                    r.id
                );
            }
        }
    }
}
