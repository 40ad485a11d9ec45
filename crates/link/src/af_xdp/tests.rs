//! The AF_XDP link against the kernel over a veth pair, in native and in
//! generic XDP mode (as root; skipped with a message otherwise).

use super::*;
use crate::test_net::{arp_request, is_arp_reply_from, is_root, receive, run, NsVeth};
use std::net::UdpSocket;
use std::process::Command;
use std::time::{Duration, Instant};

/// A veth pair with the kernel side in a namespace of its own at
/// 10.99.y.1/24 (y from the pid), one queue each way: the link binds
/// queue 0.
fn veth(tag: &str) -> NsVeth {
    let y = 100 + (std::process::id() % 100) as u8;
    NsVeth::with_one_queue(&format!("ux{tag}"), y)
}

impl NsVeth {
    /// A UDP datagram from the kernel side's socket to `our_ip():port`.
    fn peer_send_udp(&self, port: u16, payload: &'static [u8]) {
        let dst = format!("{}:{port}", self.our_ip());
        self.in_ns(move || {
            let s = UdpSocket::bind("0.0.0.0:0").unwrap();
            s.send_to(payload, dst.as_str()).unwrap();
        });
    }

    /// Waits until the kernel side can send: bringing our end up gives it
    /// a carrier, but its qdisc is switched from `noop` (which drops every
    /// frame) to `noqueue` later by the kernel's linkwatch work, which a
    /// loaded machine delays by up to a second or more.
    fn wait_peer_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let out = Command::new("ip")
                .args(["-n", &self.ns, "link", "show", "dev", &self.inner])
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            if text.contains("LOWER_UP") && !text.contains("qdisc noop") {
                return;
            }
            assert!(Instant::now() < deadline, "peer never became ready: {text}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The kernel side pings `addr`, an address the kernel holds on our
    /// end beside ustack's program: the kernel must answer.
    #[cfg(feature = "libxdp")]
    fn assert_kernel_answers_ping(&self, addr: &str) {
        let ping = Command::new("ip")
            .args([
                "netns", "exec", &self.ns, "ping", "-c", "1", "-W", "3", addr,
            ])
            .output()
            .unwrap();
        assert!(
            ping.status.success(),
            "the kernel did not answer for its own address {addr} beside ustack's program: {}\n{}",
            String::from_utf8_lossy(&ping.stdout),
            self.diagnostics()
        );
    }

    /// Both ends' counters, for a failure message.
    fn diagnostics(&self) -> String {
        let mut text = String::new();
        for args in [
            vec!["-s", "-d", "link", "show", "dev", self.outer.as_str()],
            vec!["-n", &self.ns, "-s", "link", "show", "dev", &self.inner],
        ] {
            let out = Command::new("ip").args(&args).output().unwrap();
            text.push_str(&String::from_utf8_lossy(&out.stdout));
        }
        let out = Command::new("ethtool")
            .args(["-S", &self.outer])
            .output()
            .unwrap();
        text.push_str(&String::from_utf8_lossy(&out.stdout));
        text
    }
}

/// Whether `ifname` has an XDP program, waiting up to 2 s for it to go
/// when `want` is false: a test thread that forks a command while another
/// closes the BPF link leaves a copy of the descriptor in the child until
/// it execs, which delays the detach.
fn xdp_attached_settled(ifname: &str, want: bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let now = xdp_attached(ifname);
        if now == want || Instant::now() >= deadline {
            return now;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn xdp_attached(ifname: &str) -> bool {
    let out = Command::new("ip")
        .args(["-d", "link", "show", "dev", ifname])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).contains("prog/xdp")
}

fn small_config(mode: XdpModeChoice) -> XdpConfig {
    XdpConfig {
        mode,
        frames: 256,
        reserve: 16,
        ring_size: 64,
        ..XdpConfig::default()
    }
}

fn send_frames(link: &mut AfXdpLink, frame: &[u8], count: usize) {
    let mut v = Vec::new();
    for _ in 0..count {
        let mut b = link.alloc_tx().expect("a TX frame");
        b.set_len(frame.len());
        b.data_mut().copy_from_slice(frame);
        v.push(b);
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while !v.is_empty() {
        assert!(Instant::now() < deadline, "TX ring never drained");
        link.tx_burst(&mut v).unwrap();
        link.service().unwrap();
    }
}

/// The one's-complement sum of `data` (RFC 1071).
fn sum16(mut acc: u32, data: &[u8]) -> u32 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        acc += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [b] = chunks.remainder() {
        acc += u32::from(*b) << 8;
    }
    acc
}

fn fold(mut acc: u32) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// Whether the UDP checksum of IPv4 frame `f` (no options) verifies.
fn udp_checksum_ok(f: &[u8]) -> bool {
    let ip = &f[14..34];
    let udp = &f[34..];
    let udp_len = u16::from_be_bytes([udp[4], udp[5]]) as usize;
    let mut acc = sum16(0, &ip[12..20]);
    acc += 17 + udp_len as u32;
    acc = sum16(acc, &udp[..udp_len]);
    fold(acc) == 0xffff
}

/// ARP replies and kernel UDP, with the XDP program in `mode`: every frame
/// the engine gets lies in the UMEM, nothing is copied, and the program goes
/// away with the link.
fn arp_and_udp(tag: &str, mode: XdpModeChoice, expect: XdpMode) {
    let veth = veth(tag);
    let mut link = AfXdpLink::open(&veth.outer, &small_config(mode)).unwrap();
    assert_eq!(link.xdp_mode(), expect);
    assert!(!link.zero_copy(), "veth has no zero-copy AF_XDP");
    assert!(
        xdp_attached(&veth.outer),
        "no XDP program on {}",
        veth.outer
    );
    eprintln!("{}", link.describe());
    veth.wait_peer_ready();
    let mac = link.info().mac;
    let peer = veth.peer_ip();
    let umem = link.umem_range();

    // 300 ARP requests through a 64-entry TX ring and 256 frames: the rings
    // wrap several times, and each reply is read where the kernel put it.
    let req = arp_request(mac, [10, 99, veth.y, 2], peer);
    let mut replies = 0;
    let mut outside = 0;
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut to_send = 300;
    while replies < 300 && Instant::now() < deadline {
        if to_send > 0 {
            let n = to_send.min(16);
            send_frames(&mut link, &req, n);
            to_send -= n;
        }
        link.service().unwrap();
        link.rx_burst(&mut out, MAX_BURST).unwrap();
        for b in out.drain(..) {
            let p = b.data().as_ptr() as usize;
            if !(umem.contains(&p) && umem.contains(&(p + b.data().len() - 1))) {
                outside += 1;
            }
            if is_arp_reply_from(b.data(), mac, peer) {
                replies += 1;
            }
            link.recycle(b);
        }
    }
    assert_eq!(
        replies,
        300,
        "stats {:?}; {}",
        link.stats(),
        veth.diagnostics()
    );
    assert_eq!(outside, 0, "received frames outside the UMEM");

    // Kernel UDP with its checksum offload off: a full checksum arrives.
    veth.peer_neigh(mac);
    veth.peer_tx_offload(false);
    veth.peer_send_udp(9999, b"full-checksum");
    let is_udp = |b: &XdpFrame| {
        let d = b.data();
        d.len() >= 42 && d[12..14] == [0x08, 0x00] && d[23] == 17
    };
    let got = receive(&mut link, 1, Duration::from_secs(5), is_udp);
    assert_eq!(got.len(), 1, "no UDP datagram; stats {:?}", link.stats());
    let (frame, partial) = &got[0];
    assert!(frame.ends_with(b"full-checksum"));
    assert!(!partial, "a whole checksum is not marked partial");
    assert!(udp_checksum_ok(frame), "offload off: the checksum is whole");
    assert!(link.describe().contains("partial checksums recognised"));

    // With the offload on, the kernel leaves the checksum partial (only the
    // pseudo-header sum) and AF_XDP cannot say so: what arrives does not
    // verify, and the link, on a veth, recognises the partial form and
    // marks the frame as AF_PACKET would.
    veth.peer_tx_offload(true);
    veth.peer_send_udp(9999, b"partial-checksum");
    let got = receive(&mut link, 1, Duration::from_secs(5), is_udp);
    assert_eq!(got.len(), 1, "no UDP datagram; stats {:?}", link.stats());
    let (frame, partial) = &got[0];
    assert!(frame.ends_with(b"partial-checksum"));
    assert!(
        !udp_checksum_ok(frame),
        "expected the partial checksum of a veth peer with tx offload on"
    );
    assert!(
        wire::partial_checksum::holds_partial_form(frame),
        "{} XDP: the field is not the pseudo-header's sum",
        expect.name()
    );
    assert!(*partial, "a veth's partial checksum is marked");
    assert_eq!(link.stats().rx_csum_partial_form, 1);

    let s = link.stats();
    assert_eq!(s.rx_copied, 0);
    assert_eq!(s.ring_errors, 0, "{s:?}");
    assert_eq!(s.tx_frames, 300);
    assert_eq!(s.tx_dropped, 0);
    assert!(s.rx_frames >= 302);
    // Every frame is back (the last completions may lag): each of the 256
    // chunks is on the free list or in the fill ring, none lost.
    let accounted = |l: &AfXdpLink| l.free_frames() + l.sock.fill.outstanding() as usize;
    let deadline = Instant::now() + Duration::from_secs(2);
    while accounted(&link) != 256 && Instant::now() < deadline {
        link.service().unwrap();
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(accounted(&link), 256);
    drop(link);
    assert!(
        !xdp_attached_settled(&veth.outer, false),
        "the XDP program outlived the link"
    );
}

#[test]
fn veth_native_xdp_arp_and_udp() {
    if !is_root() {
        eprintln!("skipped: AF_XDP test needs root");
        return;
    }
    arp_and_udp("n", XdpModeChoice::Native, XdpMode::Native);
}

#[test]
fn veth_generic_xdp_arp_and_udp() {
    if !is_root() {
        eprintln!("skipped: AF_XDP test needs root");
        return;
    }
    arp_and_udp("g", XdpModeChoice::Generic, XdpMode::Generic);
}

#[test]
fn frames_of_another_link_are_refused() {
    if !is_root() {
        eprintln!("skipped: AF_XDP test needs root");
        return;
    }
    let a = veth("fa");
    let b = veth("fb");
    let mut la = AfXdpLink::open(&a.outer, &small_config(XdpModeChoice::Generic)).unwrap();
    let mut lb = AfXdpLink::open(&b.outer, &small_config(XdpModeChoice::Generic)).unwrap();
    let free_a = la.free_frames();
    let mut f = lb.alloc_tx().unwrap();
    f.set_len(60);
    la.recycle(f);
    assert_eq!(
        la.free_frames(),
        free_a,
        "a foreign frame joined the free list"
    );
    assert_eq!(la.stats().ring_errors, 1);
    let mut f = lb.alloc_tx().unwrap();
    f.set_len(60);
    let mut v = vec![f];
    la.tx_burst(&mut v).unwrap();
    assert!(v.is_empty());
    let s = la.stats();
    assert_eq!((s.ring_errors, s.tx_dropped, s.tx_frames), (2, 1, 0));
    // A frame shorter than an Ethernet header is dropped, its chunk kept.
    let mut f = la.alloc_tx().unwrap();
    f.set_len(10);
    let mut v = vec![f];
    la.tx_burst(&mut v).unwrap();
    assert_eq!(la.stats().tx_dropped, 2);
    assert_eq!(la.free_frames(), free_a);
}

#[test]
fn second_program_on_an_interface_is_refused() {
    if !is_root() {
        eprintln!("skipped: AF_XDP test needs root");
        return;
    }
    let v = veth("b");
    let _first = AfXdpLink::open(&v.outer, &small_config(XdpModeChoice::Native)).unwrap();
    let err = AfXdpLink::open(&v.outer, &small_config(XdpModeChoice::Auto))
        .err()
        .expect("a second program on the same interface");
    // EBUSY (or EEXIST) from BPF_LINK_CREATE; auto mode does not try
    // generic then: it would meet the same program.
    assert!(
        matches!(
            err.kind(),
            io::ErrorKind::ResourceBusy | io::ErrorKind::AlreadyExists
        ),
        "{err}"
    );
    assert!(err.to_string().contains("native"), "{err}");
}

#[test]
fn bad_configs_are_refused() {
    if !is_root() {
        eprintln!("skipped: AF_XDP test needs root");
        return;
    }
    let v = veth("c");
    for cfg in [
        XdpConfig {
            ring_size: 100,
            ..small_config(XdpModeChoice::Generic)
        },
        XdpConfig {
            frames: 64,
            ..small_config(XdpModeChoice::Generic)
        },
        XdpConfig {
            frame_size: 1024,
            ..small_config(XdpModeChoice::Generic)
        },
    ] {
        let err = AfXdpLink::open(&v.outer, &cfg).err().unwrap();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{cfg:?}: {err}");
        assert!(
            !xdp_attached_settled(&v.outer, false),
            "a refused link left its program"
        );
    }
    let err = AfXdpLink::open(
        &v.outer,
        &XdpConfig {
            bind: XdpBindChoice::ZeroCopy,
            ..small_config(XdpModeChoice::Native)
        },
    )
    .err()
    .expect("veth has no zero-copy");
    assert!(err.to_string().contains("zero-copy"), "{err}");
    assert!(AfXdpLink::open("no-such-if0", &XdpConfig::default()).is_err());
}

#[test]
fn a_second_process_joins_the_program_and_keeps_it_attached() {
    assert!(is_root(), "this AF_XDP test needs root");
    let v = veth("j");
    let first = attach_or_join_program(&v.outer, XdpModeChoice::Generic).unwrap();
    let ifindex = first.ifindex();
    // Another member asks native: it joins the generic program there is.
    let joined = attach_or_join_program(&v.outer, XdpModeChoice::Native).unwrap();
    assert_eq!(joined.mode(), XdpMode::Generic);
    assert_eq!(joined.ifindex(), ifindex);
    // Its BPF link keeps the program on the interface once the first is
    // gone, and its socket map is the program's.
    drop(first);
    let attached = |i| super::attached::attached_program(i).unwrap();
    assert_eq!(attached(ifindex).map(|(_, m)| m), Some(XdpMode::Generic));
    let link = AfXdpLink::open_with(
        &v.outer,
        Arc::clone(&joined),
        &small_config(XdpModeChoice::Generic),
    )
    .unwrap();
    assert!(link.describe().contains("queue 0 generic XDP"));
    drop(link);
    drop(joined);
    // The BPF link goes with its last descriptor. Another test of this
    // process that spawns a command holds a copy of every descriptor
    // between its fork and its exec (close-on-exec acts only at the exec),
    // so the detach may come a moment later (seen once in CI).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while attached(ifindex).is_some() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(
        attached(ifindex),
        None,
        "the last member's going detaches it"
    );
}

/// Whether `f` is an IPv4 UDP datagram to port `port`.
#[cfg(feature = "libxdp")]
fn is_udp_to(f: &[u8], port: u16) -> bool {
    f.len() >= 42 && f[12..14] == [0x08, 0x00] && f[23] == 17 && f[36..38] == port.to_be_bytes()
}

/// ustack's classifying program through libxdp, in `mode`: the kernel
/// serves its own address on the interface (the peer's ping of it, ARP
/// included, is answered by the kernel), datagrams to ustack's address come
/// to the socket, those to a `[kni]` port go to the kernel instead, and the
/// program leaves the interface when dropped.
#[cfg(feature = "libxdp")]
fn libxdp_program_passes_what_ustack_does_not_serve(tag: &str, mode: XdpMode) {
    let veth = veth(tag);
    let kernel_addr = format!("10.99.{}.3", veth.y);
    run(&[
        "ip",
        "addr",
        "add",
        &format!("{kernel_addr}/24"),
        "dev",
        &veth.outer,
    ]);
    let ifindex = CtlSocket::new().unwrap().index(&veth.outer).unwrap() as u32;
    let prog = XdpProgram::attach_libxdp(ifindex, mode).unwrap();
    assert_eq!(prog.mode(), mode);
    let ours = std::net::Ipv4Addr::new(10, 99, veth.y, 2);
    let served = prog.served().expect("the classifying program has maps");
    served.set_addresses(&[ours], &[]).unwrap();
    assert_eq!(served.addresses().unwrap(), (vec![ours], vec![]));
    served
        .set_kernel_ports(crate::KernelPorts::Listed, &[22], &[9999])
        .unwrap();
    assert_eq!(served.kernel_ports_mode().unwrap(), 1);
    let cfg = XdpConfig {
        mode: match mode {
            XdpMode::Native => XdpModeChoice::Native,
            XdpMode::Generic => XdpModeChoice::Generic,
        },
        ..small_config(XdpModeChoice::Auto)
    };
    let mut link = AfXdpLink::open_with(&veth.outer, Arc::new(prog), &cfg).unwrap();
    assert!(xdp_attached(&veth.outer));
    veth.wait_peer_ready();

    // The kernel's own address: ARP and ICMP pass to the kernel, which
    // answers (nothing of it reaches the socket).
    veth.assert_kernel_answers_ping(&kernel_addr);

    // ustack's address: a datagram to a [kni] UDP port goes to the kernel,
    // one to another port to the socket. The first is sent first, so were
    // it redirected it would be received before the second.
    veth.peer_neigh(link.info().mac);
    veth.peer_send_udp(9999, b"to the kernel");
    veth.peer_send_udp(7777, b"to ustack");
    let got = receive(&mut link, 1, Duration::from_secs(5), |b| {
        is_udp_to(b.data(), 9999) || is_udp_to(b.data(), 7777)
    });
    assert_eq!(got.len(), 1, "{}", veth.diagnostics());
    assert!(
        is_udp_to(&got[0].0, 7777),
        "the datagram to the [kni] port 9999 reached the socket"
    );
    assert_eq!(link.stats().rx_copied, 0);

    drop(link);
    assert!(
        !xdp_attached_settled(&veth.outer, false),
        "the program stayed on {} after the link closed",
        veth.outer
    );
}

/// The id of the XDP program `ifname` runs, if any.
#[cfg(feature = "libxdp")]
fn xdp_prog_id(ifname: &str) -> Option<u32> {
    let ifindex = CtlSocket::new().unwrap().index(ifname).unwrap() as u32;
    attached::attached_program(ifindex)
        .unwrap()
        .map(|(id, _)| id)
}

/// Where the interface already runs a program attached alone (here
/// libxdp's own AF_XDP default program, loaded by `ip`), ustack's program
/// is chained in front of it: the kernel's own address still answers
/// (through the previous program, which passes it), ustack's address comes
/// to the socket, and the previous program is back when ustack's goes.
/// While its owner lives, ustack's program is not taken over; once the
/// owner is gone (its record forged to a dead process), the next ustack
/// program takes its place and `ustack xdp detach` removes it, each putting
/// the displaced program back.
#[cfg(feature = "libxdp")]
fn libxdp_program_chains_in_front_of_a_program_attached_alone() {
    let veth = veth("lc");
    let kernel_addr = format!("10.99.{}.4", veth.y);
    run(&[
        "ip",
        "addr",
        "add",
        &format!("{kernel_addr}/24"),
        "dev",
        &veth.outer,
    ]);
    run(&[
        "ip",
        "link",
        "set",
        "dev",
        &veth.outer,
        "xdpgeneric",
        "obj",
        "/usr/lib/x86_64-linux-gnu/bpf/xsk_def_xdp_prog.o",
        "sec",
        "xdp",
    ]);
    let previous = xdp_prog_id(&veth.outer).expect("ip attached no program");
    let ifindex = CtlSocket::new().unwrap().index(&veth.outer).unwrap() as u32;
    let prog = XdpProgram::attach_libxdp(ifindex, XdpMode::Generic).unwrap();
    assert_eq!(prog.chained_to(), Some(previous));
    assert!(!prog.in_dispatcher());
    let ours = std::net::Ipv4Addr::new(10, 99, veth.y, 2);
    prog.served().unwrap().set_addresses(&[ours], &[]).unwrap();
    let mut link = AfXdpLink::open_with(
        &veth.outer,
        Arc::new(prog),
        &small_config(XdpModeChoice::Generic),
    )
    .unwrap();
    let now = xdp_prog_id(&veth.outer);
    assert!(
        now.is_some() && now != Some(previous),
        "ustack's program is not on the interface"
    );
    veth.wait_peer_ready();
    veth.assert_kernel_answers_ping(&kernel_addr);
    veth.peer_neigh(link.info().mac);
    veth.peer_send_udp(7777, b"to ustack");
    let got = receive(&mut link, 1, Duration::from_secs(5), |b| {
        is_udp_to(b.data(), 7777)
    });
    assert_eq!(got.len(), 1, "{}", veth.diagnostics());
    // A live owner's program is neither taken over nor detached.
    let super::stale::OnInterface::Ustack(found) = super::stale::inspect(ifindex).unwrap() else {
        panic!("ustack's program not recognised on {}", veth.outer);
    };
    assert_eq!(found.owner, Some(std::process::id()));
    assert!(found.owner_alive && !found.is_stale());
    assert_eq!(found.previous.as_ref().map(|p| p.1), Some(previous));
    drop(found);
    let again = XdpProgram::attach_libxdp(ifindex, XdpMode::Generic).unwrap_err();
    assert_eq!(again.kind(), std::io::ErrorKind::ResourceBusy, "{again}");
    assert!(super::stale::detach_stale(&veth.outer).is_err());

    // Its owner gone: a new program takes its place, chained to the
    // program it displaced, which is back when the new one goes.
    let stale_id = xdp_prog_id(&veth.outer);
    super::stale::forge_dead_owner(ifindex, 0x7fff_fff0);
    let taken = XdpProgram::attach_libxdp(ifindex, XdpMode::Generic).unwrap();
    assert_eq!(taken.chained_to(), Some(previous));
    let now = xdp_prog_id(&veth.outer);
    assert!(now.is_some() && now != stale_id && now != Some(previous));
    // The stale program's own stop finds it replaced (said on stderr).
    drop(link);
    assert_eq!(xdp_prog_id(&veth.outer), now);
    drop(taken);
    assert_eq!(
        xdp_prog_id(&veth.outer),
        Some(previous),
        "the previous program is not back"
    );

    // `ustack xdp detach` puts the displaced program back.
    let left = XdpProgram::attach_libxdp(ifindex, XdpMode::Generic).unwrap();
    super::stale::forge_dead_owner(ifindex, 0x7fff_fff0);
    let said = super::stale::detach_stale(&veth.outer).unwrap();
    assert!(
        said.contains(&format!("program {previous} is back")),
        "{said}"
    );
    assert_eq!(xdp_prog_id(&veth.outer), Some(previous));
    drop(left);
    assert_eq!(xdp_prog_id(&veth.outer), Some(previous));
    run(&["ip", "link", "set", "dev", &veth.outer, "xdpgeneric", "off"]);
}

/// One test: each case adds the kernel's address to its veth in this
/// namespace, and two veths of one process share a subnet.
#[cfg(feature = "libxdp")]
#[test]
fn libxdp_program_native_generic_and_chained() {
    assert!(is_root(), "AF_XDP tests need root");
    libxdp_program_passes_what_ustack_does_not_serve("ln", XdpMode::Native);
    libxdp_program_passes_what_ustack_does_not_serve("lg", XdpMode::Generic);
    libxdp_program_chains_in_front_of_a_program_attached_alone();
}

/// The kernel side's MAC address.
fn peer_mac(veth: &NsVeth) -> [u8; 6] {
    let out = Command::new("ip")
        .args(["-n", &veth.ns, "-o", "link", "show", "dev", &veth.inner])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let at = text.find("link/ether ").expect("a MAC") + "link/ether ".len();
    let mut mac = [0u8; 6];
    for (m, hex) in mac.iter_mut().zip(text[at..at + 17].split(':')) {
        *m = u8::from_str_radix(hex, 16).unwrap();
    }
    mac
}

/// A UDP socket of the kernel side on `10.99.y.1:port`, waiting at most a
/// second for each datagram.
fn peer_udp_socket(veth: &NsVeth, port: u16) -> UdpSocket {
    let ns_path = format!("/var/run/netns/{}", veth.ns);
    let addr = format!("10.99.{}.1:{port}", veth.y);
    std::thread::spawn(move || {
        let f = std::fs::File::open(&ns_path).unwrap();
        // SAFETY: setns on a namespace file we hold open; it changes only
        // this short-lived thread's network namespace, and the socket made
        // in it stays there.
        let r = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(r, 0, "setns: {}", io::Error::last_os_error());
        let s = UdpSocket::bind(addr.as_str()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
        s
    })
    .join()
    .unwrap()
}

/// An IPv4 UDP frame from `10.99.y.2:4000` to the kernel side's port,
/// its IP header checksum whole and its UDP checksum field holding the
/// pseudo-header's sum only (the partial form the stack leaves).
fn partial_udp_frame(veth: &NsVeth, src_mac: [u8; 6], port: u16, payload: &[u8]) -> Vec<u8> {
    let udp_len = 8 + payload.len();
    let mut f = Vec::new();
    f.extend_from_slice(&peer_mac(veth));
    f.extend_from_slice(&src_mac);
    f.extend_from_slice(&[0x08, 0x00]);
    let total = (20 + udp_len) as u16;
    let mut ip = [0u8; 20];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[10, 99, veth.y, 2]);
    ip[16..20].copy_from_slice(&veth.peer_ip());
    let sum = !fold(sum16(0, &ip));
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    f.extend_from_slice(&ip);
    let pseudo = fold(sum16(17 + udp_len as u32, &ip[12..20]));
    f.extend_from_slice(&4000u16.to_be_bytes());
    f.extend_from_slice(&port.to_be_bytes());
    f.extend_from_slice(&(udp_len as u16).to_be_bytes());
    f.extend_from_slice(&pseudo.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// Transmit checksum offload through TX metadata, in `mode`: frames handed
/// out start after room for the metadata, and a UDP datagram sent with only
/// its pseudo-header's sum reaches the kernel's socket, whose stack drops a
/// bad checksum. Our end's own offload is off, so the kernel finishes the
/// checksum in software before the veth carries it (what a device without
/// the offload gets). The same frame sent without the request arrives with
/// its partial sum as it is, and is dropped: the request is what made it
/// whole.
fn tx_checksum_through_metadata(tag: &str, mode: XdpModeChoice) {
    let veth = veth(tag);
    run(&["ethtool", "-K", &veth.outer, "tx", "off"]);
    let mut link = AfXdpLink::open(&veth.outer, &small_config(mode)).unwrap();
    assert!(
        link.tx_checksum_offload(),
        "Linux 6.11+ takes TX metadata in copy mode: {}",
        link.describe()
    );
    assert_eq!(link.stats().tx_csum_refused, 0);
    veth.wait_peer_ready();
    let peer = peer_udp_socket(&veth, 7777);
    let frame = partial_udp_frame(&veth, link.info().mac, 7777, b"finished by the kernel");
    let send = |link: &mut AfXdpLink, partial: bool| {
        let mut b = link.alloc_tx().expect("a TX frame");
        assert_eq!(b.offset(), abi::TX_METADATA_LEN, "room for the metadata");
        b.set_len(frame.len());
        b.data_mut().copy_from_slice(&frame);
        b.set_csum_partial(partial);
        let mut v = vec![b];
        while !v.is_empty() {
            link.tx_burst(&mut v).unwrap();
        }
    };
    send(&mut link, true);
    let mut buf = [0u8; 64];
    let n = peer.recv(&mut buf).unwrap_or_else(|e| {
        panic!(
            "no datagram at the kernel's socket ({e}): {:?}",
            link.stats()
        )
    });
    assert_eq!(&buf[..n], b"finished by the kernel");
    assert_eq!(link.stats().tx_csum_partial, 1);
    send(&mut link, false);
    assert!(
        peer.recv(&mut buf).is_err(),
        "the pseudo-header sum alone, sent without the request, was taken"
    );
    assert_eq!(link.stats().tx_csum_partial, 1);
    assert_eq!(link.stats().tx_dropped, 0);
}

#[test]
fn tx_checksum_through_metadata_generic_and_native() {
    assert!(is_root(), "this AF_XDP test needs root");
    tx_checksum_through_metadata("mg", XdpModeChoice::Generic);
    tx_checksum_through_metadata("mn", XdpModeChoice::Native);
}

#[test]
fn tx_metadata_bytes_are_the_kernels_layout() {
    let m = tx_metadata_bytes(34, 6);
    assert_eq!(m.len(), 24, "a multiple of 8, room for launch_time");
    assert_eq!(u64::from_ne_bytes(m[..8].try_into().unwrap()), 1 << 1);
    assert_eq!(u16::from_ne_bytes([m[8], m[9]]), 34);
    assert_eq!(u16::from_ne_bytes([m[10], m[11]]), 6);
    assert!(m[12..].iter().all(|&b| b == 0));
}
