//! A NIC's receive-side scaling as the engines must compute it, and how a
//! kernel NIC's is programmed or read through ethtool (for AF_XDP, whose
//! sockets each read one queue of the NIC).
//!
//! The NIC puts a frame on queue `reta[toeplitz(key, frame) % reta.len()]`.
//! When the engines know the key, the table and which fields are hashed,
//! they find each frame's owner as the NIC does (nothing is handed between
//! engines) and open connections from ports whose replies come home.
//!
//! Through the `SIOCETHTOOL` ioctl: `ETHTOOL_SRSSH` writes a symmetric key
//! and a table spreading flows round robin over the engines' queues (where
//! the driver refuses the key, the table alone); `ETHTOOL_SRXFH` asks every
//! TCP and UDP flow type to hash addresses and ports.  Whatever was or
//! was not written, `ETHTOOL_GRSSH` and `ETHTOOL_GRXFH` then read back
//! what the NIC does, and only that is used: a Toeplitz hash with no input
//! transformation, a table naming only served queues, and addresses and
//! ports hashed for TCP and UDP over IPv4 and IPv6.  Anything else is
//! refused with the reason, and the engines steer in software.

use std::io;

/// A port's RSS key and indirection table: the NIC puts a frame on queue
/// `reta[toeplitz(key, frame) % reta.len()]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RssTable {
    /// The key (its first 40 bytes are all an IPv4 or IPv6 flow's hash
    /// reads).
    pub key: Vec<u8>,
    pub reta: Vec<u16>,
    /// The table is the one ustack wrote (entry i: queue i % queues);
    /// false: the driver refused, and this is the table it reads back.
    pub programmed: bool,
}

/// The key bytes a flow's hash reads (IPv6 addresses and ports, plus the
/// last 32-bit window).
const KEY_USED: usize = 40;

/// `ETHTOOL_GRXFH`/`ETHTOOL_SRXFH` (linux/ethtool.h): a flow type's hashed
/// fields.
pub const ETHTOOL_GRXFH: u32 = 0x29;
pub const ETHTOOL_SRXFH: u32 = 0x2a;
/// `ETHTOOL_GRSSH`/`ETHTOOL_SRSSH`: the key, table and hash function.
pub const ETHTOOL_GRSSH: u32 = 0x46;
pub const ETHTOOL_SRSSH: u32 = 0x47;

/// `ETH_RSS_HASH_TOP`: the Toeplitz hash function (0 in a set request:
/// unchanged).
pub const ETH_RSS_HASH_TOP: u8 = 1;
/// `ETH_RXFH_INDIR_NO_CHANGE`: a set request that leaves the table.
const INDIR_NO_CHANGE: u32 = 0xffff_ffff;

/// Flow types (`TCP_V4_FLOW` ...) whose hashed fields are set and checked.
pub const TCP_V4_FLOW: u32 = 0x01;
pub const UDP_V4_FLOW: u32 = 0x02;
pub const TCP_V6_FLOW: u32 = 0x05;
pub const UDP_V6_FLOW: u32 = 0x06;
const FLOW_TYPES: [(u32, &str); 4] = [
    (TCP_V4_FLOW, "tcp4"),
    (UDP_V4_FLOW, "udp4"),
    (TCP_V6_FLOW, "tcp6"),
    (UDP_V6_FLOW, "udp6"),
];

/// `RXH_IP_SRC | RXH_IP_DST | RXH_L4_B_0_1 | RXH_L4_B_2_3`: both addresses
/// and both ports, the fields ustack's Toeplitz computation reads.
pub const RXH_ADDRESSES_AND_PORTS: u64 = (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7);

/// `struct ethtool_rxfh`'s fixed part: cmd, rss_context, indir_size,
/// key_size (u32 each), hfunc, input_xfrm, two reserved bytes, a reserved
/// u32; then `indir_size` u32 entries and `key_size` key bytes.
pub const RXFH_HEADER: usize = 24;
/// `struct ethtool_rxnfc` as `ETHTOOL_{G,S}RXFH` read it: cmd, flow_type,
/// then the u64 of hashed fields.
pub const RXNFC_LEN: usize = 16;

/// `struct ethtool_rxfh` and what follows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rxfh {
    pub cmd: u32,
    pub indir_size: u32,
    pub key_size: u32,
    pub hfunc: u8,
    /// `RXH_XFRM_*`: a transformation of the input before hashing
    /// (symmetric XOR ...); 0: none.
    pub input_xfrm: u8,
    pub indir: Vec<u32>,
    pub key: Vec<u8>,
}

fn u32_at(buf: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(buf.get(at..at + 4)?.try_into().ok()?))
}

impl Rxfh {
    /// A query of the device's table and key sizes (both 0: the kernel
    /// writes back the sizes and nothing else).
    pub fn sizes_query() -> Rxfh {
        Rxfh {
            cmd: ETHTOOL_GRSSH,
            indir_size: 0,
            key_size: 0,
            hfunc: 0,
            input_xfrm: 0,
            indir: Vec::new(),
            key: Vec::new(),
        }
    }

    /// A query of the whole table and key of the sizes the device said.
    pub fn full_query(indir_size: u32, key_size: u32) -> Rxfh {
        Rxfh {
            cmd: ETHTOOL_GRSSH,
            indir_size,
            key_size,
            hfunc: 0,
            input_xfrm: 0,
            indir: vec![0; indir_size as usize],
            key: vec![0; key_size as usize],
        }
    }

    /// The request's bytes (the buffer the kernel reads and writes back).
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(RXFH_HEADER + self.indir.len() * 4 + self.key.len());
        b.extend_from_slice(&self.cmd.to_ne_bytes());
        b.extend_from_slice(&0u32.to_ne_bytes()); // rss_context: the default
        b.extend_from_slice(&self.indir_size.to_ne_bytes());
        b.extend_from_slice(&self.key_size.to_ne_bytes());
        b.extend_from_slice(&[self.hfunc, self.input_xfrm, 0, 0]);
        b.extend_from_slice(&0u32.to_ne_bytes());
        for e in &self.indir {
            b.extend_from_slice(&e.to_ne_bytes());
        }
        b.extend_from_slice(&self.key);
        b
    }

    /// Reads a request or the kernel's answer.  The arrays are read only
    /// when the buffer holds them (a sizes query's answer names sizes it
    /// has no room for: they come back empty).
    pub fn decode(buf: &[u8]) -> Result<Rxfh, String> {
        let short = || format!("an ethtool_rxfh of {} bytes", buf.len());
        let cmd = u32_at(buf, 0).ok_or_else(short)?;
        let indir_size = u32_at(buf, 8).ok_or_else(short)?;
        let key_size = u32_at(buf, 12).ok_or_else(short)?;
        let (hfunc, input_xfrm) = match buf.get(16..18) {
            Some(&[h, x]) => (h, x),
            _ => return Err(short()),
        };
        let body = buf.get(RXFH_HEADER..).ok_or_else(short)?;
        let indir_bytes = if indir_size == INDIR_NO_CHANGE {
            0
        } else {
            (indir_size as usize).saturating_mul(4)
        };
        let want = indir_bytes.saturating_add(key_size as usize);
        let (indir, key) = if body.is_empty() {
            (Vec::new(), Vec::new())
        } else if body.len() >= want {
            let indir = body[..indir_bytes]
                .chunks_exact(4)
                .map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            (indir, body[indir_bytes..want].to_vec())
        } else {
            return Err(format!(
                "an ethtool_rxfh naming {indir_size} table entries and a {key_size}-byte key in \
                 {} bytes",
                buf.len()
            ));
        };
        Ok(Rxfh {
            cmd,
            indir_size,
            key_size,
            hfunc,
            input_xfrm,
            indir,
            key,
        })
    }
}

/// `ETHTOOL_{G,S}RXFH`'s request: the fields hashed for one flow type.
pub fn encode_rxnfc(cmd: u32, flow_type: u32, fields: u64) -> [u8; RXNFC_LEN] {
    let mut b = [0u8; RXNFC_LEN];
    b[0..4].copy_from_slice(&cmd.to_ne_bytes());
    b[4..8].copy_from_slice(&flow_type.to_ne_bytes());
    b[8..16].copy_from_slice(&fields.to_ne_bytes());
    b
}

/// The hashed fields of an `ETHTOOL_GRXFH` answer.
pub fn decode_rxnfc_fields(b: &[u8; RXNFC_LEN]) -> u64 {
    let mut f = [0u8; 8];
    f.copy_from_slice(&b[8..16]);
    u64::from_ne_bytes(f)
}

/// The bytes a well-formed request of command `cmd` occupies, from its
/// header; `None`: not a command this module issues, or a buffer too
/// short for its header.
pub fn request_len(buf: &[u8]) -> Option<usize> {
    match u32_at(buf, 0)? {
        ETHTOOL_GRXFH | ETHTOOL_SRXFH => Some(RXNFC_LEN),
        ETHTOOL_GRSSH | ETHTOOL_SRSSH => {
            let r = Rxfh::decode(buf.get(..RXFH_HEADER)?).ok()?;
            let indir = if r.indir_size == INDIR_NO_CHANGE {
                0
            } else {
                (r.indir_size as usize).checked_mul(4)?
            };
            RXFH_HEADER
                .checked_add(indir)?
                .checked_add(r.key_size as usize)
        }
        _ => None,
    }
}

/// A device's ethtool interface: one request on a command's buffer, which
/// the device reads and writes back in place.
pub trait EthtoolDevice {
    fn request(&self, buf: &mut [u8]) -> io::Result<()>;
}

/// A kernel network interface's ethtool interface, by `SIOCETHTOOL`.
pub struct InterfaceEthtool {
    sock: crate::ifreq::CtlSocket,
    name: String,
}

impl InterfaceEthtool {
    pub fn new(name: &str) -> io::Result<InterfaceEthtool> {
        Ok(InterfaceEthtool {
            sock: crate::ifreq::CtlSocket::new()?,
            name: name.to_owned(),
        })
    }
}

impl EthtoolDevice for InterfaceEthtool {
    fn request(&self, buf: &mut [u8]) -> io::Result<()> {
        // The kernel reads and writes as many bytes as the header names:
        // they must all be in `buf`.
        match request_len(buf) {
            Some(n) if n <= buf.len() => self.sock.ethtool(&self.name, buf),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "an ethtool request shorter than its header names, or not an RSS command",
            )),
        }
    }
}

/// The symmetric key (the 16-bit pattern 0x6d5a repeated, see
/// `stack::steer::SYMMETRIC_KEY`) at a device's key length: both
/// directions of a flow hash alike, whatever the length.
pub fn symmetric_key(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| if i % 2 == 0 { 0x6d } else { 0x5a })
        .collect()
}

/// Programs the device's RSS for `queues` engines (a symmetric key where
/// the driver takes one, a round-robin table, addresses and ports hashed
/// for TCP and UDP), then reads back what it does and returns it if the
/// engines can compute it, or why not.
pub fn program_or_read(dev: &impl EthtoolDevice, queues: u16) -> Result<RssTable, String> {
    if queues == 0 {
        return Err("RSS over no queues".into());
    }
    let sizes = rxfh_request(dev, &Rxfh::sizes_query())
        .map_err(|e| format!("the RSS configuration cannot be read (ETHTOOL_GRSSH: {e})"))?;
    if sizes.indir_size == 0 {
        return Err("the device reports no RSS indirection table".into());
    }
    if sizes.indir_size as usize > MAX_TABLE {
        return Err(format!(
            "the indirection table has {} entries",
            sizes.indir_size
        ));
    }
    let table: Vec<u32> = (0..sizes.indir_size)
        .map(|i| i % u32::from(queues))
        .collect();
    let with_key = sizes.key_size as usize >= KEY_USED;
    let set = |key: bool| Rxfh {
        cmd: ETHTOOL_SRSSH,
        indir_size: sizes.indir_size,
        key_size: if key { sizes.key_size } else { 0 },
        hfunc: ETH_RSS_HASH_TOP,
        input_xfrm: 0,
        indir: table.clone(),
        key: if key {
            symmetric_key(sizes.key_size as usize)
        } else {
            Vec::new()
        },
    };
    // The key and table, else the table alone; refusals are not errors
    // (what the device does is read back below).
    if !(with_key && rxfh_request(dev, &set(true)).is_ok()) {
        let _ = rxfh_request(dev, &set(false));
    }
    for (flow, _) in FLOW_TYPES {
        let mut b = encode_rxnfc(ETHTOOL_SRXFH, flow, RXH_ADDRESSES_AND_PORTS);
        let _ = dev.request(&mut b);
    }
    let now = rxfh_request(dev, &Rxfh::full_query(sizes.indir_size, sizes.key_size))
        .map_err(|e| format!("the RSS configuration cannot be read back (ETHTOOL_GRSSH: {e})"))?;
    if now.hfunc != ETH_RSS_HASH_TOP {
        return Err(format!(
            "the hash function is not Toeplitz (ethtool hfunc {:#x})",
            now.hfunc
        ));
    }
    if now.input_xfrm != 0 {
        return Err(format!(
            "the hash input is transformed before hashing (ethtool input_xfrm {:#x})",
            now.input_xfrm
        ));
    }
    if now.key.len() < KEY_USED {
        return Err(format!(
            "the RSS key is {} bytes, fewer than the {KEY_USED} a flow's hash reads",
            now.key.len()
        ));
    }
    if now.indir.len() != sizes.indir_size as usize {
        return Err("the indirection table read back is not of the device's size".into());
    }
    let mut reta = Vec::with_capacity(now.indir.len());
    for &q in &now.indir {
        if q >= u32::from(queues) {
            return Err(format!(
                "the indirection table names queue {q}, and there are {queues} engines"
            ));
        }
        reta.push(q as u16);
    }
    for (flow, name) in FLOW_TYPES {
        let mut b = encode_rxnfc(ETHTOOL_GRXFH, flow, 0);
        dev.request(&mut b).map_err(|e| {
            format!("the fields hashed for {name} cannot be read (ETHTOOL_GRXFH: {e})")
        })?;
        let fields = decode_rxnfc_fields(&b);
        if fields != RXH_ADDRESSES_AND_PORTS {
            return Err(format!(
                "{name} hashes fields {fields:#x}, not both addresses and ports \
                 (ethtool -N IFACE rx-flow-hash {name} sdfn)"
            ));
        }
    }
    let programmed = now.indir == table;
    Ok(RssTable {
        key: now.key,
        reta,
        programmed,
    })
}

/// The largest table ustack's computation takes (`stack::steer::MAX_RETA`;
/// this crate does not depend on `stack`).
const MAX_TABLE: usize = 4096;

/// Issues `req` and decodes the answer.
fn rxfh_request(dev: &impl EthtoolDevice, req: &Rxfh) -> io::Result<Rxfh> {
    let mut buf = req.encode();
    dev.request(&mut buf)?;
    Rxfh::decode(&buf).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

#[cfg(test)]
mod tests;
