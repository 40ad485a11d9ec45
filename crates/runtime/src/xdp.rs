//! Opening `link=af_xdp` ports: one AF_XDP socket per engine, engine `e` on
//! the interface's queue `e`, all under one XDP program, with UMEM and ring
//! sizes from `[portN]`.

use std::io;
use std::sync::Arc;

use link::af_xdp::{attach_or_join_program, attach_program};
use link::{AfXdpLink, KernelPorts, XdpBindChoice, XdpConfig, XdpModeChoice};

use crate::config::{KniConfig, PortConfig, XdpBindSetting, XdpModeSetting, XdpProgramSetting};
use crate::setup::DEFAULT_POOL_BUFFERS;

/// Frames up to this MTU fit a 2048-byte chunk (256 bytes of kernel
/// headroom and 18 of Ethernet and VLAN header before the payload).
const SMALL_CHUNK_MTU: usize = 2048 - 256 - 18;

/// The socket settings of `port`'s queue `queue`.
pub fn xdp_config(port: &PortConfig, queue: u32) -> XdpConfig {
    let mtu = usize::from(port.mtu.unwrap_or(1500));
    let frame_size = if mtu <= SMALL_CHUNK_MTU { 2048 } else { 4096 };
    let frames = port
        .memory
        .map_or(DEFAULT_POOL_BUFFERS, |m| m.buffers(frame_size));
    // Rings of at most 2048 entries and at most a quarter of the frames
    // each (a power of two), so the fill ring never takes every frame.
    let quarter = (frames / 4).clamp(16, 2048);
    let ring_size = 1 << (31 - quarter.leading_zeros());
    XdpConfig {
        queue,
        mode: match port.xdp_mode {
            XdpModeSetting::Auto => XdpModeChoice::Auto,
            XdpModeSetting::Native => XdpModeChoice::Native,
            XdpModeSetting::Generic => XdpModeChoice::Generic,
        },
        bind: match port.xdp_bind {
            XdpBindSetting::Auto => XdpBindChoice::Auto,
            XdpBindSetting::ZeroCopy => XdpBindChoice::ZeroCopy,
            XdpBindSetting::Copy => XdpBindChoice::Copy,
        },
        frame_size,
        frames,
        reserve: (frames / 16).max(8),
        ring_size,
        need_wakeup: true,
        // The opener says (`[dpdk] tx_csum_offoad_skip`).
        tx_checksum: true,
    }
}

/// Receive queues of interface `ifname` (from sysfs), if it can be read.
fn rx_queues(ifname: &str) -> Option<usize> {
    let dir = std::fs::read_dir(format!("/sys/class/net/{ifname}/queues")).ok()?;
    Some(
        dir.filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
            .count(),
    )
}

/// Attaches the program `port.xdp_program` names to `ifname`.
fn port_program(
    ifname: &str,
    port: &PortConfig,
    kni: &KniConfig,
) -> io::Result<Arc<link::af_xdp::XdpProgram>> {
    let mode = xdp_config(port, 0).mode;
    match port.xdp_program {
        XdpProgramSetting::Alone => attach_program(ifname, mode),
        XdpProgramSetting::Libxdp => libxdp_program(ifname, mode, kni),
    }
}

/// ustack's classifying program through libxdp, with `[kni]`'s ports (the
/// addresses are written by each engine as it starts:
/// `Engine::sync_served_addresses`).
#[cfg(feature = "libxdp")]
fn libxdp_program(
    ifname: &str,
    mode: XdpModeChoice,
    kni: &KniConfig,
) -> io::Result<Arc<link::af_xdp::XdpProgram>> {
    let prog = link::af_xdp::attach_libxdp_program(ifname, mode)?;
    let kernel = if kni.enable {
        kernel_ports(
            kni.kni_action,
            kni.method == crate::config::KniMethod::Accept,
        )
    } else {
        KernelPorts::None
    };
    let served = prog
        .served()
        .ok_or_else(|| io::Error::other("the libxdp program has no address maps"))?;
    served.set_kernel_ports(kernel, &kni.tcp_ports, &kni.udp_ports)?;
    eprintln!(
        "ustack: af_xdp {ifname}: ustack's XDP program {} (libxdp, {} mode): frames for \
         other addresses{} go to the kernel",
        match (prog.in_dispatcher(), prog.chained_to()) {
            (true, _) => "runs in libxdp's dispatcher beside other XDP programs".to_string(),
            (false, Some(id)) => format!(
                "is chained in front of XDP program {id}, which gets every frame ustack does \
                 not take (libxdp's dispatcher is not running here)"
            ),
            (false, None) => "holds the interface alone: libxdp could not use its dispatcher \
                              (see libxdp's message above)"
                .to_string(),
        },
        prog.mode().name(),
        if kernel == KernelPorts::None {
            ""
        } else {
            " and [kni]'s ports"
        }
    );
    Ok(prog)
}

#[cfg(not(feature = "libxdp"))]
fn libxdp_program(
    ifname: &str,
    _mode: XdpModeChoice,
    _kni: &KniConfig,
) -> io::Result<Arc<link::af_xdp::XdpProgram>> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        format!(
            "af_xdp {ifname}: xdp_program=libxdp needs ustack built with the libxdp feature \
             (cargo build --features runtime/libxdp; clang, libbpf-dev and libxdp-dev)"
        ),
    ))
}

/// What `[kni]`'s `kni_action` and `method` (accept or not) send to the
/// kernel, as a receive filter applies it.
pub fn kernel_ports(action: crate::config::KniAction, accept: bool) -> KernelPorts {
    use crate::config::KniAction;
    match (action, accept) {
        (KniAction::AllToFf, _) => KernelPorts::None,
        (KniAction::AllToKni, _) => KernelPorts::All,
        (KniAction::Default, true) => KernelPorts::Listed,
        (KniAction::Default, false) => KernelPorts::Unlisted,
    }
}

/// Whether `port`'s program sends the `[kni]` ports to the kernel itself,
/// so the port needs no TAP.
pub fn kernel_path_in_program(port: &PortConfig) -> bool {
    matches!(port.link, crate::config::LinkSpec::AfXdp(_))
        && port.xdp_program == XdpProgramSetting::Libxdp
}

/// Opens `engines` sockets on `ifname`, queue `e` for engine `e`, with
/// transmit checksum offload where the kernel gives it (`tx_checksum`:
/// not `[dpdk] tx_csum_offoad_skip`).
pub fn open_queues(
    ifname: &str,
    port: &PortConfig,
    kni: &KniConfig,
    engines: usize,
    tx_checksum: bool,
) -> io::Result<Vec<AfXdpLink>> {
    let program = port_program(ifname, port, kni)?;
    if let Some(n) = rx_queues(ifname) {
        if n > engines {
            eprintln!(
                "ustack: af_xdp {ifname}: {n} receive queues, {engines} served; frames on the \
                 others go to the kernel (ethtool -L {ifname} combined {engines})"
            );
        } else if n < engines {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{ifname} has {n} receive queues and there are {engines} engines: AF_XDP \
                     binds one queue per engine"
                ),
            ));
        }
    }
    // The NIC's RSS, before any socket binds (a driver may reset its
    // queues when its RSS changes).
    let rss = (engines > 1).then(|| nic_rss(ifname, engines));
    let mut links = (0..engines)
        .map(|e| {
            let cfg = XdpConfig {
                tx_checksum,
                ..xdp_config(port, e as u32)
            };
            let link = AfXdpLink::open_with(ifname, Arc::clone(&program), &cfg)?;
            eprintln!("ustack: {ifname}: {}", link.describe());
            Ok(link)
        })
        .collect::<io::Result<Vec<AfXdpLink>>>()?;
    if let (Some(rss), Some(first)) = (rss, links.first_mut()) {
        first.set_rss_table(rss);
    }
    Ok(links)
}

/// Programs interface `ifname`'s RSS for `engines` queues through ethtool
/// (a symmetric key, a round-robin table, addresses and ports hashed), or
/// reads back what the driver keeps, for the engines to compute; or why
/// the engines cannot (a veth has no RSS: frames arrive on the queue the
/// peer sent on, and are steered in software).
fn nic_rss(ifname: &str, engines: usize) -> Result<link::nic_rss::RssTable, String> {
    let queues = u16::try_from(engines).map_err(|_| format!("{engines} engines"))?;
    let dev = link::nic_rss::InterfaceEthtool::new(ifname).map_err(|e| e.to_string())?;
    let table = link::nic_rss::program_or_read(&dev, queues)?;
    if table.programmed {
        eprintln!(
            "ustack: af_xdp {ifname}: RSS programmed through ethtool for {engines} queues \
             ({} table entries, {}-byte key); it stays after ustack exits \
             (ethtool -X {ifname} default restores the driver's table)",
            table.reta.len(),
            table.key.len()
        );
    }
    Ok(table)
}

/// How long a process of a group waits for a free queue (one a process
/// it forked from still holds until it lets its engine go).
const MEMBER_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// Opens the socket of process `member` of `members` sharing `ifname`,
/// each on a queue of its own, all under one XDP program (attached by the
/// first, joined by the others: `link::af_xdp::attach_or_join_program`).
/// It binds queue `member`, or when another process holds that one (a
/// pre-fork server's parent until its engine stops) the first free one
/// after it, waiting up to [`MEMBER_WAIT`] for one to be let go.
/// `tx_checksum` as for [`open_queues`].
pub fn open_member(
    ifname: &str,
    port: &PortConfig,
    member: usize,
    members: usize,
    tx_checksum: bool,
) -> io::Result<AfXdpLink> {
    let n = rx_queues(ifname).unwrap_or(members);
    if n < members {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{ifname} has {n} receive queues and {members} processes share it: AF_XDP gives each process a queue of its own (ethtool -L {ifname} combined {members}; a veth is made with numrxqueues {members} numtxqueues {members})"
            ),
        ));
    }
    if n > members && member == 0 {
        eprintln!(
            "ustack: af_xdp {ifname}: {n} receive queues, {members} processes: frames on the others go to the kernel (ethtool -L {ifname} combined {members})"
        );
    }
    if port.xdp_program == XdpProgramSetting::Libxdp {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "af_xdp {ifname}: xdp_program=libxdp serves one process per port; processes \
                 sharing a port join ustack's own program (xdp_program=alone)"
            ),
        ));
    }
    let program = attach_or_join_program(ifname, xdp_config(port, 0).mode)?;
    let end = std::time::Instant::now() + MEMBER_WAIT;
    loop {
        let mut busy = None;
        for q in (0..n).map(|i| (member + i) % n) {
            let cfg = XdpConfig {
                tx_checksum,
                ..xdp_config(port, q as u32)
            };
            match AfXdpLink::open_with(ifname, Arc::clone(&program), &cfg) {
                Ok(link) => {
                    if q != member {
                        eprintln!(
                            "ustack: af_xdp {ifname}: queue {member} is another process's; this one (process {member} of {members}) took queue {q}"
                        );
                    }
                    eprintln!("ustack: {ifname}: {}", link.describe());
                    return Ok(link);
                }
                Err(e) if e.kind() == io::ErrorKind::ResourceBusy => busy = Some(e),
                Err(e) => return Err(e),
            }
        }
        if std::time::Instant::now() >= end {
            let e = busy.unwrap_or_else(|| io::Error::from(io::ErrorKind::ResourceBusy));
            return Err(io::Error::new(
                e.kind(),
                format!(
                    "every receive queue of {ifname} has a process's AF_XDP socket ({n} queues, waited {}s for one to be let go): {e}",
                    MEMBER_WAIT.as_secs()
                ),
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn port(extra: &str) -> PortConfig {
        let text = format!("[port0]\nlink=af_xdp:e0\naddr=10.99.1.2/24\n{extra}");
        Config::parse(&text, "t.ini").unwrap().ports.remove(0)
    }

    #[test]
    fn sizes_follow_memory_and_mtu() {
        let c = xdp_config(&port(""), 1);
        assert_eq!((c.queue, c.frame_size, c.frames), (1, 2048, 8192));
        assert_eq!(c.ring_size, 2048);
        assert_eq!((c.mode, c.bind), (XdpModeChoice::Auto, XdpBindChoice::Auto));
        let c = xdp_config(&port("memory=64\nxdp_mode=generic\nxdp_bind=copy\n"), 0);
        assert_eq!(c.frames, 64);
        assert!(c.frames >= 2 * c.ring_size && c.ring_size.is_power_of_two());
        assert_eq!(
            (c.mode, c.bind),
            (XdpModeChoice::Generic, XdpBindChoice::Copy)
        );
        let c = xdp_config(&port("mtu=3000\nmemory=1024\n"), 0);
        assert_eq!((c.frame_size, c.frames, c.ring_size), (4096, 1024, 256));
    }
}
