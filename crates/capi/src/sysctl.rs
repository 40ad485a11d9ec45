//! `ff_sysctl`: FreeBSD's sysctl(3) by MIB over the keys ustack has, read
//! only, with FreeBSD's types, numbers and errno values, and its meta
//! keys (sysctl.name, .next, .name2oid, .oidfmt) so a program can find a
//! key by name as FreeBSD's `sysctlbyname` does.
//!
//! The values are the configuration in force: `[freebsd.sysctl]` and
//! `[freebsd.boot]` as `ff_init` read them (their defaults before).  The
//! engine takes them at start and has no way to change them while it
//! runs, so a new value fails with EPERM, FreeBSD's answer for a key that
//! cannot be written.
//!
//! MIB numbers: FreeBSD's fixed ones where it has them (CTL_KERN 1,
//! KERN_IPC 30, CTL_NET 4, PF_INET 2, the IPPROTO_* numbers for ip, icmp,
//! tcp and udp, IPCTL_DEFTTL, TCPCTL_*, KIPC_*, ICMPCTL_ICMPLIM,
//! UDPCTL_RECVSPACE, PF_LINK 18, IFT_ETHER 6); the others are numbered
//! from 0x100 in each node, as FreeBSD numbers its OID_AUTO keys (which
//! also differ between FreeBSD kernels: look them up by name).

use std::os::raw::{c_int, c_uint, c_void};
use std::sync::Mutex;

use api::Errno;
use runtime::config::{BootParams, Config, Sysctls};

use crate::{ret_unit, EFAULT};

/// FreeBSD's CTL_MAXNAME: the longest MIB.
const CTL_MAXNAME: c_uint = 24;

/// FreeBSD's CTLTYPE_* and the read-only flag.
const CTLTYPE_NODE: u32 = 1;
const CTLTYPE_INT: u32 = 2;
const CTLTYPE_STRING: u32 = 3;
const CTLTYPE_UINT: u32 = 6;
const CTLTYPE_ULONG: u32 = 8;
const CTLFLAG_RD: u32 = 0x8000_0000;

/// FreeBSD's OID_AUTO numbers start here.
const AUTO: i32 = 0x100;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Int,
    UInt,
    ULong,
    Str,
}

impl Kind {
    fn ctltype(self) -> u32 {
        match self {
            Kind::Int => CTLTYPE_INT,
            Kind::UInt => CTLTYPE_UINT,
            Kind::ULong => CTLTYPE_ULONG,
            Kind::Str => CTLTYPE_STRING,
        }
    }

    fn format(self) -> &'static str {
        match self {
            Kind::Int => "I",
            Kind::UInt => "IU",
            Kind::ULong => "LU",
            Kind::Str => "A",
        }
    }
}

struct Key {
    name: &'static str,
    oid: &'static [i32],
    kind: Kind,
}

const fn key(name: &'static str, oid: &'static [i32], kind: Kind) -> Key {
    Key { name, oid, kind }
}

/// Every key (sysctl.next walks them in MIB order).
static KEYS: &[Key] = &[
    key("kern.ipc.maxsockbuf", &[1, 30, 1], Kind::ULong),
    key("kern.ipc.somaxconn", &[1, 30, 3], Kind::UInt),
    key("kern.ipc.maxsockets", &[1, 30, AUTO], Kind::Int),
    key(
        "net.inet.ip.portrange.first",
        &[4, 2, 0, 0, AUTO],
        Kind::Int,
    ),
    key(
        "net.inet.ip.portrange.last",
        &[4, 2, 0, 0, AUTO + 1],
        Kind::Int,
    ),
    key("net.inet.ip.ttl", &[4, 2, 0, 3], Kind::Int),
    // net.inet6.ip6 is CTL_NET, PF_INET6 (28), IPPROTO_IPV6 (41); the leaf
    // numbers are FreeBSD's IPV6CTL_DEFHLIM, _ACCEPT_RTADV and _DAD_COUNT.
    key("net.inet6.ip6.hlim", &[4, 28, 41, 3], Kind::Int),
    key("net.inet6.ip6.accept_rtadv", &[4, 28, 41, 12], Kind::Int),
    key("net.inet6.ip6.dad_count", &[4, 28, 41, 16], Kind::Int),
    // net.inet6.icmp6 is IPPROTO_ICMPV6 (58); ICMPV6CTL_REDIRACCEPT is 2.
    key("net.inet6.icmp6.rediraccept", &[4, 28, 58, 2], Kind::Int),
    key("net.inet.ip.maxfragpackets", &[4, 2, 0, AUTO], Kind::Int),
    key(
        "net.inet.ip.maxfragsperpacket",
        &[4, 2, 0, AUTO + 1],
        Kind::Int,
    ),
    key("net.inet.ip.fragttl", &[4, 2, 0, AUTO + 2], Kind::Int),
    key("net.inet.icmp.icmplim", &[4, 2, 1, 3], Kind::UInt),
    key("net.inet.icmp.drop_redirect", &[4, 2, 1, AUTO], Kind::Int),
    key("net.inet.tcp.rfc1323", &[4, 2, 6, 1], Kind::Int),
    key("net.inet.tcp.mssdflt", &[4, 2, 6, 3], Kind::Int),
    // FreeBSD's TCPCTL_V6MSSDFLT.
    key("net.inet.tcp.v6mssdflt", &[4, 2, 6, 13], Kind::Int),
    key("net.inet.tcp.keepidle", &[4, 2, 6, 6], Kind::Int),
    key("net.inet.tcp.keepintvl", &[4, 2, 6, 7], Kind::Int),
    key("net.inet.tcp.sendspace", &[4, 2, 6, 8], Kind::ULong),
    key("net.inet.tcp.recvspace", &[4, 2, 6, 9], Kind::ULong),
    key("net.inet.tcp.msl", &[4, 2, 6, AUTO], Kind::Int),
    key("net.inet.tcp.delayed_ack", &[4, 2, 6, AUTO + 1], Kind::Int),
    key("net.inet.tcp.fast_path", &[4, 2, 6, AUTO + 2], Kind::Int),
    key("net.inet.tcp.sendbuf_max", &[4, 2, 6, AUTO + 3], Kind::Int),
    key("net.inet.tcp.recvbuf_max", &[4, 2, 6, AUTO + 4], Kind::Int),
    key("net.inet.tcp.syncookies", &[4, 2, 6, AUTO + 5], Kind::Int),
    key("net.inet.tcp.keepcnt", &[4, 2, 6, AUTO + 6], Kind::Int),
    key(
        "net.inet.tcp.cc.algorithm",
        &[4, 2, 6, AUTO + 7, AUTO],
        Kind::Str,
    ),
    key(
        "net.inet.tcp.sack.enable",
        &[4, 2, 6, AUTO + 8, AUTO],
        Kind::Int,
    ),
    key(
        "net.inet.tcp.ecn.enable",
        &[4, 2, 6, AUTO + 9, AUTO],
        Kind::Int,
    ),
    key(
        "net.inet.tcp.memory_budget_mb",
        &[4, 2, 6, AUTO + 10],
        Kind::Int,
    ),
    key("net.inet.udp.recvspace", &[4, 2, 17, 4], Kind::ULong),
    key(
        "net.link.ether.inet.maxhold",
        &[4, 18, 6, 2, AUTO],
        Kind::Int,
    ),
    key(
        "net.link.ether.inet.max_age",
        &[4, 18, 6, 2, AUTO + 1],
        Kind::Int,
    ),
];

/// The configuration `ff_init` read.
static VALUES: Mutex<Option<(Sysctls, BootParams)>> = Mutex::new(None);

/// Keeps the values of `cfg` for `ff_sysctl` (`ustack_init`).
pub(crate) fn note_config(cfg: &Config) {
    *VALUES.lock().unwrap_or_else(|e| e.into_inner()) = Some((cfg.sysctls.clone(), cfg.boot));
}

/// Key `k`'s value now, as its C type's bytes.
fn value(k: &Key) -> Vec<u8> {
    let (s, boot) = VALUES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
        .unwrap_or_default();
    let text = match k.name {
        "kern.ipc.maxsockets" => boot.max_sockets.to_string(),
        name => s.get(name).unwrap_or_default(),
    };
    let n = || text.parse::<i64>().unwrap_or(0);
    match k.kind {
        Kind::Int => (n() as i32).to_ne_bytes().to_vec(),
        Kind::UInt => (n() as u32).to_ne_bytes().to_vec(),
        Kind::ULong => (n() as u64).to_ne_bytes().to_vec(),
        Kind::Str => {
            let mut b = text.into_bytes();
            b.push(0);
            b
        }
    }
}

/// The node or key at `oid`: the key, or a node's name, or why not
/// (FreeBSD's sysctl_find_oid and sysctl_root).
enum Found {
    Key(&'static Key),
    Node(String),
}

fn find(oid: &[i32]) -> api::Result<Found> {
    if let Some(k) = KEYS.iter().find(|k| k.oid == oid) {
        return Ok(Found::Key(k));
    }
    if KEYS.iter().any(|k| oid.starts_with(k.oid)) {
        return Err(Errno(libc::ENOTDIR));
    }
    KEYS.iter()
        .find(|k| k.oid.starts_with(oid))
        .map(|k| {
            Found::Node(
                k.name
                    .split('.')
                    .take(oid.len())
                    .collect::<Vec<_>>()
                    .join("."),
            )
        })
        .ok_or(Errno::ENOENT)
}

/// The MIB of a name (a key or a node).
fn name2oid(name: &[u8]) -> api::Result<Vec<i32>> {
    let name = name.strip_suffix(b"\0").unwrap_or(name);
    let name = std::str::from_utf8(name).map_err(|_| Errno::ENOENT)?;
    let parts = name.split('.').count();
    KEYS.iter()
        .find(|k| {
            k.name == name
                || (k.name.starts_with(name) && k.name.as_bytes().get(name.len()) == Some(&b'.'))
        })
        .map(|k| k.oid[..parts.min(k.oid.len())].to_vec())
        .filter(|_| !name.is_empty())
        .ok_or(Errno::ENOENT)
}

fn ints(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|i| i.to_ne_bytes()).collect()
}

/// What a read of `mib` gives, or why not; `new`: the new value given.
fn answer(mib: &[i32], new: Option<&[u8]>) -> api::Result<Vec<u8>> {
    if mib[0] == 0 {
        // The meta keys of CTL_SYSCTL.
        return match (mib[1], new) {
            (3, Some(name)) if mib.len() == 2 => name2oid(name).map(|o| ints(&o)),
            (3, None) if mib.len() == 2 => Err(Errno::ENOENT),
            (_, Some(_)) => Err(Errno(libc::EPERM)),
            (1, None) => {
                let name = match find(&mib[2..])? {
                    Found::Key(k) => k.name.to_string(),
                    Found::Node(n) => n,
                };
                let mut b = name.into_bytes();
                b.push(0);
                Ok(b)
            }
            (2, None) => KEYS
                .iter()
                .map(|k| k.oid)
                .filter(|o| *o > &mib[2..])
                .min()
                .map(ints)
                .ok_or(Errno::ENOENT),
            (4, None) => {
                let (kind, fmt) = match find(&mib[2..])? {
                    Found::Key(k) => (k.kind.ctltype() | CTLFLAG_RD, k.kind.format()),
                    Found::Node(_) => (CTLTYPE_NODE | CTLFLAG_RD, "N"),
                };
                let mut b = kind.to_ne_bytes().to_vec();
                b.extend_from_slice(fmt.as_bytes());
                b.push(0);
                Ok(b)
            }
            _ => Err(Errno::ENOENT),
        };
    }
    match find(mib)? {
        Found::Node(_) => Err(Errno(libc::EISDIR)),
        Found::Key(_) if new.is_some() => Err(Errno(libc::EPERM)),
        Found::Key(k) => Ok(value(k)),
    }
}

/// `ff_sysctl(name, namelen, oldp, oldlenp, newp, newlen)`: reads key
/// `name[..namelen]` into `oldp` (`*oldlenp` bytes there; the length
/// written goes back in `*oldlenp`; `oldp` NULL: only the length needed).
/// Returns 0, or -1 with errno ENOENT, EISDIR, ENOTDIR, ENOMEM (the value
/// does not fit, or `oldlenp` is null: nothing written, `*oldlenp`
/// unchanged), EPERM (a new value), EINVAL (`namelen` out of 2..=24),
/// EFAULT (`name` null).
///
/// # Safety
/// `name` is null or points to `namelen` readable ints; `oldlenp` null or
/// a readable and writable size_t; `oldp` null or `*oldlenp` writable
/// bytes; `newp` null or `newlen` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn ff_sysctl(
    name: *const c_int,
    namelen: c_uint,
    oldp: *mut c_void,
    oldlenp: *mut usize,
    newp: *const c_void,
    newlen: usize,
) -> c_int {
    let r = (|| {
        if !(2..=CTL_MAXNAME).contains(&namelen) {
            return Err(Errno::EINVAL);
        }
        if name.is_null() {
            return Err(EFAULT);
        }
        // SAFETY: `namelen` readable ints (the caller's promise), at most
        // CTL_MAXNAME of them.
        let mib = unsafe { std::slice::from_raw_parts(name, namelen as usize) }.to_vec();
        let new = if newp.is_null() {
            None
        } else {
            // SAFETY: `newlen` readable bytes (the caller's promise).
            Some(unsafe { crate::sockets::bytes(newp, newlen) }?)
        };
        let v = answer(&mib, new)?;
        if oldp.is_null() {
            if !oldlenp.is_null() {
                // SAFETY: a writable size_t (the caller's promise).
                unsafe { oldlenp.write_unaligned(v.len()) };
            }
            return Ok(());
        }
        // No length: no room (FreeBSD's reading of it).
        let room = if oldlenp.is_null() {
            0
        } else {
            // SAFETY: a readable size_t (the caller's promise).
            unsafe { oldlenp.read_unaligned() }
        };
        if room < v.len() {
            return Err(Errno(libc::ENOMEM));
        }
        // SAFETY: `*oldlenp` >= v.len() writable bytes at `oldp` (the
        // caller's promise), not overlapping `v`.
        unsafe {
            std::ptr::copy_nonoverlapping(v.as_ptr(), oldp.cast::<u8>(), v.len());
            oldlenp.write_unaligned(v.len());
        }
        Ok(())
    })();
    ret_unit(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_sysctl_of_the_configuration_has_a_key() {
        for name in Sysctls::NAMES {
            assert!(KEYS.iter().any(|k| k.name == *name), "{name} has no key");
        }
        let mut oids: Vec<&[i32]> = KEYS.iter().map(|k| k.oid).collect();
        oids.sort();
        oids.dedup();
        assert_eq!(oids.len(), KEYS.len(), "two keys share a MIB");
        for k in KEYS {
            assert_eq!(k.name.split('.').count(), k.oid.len(), "{}", k.name);
            // Every node on the way has one name.
            for d in 1..k.oid.len() {
                let node: Vec<&str> = k.name.split('.').take(d).collect();
                for other in KEYS {
                    if other.oid.len() > d && other.oid[..d] == k.oid[..d] {
                        let o: Vec<&str> = other.name.split('.').take(d).collect();
                        assert_eq!(node, o, "{} and {}", k.name, other.name);
                    }
                }
            }
        }
    }

    #[test]
    fn lookups() {
        assert_eq!(
            name2oid(b"net.inet.tcp.sendspace\0").unwrap(),
            vec![4, 2, 6, 8]
        );
        assert_eq!(name2oid(b"net.inet.tcp").unwrap(), vec![4, 2, 6]);
        assert_eq!(name2oid(b"net.inet.tc"), Err(Errno::ENOENT));
        assert_eq!(name2oid(b""), Err(Errno::ENOENT));
        assert!(matches!(find(&[4, 2, 6]), Ok(Found::Node(n)) if n == "net.inet.tcp"));
        assert_eq!(find(&[4, 2, 6, 8, 1]).err(), Some(Errno(libc::ENOTDIR)));
        assert_eq!(find(&[4, 2, 99]).err(), Some(Errno::ENOENT));
        assert_eq!(answer(&[4, 2, 6], None), Err(Errno(libc::EISDIR)));
        assert_eq!(answer(&[4, 2, 0, 3], None).unwrap(), 64i32.to_ne_bytes());
        assert_eq!(
            answer(&[4, 2, 0, 3], Some(&[1, 0, 0, 0])),
            Err(Errno(libc::EPERM))
        );
        assert_eq!(
            answer(&[4, 2, 6, AUTO + 7, AUTO], None).unwrap(),
            b"cubic\0"
        );
        // sysctl.next walks every key once, in order.
        let mut at = vec![0, 2];
        let mut seen = Vec::new();
        while let Ok(next) = answer(&at, None) {
            let oid: Vec<i32> = next
                .chunks(4)
                .map(|c| i32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            seen.push(oid.clone());
            at = [vec![0, 2], oid].concat();
        }
        assert_eq!(seen.len(), KEYS.len());
    }
}
