//! `link=dpdk`: the EAL and a port's DPDK settings from `[dpdk]` and
//! `[portN]` (cargo feature `dpdk`).
//!
//! As in F-Stack, `[portN] link=dpdk` is ethdev port N: the N-th device DPDK
//! probed (PCI devices from `allow`/`pci_whitelist`, then the `vdev`s in
//! order). When `vdev=` is set and no PCI device is allowed, PCI is not
//! probed at all (`--no-pci`), so a development setup on virtual devices
//! never touches the machine's NICs.

use std::io;

use link::dpdk::{eal, DpdkLink, DpdkPortConfig, EalConfig, ProcType as EalProcType};

use crate::config::{DpdkConfig, PortConfig, ProcType};
use crate::setup::DEFAULT_POOL_BUFFERS;

/// The EAL's settings from `[dpdk]`.
pub fn eal_config(d: &DpdkConfig) -> EalConfig {
    EalConfig {
        lcores: d.lcore_mask.as_ref().map(|m| m.iter().collect()),
        channels: d.channel,
        allow: d.pci_allow.clone(),
        no_pci: d.pci_allow.is_empty() && !d.vdev.is_empty(),
        file_prefix: d.file_prefix.clone(),
        no_huge: d.no_huge,
        memory_mb: d.memory_mb,
        vdevs: d.vdev.clone(),
        base_virtaddr: d.base_virtaddr,
        proc_type: match d.proc_type {
            ProcType::Auto => EalProcType::Auto,
            ProcType::Primary => EalProcType::Primary,
            ProcType::Secondary => EalProcType::Secondary,
        },
        log_level: d.log_level,
    }
}

/// The most descriptors asked per ring.
const MAX_DESC: u32 = 512;

/// Port N's settings from `[dpdk]` and `[portN]`: mbufs sized for the MTU
/// and counted as `[portN] memory` says, descriptors a quarter of the pool
/// each way (at most 512), a sixteenth of the pool kept for ARP and ICMP.
pub fn port_config(d: &DpdkConfig, port: &PortConfig) -> DpdkPortConfig {
    let mtu = usize::from(port.mtu.unwrap_or(1500)).max(1500);
    let buf_size = (mtu + 64).next_power_of_two().max(2048);
    let pool_size = port
        .memory
        .map_or(DEFAULT_POOL_BUFFERS, |m| m.buffers(buf_size));
    let desc = prev_power_of_two((pool_size / 4).min(MAX_DESC)).max(16) as u16;
    DpdkPortConfig {
        port_id: port.id,
        pool_size,
        buf_size,
        reserve: (pool_size / 16).max(8),
        rx_desc: desc,
        tx_desc: desc,
        promiscuous: d.promiscuous,
        tx_csum_offload: !d.tx_csum_offload_skip,
        tso: d.tso,
        vlan_strip: d.vlan_strip,
        symmetric_rss: d.symmetric_rss,
        mtu: port.mtu,
        mac: port.mac,
    }
}

fn prev_power_of_two(n: u32) -> u32 {
    if n == 0 {
        0
    } else {
        1 << (31 - n.leading_zeros())
    }
}

/// Starts the EAL (once per process) and opens port N.
pub fn open(d: &DpdkConfig, port: &PortConfig) -> io::Result<DpdkLink> {
    let mut links = open_queues(d, port, 1)?;
    Ok(links.remove(0))
}

/// Starts the EAL (once per process) and opens port N with one queue pair
/// per engine, queue `e` for engine `e`.
pub fn open_queues(d: &DpdkConfig, port: &PortConfig, engines: usize) -> io::Result<Vec<DpdkLink>> {
    eal::init(&eal_config(d))?;
    let queues = u16::try_from(engines)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "too many engines"))?;
    let links = DpdkLink::open_queues(&port_config(d, port), queues)?;
    let link = &links[0];
    let o = link.offloads();
    eprintln!(
        "ustack: [port{}] dpdk port {} ({}): {} queue pair(s), rx checksum offload tcp={} \
         udp={} ipv4={}, lro={}, tx checksum offload tcp={} udp={}, tso={}, vlan strip={}, \
         rx scatter={}{}, rss={}{}",
        port.id,
        link.port_id(),
        link.driver(),
        links.len(),
        o.rx_tcp_csum,
        o.rx_udp_csum,
        o.rx_ipv4_csum,
        o.rx_lro,
        o.tx_tcp_csum,
        o.tx_udp_csum,
        o.tso,
        o.vlan_strip,
        o.rx_scatter,
        // A driver whose frames may exceed the port's buffers (af_packet's
        // framesz) receives into mbufs of its frame size.
        o.large_rx_frame
            .map(|f| format!(", received into mbufs of {f} bytes"))
            .unwrap_or_default(),
        o.rss_hf != 0,
        // Whatever queue the port puts a frame on (its RSS hash, or for a
        // port without RSS queue 0 or the driver's own rule), the engine
        // that reads it hands it to the engine of its flow.
        match (links.len() > 1, o.rss_hf != 0 && d.symmetric_rss) {
            (true, true) => " with the symmetric key; frames steered to their engine",
            (true, false) => "; frames steered to their engine",
            _ => "",
        }
    );
    if d.tso && !o.tso {
        eprintln!(
            "ustack: [port{}] tso=1: the port has no TCP segmentation offload (or no TCP \
             checksum offload): frames go out at the MTU",
            port.id
        );
    } else if o.tso && !o.tso_ipv6 {
        eprintln!(
            "ustack: [port{}] tso=1: the port cuts TCP over IPv4; IPv6 super-frames are cut \
             by the link",
            port.id
        );
    }
    Ok(links)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn eal_and_port_settings_from_config() {
        let cfg = Config::parse(
            "[dpdk]\nlcore_mask=6\nchannel=2\nfile_prefix=us7\nno_huge=1\nmemory=256\n\
             vdev=net_af_packet0,iface=a;net_af_packet1,iface=b\npromiscuous=0\n\
             tx_csum_offoad_skip=1\ntso=1\nvlan_strip=0\nsymmetric_rss=1\n\
             [port0]\nlink=dpdk\naddr=10.99.1.2/24\nmemory=1024\nmtu=1400\n\
             mac=02:00:00:00:00:07\n\
             [port1]\nlink=dpdk\naddr=10.99.2.2/24\n",
            "t.ini",
        )
        .unwrap();
        let e = eal_config(&cfg.dpdk);
        assert_eq!(
            e.args().join(" "),
            "ustack -l 1,2 -n 2 --no-pci --file-prefix us7 --no-huge -m 256 \
             --vdev net_af_packet0,iface=a,framesz=65408,blocksz=2093056,framecnt=128 \
             --vdev net_af_packet1,iface=b,framesz=65408,blocksz=2093056,framecnt=128 --proc-type auto \
             --no-shconf --no-telemetry"
        );
        let p0 = port_config(&cfg.dpdk, &cfg.ports[0]);
        assert_eq!(p0.port_id, 0);
        assert_eq!(p0.pool_size, 1024);
        assert_eq!(p0.buf_size, 2048);
        assert_eq!((p0.rx_desc, p0.tx_desc, p0.reserve), (256, 256, 64));
        assert!(!p0.promiscuous && !p0.tx_csum_offload && p0.tso && !p0.vlan_strip);
        assert!(p0.symmetric_rss);
        assert_eq!(p0.mtu, Some(1400));
        assert_eq!(p0.mac, Some([2, 0, 0, 0, 0, 7]));
        let p1 = port_config(&cfg.dpdk, &cfg.ports[1]);
        assert_eq!(p1.port_id, 1);
        assert_eq!(p1.pool_size, DEFAULT_POOL_BUFFERS);
        assert_eq!((p1.rx_desc, p1.tx_desc), (512, 512));

        // PCI devices allowed: PCI is probed.
        let cfg = Config::parse(
            "[dpdk]\nallow=02:00.0\nvdev=net_null0\n[port0]\nlink=dpdk\naddr=10.99.1.2/24\n",
            "t.ini",
        )
        .unwrap();
        let a = eal_config(&cfg.dpdk).args();
        assert!(a.windows(2).any(|w| w == ["-a", "02:00.0"]), "{a:?}");
        assert!(!a.iter().any(|x| x == "--no-pci"), "{a:?}");
    }
}
