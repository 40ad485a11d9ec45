use std::cell::RefCell;

use super::*;

const EOPNOTSUPP: i32 = libc::EOPNOTSUPP;
const EINVAL: i32 = libc::EINVAL;

/// What a driver allows, for [`ModelDriver`].
#[derive(Clone, Copy)]
struct Allows {
    /// `get_rxfh` exists (a veth has none).
    get: bool,
    /// The table may be written.
    set_table: bool,
    /// The key may be written.
    set_key: bool,
    /// The hashed fields may be written.
    set_fields: bool,
}

/// A driver's RSS state behind the kernel's ethtool checks
/// (net/ethtool/ioctl.c): sizes in a request are 0 or the device's,
/// a set request changes what it names.
struct ModelDriver {
    allows: Allows,
    state: RefCell<DriverState>,
}

struct DriverState {
    indir: Vec<u32>,
    key: Vec<u8>,
    hfunc: u8,
    input_xfrm: u8,
    /// Fields hashed for tcp4, udp4, tcp6, udp6.
    fields: [u64; 4],
}

fn flow_index(flow: u32) -> Option<usize> {
    FLOW_TYPES.iter().position(|&(f, _)| f == flow)
}

fn err(code: i32) -> io::Result<()> {
    Err(io::Error::from_raw_os_error(code))
}

impl ModelDriver {
    /// A NIC's defaults: a 128-entry table over `rings` rings (as
    /// `ethtool_rxfh_indir_default`), a 52-byte key, Toeplitz, UDP hashed
    /// by addresses only.
    fn nic(rings: u32, allows: Allows) -> ModelDriver {
        ModelDriver {
            allows,
            state: RefCell::new(DriverState {
                indir: (0..128).map(|i| i % rings).collect(),
                key: (0..52).map(|i| (i * 37 + 11) as u8).collect(),
                hfunc: ETH_RSS_HASH_TOP,
                input_xfrm: 0,
                fields: [
                    RXH_ADDRESSES_AND_PORTS,
                    (1 << 4) | (1 << 5),
                    RXH_ADDRESSES_AND_PORTS,
                    (1 << 4) | (1 << 5),
                ],
            }),
        }
    }
}

impl EthtoolDevice for ModelDriver {
    fn request(&self, buf: &mut [u8]) -> io::Result<()> {
        let cmd = u32::from_ne_bytes(buf[..4].try_into().unwrap());
        let mut st = self.state.borrow_mut();
        match cmd {
            ETHTOOL_GRXFH | ETHTOOL_SRXFH => {
                let b: &mut [u8; RXNFC_LEN] = (&mut buf[..RXNFC_LEN]).try_into().unwrap();
                let flow = u32::from_ne_bytes(b[4..8].try_into().unwrap());
                let Some(i) = flow_index(flow) else {
                    return err(EINVAL);
                };
                if cmd == ETHTOOL_GRXFH {
                    b[8..16].copy_from_slice(&st.fields[i].to_ne_bytes());
                } else if self.allows.set_fields {
                    st.fields[i] = decode_rxnfc_fields(b);
                } else {
                    return err(EOPNOTSUPP);
                }
                Ok(())
            }
            ETHTOOL_GRSSH => {
                if !self.allows.get {
                    return err(EOPNOTSUPP);
                }
                let r = Rxfh::decode(buf).unwrap();
                let (n, k) = (st.indir.len() as u32, st.key.len() as u32);
                if (r.indir_size != 0 && r.indir_size != n) || (r.key_size != 0 && r.key_size != k)
                {
                    return err(EINVAL);
                }
                let answer = Rxfh {
                    cmd,
                    indir_size: n,
                    key_size: k,
                    hfunc: st.hfunc,
                    input_xfrm: st.input_xfrm,
                    indir: if r.indir_size == 0 {
                        vec![]
                    } else {
                        st.indir.clone()
                    },
                    key: if r.key_size == 0 {
                        vec![]
                    } else {
                        st.key.clone()
                    },
                }
                .encode();
                buf[..answer.len()].copy_from_slice(&answer);
                Ok(())
            }
            ETHTOOL_SRSSH => {
                if !self.allows.get {
                    return err(EOPNOTSUPP);
                }
                let r = Rxfh::decode(buf).unwrap();
                let (n, k) = (st.indir.len() as u32, st.key.len() as u32);
                if (r.indir_size != 0 && r.indir_size != INDIR_NO_CHANGE && r.indir_size != n)
                    || (r.key_size != 0 && r.key_size != k)
                    || (r.hfunc != 0 && r.hfunc != ETH_RSS_HASH_TOP)
                {
                    return err(EINVAL);
                }
                let table = r.indir_size != 0 && r.indir_size != INDIR_NO_CHANGE;
                if (table && !self.allows.set_table) || (r.key_size != 0 && !self.allows.set_key) {
                    return err(EOPNOTSUPP);
                }
                if table {
                    st.indir = r.indir;
                }
                if r.key_size != 0 {
                    st.key = r.key;
                }
                Ok(())
            }
            _ => err(EOPNOTSUPP),
        }
    }
}

const ALL: Allows = Allows {
    get: true,
    set_table: true,
    set_key: true,
    set_fields: true,
};

#[test]
fn rxfh_is_laid_out_as_the_kernel_reads_it() {
    let r = Rxfh {
        cmd: ETHTOOL_SRSSH,
        indir_size: 2,
        key_size: 3,
        hfunc: ETH_RSS_HASH_TOP,
        input_xfrm: 0,
        indir: vec![1, 0],
        key: vec![0xaa, 0xbb, 0xcc],
    };
    let b = r.encode();
    assert_eq!(b.len(), RXFH_HEADER + 2 * 4 + 3);
    assert_eq!(&b[0..4], &ETHTOOL_SRSSH.to_ne_bytes());
    assert_eq!(&b[4..8], &[0; 4], "rss_context 0: the default context");
    assert_eq!(&b[8..12], &2u32.to_ne_bytes());
    assert_eq!(&b[12..16], &3u32.to_ne_bytes());
    assert_eq!(&b[16..24], &[ETH_RSS_HASH_TOP, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(&b[24..28], &1u32.to_ne_bytes());
    assert_eq!(&b[32..], &[0xaa, 0xbb, 0xcc]);
    assert_eq!(Rxfh::decode(&b).unwrap(), r);
    assert_eq!(request_len(&b), Some(b.len()));
    let q = encode_rxnfc(ETHTOOL_SRXFH, UDP_V6_FLOW, RXH_ADDRESSES_AND_PORTS);
    assert_eq!(&q[0..4], &ETHTOOL_SRXFH.to_ne_bytes());
    assert_eq!(&q[4..8], &UDP_V6_FLOW.to_ne_bytes());
    assert_eq!(decode_rxnfc_fields(&q), 0xf0);
    assert_eq!(request_len(&q), Some(RXNFC_LEN));
}

#[test]
fn truncated_or_lying_answers_are_errors() {
    let b = Rxfh::full_query(128, 40).encode();
    for cut in 0..b.len() {
        let d = Rxfh::decode(&b[..cut]);
        if cut == RXFH_HEADER {
            // The header alone: a sizes answer.
            assert!(d.unwrap().indir.is_empty());
        } else {
            assert!(d.is_err(), "{cut} bytes decoded");
        }
    }
    let mut huge = Rxfh::sizes_query().encode();
    huge[8..12].copy_from_slice(&u32::MAX.wrapping_sub(1).to_ne_bytes());
    huge.push(0);
    assert!(Rxfh::decode(&huge).is_err());
    assert_eq!(request_len(&[0x03, 0, 0, 0]), None, "not an RSS command");
    assert_eq!(request_len(&b[..10]), None);
}

#[test]
fn a_programmable_nic_takes_the_symmetric_key_the_table_and_the_fields() {
    let nic = ModelDriver::nic(8, ALL);
    let t = program_or_read(&nic, 4).unwrap();
    assert!(t.programmed);
    assert_eq!(t.key, symmetric_key(52));
    assert_eq!(&t.key[..4], &[0x6d, 0x5a, 0x6d, 0x5a]);
    assert_eq!(t.reta, (0..128).map(|i| i % 4).collect::<Vec<u16>>());
    let st = nic.state.borrow();
    assert_eq!(st.fields, [RXH_ADDRESSES_AND_PORTS; 4]);
    assert_eq!(st.indir, (0..128).map(|i| i % 4).collect::<Vec<u32>>());
}

#[test]
fn a_fixed_key_is_read_back_with_the_written_table() {
    let nic = ModelDriver::nic(
        8,
        Allows {
            set_key: false,
            ..ALL
        },
    );
    let own = nic.state.borrow().key.clone();
    let t = program_or_read(&nic, 2).unwrap();
    assert!(t.programmed);
    assert_eq!(t.key, own);
    assert_eq!(t.reta, (0..128).map(|i| i % 2).collect::<Vec<u16>>());
}

#[test]
fn a_read_only_nic_is_used_as_it_is_when_its_table_names_served_queues() {
    let ro = Allows {
        set_table: false,
        set_key: false,
        ..ALL
    };
    let nic = ModelDriver::nic(4, ro);
    nic.state.borrow_mut().fields = [RXH_ADDRESSES_AND_PORTS; 4];
    // A table of the driver's own, not round robin.
    nic.state.borrow_mut().indir = (0..128).map(|i| (i / 32) as u32).collect();
    let t = program_or_read(&nic, 4).unwrap();
    assert!(!t.programmed);
    assert_eq!(
        t.reta,
        (0..128).map(|i| (i / 32) as u16).collect::<Vec<u16>>()
    );
    assert_eq!(t.key, nic.state.borrow().key);
    // Two engines for four rings: the table names queues nobody serves.
    let e = program_or_read(&nic, 2).unwrap_err();
    assert!(e.contains("names queue 2"), "{e}");
}

#[test]
fn what_the_engines_cannot_compute_is_refused_with_the_reason() {
    // UDP hashed by addresses only, and the driver will not change it.
    let nic = ModelDriver::nic(
        4,
        Allows {
            set_fields: false,
            ..ALL
        },
    );
    let e = program_or_read(&nic, 4).unwrap_err();
    assert!(e.contains("udp4 hashes fields 0x30"), "{e}");
    // Another hash function, or a symmetric transformation of the input.
    let nic = ModelDriver::nic(4, ALL);
    nic.state.borrow_mut().hfunc = 2;
    let e = program_or_read(&nic, 4).unwrap_err();
    assert!(e.contains("not Toeplitz"), "{e}");
    let nic = ModelDriver::nic(4, ALL);
    nic.state.borrow_mut().input_xfrm = 1;
    let e = program_or_read(&nic, 4).unwrap_err();
    assert!(e.contains("input_xfrm 0x1"), "{e}");
    // A key shorter than an IPv6 flow's hash reads.
    let nic = ModelDriver::nic(4, ALL);
    nic.state.borrow_mut().key = vec![1; 16];
    let e = program_or_read(&nic, 4).unwrap_err();
    assert!(e.contains("16 bytes"), "{e}");
    // A device with no RSS at all (a veth).
    let none = ModelDriver::nic(1, Allows { get: false, ..ALL });
    let e = program_or_read(&none, 4).unwrap_err();
    assert!(e.contains("cannot be read"), "{e}");
}

#[test]
fn short_buffers_never_reach_the_kernel() {
    let dev = InterfaceEthtool::new("lo").unwrap();
    let mut b = Rxfh::full_query(128, 40).encode();
    b.truncate(RXFH_HEADER + 10);
    let e = dev.request(&mut b).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    let mut other = [3u8, 0, 0, 0, 0, 0, 0, 0];
    assert_eq!(
        dev.request(&mut other).unwrap_err().kind(),
        io::ErrorKind::InvalidInput
    );
}

#[test]
fn a_veth_has_no_rss_to_program_and_says_so() {
    assert!(
        crate::test_net::is_root(),
        "this test creates a veth pair: run it as root"
    );
    let (a, _b, _cleanup) = crate::test_net::quiet_veth_pair("rss");
    let dev = InterfaceEthtool::new(&a).unwrap();
    // The driver has no RSS configuration: EOPNOTSUPP (not EINVAL or
    // EFAULT, which a badly formed request would get).
    let mut b = Rxfh::sizes_query().encode();
    let e = dev.request(&mut b).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(EOPNOTSUPP), "{e}");
    let e = program_or_read(&dev, 2).unwrap_err();
    assert!(e.contains("ETHTOOL_GRSSH"), "{e}");
}
