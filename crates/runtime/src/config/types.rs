//! Small value types shared by the sections.

use std::fmt;

/// A set of CPU cores, from `[dpdk] lcore_mask` (hex) or a `lcore_list`
/// (`0-3,5`). Sorted, each core once.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CoreSet {
    cores: Vec<u32>,
}

impl CoreSet {
    pub(crate) fn from_sorted(cores: Vec<u32>) -> CoreSet {
        CoreSet { cores }
    }

    /// The cores, ascending.
    pub fn as_slice(&self) -> &[u32] {
        &self.cores
    }

    /// Iterates the cores, ascending.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.cores.iter().copied()
    }

    /// Whether `core` is in the set.
    pub fn contains(&self, core: u32) -> bool {
        self.cores.binary_search(&core).is_ok()
    }

    /// How many cores (engines, for `lcore_mask`).
    pub fn len(&self) -> usize {
        self.cores.len()
    }

    /// Whether the set is empty (never, for a parsed `lcore_mask`).
    pub fn is_empty(&self) -> bool {
        self.cores.is_empty()
    }
}

impl fmt::Display for CoreSet {
    /// Writes the set as a hexadecimal mask, `0xf00`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(&top) = self.cores.last() else {
            return write!(f, "0x0");
        };
        let nibbles = top as usize / 4 + 1;
        let mut digits = vec![0u8; nibbles];
        for &c in &self.cores {
            digits[c as usize / 4] |= 1 << (c % 4);
        }
        write!(f, "0x")?;
        for d in digits.iter().rev() {
            write!(f, "{d:x}")?;
        }
        Ok(())
    }
}

/// How a port reaches the wire (`[portN] link=`, ustack's own key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkSpec {
    /// `tap:NAME`: a Linux TAP device (created if missing).
    Tap(String),
    /// `af_packet:IFACE`: AF_PACKET (TPACKET_V3) on an existing interface.
    AfPacket(String),
    /// `af_xdp:IFACE`: AF_XDP on an existing interface.
    AfXdp(String),
    /// `dpdk`: DPDK ethdev port N (N from `[portN]`), as in F-Stack.
    Dpdk,
    /// `shm_create:PATH`: a shared-memory link to another ustack process
    /// on this host (`link::ShmLink`), whose file this port creates at
    /// PATH; one engine only. For benchmarks and tests: the same link
    /// `ustack-bench` joins its engines with.
    ShmCreate(std::path::PathBuf),
    /// `shm_attach:PATH`: the other end of a `shm_create:` link, waiting up
    /// to 10 s for its file.
    ShmAttach(std::path::PathBuf),
}

impl LinkSpec {
    pub(crate) fn parse(v: &str) -> Result<LinkSpec, String> {
        if v == "dpdk" {
            return Ok(LinkSpec::Dpdk);
        }
        let bad = || {
            "is not a link: use tap:NAME, af_packet:IFACE, af_xdp:IFACE, dpdk, \
             shm_create:PATH or shm_attach:PATH"
                .to_string()
        };
        let (kind, name) = v.split_once(':').ok_or_else(bad)?;
        if kind == "shm_create" || kind == "shm_attach" {
            if !name.starts_with('/') {
                return Err(format!("has a path {name:?} that is not absolute"));
            }
            let path = std::path::PathBuf::from(name);
            return Ok(if kind == "shm_create" {
                LinkSpec::ShmCreate(path)
            } else {
                LinkSpec::ShmAttach(path)
            });
        }
        let name = super::value::ifname(name)
            .map_err(|r| format!("has an interface name {name:?} that {r}"))?;
        match kind {
            "tap" => Ok(LinkSpec::Tap(name)),
            "af_packet" => Ok(LinkSpec::AfPacket(name)),
            "af_xdp" => Ok(LinkSpec::AfXdp(name)),
            _ => Err(bad()),
        }
    }

    /// The kernel interface the link uses, if it uses one.
    pub fn interface(&self) -> Option<&str> {
        match self {
            LinkSpec::Tap(n) | LinkSpec::AfPacket(n) | LinkSpec::AfXdp(n) => Some(n),
            LinkSpec::Dpdk | LinkSpec::ShmCreate(_) | LinkSpec::ShmAttach(_) => None,
        }
    }
}

impl fmt::Display for LinkSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinkSpec::Tap(n) => write!(f, "tap:{n}"),
            LinkSpec::AfPacket(n) => write!(f, "af_packet:{n}"),
            LinkSpec::AfXdp(n) => write!(f, "af_xdp:{n}"),
            LinkSpec::Dpdk => write!(f, "dpdk"),
            LinkSpec::ShmCreate(p) => write!(f, "shm_create:{}", p.display()),
            LinkSpec::ShmAttach(p) => write!(f, "shm_attach:{}", p.display()),
        }
    }
}

/// Where an AF_XDP port's XDP program runs (`[portN] xdp_mode=`, ustack's
/// own key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum XdpModeSetting {
    /// `auto` (default): in the driver if it can, else generic (SKB) XDP.
    #[default]
    Auto,
    /// `native`: in the driver, or the port does not open.
    Native,
    /// `generic`: in the kernel's receive path (every driver, slower).
    Generic,
}

impl XdpModeSetting {
    pub(crate) fn parse(v: &str) -> Result<XdpModeSetting, String> {
        match v {
            "auto" => Ok(XdpModeSetting::Auto),
            "native" => Ok(XdpModeSetting::Native),
            "generic" => Ok(XdpModeSetting::Generic),
            _ => Err("is not auto, native or generic".to_string()),
        }
    }
}

/// The RX ring of an `af_packet` port (`[portN] rx_ring=`, ustack's own
/// key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RxRingSetting {
    /// `v2` (default): TPACKET_V2 frame slots, each frame seen as soon as
    /// the kernel wrote it.
    #[default]
    V2,
    /// `v3`: TPACKET_V3 blocks, seen when full or after 1 ms.
    V3,
}

impl RxRingSetting {
    pub(crate) fn parse(v: &str) -> Result<RxRingSetting, String> {
        match v {
            "v2" => Ok(RxRingSetting::V2),
            "v3" => Ok(RxRingSetting::V3),
            _ => Err("is not v2 or v3".to_string()),
        }
    }
}

/// How an AF_XDP port's socket binds (`[portN] xdp_bind=`, ustack's own
/// key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum XdpBindSetting {
    /// `auto` (default): zero-copy where the driver offers it, else copy.
    #[default]
    Auto,
    /// `zerocopy`: the NIC writes into ustack's memory, or the port does
    /// not open.
    ZeroCopy,
    /// `copy`: the kernel copies each frame into ustack's memory.
    Copy,
}

impl XdpBindSetting {
    pub(crate) fn parse(v: &str) -> Result<XdpBindSetting, String> {
        match v {
            "auto" => Ok(XdpBindSetting::Auto),
            "zerocopy" => Ok(XdpBindSetting::ZeroCopy),
            "copy" => Ok(XdpBindSetting::Copy),
            _ => Err("is not auto, zerocopy or copy".to_string()),
        }
    }
}

/// Which XDP program an AF_XDP port loads (`[portN] xdp_program=`,
/// ustack's own key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum XdpProgramSetting {
    /// `alone` (default): a five-instruction program that sends every frame
    /// of a served queue to ustack, attached through a BPF link that holds
    /// the interface alone (it goes with the process).
    #[default]
    Alone,
    /// `libxdp`: ustack's classifying program through libxdp (cargo
    /// feature `libxdp`): in libxdp's dispatcher beside other XDP programs
    /// where the kernel allows it; frames ustack does not serve (other
    /// addresses, the `[kni]` ports) go to the kernel without a TAP.
    Libxdp,
}

impl XdpProgramSetting {
    pub(crate) fn parse(v: &str) -> Result<XdpProgramSetting, String> {
        match v {
            "alone" => Ok(XdpProgramSetting::Alone),
            "libxdp" => Ok(XdpProgramSetting::Libxdp),
            _ => Err("is not alone or libxdp".to_string()),
        }
    }
}

/// The size of a port's packet pool per engine (`[portN] memory=`).
///
/// A bare number counts buffers (`memory=8192`); a number with a binary
/// suffix is bytes of buffer memory (`memory=16M`), which the engine divides
/// by its buffer size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolSize {
    Buffers(u32),
    Bytes(u64),
}

impl PoolSize {
    /// The fewest buffers a pool may have: a burst for receive, one for
    /// transmit, and the reserve for ARP and ICMP.
    pub const MIN_BUFFERS: u32 = 64;
    /// The most buffers a pool may have.
    pub const MAX_BUFFERS: u32 = 1 << 24;
    /// The most bytes a pool may have (64 GiB).
    pub const MAX_BYTES: u64 = 64 << 30;

    /// Number of buffers for buffers of `buf_size` bytes (at least
    /// [`PoolSize::MIN_BUFFERS`]).
    pub fn buffers(self, buf_size: usize) -> u32 {
        match self {
            PoolSize::Buffers(n) => n,
            PoolSize::Bytes(b) => {
                let n = b / (buf_size.max(1) as u64);
                n.clamp(u64::from(Self::MIN_BUFFERS), u64::from(Self::MAX_BUFFERS)) as u32
            }
        }
    }

    pub(crate) fn parse(v: &str) -> Result<PoolSize, String> {
        let (n, mult) = super::value::size_with_suffix(v)?;
        match mult {
            None => {
                if n < u64::from(Self::MIN_BUFFERS) || n > u64::from(Self::MAX_BUFFERS) {
                    return Err(format!(
                        "is out of range ({}..={} buffers; or bytes with a K, M or G suffix)",
                        Self::MIN_BUFFERS,
                        Self::MAX_BUFFERS
                    ));
                }
                Ok(PoolSize::Buffers(n as u32))
            }
            Some(m) => match n.checked_mul(m) {
                Some(b) if (1 << 20..=Self::MAX_BYTES).contains(&b) => Ok(PoolSize::Bytes(b)),
                _ => Err("is out of range (1M..=64G bytes; or a bare number of buffers)".into()),
            },
        }
    }
}

/// DPDK's process type (`[dpdk] proc_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProcType {
    Primary,
    Secondary,
    #[default]
    Auto,
}

/// KNI's default policy (`[kni] method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KniMethod {
    /// Packets to `tcp_port`/`udp_port` go to ustack; everything else to
    /// the kernel.
    #[default]
    Reject,
    /// Packets to `tcp_port`/`udp_port` go to the kernel; everything else to
    /// ustack.
    Accept,
}

/// KNI's override of its policy (`[kni] kni_action`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KniAction {
    /// Use `method` and the port lists.
    #[default]
    Default,
    /// Everything to the kernel.
    AllToKni,
    /// Everything to ustack.
    AllToFf,
}

/// The TCP congestion control algorithm (`net.inet.tcp.cc.algorithm`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CongestionControl {
    #[default]
    Cubic,
    NewReno,
}

impl fmt::Display for CongestionControl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CongestionControl::Cubic => "cubic",
            CongestionControl::NewReno => "newreno",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_set_display() {
        let s = CoreSet::from_sorted(vec![8, 9, 10, 11]);
        assert_eq!(s.to_string(), "0xf00");
        assert!(s.contains(9) && !s.contains(0));
        assert_eq!(CoreSet::from_sorted(vec![0]).to_string(), "0x1");
        assert_eq!(CoreSet::default().to_string(), "0x0");
    }

    #[test]
    fn link_specs() {
        assert_eq!(LinkSpec::parse("tap:us0"), Ok(LinkSpec::Tap("us0".into())));
        assert_eq!(
            LinkSpec::parse("af_packet:eth1"),
            Ok(LinkSpec::AfPacket("eth1".into()))
        );
        assert_eq!(
            LinkSpec::parse("af_xdp:eth1"),
            Ok(LinkSpec::AfXdp("eth1".into()))
        );
        assert_eq!(LinkSpec::parse("dpdk"), Ok(LinkSpec::Dpdk));
        assert!(LinkSpec::parse("tap").is_err());
        assert!(LinkSpec::parse("pcap:x").is_err());
        assert!(LinkSpec::parse("tap:")
            .unwrap_err()
            .contains("empty interface name"));
        assert_eq!(LinkSpec::AfXdp("e".into()).to_string(), "af_xdp:e");
        assert_eq!(LinkSpec::Tap("t".into()).interface(), Some("t"));
        let shm = LinkSpec::parse("shm_create:/dev/shm/a b.link").unwrap();
        assert_eq!(shm, LinkSpec::ShmCreate("/dev/shm/a b.link".into()));
        assert_eq!(shm.to_string(), "shm_create:/dev/shm/a b.link");
        assert_eq!(shm.interface(), None);
        assert_eq!(
            LinkSpec::parse("shm_attach:/x"),
            Ok(LinkSpec::ShmAttach("/x".into()))
        );
        assert!(LinkSpec::parse("shm_attach:x")
            .unwrap_err()
            .contains("not absolute"));
    }

    #[test]
    fn pool_sizes() {
        assert_eq!(PoolSize::parse("8192"), Ok(PoolSize::Buffers(8192)));
        assert_eq!(PoolSize::parse("16M"), Ok(PoolSize::Bytes(16 << 20)));
        assert!(PoolSize::parse("10").is_err());
        assert!(PoolSize::parse("4K").is_err());
        assert!(PoolSize::parse("128G").is_err());
        assert_eq!(PoolSize::Bytes(16 << 20).buffers(2048), 8192);
        assert_eq!(
            PoolSize::Bytes(1 << 20).buffers(1 << 20),
            PoolSize::MIN_BUFFERS
        );
        assert_eq!(PoolSize::Buffers(100).buffers(2048), 100);
    }
}
