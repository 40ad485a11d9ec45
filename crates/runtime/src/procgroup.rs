//! Several processes on one port, one engine each: the way `ustack run`
//! serves a program that forks workers (nginx, NSD) and F-Stack's
//! multi-process mode.  Each process's AF_PACKET socket on the interface
//! joins one fanout group whose program computes ustack's flow hash
//! (`link::fanout`), so each flow reaches exactly one process; each
//! process reads the interface's ARP and IPv6 neighbour discovery on a tap
//! of its own (`link::ArpTap`), so every neighbour table learns what any
//! process asked.  While
//! processes join and leave the group, the hash sends some flows to a
//! process that does not have them: it hands such frames to the others
//! (`link::handoff`) instead of resetting the connection, and the process
//! that has the flow takes them.

use std::io;
use std::time::{Duration, Instant};

use crate::config::{Config, LinkSpec};
use crate::engine::Engine;
use crate::ports::PortLink;
use crate::setup::{link_name, SetupError};

/// Joins every port of `engine` to fanout group `group` (created by the
/// first process that joins) with the flow-hash program, and adds its ARP
/// tap.  Only AF_PACKET ports can be shared this way.
pub fn share_ports(
    engine: &mut Engine<PortLink>,
    cfg: &Config,
    group: u16,
) -> Result<(), SetupError> {
    share_ports_engine(engine, cfg, group, 0)
}

/// [`share_ports`] for engine `index` of several in this process (each
/// its own member of the group).
pub fn share_ports_engine(
    engine: &mut Engine<PortLink>,
    cfg: &Config,
    group: u16,
    index: usize,
) -> Result<(), SetupError> {
    let mut taps = Vec::new();
    let mut pass_taps = Vec::new();
    let mut xdp = false;
    // A packet socket bound to the interface has received a copy of every
    // frame since it opened: frames the group's members received too (a
    // SYN answered twice, the second answer reset by the member that has
    // the first).  With members in the group, the sockets stop receiving,
    // drop what they hold, join, and resume.
    let bystander = members(group) > 0;
    let packet_links = || {
        engine.ports().filter_map(|l| match l.device() {
            PortLink::AfPacket(l) => Some(l),
            _ => None,
        })
    };
    if bystander {
        for l in packet_links() {
            l.set_receiving(false).map_err(|error| SetupError::Open {
                port: 0,
                link: "af_packet (stopping it before it joins the group)".into(),
                error,
            })?;
        }
        if cfg
            .ports
            .iter()
            .any(|p| p.rx_ring == crate::config::RxRingSetting::V3)
        {
            // A TPACKET_V3 block shows its frames once retired (1 ms).
            std::thread::sleep(V3_RETIRE_WAIT);
        }
        engine.drop_received_before_group_join();
    }
    for (i, (port, link)) in cfg.ports.iter().zip(engine.ports()).enumerate() {
        let err = |error: io::Error| SetupError::Open {
            port: port.id,
            link: link_name(&port.link),
            error,
        };
        match (&port.link, link.device()) {
            (LinkSpec::AfPacket(ifname), PortLink::AfPacket(l)) => {
                l.join_fanout(Some(group)).map_err(err)?;
                l.set_fanout_program().map_err(err)?;
                if bystander {
                    l.set_receiving(true).map_err(err)?;
                }
                taps.push((i as u16, link::ArpTap::open(ifname).map_err(err)?));
            }
            // Its queue was bound when the link opened (xdp::open_member);
            // the program hands no frame to a tap, so the neighbour frames
            // of each queue go to the others over the handoff channel.
            // The frames of queues no process holds reach the kernel: a
            // pass tap per port, in a fanout group of its own, takes them.
            (LinkSpec::AfXdp(ifname), PortLink::AfXdp(_)) => {
                xdp = true;
                let tap = link::PassTap::open(ifname, pass_tap_group(group, i)).map_err(err)?;
                pass_taps.push((i as u16, tap));
            }
            (LinkSpec::AfPacket(_) | LinkSpec::AfXdp(_), _) => return unreachable_link(port.id),
            (LinkSpec::Dpdk, _) => {
                return Err(SetupError::PortIncomplete {
                    port: port.id,
                    what: DPDK_SHARED,
                })
            }
            _ => {
                return Err(SetupError::PortIncomplete {
                    port: port.id,
                    what: "several processes on one port need link=af_packet or link=af_xdp",
                })
            }
        }
    }
    for (i, tap) in taps {
        engine.add_arp_tap(i, tap);
    }
    for (i, tap) in pass_taps {
        engine.add_pass_tap(i, tap);
    }
    let handoff = link::FlowHandoff::open(group, index).map_err(|error| SetupError::Open {
        port: 0,
        link: "the group's handoff channel".into(),
        error,
    })?;
    engine.set_flow_handoff(handoff);
    engine.set_share_neighbors(xdp);
    Ok(())
}

/// The fanout group of port `port`'s pass taps: apart from `group` (the
/// AF_PACKET ports' group, bound to another interface) and per port (a
/// group belongs to one interface).
fn pass_tap_group(group: u16, port: usize) -> u16 {
    0x8000 | (group.wrapping_add(port as u16) & 0x7fff)
}

/// Longer than a TPACKET_V3 ring's block retire timeout (`ring_config`'s
/// 1 ms).
const V3_RETIRE_WAIT: Duration = Duration::from_millis(3);

fn unreachable_link<T>(port: u16) -> Result<T, SetupError> {
    Err(SetupError::PortIncomplete {
        port,
        what: "link=af_packet or af_xdp opened as another kind of link",
    })
}

/// Why a `link=dpdk` port is not shared between processes as the others
/// are (see [`dpdk_share_by_copy`] for what is).
pub const DPDK_SHARED: &str = "several processes on one link=dpdk port work only on \
     net_af_packet vdevs, each process its own EAL and vdev (F-Stack's primary and secondary \
     processes are not possible here: a secondary maps the primary's hugepage memory, and an \
     EAL without hugepages, no_huge, has none to share; a PCI device has one owner); use \
     link=af_xdp or link=af_packet, or net_af_packet vdevs";

/// Whether processes from one configuration can share its `link=dpdk`
/// ports by each running an EAL of its own (its own `file_prefix`) with
/// its own `net_af_packet` vdev on the interface: DPDK 22.11's af_packet
/// driver puts its socket in a fanout group keyed by its process id, so
/// every process receives every frame, and each keeps its own flows
/// (`Engine::share_by_copy`).  Not with PCI devices or other vdevs.
pub fn dpdk_share_by_copy(cfg: &Config) -> bool {
    cfg.dpdk.pci_allow.is_empty()
        && !cfg.dpdk.vdev.is_empty()
        && cfg.dpdk.vdev.iter().all(|v| v.starts_with("net_af_packet"))
}

/// A fanout group id for processes started on their own from one
/// configuration (F-Stack's `--proc-id`): the same for each of them, from
/// `[dpdk] file_prefix` (F-Stack's name for a set of processes) and the
/// ports' interfaces.
pub fn group_for(cfg: &Config) -> u16 {
    let mut key = cfg
        .dpdk
        .file_prefix
        .clone()
        .unwrap_or_else(|| "ustack".into());
    for p in &cfg.ports {
        key.push(':');
        key.push_str(&link_name(&p.link));
    }
    // FNV-1a, folded to 16 bits; 0 is avoided.
    let mut h: u32 = 0x811c_9dc5;
    for b in key.bytes() {
        h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    (((h >> 16) ^ h) as u16).max(1)
}

/// How many processes have joined `group` (each opens its handoff channel
/// right after joining).
pub fn members(group: u16) -> usize {
    let prefix = format!("@ustack-g{group}-p");
    std::fs::read_to_string("/proc/net/unix")
        .map(|t| {
            t.lines()
                .filter(|l| {
                    l.split_whitespace()
                        .nth(7)
                        .is_some_and(|p| p.starts_with(&prefix))
                })
                .count()
        })
        .unwrap_or(0)
}

/// [`share_ports`] as member `index` of the group: waits (up to `wait`)
/// until the `index` processes before it have joined, so that the kernel
/// gives it position `index` and the flows its outgoing connections'
/// ports were chosen for.  Returns whether it joined in its place (if not,
/// replies reaching another process are handed over to it, more slowly).
pub fn share_ports_as(
    engine: &mut Engine<PortLink>,
    cfg: &Config,
    group: u16,
    index: usize,
    wait: Duration,
) -> Result<bool, SetupError> {
    let end = Instant::now() + wait;
    let mut in_place = members(group) == index;
    while !in_place && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(10));
        in_place = members(group) == index;
    }
    share_ports(engine, cfg, group)?;
    Ok(in_place)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(dpdk: &str) -> Config {
        let text = format!("[dpdk]\nlcore_mask=3\n{dpdk}[port0]\nlink=dpdk\naddr=10.99.1.2/24\n");
        Config::parse(&text, "t.ini").unwrap()
    }

    #[test]
    fn dpdk_is_shared_by_copy_only_on_af_packet_vdevs() {
        assert!(dpdk_share_by_copy(&config(
            "no_huge=1\nvdev=net_af_packet0,iface=veth0\n"
        )));
        // A PCI device has one owner; other vdevs (a TAP of their own per
        // process, AF_XDP queues) do not receive every frame in each.
        assert!(!dpdk_share_by_copy(&config("pci_whitelist=0000:01:00.0\n")));
        assert!(!dpdk_share_by_copy(&config("vdev=net_tap0,iface=t0\n")));
        assert!(!dpdk_share_by_copy(&config("")));
    }
}
