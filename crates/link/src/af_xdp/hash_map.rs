//! The BPF hash maps of addresses ustack's programs read (the classifying
//! XDP program's `served.rs`, the tc program of `kernel_rx_drop.rs`):
//! listing their keys and making them hold exactly a given set.

use std::collections::HashSet;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsRawFd, OwnedFd};

use super::abi;
use super::program::bpf;

const BPF_MAP_GET_NEXT_KEY: libc::c_long = 4;

pub(crate) fn annotate(e: io::Error, what: &str) -> io::Error {
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

pub(crate) fn update<K, V>(map: &OwnedFd, key: &K, value: &V) -> io::Result<()> {
    let mut attr = abi::MapElemAttr {
        map_fd: map.as_raw_fd() as u32,
        key: (key as *const K) as u64,
        value: (value as *const V) as u64,
        ..Default::default()
    };
    bpf(abi::BPF_MAP_UPDATE_ELEM, &mut attr).map(|_| ())
}

pub(crate) fn delete<K>(map: &OwnedFd, key: &K) {
    let mut attr = abi::MapElemAttr {
        map_fd: map.as_raw_fd() as u32,
        key: (key as *const K) as u64,
        ..Default::default()
    };
    // Failing only when the key is gone already, which is the goal.
    let _ = bpf(abi::BPF_MAP_DELETE_ELEM, &mut attr);
}

/// Every key of hash map `map` (keys of `N` bytes).
pub(crate) fn keys<const N: usize>(map: &OwnedFd) -> io::Result<Vec<[u8; N]>> {
    let mut out: Vec<[u8; N]> = Vec::new();
    loop {
        let mut next = [0u8; N];
        let mut attr = abi::MapElemAttr {
            map_fd: map.as_raw_fd() as u32,
            // No key: the first one.
            key: out.last().map_or(0, |k| k.as_ptr() as u64),
            value: next.as_mut_ptr() as u64,
            ..Default::default()
        };
        match bpf(BPF_MAP_GET_NEXT_KEY, &mut attr) {
            Ok(_) => out.push(next),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(out),
            Err(e) => return Err(annotate(e, "listing a BPF program's addresses")),
        }
    }
}

/// Makes hash map `map` (values one byte) hold exactly `want`.
pub(crate) fn replace_keys<const N: usize>(map: &OwnedFd, want: &[[u8; N]]) -> io::Result<()> {
    let want_set: HashSet<[u8; N]> = want.iter().copied().collect();
    for k in keys::<N>(map)? {
        if !want_set.contains(&k) {
            delete(map, &k);
        }
    }
    for k in want {
        update(map, k, &1u8).map_err(|e| {
            annotate(
                e,
                "adding an address to a BPF program's address map (1024 per family at most)",
            )
        })?;
    }
    Ok(())
}

/// Makes the address maps `addrs4` (4-byte keys) and `addrs6` (16-byte
/// keys) hold exactly these addresses.
pub(crate) fn set_addresses(
    addrs4: &OwnedFd,
    addrs6: &OwnedFd,
    v4: &[Ipv4Addr],
    v6: &[Ipv6Addr],
) -> io::Result<()> {
    let v4: Vec<[u8; 4]> = v4.iter().map(|a| a.octets()).collect();
    let v6: Vec<[u8; 16]> = v6.iter().map(|a| a.octets()).collect();
    replace_keys(addrs4, &v4)?;
    replace_keys(addrs6, &v6)
}

/// The addresses the maps hold, each family sorted.
pub(crate) fn addresses(
    addrs4: &OwnedFd,
    addrs6: &OwnedFd,
) -> io::Result<(Vec<Ipv4Addr>, Vec<Ipv6Addr>)> {
    let mut v4: Vec<Ipv4Addr> = keys::<4>(addrs4)?.into_iter().map(Ipv4Addr::from).collect();
    let mut v6: Vec<Ipv6Addr> = keys::<16>(addrs6)?
        .into_iter()
        .map(Ipv6Addr::from)
        .collect();
    v4.sort();
    v6.sort();
    Ok((v4, v6))
}
