//! Which scripts cover which RFC section.  Each entry names a test
//! function (a path the compiler checks); the tests below check that every
//! script is listed, that each script's doc comment names the sections it
//! is listed under, and that `docs/tcp-conformance.md` is the document
//! generated here.

use crate::*;

/// One RFC section covered by one script.
pub struct Cover {
    pub rfc: &'static str,
    pub section: &'static str,
    pub module: &'static str,
    pub test: &'static str,
    /// The script itself: listing a name that is not a function fails to
    /// compile.
    pub run: fn(),
}

macro_rules! coverage {
    ($($rfc:literal $section:literal $module:ident :: $test:ident;)*) => {
        pub const COVERAGE: &[Cover] = &[$(Cover {
            rfc: $rfc,
            section: $section,
            module: stringify!($module),
            test: stringify!($test),
            run: $module::$test as fn(),
        }),*];
    };
}

coverage! {
    "RFC 9293" "3.5" rfc9293::active_open;
    "RFC 9293" "3.5" rfc9293::passive_open;
    "RFC 9293" "3.5" rfc9293::simultaneous_open;
    "RFC 9293" "3.6" rfc9293::simultaneous_close;
    "RFC 9293" "3.6" rfc9293::half_close_local;
    "RFC 9293" "3.6" rfc9293::half_close_remote;
    "RFC 9293" "3.10.7.1" rfc9293::closed_port_rst_for_ack;
    "RFC 9293" "3.10.7.1" rfc9293::closed_port_rst_for_no_ack;
    "RFC 9293" "3.10.7.1" rfc9293::closed_port_ignores_rst;
    "RFC 9293" "3.10.7.2" rfc9293::listen_rejects_ack_ignores_rst;
    "RFC 9293" "3.10.7.3" rfc9293::rst_in_syn_sent;
    "RFC 9293" "3.10.7.3" rfc9293::syn_sent_bad_ack_gets_reset;
    "RFC 9293" "3.10.7.3" rfc9293::data_in_syn_ack_taken;
    "RFC 9293" "3.10.7.4" rfc9293::rst_at_rcv_nxt_resets;
    "RFC 9293" "3.10.7.4" rfc9293::rst_outside_window_dropped;
    "RFC 9293" "3.10.7.4" rfc9293::rst_in_syn_received_returns_to_listen;
    "RFC 9293" "3.10.7.4" rfc9293::time_wait_lasts_two_msl;
    "RFC 9293" "3.10.7.4" rfc9293::time_wait_acks_retransmitted_fin;
    "RFC 9293" "3.10.7.4" rfc9293::syn_received_bad_ack_gets_reset;
    "RFC 9293" "3.10.7.4" rfc9293::duplicate_syn_resends_syn_ack;
    "RFC 9293" "3.8.6.2.2" window::receive_window_and_update;
    "RFC 9293" "3.8.6.2.2" window::larger_receive_buffer_opens_the_window_with_the_next_ack;
    "RFC 9293" "3.8.6.2.2" window::read_in_place_sends_the_window_update;
    "RFC 9293" "3.8.6.2.1" window::sender_sws_avoidance;
    "RFC 9293" "3.10.7.4" window::zero_window_accepts_acks_only;
    "RFC 9293" "3.10.7.4" window::data_beyond_window_trimmed;
    "RFC 9293" "3.10.7.4" window::fin_after_gap_waits;
    "RFC 9293" "3.10.7.4" window::data_on_handshake_ack;
    "RFC 5681" "3.1" rto::timeout_restarts_from_one_segment;
    "RFC 6298" "3" rto::no_rtt_sample_from_retransmission;
    "RFC 9293" "3.10.7.4" rfc9293::rst_in_simultaneous_open_refuses;
    "RFC 9293" "3.10.7.4" rfc9293::rst_while_closing;
    "RFC 6298" "5.4" rto::timeout_restarts_from_one_segment;
    "RFC 5961" "3.2" rfc5961::challenge_ack_for_rst_not_at_rcv_nxt;
    "RFC 5961" "4.2" rfc5961::challenge_ack_for_syn_in_established;
    "RFC 5961" "5.2" rfc5961::challenge_ack_for_ack_too_old;
    "RFC 5961" "5.2" rfc5961::ack_for_unsent_data_dropped;
    "RFC 5961" "7" rfc5961::challenge_acks_rate_limited;
    "RFC 9293" "3.7.1" options::mss_from_interface_mtu;
    "RFC 9293" "3.7.1" options::peer_mss_limits_segments;
    "RFC 9293" "3.7.1" options::default_send_mss;
    "RFC 6691" "2" options::timestamps_reduce_payload;
    "RFC 7323" "2.2" options::syn_ack_answers_offered_options;
    "RFC 2018" "2" options::syn_ack_answers_offered_options;
    "RFC 7323" "2.2" options::no_window_scale_unless_offered;
    "RFC 7323" "2.3" options::windows_scaled_after_handshake;
    "RFC 7323" "2.2" options::large_buffer_offered_unscaled_then_whole_without_an_ack_for_the_ack;
    "RFC 7323" "2.2" options::syn_ack_window_not_scaled;
    "RFC 7323" "2.3" options::window_scale_above_14_is_14;
    "RFC 7323" "4.3" options::timestamp_echo_rules;
    "RFC 7323" "4.1" options::rtt_measured_from_timestamps;
    "RFC 6298" "2.2" options::rtt_measured_from_timestamps;
    "RFC 6298" "2.3" options::rtt_measured_from_timestamps;
    "RFC 7323" "5.3" options::paws_drops_old_timestamps;
    "RFC 2018" "4" sack::sack_blocks_for_out_of_order_data;
    "RFC 6675" "5" sack::sack_recovery_retransmits_only_holes;
    "RFC 6675" "5" sack::sack_loss_detected_before_three_dupacks;
    "RFC 6298" "2.1" rto::syn_rto_initial_and_backoff;
    "RFC 6298" "5.5" rto::syn_rto_initial_and_backoff;
    "RFC 6298" "2.4" rto::data_rto_minimum_and_backoff;
    "RFC 6298" "5.5" rto::data_rto_minimum_and_backoff;
    "RFC 6298" "5.3" rto::rto_restarted_by_new_ack;
    "RFC 6298" "5.7" rto::rto_three_seconds_after_syn_retransmission;
    "RFC 6298" "5.7" rto::rto_three_seconds_after_syn_ack_retransmission;
    "RFC 9293" "3.8.3" rto::connect_times_out;
    "RFC 9293" "3.8.3" rto::retransmissions_give_up;
    "RFC 5681" "3.2" recovery::fast_retransmit_on_third_dupack;
    "RFC 3042" "2" recovery::limited_transmit;
    "RFC 5681" "3.2" recovery::fast_recovery_inflates_window;
    "RFC 6582" "3.2" recovery::newreno_partial_ack;
    "RFC 9438" "4.6" recovery::cubic_is_default;
    "RFC 5681" "3.1" recovery::newreno_selectable;
    "RFC 6582" "3.2" recovery::newreno_selectable;
    "RFC 5681" "4.2" ack::delayed_ack_every_second_segment;
    "RFC 9293" "3.8.6.3" ack::delayed_ack_timeout;
    "RFC 9293" "3.8.6.3" ack::delayed_ack_disabled;
    "RFC 5681" "4.2" ack::immediate_ack_for_out_of_order_and_gap_fill;
    "RFC 9293" "3.8.6.3" ack::ack_piggybacked_on_data;
    "RFC 9293" "3.7.4" ack::nagle_holds_small_segments;
    "RFC 9293" "3.7.4" ack::nagle_sends_full_segments;
    "RFC 9293" "3.7.4" ack::nodelay_sends_at_once;
    "RFC 9293" "3.8.6.1" timers::zero_window_probes;
    "RFC 9293" "3.8.6.1" timers::window_closes_mid_transfer;
    "RFC 1122" "4.2.2.17" timers::zero_window_probes_never_give_up;
    "RFC 9293" "3.8.4" timers::keepalive_probes_then_reset;
    "RFC 9293" "3.8.4" timers::keepalive_answered;
    "RFC 9293" "3.8.4" timers::keepalive_off_by_default;
    "RFC 9293" "3.10.4" close::close_sends_fin_after_data;
    "RFC 9293" "3.10.5" close::linger_zero_close_sends_rst;
    "RFC 6298" "5.4" close::fin_retransmitted_on_timeout;
    "RFC 9293" "3.10.4" close::fin_retransmitted_on_timeout;
    "RFC 1122" "4.2.2.13" close::close_with_unread_data_sends_rst;
    "RFC 2525" "2.17" close::close_with_unread_data_sends_rst;
    "RFC 1122" "4.2.2.13" close::data_after_close_sends_rst;
    "RFC 6528" "3" isn::isn_per_four_tuple;
    "RFC 6056" "3.3.4" isn::ephemeral_ports;
    "RFC 4987" "2" listen::syn_queue_bounded_by_backlog;
    "RFC 4987" "2" listen::accept_queue_bounded_by_backlog;
    "RFC 4987" "2" listen::somaxconn_caps_backlog;
    "RFC 4987" "2" listen::handshake_ack_dropped_while_accept_queue_full;
    "RFC 4987" "2" listen::syn_queue_entry_expires;
    "RFC 4987" "3.6" listen::syn_cookie_when_syn_queue_full;
    "RFC 4987" "3.6" listen::syn_cookie_without_timestamps_and_bad_cookie;
    "RFC 1122" "4.2.3.9" icmp::port_unreachable_refuses_connect;
    "RFC 9293" "3.9.2.2" icmp::port_unreachable_refuses_connect;
    "RFC 1122" "4.2.3.9" icmp::protocol_unreachable_refuses_connect;
    "RFC 9293" "3.9.2.2" icmp::protocol_unreachable_refuses_connect;
    "RFC 1122" "4.2.3.9" icmp::host_unreachable_is_soft_and_reported_at_timeout;
    "RFC 9293" "3.9.2.2" icmp::host_unreachable_is_soft_and_reported_at_timeout;
    "RFC 5927" "4.2" icmp::errors_on_established_connection_are_soft;
    "RFC 1122" "4.2.3.9" icmp::errors_on_established_connection_are_soft;
    "RFC 1122" "4.2.3.9" icmp::soft_error_forgotten_when_peer_answers;
    "RFC 5927" "4.1" icmp::error_about_acknowledged_segment_ignored;
    "RFC 1191" "6.4" icmp::frag_needed_shrinks_segments_and_resends_at_once;
    "RFC 9293" "3.7.2" icmp::frag_needed_shrinks_segments_and_resends_at_once;
    "RFC 5927" "7.2" icmp::frag_needed_shrinks_segments_and_resends_at_once;
    "RFC 9293" "3.1" options::unknown_options_ignored;
    "RFC 9293" "3.2" options::unaligned_options_read;
    "RFC 9293" "3.1" options::illegal_option_length_dropped;
    "RFC 9293" "3.7.1" options::local_mtu_bounds_segments;
    "RFC 9293" "3.10.7.4" window::rst_processed_with_zero_window;
    "RFC 3168" "6.1.1" ecn::ecn_agreed_when_the_peer_asks;
    "RFC 3168" "6.1.4" ecn::ecn_agreed_when_the_peer_asks;
    "RFC 3168" "6.1.5" ecn::ecn_agreed_when_the_peer_asks;
    "RFC 3168" "6.1.1" ecn::ecn_refused_when_off;
    "RFC 3168" "6.1.1" ecn::ecn_asked_on_connect;
    "RFC 3168" "6.1.3" ecn::ce_echoed_until_cwr;
    "RFC 3168" "6.1.2" ecn::ece_reduces_the_window_once_per_window;
    "RFC 5482" "3" timers::user_timeout_bounds_zero_window_probes;
    "RFC 5482" "3" timers::user_timeout_replaces_the_keepalive_count;
    "RFC 9293" "3.8.5" urgent::urgent_pointer_after_the_urgent_data;
    "RFC 6093" "2" urgent::urgent_pointer_after_the_urgent_data;
    "RFC 9293" "3.8.5" urgent::urgent_data_longer_than_a_segment;
    "RFC 9293" "3.8.5" urgent::urgent_octet_read_out_of_band;
    "RFC 9293" "3.8.5" urgent::read_past_the_mark_skips_the_octet;
    "RFC 9293" "3.8.5" urgent::urgent_pointer_into_a_later_segment;
    "RFC 6093" "3" urgent::oob_inline_keeps_the_octet_in_the_stream;
    "RFC 6093" "4" urgent::newer_urgent_pointer_moves_the_mark;
    "RFC 5681" "3.1" recovery::congestion_avoidance_grows_one_segment_per_window;
    "RFC 9293" "3.8.3" rto::user_timeout_ends_retransmissions;
    "RFC 5482" "3" rto::user_timeout_ends_retransmissions;
    "RFC 9293" "3.8.3" rto::user_timeout_bounds_connect;
    "RFC 5482" "3" rto::user_timeout_bounds_connect;
    "RFC 9293" "3.8.3" rto::syn_retries_per_connection;
    "RFC 9293" "3.8.3" rto::negative_advice_after_r1_retransmissions;
    "RFC 1122" "4.2.3.5" rto::negative_advice_after_r1_retransmissions;
    "RFC 9293" "3.9.1.1" addresses::listens_on_one_port_per_address;
    "RFC 9293" "3.9.1.1" addresses::connect_to_broadcast_or_multicast_refused;
    "RFC 9293" "3.9.2.2" icmp::source_quench_ignored;
    "RFC 9293" "3.5.3" rfc9293::rst_with_data_resets;
    "RFC 9293" "3.8.2" recovery::congestion_avoidance_grows_one_segment_per_window;
    "RFC 9293" "3.1" rfc9293::bad_checksum_dropped;
    "RFC 9293" "3.9.2.1" addresses::syn_to_broadcast_or_multicast_dropped;
    "RFC 9293" "3.10.7.2" addresses::syn_to_broadcast_or_multicast_dropped;
    "RFC 9293" "3.9.1.1" addresses::syn_from_invalid_source_dropped;
    "RFC 1122" "4.2.3.10" addresses::syn_from_invalid_source_dropped;
    "RFC 9293" "3.9.1.1" addresses::active_open_keeps_its_source_address;
    "RFC 9293" "3.10.1" addresses::active_open_keeps_its_source_address;
    "RFC 9293" "3.9.1.1" addresses::passive_open_answers_from_the_address_called;
    "RFC 9293" "3.10.7.2" addresses::passive_open_answers_from_the_address_called;
}

/// The script sources, to find every `#[test]` and its doc comment.
const SOURCES: &[(&str, &str)] = &[
    ("rfc9293", include_str!("rfc9293.rs")),
    ("rfc5961", include_str!("rfc5961.rs")),
    ("listen", include_str!("listen.rs")),
    ("options", include_str!("options.rs")),
    ("sack", include_str!("sack.rs")),
    ("rto", include_str!("rto.rs")),
    ("recovery", include_str!("recovery.rs")),
    ("ack", include_str!("ack.rs")),
    ("timers", include_str!("timers.rs")),
    ("close", include_str!("close.rs")),
    ("isn", include_str!("isn.rs")),
    ("window", include_str!("window.rs")),
    ("icmp", include_str!("icmp.rs")),
    ("addresses", include_str!("addresses.rs")),
    ("urgent", include_str!("urgent.rs")),
    ("ecn", include_str!("ecn.rs")),
];

/// A script found in the sources: module, name, doc comment (one line).
struct Found {
    module: &'static str,
    name: String,
    doc: String,
}

fn scripts() -> Vec<Found> {
    let mut out = Vec::new();
    for &(module, src) in SOURCES {
        let lines: Vec<&str> = src.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if line.trim() != "#[test]" {
                continue;
            }
            let Some(name) = lines
                .get(i + 1)
                .and_then(|l| l.trim().strip_prefix("pub fn "))
                .and_then(|l| l.split('(').next())
            else {
                continue;
            };
            let mut doc = Vec::new();
            let mut j = i;
            while j > 0 {
                j -= 1;
                match lines[j].trim().strip_prefix("///") {
                    Some(d) => doc.push(d.trim()),
                    None => break,
                }
            }
            doc.reverse();
            out.push(Found {
                module,
                name: name.to_string(),
                doc: doc.join(" "),
            });
        }
    }
    out
}

/// Sort key: the RFC's number, then the section's numbers.
fn order(c: &Cover) -> (u32, Vec<u32>) {
    let num = |s: &str| s.parse::<u32>().unwrap_or(u32::MAX);
    let rfc = num(c.rfc.trim_start_matches("RFC "));
    (rfc, c.section.split('.').map(num).collect())
}

/// The script table: one row per (RFC section, script), by RFC and
/// section, scripts in list order.
pub fn table() -> String {
    let found = scripts();
    let mut rows: Vec<&Cover> = COVERAGE.iter().collect();
    rows.sort_by_key(|c| order(c));
    let mut t = String::from("| RFC | section | behaviour | script |\n|---|---|---|---|\n");
    for c in rows {
        let doc = found
            .iter()
            .find(|f| f.module == c.module && f.name == c.test)
            .map_or(String::new(), |f| f.doc.clone());
        // The behaviour: the doc comment after its leading "RFC ...:".
        let what = doc.split_once(": ").map_or(doc.as_str(), |(_, w)| w);
        t.push_str(&format!(
            "| {} | {} | {} | `{}::{}` |\n",
            c.rfc,
            c.section,
            what.replace('|', "\\|"),
            c.module,
            c.test
        ));
    }
    t
}

/// Whether `doc` names `section` of `rfc`: "RFC 6298 2.2, 2.3:" names
/// both 2.2 and 2.3 of RFC 6298.
fn names_section(doc: &str, rfc: &str, section: &str) -> bool {
    doc.match_indices(rfc).any(|(at, _)| {
        let rest = &doc[at + rfc.len()..];
        let list = rest.split([':', ';', '(', ')']).next().unwrap_or("");
        list.split([' ', ',']).any(|w| w == section)
    })
}

#[test]
fn every_script_is_covered_and_names_its_sections() {
    let found = scripts();
    assert!(!found.is_empty());
    for f in &found {
        if f.module == "coverage" {
            continue;
        }
        let entries: Vec<&Cover> = COVERAGE
            .iter()
            .filter(|c| c.module == f.module && c.test == f.name)
            .collect();
        assert!(
            !entries.is_empty(),
            "{}::{} is not in COVERAGE",
            f.module,
            f.name
        );
        for c in entries {
            assert!(
                names_section(&f.doc, c.rfc, c.section),
                "the doc comment of {}::{} does not name {} {}: {:?}",
                f.module,
                f.name,
                c.rfc,
                c.section,
                f.doc
            );
        }
    }
    for c in COVERAGE {
        assert!(
            found
                .iter()
                .any(|f| f.module == c.module && f.name == c.test),
            "{}::{} is listed but is not a #[test] in the sources",
            c.module,
            c.test
        );
        let _ = c.run;
    }
}

/// Where the generated tables live (the README links to it).
const DOC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/tcp-conformance.md");

/// The whole generated document.
fn document() -> String {
    format!(
        "# TCP conformance\n\n\
         Generated from `crates/stack/tests/conformance/coverage.rs` by the\n\
         `coverage_table` test (`make test` prints it; run it with\n\
         `USTACK_BLESS=1` to rewrite this file after changing the scripts).\n\n\
         `crates/stack/tests/conformance` holds packetdrill-style scripts: each\n\
         one injects segments from a fake peer into one stack on a simulated\n\
         clock and checks the segments the stack emits, field by field, over\n\
         IPv4 and again over IPv6 (`v6.rs`).\n\n\
         ## RFC 9293 requirements (Appendix B)\n\n\
         Every MUST and SHOULD of RFC 9293's requirement summary, with the\n\
         scripts that check it, or why none does (`requirements.rs`).\n\n{}\n\
         ## Scripts by RFC section\n\n{}",
        crate::requirements::table(),
        table()
    )
}

/// Prints the coverage table (`make test` shows it) and checks the copy
/// in `docs/tcp-conformance.md` (rewritten with `USTACK_BLESS=1`).
#[test]
fn coverage_table() {
    let doc = document();
    println!("\n{doc}");
    println!(
        "RFC 9293 requirements: {}; {}",
        crate::requirements::counts("MUST"),
        crate::requirements::counts("SHLD")
    );
    if std::env::var_os("USTACK_BLESS").is_some() {
        std::fs::write(DOC, &doc).expect("write docs/tcp-conformance.md");
        return;
    }
    let have = std::fs::read_to_string(DOC).unwrap_or_default();
    assert!(
        have == doc,
        "docs/tcp-conformance.md is out of date: run \
         `USTACK_BLESS=1 cargo test --release -p stack --test conformance coverage_table`"
    );
}
