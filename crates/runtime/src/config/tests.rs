//! Tests of the whole configuration: the example file, every message.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use super::*;

const EXAMPLE: &str = include_str!("../../../../config/example.ini");

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse(text, "config.ini")
}

/// The error message of `text`, as displayed.
fn err(text: &str) -> String {
    match parse(text) {
        Ok(c) => panic!("expected an error, parsed {c:#?}"),
        Err(e) => e.to_string(),
    }
}

fn warnings(text: &str) -> Vec<String> {
    parse(text)
        .unwrap_or_else(|e| panic!("{e}"))
        .warnings
        .iter()
        .map(|w| w.to_string())
        .collect()
}

/// A valid one-port configuration to build test cases from.
const BASE: &str = "\
[dpdk]
lcore_mask=3
port_list=0

[port0]
addr=10.99.1.2
netmask=255.255.255.0
gateway=10.99.1.1
";

#[test]
fn example_parses_without_warnings() {
    let c = Config::parse(EXAMPLE, "example.ini").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.warnings, [], "the reference file should be clean");

    let d = &c.dpdk;
    assert_eq!(d.lcore_mask.as_ref().unwrap().as_slice(), &[0, 1]);
    assert_eq!(d.channel, Some(4));
    assert!(d.promiscuous && d.numa_on && d.vlan_strip);
    assert!(!d.tx_csum_offload_skip && !d.tso && !d.symmetric_rss && !d.no_huge);
    assert_eq!(d.idle_sleep, Duration::ZERO);
    assert_eq!(d.pkt_tx_delay, Duration::from_micros(100));
    assert_eq!(d.port_list, [0, 1]);
    assert_eq!(d.base_virtaddr, Some(0x7f00_0000_0000));
    assert_eq!(d.file_prefix.as_deref(), Some("ustack"));
    assert_eq!(d.memory_mb, Some(1024));
    assert_eq!(d.pci_allow, ["02:00.0", "0000:03:00.0"]);
    assert_eq!(d.vdev, ["net_tap0,iface=dtap0", "net_null0"]);
    assert_eq!(d.proc_type, ProcType::Auto);
    assert_eq!(d.log_level, Some(6));

    assert_eq!(c.ports.len(), 2);
    let p0 = c.port(0).unwrap();
    assert_eq!(p0.link, LinkSpec::Tap("ustack0".into()));
    assert_eq!(p0.if_name, "ustack0");
    let v4 = p0.ipv4.unwrap();
    assert_eq!(v4.addr, Ipv4Addr::new(10, 99, 1, 2));
    assert_eq!(v4.netmask, Ipv4Addr::new(255, 255, 255, 0));
    assert_eq!(v4.prefix_len, 24);
    assert_eq!(v4.broadcast, Ipv4Addr::new(10, 99, 1, 255));
    assert_eq!(v4.gateway, Some(Ipv4Addr::new(10, 99, 1, 1)));
    let v6 = p0.ipv6.unwrap();
    assert_eq!(v6.addr, "fd00:99:1::2".parse::<Ipv6Addr>().unwrap());
    assert_eq!(v6.prefix_len, 64);
    assert_eq!(v6.gateway, Some("fe80::1".parse().unwrap()));
    assert_eq!(
        p0.vip_addrs,
        [Ipv4Addr::new(10, 99, 1, 3), Ipv4Addr::new(10, 99, 1, 4)]
    );
    assert_eq!(p0.vip_addrs6.len(), 2);
    assert_eq!(p0.vip_prefix_len, 64);
    assert_eq!(
        p0.ipfw_pr,
        [SourcePrefix {
            addr: Ipv4Addr::new(10, 99, 1, 3),
            prefix_len: 32
        }]
    );
    assert!(c.vlans.is_empty() && d.vlan_filter.is_empty());
    assert_eq!(p0.lcore_list.as_deref(), Some(&[0, 1][..]));
    assert_eq!(p0.memory, Some(PoolSize::Buffers(8192)));
    assert_eq!(p0.mtu, Some(1500));
    assert_eq!(p0.mac, Some([2, 0, 0, 0x99, 1, 2]));

    let p1 = c.port(1).unwrap();
    assert_eq!(p1.link, LinkSpec::AfPacket("veth-us1".into()));
    assert_eq!(p1.if_name, "ustack1");
    assert_eq!(p1.ipv4.unwrap().prefix_len, 24);
    assert_eq!(p1.ipv4.unwrap().broadcast, Ipv4Addr::new(10, 99, 2, 255));
    assert_eq!(p1.ipv6, None);
    assert_eq!(p1.memory, Some(PoolSize::Bytes(16 << 20)));
    assert_eq!(p1.lcore_list.as_deref(), Some(&[1][..]));

    assert_eq!(c.pcap, PcapConfig::default());
    assert_eq!(c.kni.method, KniMethod::Reject);
    assert_eq!(c.kni.tcp_ports, [80, 443]);
    assert_eq!(c.kni.udp_ports, [53]);
    assert!(!c.kni.enable);
    assert_eq!(c.kni.ifname, "ustack-kni");
    assert_eq!(c.fault, None);

    assert_eq!(c.boot.max_sockets, 262_144);
    // Every typed sysctl is in the example, at its default.
    assert_eq!(c.sysctls, Sysctls::default());
    for name in Sysctls::NAMES {
        assert!(
            c.freebsd_sysctl.iter().any(|e| e.name == *name),
            "example.ini does not document {name}"
        );
    }
    let ttl = c
        .freebsd_sysctl
        .iter()
        .find(|e| e.name == "net.inet.ip.ttl")
        .unwrap();
    assert_eq!(ttl.value, "64");
    assert_eq!(
        EXAMPLE.lines().nth(ttl.line.unwrap() - 1),
        Some("net.inet.ip.ttl=64")
    );
}

#[test]
fn example_fault_section() {
    // The example's [fault] block, uncommented.
    let text: String = EXAMPLE
        .lines()
        .map(|l| {
            let fault = [
                "[fault]",
                "loss=",
                "duplicate=",
                "reorder=",
                "corrupt=",
                "delay_us=",
                "jitter_us=",
                "tx_delay_us=",
                "seed=",
            ];
            match l.strip_prefix('#') {
                Some(rest) if fault.iter().any(|k| rest.starts_with(k)) => rest,
                _ => l,
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let c = parse(&text).unwrap_or_else(|e| panic!("{e}"));
    let f = c.fault.unwrap();
    assert_eq!(f.loss, 0.01);
    assert_eq!(f.duplicate, 0.001);
    assert_eq!(f.reorder, 0.01);
    assert_eq!(f.corrupt, 0.0001);
    assert_eq!(f.delay_us, 500);
    assert_eq!(f.jitter_us, 100);
    assert_eq!(f.tx_delay_us, 2000);
    assert_eq!(f.seed, 42);
}

#[test]
fn example_vlan_sections() {
    // The example's vlan_filter and [vlanN] blocks, uncommented.
    let mut in_vlans = false;
    let text: String = EXAMPLE
        .lines()
        .map(|l| {
            in_vlans |= l.starts_with("#[vlan10]");
            if in_vlans && l.is_empty() {
                in_vlans = false;
            }
            match l.strip_prefix('#') {
                Some(rest) if in_vlans || rest.starts_with("vlan_filter=") => rest,
                _ => l,
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let c = parse(&text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.dpdk.vlan_filter, [10, 20, 30]);
    let ids: Vec<(u16, u16)> = c.vlans.iter().map(|v| (v.id, v.portid)).collect();
    assert_eq!(ids, [(10, 1), (20, 1), (30, 1)]);
    assert!(c
        .vlans
        .iter()
        .all(|v| v.ipfw_pr.len() == 1 && v.vip_addrs.len() == 1));
    assert!(c.vlans[1].ipv6.is_some());
    // Port 1's own address is now ignored, by name.
    assert_eq!(c.port(1).unwrap().ipv4, None);
    let w: Vec<String> = c.warnings.iter().map(|w| w.to_string()).collect();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("[port1] ignores addr, gateway"), "{w:?}");
}

#[test]
fn empty_and_minimal() {
    let c = parse("").unwrap();
    assert!(c.ports.is_empty());
    assert_eq!(c.dpdk, DpdkConfig::default());
    assert_eq!(c, Config::parse("", "config.ini").unwrap());
    // The exception path's TAP of port N is ustack-kniN unless named.
    assert_eq!(c.kni.ifname, "ustack-kni");
    assert_eq!(parse("[kni]\nifname=kx\n").unwrap().kni.ifname, "kx");
    assert_eq!(Config::default().ports, []);

    // No port_list: the [portN] sections define it.
    let c = parse("[port3]\naddr=10.0.0.2/8\n[port1]\naddr=10.1.0.2/8\n").unwrap();
    assert_eq!(c.dpdk.port_list, [1, 3]);
    assert_eq!(c.ports.iter().map(|p| p.id).collect::<Vec<_>>(), [1, 3]);
    assert_eq!(c.ports[0].link, LinkSpec::Dpdk);
}

#[test]
fn invalid_values_name_file_line_section_key() {
    let cases: &[(&str, &str)] = &[
        (
            "[port0]\naddr=10.99.1.300\n",
            "config.ini:2: [port0] addr: \"10.99.1.300\" is not an IPv4 address",
        ),
        (
            "[dpdk]\nlcore_mask=0\n",
            "config.ini:2: [dpdk] lcore_mask: \"0\" selects no CPU",
        ),
        (
            "[dpdk]\nlcore_mask=0xfz\n",
            "config.ini:2: [dpdk] lcore_mask: \"0xfz\" is not a hexadecimal CPU mask",
        ),
        (
            "[dpdk]\npromiscuous=yes\n",
            "config.ini:2: [dpdk] promiscuous: \"yes\" must be 0 or 1",
        ),
        (
            "[dpdk]\n\nidle_sleep=-5\n",
            "config.ini:3: [dpdk] idle_sleep: \"-5\" is out of range (0..=1000000)",
        ),
        (
            "[dpdk]\nchannel=four\n",
            "config.ini:2: [dpdk] channel: \"four\" is not an integer",
        ),
        (
            "[dpdk]\nport_list=0-3,x\n",
            "config.ini:2: [dpdk] port_list: \"0-3,x\" has an item \"x\" that is not a number or a range",
        ),
        (
            "[dpdk]\nport_list=3-1\n",
            "config.ini:2: [dpdk] port_list: \"3-1\" has a range \"3-1\" that goes backwards",
        ),
        (
            "[dpdk]\nproc_type=main\n",
            "config.ini:2: [dpdk] proc_type: \"main\" must be primary, secondary or auto",
        ),
        (
            "[dpdk]\npci_whitelist=02:00\n",
            "config.ini:2: [dpdk] pci_whitelist: \"02:00\" has \"02:00\", which is not a PCI address (0000:02:00.0 or 02:00.0)",
        ),
        (
            // F-Stack's own sample has this typo in its netmask.
            "[port0]\naddr=192.168.1.2\nnetmask=255.255.225.0\n",
            "config.ini:3: [port0] netmask: \"255.255.225.0\" is not a contiguous netmask",
        ),
        (
            "[port0]\naddr=10.99.1.2\nnetmask=255.255.255.0\ngateway=10.99.2.1\n",
            "config.ini:4: [port0] gateway: \"10.99.2.1\" is not inside the port's subnet 10.99.1.0/24",
        ),
        (
            "[port0]\naddr=10.99.1.2/24\ngateway=10.99.1.2\n",
            "config.ini:3: [port0] gateway: \"10.99.1.2\" is the port's own address",
        ),
        (
            "[port0]\naddr=10.99.1.255/24\n",
            "config.ini:2: [port0] addr: \"10.99.1.255/24\" is the broadcast address of 10.99.1.0/24",
        ),
        (
            "[port0]\naddr=224.0.0.1/24\n",
            "config.ini:2: [port0] addr: \"224.0.0.1/24\" is not a unicast address",
        ),
        (
            "[port0]\naddr=10.99.1.2/24\nbroadcast=10.99.2.255\n",
            "config.ini:3: [port0] broadcast: \"10.99.2.255\" is not inside 10.99.1.0/24",
        ),
        (
            "[port0]\naddr=10.99.1.2\n",
            "config.ini:2: [port0] addr: netmask= is required (or write addr as 10.99.1.2/24)",
        ),
        (
            "[port0]\naddr=10.99.1.2/16\nnetmask=255.255.255.0\n",
            "config.ini:3: [port0] netmask: \"255.255.255.0\" (/24) contradicts addr's /16",
        ),
        (
            "[port0]\ngateway=10.0.0.1\naddr6=fd00::2\n",
            "config.ini:2: [port0] gateway is set but addr is not",
        ),
        (
            "[port0]\nlink=tap:us0\naddr6=fd00::2\n",
            "config.ini:2: [port0] addr is required when link= is set",
        ),
        (
            "[port0]\nmtu=1500\n",
            "config.ini:1: [port0] has no address: set addr= and netmask= (or addr6=), or give it [vlanN] sections with portid=0",
        ),
        (
            "[port0]\nlink=tap\naddr=10.0.0.2/24\n",
            "config.ini:2: [port0] link: \"tap\" is not a link: use tap:NAME, af_packet:IFACE, af_xdp:IFACE, dpdk, shm_create:PATH or shm_attach:PATH",
        ),
        (
            "[port0]\naddr=10.0.0.2/24\naddr6=fd00::2\nmtu=1000\n",
            "config.ini:4: [port0] mtu: \"1000\" is below 1280, the IPv6 minimum (addr6 is set)",
        ),
        (
            "[port0]\naddr=10.0.0.2/24\nmtu=60\n",
            "config.ini:3: [port0] mtu: \"60\" is out of range (68..=65535)",
        ),
        (
            "[port0]\naddr=10.0.0.2/24\nmac=01:00:5e:00:00:01\n",
            "config.ini:3: [port0] mac: \"01:00:5e:00:00:01\" is a multicast MAC address, not an interface's",
        ),
        (
            "[port0]\nlink=af_xdp:e0\naddr=10.0.0.2/24\nxdp_mode=driver\n",
            "config.ini:4: [port0] xdp_mode: \"driver\" is not auto, native or generic",
        ),
        (
            "[port0]\nlink=af_xdp:e0\naddr=10.0.0.2/24\nxdp_bind=zero\n",
            "config.ini:4: [port0] xdp_bind: \"zero\" is not auto, zerocopy or copy",
        ),
        (
            "[port0]\naddr=10.0.0.2/24\nmemory=16\n",
            "config.ini:3: [port0] memory: \"16\" is out of range (64..=16777216 buffers; or bytes with a K, M or G suffix)",
        ),
        (
            "[port0]\naddr6=fd00::2/64\nprefix_len=48\n",
            "config.ini:3: [port0] prefix_len: 48 contradicts addr6's /64",
        ),
        (
            "[port0]\naddr=10.0.0.2/24\nprefix_len=64\n",
            "config.ini:3: [port0] prefix_len is set but addr6 is not",
        ),
        (
            "[port0]\naddr=10.0.0.2/24\nif_name=a-name-that-is-too-long\n",
            "config.ini:3: [port0] if_name: \"a-name-that-is-too-long\" is longer than 15 bytes (IFNAMSIZ)",
        ),
        (
            "[pcap]\nsnaplen=0\n",
            "config.ini:2: [pcap] snaplen: \"0\" is out of range (1..=65535)",
        ),
        (
            "[kni]\nmethod=drop\n",
            "config.ini:2: [kni] method: \"drop\" must be reject or accept",
        ),
        (
            "[kni]\nudp_port=0,53\n",
            "config.ini:2: [kni] udp_port: \"0,53\" has 0 below the minimum 1",
        ),
        (
            "[kni]\nifname=ustack-kni-x\n",
            "config.ini:2: [kni] ifname: \"ustack-kni-x\" is longer than 10 bytes (the port number is appended)",
        ),
        (
            "[kni]\nenable=1\ntcp_port=80\n",
            "config.ini:2: [kni] method= (reject or accept) is required when enable=1",
        ),
    ];
    for (text, want) in cases {
        assert_eq!(&err(text), want, "for:\n{text}");
    }
}

#[test]
fn error_fields() {
    let e = parse("[port0]\naddr=10.99.1.300\n").unwrap_err();
    assert_eq!(e.file, "config.ini");
    assert_eq!(e.line, Some(2));
    assert_eq!(
        e.message,
        "[port0] addr: \"10.99.1.300\" is not an IPv4 address"
    );
}

#[test]
fn syntax_errors_have_lines() {
    assert_eq!(
        err("[dpdk]\nlcore_mask\n"),
        "config.ini:2: expected \"key=value\", \"[section]\" or a comment, found \"lcore_mask\""
    );
    assert_eq!(
        err("lcore_mask=1\n"),
        "config.ini:1: key \"lcore_mask\" is outside of any [section]"
    );
}

#[test]
fn duplicate_keys() {
    assert_eq!(
        err("[dpdk]\nlcore_mask=1\nchannel=4\nlcore_mask=2\n"),
        "config.ini:4: [dpdk] lcore_mask is set twice (first set on line 2)"
    );
    // Also across two [dpdk] headers, and in the FreeBSD sections.
    assert_eq!(
        err("[dpdk]\ntso=1\n[pcap]\n[dpdk]\ntso=0\n"),
        "config.ini:5: [dpdk] tso is set twice (first set on line 2)"
    );
    assert_eq!(
        err("[freebsd.sysctl]\nnet.inet.ip.ttl=64\nnet.inet.ip.ttl=32\n"),
        "config.ini:3: [freebsd.sysctl] net.inet.ip.ttl is set twice (first set on line 2)"
    );
}

#[test]
fn unknown_keys_and_sections_are_errors() {
    assert_eq!(
        err("[dpdk]\nlcore_msak=3\n"),
        "config.ini:2: [dpdk] lcore_msak is not a known key (did you mean lcore_mask?)"
    );
    assert_eq!(
        err("[port0]\naddr=10.0.0.2/24\nfoo=1\n"),
        "config.ini:3: [port0] foo is not a known key"
    );
    assert_eq!(
        err("[pcap]\nsnap_len=96\n"),
        "config.ini:2: [pcap] snap_len is not a known key (did you mean snaplen?)"
    );
    assert_eq!(
        err("[fault]\nlos=0.1\n"),
        "config.ini:2: [fault] los is not a known key (did you mean loss?)"
    );
    assert_eq!(
        err("[dpkd]\n"),
        "config.ini:1: unknown section [dpkd] (did you mean [dpdk]?)"
    );
    assert_eq!(
        err("[\u{3b1}]\n"),
        "config.ini:1: unknown section [\u{3b1}]"
    );
    assert_eq!(
        err("[prot0]\n"),
        "config.ini:1: unknown section [prot0] (did you mean [portN]?)"
    );
    assert_eq!(
        err("[port01]\naddr=10.0.0.2/24\n"),
        "config.ini:1: [port01]: write the port number without leading zeros"
    );
    assert_eq!(
        err("[port70000]\n"),
        "config.ini:1: [port70000]: port number is out of range (0..=65535)"
    );
    // Case matters, as in F-Stack.
    assert_eq!(
        err("[DPDK]\n"),
        "config.ini:1: unknown section [DPDK] (did you mean [dpdk]?)"
    );
}

#[test]
fn ignored_fstack_keys_warn_by_name() {
    let w = warnings(
        "[dpdk]\nlcore_mask=1\nnb_vdev=0\nnb_bond=0\nlro=1\n\
         [port0]\naddr=10.0.0.2/24\nvip_ifname=lo0\nslave_port_list=0,1\n\
         [pcap]\ntimestamp_precision=1\n",
    );
    assert_eq!(
        w,
        [
            "config.ini:3: [dpdk] nb_vdev is ignored by ustack (DPDK virtual devices are configured with [dpdk] vdev=)",
            "config.ini:4: [dpdk] nb_bond is ignored by ustack (bonding is not supported)",
            "config.ini:5: [dpdk] lro is ignored by ustack (large receive offload is not used)",
            "config.ini:8: [port0] vip_ifname is ignored by ustack (virtual addresses are added to the port's own interface)",
            "config.ini:9: [port0] slave_port_list is ignored by ustack (bonding is not supported)",
            "config.ini:11: [pcap] timestamp_precision is ignored by ustack (ustack chooses the timestamp precision of its captures)",
        ]
    );
}

#[test]
fn unsupported_sections_warn_by_name() {
    let w = warnings(
        "[dpdk]\nnb_vdev=1\n[vdev0]\npath=/var/run/openvswitch/vhost-user0\nqueues=1\n\
         [bond0]\nmode=4\n",
    );
    assert_eq!(
        w,
        [
            "config.ini:2: [dpdk] nb_vdev is ignored by ustack (DPDK virtual devices are configured with [dpdk] vdev=)",
            "config.ini:3: [vdev0] is not supported by ustack and is ignored (container vhost-user devices are configured with [dpdk] vdev=)",
            "config.ini:6: [bond0] is not supported by ustack and is ignored (bonding is not supported)",
        ]
    );
}

#[test]
fn pkt_tx_delay_clamps_with_warning() {
    let c = parse("[dpdk]\npkt_tx_delay=500\n").unwrap();
    assert_eq!(c.dpdk.pkt_tx_delay, Duration::from_micros(100));
    assert_eq!(
        c.warnings[0].to_string(),
        "config.ini:2: [dpdk] pkt_tx_delay: 500 is above 100; using 100 as F-Stack does"
    );
    let c = parse("[dpdk]\npkt_tx_delay=0\n").unwrap();
    assert_eq!(c.dpdk.pkt_tx_delay, Duration::ZERO);
    assert!(c.warnings.is_empty());
}

#[test]
fn port_list_and_sections() {
    let two = "[dpdk]\nport_list=0-1,3\n\
               [port0]\naddr=10.0.0.2/24\n[port1]\naddr=10.0.1.2/24\n[port3]\naddr=10.0.3.2/24\n";
    assert_eq!(parse(two).unwrap().dpdk.port_list, [0, 1, 3]);
    assert_eq!(
        err("[dpdk]\nport_list=0-1\n[port0]\naddr=10.0.0.2/24\n[port1]\naddr=10.0.1.2/24\n[port2]\naddr=10.0.2.2/24\n"),
        "config.ini:7: [port2] is not in [dpdk] port_list (0-1)"
    );
    assert_eq!(
        err("[dpdk]\nport_list=0-2\n[port0]\naddr=10.0.0.2/24\n[port2]\naddr=10.0.2.2/24\n"),
        "config.ini:2: [dpdk] port_list: port 1 has no [port1] section"
    );
    // Ports must differ.
    assert_eq!(
        err("[port0]\naddr=10.0.0.2/24\nlink=tap:t0\n[port1]\naddr=10.0.1.2/24\nlink=tap:t0\n"),
        "config.ini:6: [port1] link: tap:t0 is also port0's"
    );
    assert_eq!(
        err("[port0]\naddr=10.0.0.2/24\n[port1]\naddr=10.0.0.2/24\n"),
        "config.ini:4: [port1] addr: 10.0.0.2 is also port0's"
    );
    assert_eq!(
        err("[port0]\naddr=10.0.0.2/24\nif_name=x\n[port1]\naddr=10.0.1.2/24\nif_name=x\n"),
        "config.ini:6: [port1] if_name: \"x\" is also port0's"
    );
}

#[test]
fn lcore_list_against_lcore_mask() {
    let ok = format!("{BASE}lcore_list=0-1\n");
    assert_eq!(parse(&ok).unwrap().ports[0].lcore_list, Some(vec![0, 1]));
    assert_eq!(
        err(&format!("{BASE}lcore_list=0-2\n")),
        "config.ini:9: [port0] lcore_list: core 2 is not in [dpdk] lcore_mask (0x3)"
    );
    assert_eq!(
        err("[port0]\naddr=10.0.0.2/24\nlcore_list=0\n"),
        "config.ini:3: [port0] lcore_list needs [dpdk] lcore_mask"
    );
}

#[test]
fn vip_lists() {
    let c = parse(&format!(
        "{BASE}vip_addr=10.99.1.3; 10.99.1.4;10.99.2.9;\nvip_addr6=fd00::3;fd00::4\nvip_prefix_len=120\n"
    ))
    .unwrap();
    let p = &c.ports[0];
    assert_eq!(
        p.vip_addrs,
        [
            Ipv4Addr::new(10, 99, 1, 3),
            Ipv4Addr::new(10, 99, 1, 4),
            Ipv4Addr::new(10, 99, 2, 9)
        ]
    );
    assert_eq!(
        p.vip_addrs6,
        [
            "fd00::3".parse::<Ipv6Addr>().unwrap(),
            "fd00::4".parse().unwrap()
        ]
    );
    assert_eq!(p.vip_prefix_len, 120);

    assert_eq!(
        err(&format!("{BASE}vip_addr=10.99.1.3;10.99.1.x\n")),
        "config.ini:9: [port0] vip_addr: \"10.99.1.3;10.99.1.x\" has \"10.99.1.x\", which is not an IPv4 address"
    );
    assert_eq!(
        err(&format!("{BASE}vip_addr=10.99.1.3;10.99.1.3\n")),
        "config.ini:9: [port0] vip_addr: \"10.99.1.3;10.99.1.3\" lists 10.99.1.3 twice"
    );
    assert_eq!(
        err(&format!("{BASE}vip_addr=10.99.1.2\n")),
        "config.ini:9: [port0] vip_addr: \"10.99.1.2\" lists 10.99.1.2, the port's addr"
    );
    let many: Vec<String> = (1..=65).map(|i| format!("10.98.0.{i}")).collect();
    assert_eq!(
        err(&format!("{BASE}vip_addr={}\n", many.join(";"))),
        format!(
            "config.ini:9: [port0] vip_addr: {:?} has 65 addresses, more than 64",
            many.join(";")
        )
    );
    assert_eq!(
        err(&format!("{BASE}vip_addr6=fd00::3;ff02::1\n")),
        "config.ini:9: [port0] vip_addr6: \"fd00::3;ff02::1\" has \"ff02::1\", which is not a unicast address"
    );
}

#[test]
fn small_subnets() {
    // /31 and /32 have no network or broadcast address.
    let c = parse("[port0]\naddr=10.0.0.0/31\ngateway=10.0.0.1\n").unwrap();
    assert_eq!(
        c.ports[0].ipv4.unwrap().gateway,
        Some(Ipv4Addr::new(10, 0, 0, 1))
    );
    let c = parse("[port0]\naddr=10.0.0.7\nnetmask=255.255.255.255\n").unwrap();
    assert_eq!(
        c.ports[0].ipv4.unwrap().broadcast,
        Ipv4Addr::new(10, 0, 0, 7)
    );
    assert_eq!(
        err("[port0]\naddr=10.0.0.7/32\ngateway=10.0.0.1\n"),
        "config.ini:3: [port0] gateway: \"10.0.0.1\" is not inside the port's subnet 10.0.0.7/32"
    );
}

#[test]
fn fault_section_bounds() {
    let c = parse("[fault]\nloss=0.5\n").unwrap();
    let f = c.fault.unwrap();
    assert_eq!(f.loss, 0.5);
    assert_eq!(f.duplicate, 0.0);
    assert_eq!(f.seed, FAULT_DEFAULT_SEED);
    // An empty section still turns fault injection on (with no faults).
    assert_eq!(
        parse("[fault]\n").unwrap().fault,
        Some(FaultConfigSpec::default())
    );
    assert_eq!(parse("").unwrap().fault, None);
    // Both ends of the range are allowed.
    let c = parse("[fault]\nloss=0\ncorrupt=1\ndelay_us=10000000\nseed=18446744073709551615\n")
        .unwrap();
    assert_eq!(c.fault.as_ref().unwrap().corrupt, 1.0);
    assert_eq!(c.fault.as_ref().unwrap().seed, u64::MAX);

    let cases: &[(&str, &str)] = &[
        (
            "[fault]\nloss=1.01\n",
            "config.ini:2: [fault] loss: \"1.01\" is out of range (0..=1)",
        ),
        (
            "[fault]\nduplicate=-0.1\n",
            "config.ini:2: [fault] duplicate: \"-0.1\" is out of range (0..=1)",
        ),
        (
            "[fault]\nreorder=NaN\n",
            "config.ini:2: [fault] reorder: \"NaN\" is out of range (0..=1)",
        ),
        (
            "[fault]\ncorrupt=often\n",
            "config.ini:2: [fault] corrupt: \"often\" is not a number",
        ),
        (
            "[fault]\ndelay_us=10000001\n",
            "config.ini:2: [fault] delay_us: \"10000001\" is out of range (0..=10000000)",
        ),
        (
            "[fault]\njitter_us=1.5\n",
            "config.ini:2: [fault] jitter_us: \"1.5\" is not an integer",
        ),
        (
            "[fault]\nseed=-1\n",
            "config.ini:2: [fault] seed: \"-1\" is out of range (0..=18446744073709551615)",
        ),
    ];
    for (text, want) in cases {
        assert_eq!(&err(text), want);
    }
}

#[test]
fn sysctl_typed_values() {
    let c = parse(
        "[freebsd.sysctl]\nnet.inet.ip.ttl=32\nnet.link.ether.inet.maxhold=5\n\
         net.inet.tcp.msl=2000\nnet.inet.tcp.delayed_ack=0\nnet.inet.tcp.cc.algorithm=newreno\n\
         kern.ipc.somaxconn=32768\nnet.inet.ip.fragttl=15\nnet.inet.ip.maxfragpackets=0\n\
         net.inet.tcp.keepidle=60000\nnet.inet.ip.portrange.first=20000\n\
         net.inet.tcp.sendspace=16384\nnet.inet.tcp.sendbuf_max=16777216\n",
    )
    .unwrap();
    let s = &c.sysctls;
    assert_eq!(s.ip_ttl, 32);
    assert_eq!(s.arp_maxhold, 5);
    assert_eq!(s.tcp_msl, Duration::from_millis(2000));
    assert!(!s.tcp_delayed_ack);
    assert_eq!(s.tcp_cc, CongestionControl::NewReno);
    assert_eq!(s.somaxconn, 32768);
    assert_eq!(s.reass_timeout, Duration::from_secs(15));
    assert_eq!(s.reass_max_packets, 0);
    assert_eq!(s.tcp_keepidle, Duration::from_secs(60));
    assert_eq!(s.port_range_first, 20000);
    assert_eq!(s.tcp_send_space, 16384);
    assert_eq!(s.tcp_sendbuf_max, 16 << 20);
    // Untouched values keep their defaults.
    assert_eq!(s.arp_max_age, Duration::from_secs(1200));
    assert_eq!(s.icmp_rate_limit, 200);
    assert_eq!(s.reass_max_frags, 64);
    assert!(c.warnings.is_empty());
    // The raw list keeps everything as written, in order, with lines.
    assert_eq!(c.freebsd_sysctl.len(), 12);
    assert_eq!(
        c.freebsd_sysctl[0],
        SysctlEntry {
            name: "net.inet.ip.ttl".into(),
            value: "32".into(),
            line: Some(2)
        }
    );
}

#[test]
fn sysctl_range_errors() {
    let cases: &[(&str, &str)] = &[
        (
            "[freebsd.sysctl]\nnet.inet.ip.ttl=256\n",
            "config.ini:2: [freebsd.sysctl] net.inet.ip.ttl: \"256\" is out of range (1..=255)",
        ),
        (
            "[freebsd.sysctl]\nnet.inet.ip.ttl=0\n",
            "config.ini:2: [freebsd.sysctl] net.inet.ip.ttl: \"0\" is out of range (1..=255)",
        ),
        (
            "[freebsd.sysctl]\nnet.link.ether.inet.maxhold=5000\n",
            "config.ini:2: [freebsd.sysctl] net.link.ether.inet.maxhold: \"5000\" is out of range (1..=4096)",
        ),
        (
            "[freebsd.sysctl]\nnet.inet.ip.maxfragpackets=-1\n",
            "config.ini:2: [freebsd.sysctl] net.inet.ip.maxfragpackets: \"-1\" is out of range (0..=1048576)",
        ),
        (
            "[freebsd.sysctl]\nnet.inet.tcp.delayed_ack=2\n",
            "config.ini:2: [freebsd.sysctl] net.inet.tcp.delayed_ack: \"2\" must be 0 or 1",
        ),
        (
            "[freebsd.sysctl]\nnet.inet.tcp.cc.algorithm=bbr\n",
            "config.ini:2: [freebsd.sysctl] net.inet.tcp.cc.algorithm: \"bbr\" must be cubic or newreno",
        ),
        (
            "[freebsd.sysctl]\nnet.inet.tcp.mssdflt=100\n",
            "config.ini:2: [freebsd.sysctl] net.inet.tcp.mssdflt: \"100\" is out of range (216..=65495)",
        ),
        (
            "[freebsd.sysctl]\nnet.inet.tcp.msl=2s\n",
            "config.ini:2: [freebsd.sysctl] net.inet.tcp.msl: \"2s\" is not an integer",
        ),
        (
            "[freebsd.sysctl]\nnet.inet.ip.portrange.last=5000\nnet.inet.ip.portrange.first=6000\n",
            "config.ini:3: [freebsd.sysctl] net.inet.ip.portrange.first (6000) is above net.inet.ip.portrange.last (5000)",
        ),
        (
            "[freebsd.sysctl]\nnet.inet.tcp.recvspace=4194304\n",
            "config.ini:2: [freebsd.sysctl] net.inet.tcp.recvspace (4194304) is above net.inet.tcp.recvbuf_max (2097152)",
        ),
        (
            "[freebsd.boot]\nkern.ipc.maxsockets=0\n",
            "config.ini:2: [freebsd.boot] kern.ipc.maxsockets: \"0\" is out of range (1..=16777216)",
        ),
    ];
    for (text, want) in cases {
        assert_eq!(&err(text), want);
    }
}

#[test]
fn freebsd_unknown_names_warn() {
    let c = parse(
        "[freebsd.boot]\nhz=100\nfd_reserve=1024\nkern.ipc.maxsockets=1000\nnet.inet.tcp.tcbhashsize=65536\n\
         [freebsd.sysctl]\nnet.inet.tcp.blackhole=1\nnet.inet.ip.forwarding=0\nnet.inet.tcp.msl=2000\n\
         kern.ipc.maxsockets=5\nnet.inet.ip.ttl=x1\n",
    );
    // The bad ttl is still an error: typed names are checked.
    assert_eq!(
        c.unwrap_err().to_string(),
        "config.ini:11: [freebsd.sysctl] net.inet.ip.ttl: \"x1\" is not an integer"
    );
    let c = parse(
        "[freebsd.boot]\nhz=100\nfd_reserve=1024\nkern.ipc.maxsockets=1000\nnet.inet.tcp.tcbhashsize=65536\n\
         net.inet.ip.ttl=3\n\
         [freebsd.sysctl]\nnet.inet.tcp.blackhole=1\nnet.inet.ip.forwarding=0\nnet.inet.tcp.msl=2000\n\
         kern.ipc.maxsockets=5\n",
    )
    .unwrap();
    assert_eq!(c.boot.max_sockets, 1000);
    assert_eq!(c.sysctls.ip_ttl, 64, "ttl in [freebsd.boot] is not applied");
    assert_eq!(c.freebsd_boot.len(), 5);
    assert_eq!(c.freebsd_sysctl.len(), 4);
    let w: Vec<String> = c.warnings.iter().map(|w| w.to_string()).collect();
    assert_eq!(
        w,
        [
            "config.ini:2: [freebsd.boot] hz is ignored by ustack (ustack's timers do not run on a FreeBSD clock tick)",
            "config.ini:3: [freebsd.boot] fd_reserve is ignored by ustack (ustack reserves its socket numbers from the kernel, so they never collide with kernel fds)",
            "config.ini:5: [freebsd.boot] net.inet.tcp.tcbhashsize is ignored by ustack (ustack sizes its own tables)",
            "config.ini:6: [freebsd.boot] net.inet.ip.ttl is ignored by ustack (ustack reads it from [freebsd.sysctl])",
            "config.ini:8: [freebsd.sysctl] net.inet.tcp.blackhole is ignored by ustack (not a setting ustack implements)",
            "config.ini:9: [freebsd.sysctl] net.inet.ip.forwarding is ignored by ustack (ustack does not forward packets)",
            "config.ini:11: [freebsd.sysctl] kern.ipc.maxsockets is ignored by ustack (ustack reads it from [freebsd.boot])",
        ]
    );
}

#[test]
fn fstack_style_config_loads() {
    // An F-Stack configuration in F-Stack's layout, with its usual keys.
    let text = "\
[dpdk]
lcore_mask=1
channel=4
promiscuous=1
numa_on=1
tx_csum_offoad_skip=0
tso=0
vlan_strip=1
idle_sleep=0
pkt_tx_delay=100
symmetric_rss=0
port_list=0
nb_vdev=0
nb_bond=0

[pcap]
enable=0
snaplen=96
savelen=16777216
savepath=.

[port0]
addr=192.168.1.2
netmask=255.255.255.0
broadcast=192.168.1.255
gateway=192.168.1.1

[freebsd.boot]
hz=100
fd_reserve=1024
kern.ipc.maxsockets=262144
net.inet.tcp.syncache.hashsize=4096
kern.ncallout=262144

[freebsd.sysctl]
kern.ipc.somaxconn=32768
kern.ipc.maxsockbuf=16777216
net.link.ether.inet.maxhold=5
net.inet.tcp.sendspace=16384
net.inet.tcp.recvspace=8192
net.inet.tcp.cc.algorithm=cubic
net.inet.tcp.sendbuf_max=16777216
net.inet.tcp.recvbuf_max=16777216
net.inet.tcp.sendbuf_auto=1
net.inet.tcp.sack.enable=1
net.inet.tcp.msl=2000
net.inet.tcp.delayed_ack=1
net.inet.tcp.functions_default=freebsd
";
    let c = parse(text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.dpdk.port_list, [0]);
    assert_eq!(c.ports[0].link, LinkSpec::Dpdk);
    assert_eq!(
        c.ports[0].ipv4.unwrap().gateway,
        Some(Ipv4Addr::new(192, 168, 1, 1))
    );
    assert_eq!(c.sysctls.max_sockbuf, 16 << 20);
    assert_eq!(c.sysctls.tcp_recv_space, 8192);
    assert_eq!(c.sysctls.tcp_msl, Duration::from_secs(2));
    let named: Vec<&str> = c
        .warnings
        .iter()
        .map(|w| w.message.split_whitespace().nth(1).unwrap())
        .collect();
    assert_eq!(
        named,
        [
            "nb_vdev",
            "nb_bond",
            "hz",
            "fd_reserve",
            "net.inet.tcp.syncache.hashsize",
            "kern.ncallout",
            "net.inet.tcp.sendbuf_auto",
            "net.inet.tcp.functions_default",
        ]
    );
}

#[test]
fn overrides() {
    let mut c = parse(BASE).unwrap();
    c.apply_override("port0.addr", "10.99.1.7").unwrap();
    assert_eq!(c.ports[0].ipv4.unwrap().addr, Ipv4Addr::new(10, 99, 1, 7));
    c.apply_set("freebsd.sysctl.net.inet.ip.ttl=32").unwrap();
    assert_eq!(c.sysctls.ip_ttl, 32);
    assert_eq!(c.freebsd_sysctl[0].line, None);
    c.apply_set("dpdk.idle_sleep = 50").unwrap();
    assert_eq!(c.dpdk.idle_sleep, Duration::from_micros(50));
    c.apply_override("fault.loss", "0.1").unwrap();
    assert_eq!(c.fault.as_ref().unwrap().loss, 0.1);

    // Same validation and messages, located at --set; `c` is unchanged.
    let before = c.clone();
    let e = c.apply_override("port0.addr", "10.99.1.300").unwrap_err();
    assert_eq!(
        e.to_string(),
        "--set: [port0] addr: \"10.99.1.300\" is not an IPv4 address"
    );
    assert_eq!(e.file, OVERRIDE_ORIGIN);
    assert_eq!(e.line, None);
    assert_eq!(c, before);
    assert_eq!(
        c.apply_override("dpdk.lcore_msak", "1")
            .unwrap_err()
            .to_string(),
        "--set: [dpdk] lcore_msak is not a known key (did you mean lcore_mask?)"
    );
    assert_eq!(
        c.apply_override("freebsd.sysctl.net.inet.ip.ttl", "300")
            .unwrap_err()
            .to_string(),
        "--set: [freebsd.sysctl] net.inet.ip.ttl: \"300\" is out of range (1..=255)"
    );
    // A change that breaks another key is reported where that key is.
    assert_eq!(
        c.apply_override("port0.addr", "10.99.2.7")
            .unwrap_err()
            .to_string(),
        "config.ini:8: [port0] gateway: \"10.99.1.1\" is not inside the port's subnet 10.99.2.0/24"
    );
    // A new port must be in port_list.
    assert_eq!(
        c.apply_override("port1.addr", "10.0.0.1/24")
            .unwrap_err()
            .to_string(),
        "--set: [port1] is not in [dpdk] port_list (0)"
    );
    // Ignored keys warn at --set.
    c.apply_override("dpdk.nb_bond", "1").unwrap();
    assert_eq!(
        c.warnings.last().unwrap().to_string(),
        "--set: [dpdk] nb_bond is ignored by ustack (bonding is not supported)"
    );
    for bad in ["addr", "port0.", ".addr", "port0 .addr"] {
        assert!(
            c.apply_override(bad, "1")
                .unwrap_err()
                .message
                .contains("is not section.key"),
            "{bad}"
        );
    }
    assert!(c
        .apply_set("port0.addr")
        .unwrap_err()
        .message
        .contains("is not section.key=value"));
}

#[test]
fn from_file_reads_and_names_the_file() {
    let dir = std::env::temp_dir().join(format!("ustack-config-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bad.ini");
    std::fs::write(&path, "[port0]\naddr=10.99.1.300\n").unwrap();
    let e = Config::from_file(&path).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}:2: [port0] addr: \"10.99.1.300\" is not an IPv4 address",
            path.display()
        )
    );
    std::fs::write(&path, BASE).unwrap();
    assert_eq!(
        Config::from_file(&path).unwrap().file,
        path.display().to_string()
    );
    let missing = dir.join("missing.ini");
    let e = Config::from_file(&missing).unwrap_err();
    assert_eq!(e.line, None);
    assert!(e
        .to_string()
        .starts_with(&format!("{}: cannot read", missing.display())));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn every_shipped_config_loads() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../config");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut n = 0;
    for entry in entries {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "ini") {
            if let Err(e) = Config::from_file(&path) {
                panic!("{e}");
            }
            n += 1;
        }
    }
    assert!(n >= 2, "config/ should hold example.ini and tap.ini");
}

#[test]
fn xdp_keys_choose_mode_and_bind() {
    let c = Config::parse(
        "[port0]\nlink=af_xdp:e0\naddr=10.0.0.2/24\nxdp_mode=generic\nxdp_bind=copy\n\
         [port1]\nlink=af_xdp:e1\naddr=10.0.1.2/24\n",
        "x.ini",
    )
    .unwrap();
    assert_eq!(c.ports[0].link, LinkSpec::AfXdp("e0".into()));
    assert_eq!(c.ports[0].xdp_mode, XdpModeSetting::Generic);
    assert_eq!(c.ports[0].xdp_bind, XdpBindSetting::Copy);
    assert_eq!(c.ports[1].xdp_mode, XdpModeSetting::Auto);
    assert_eq!(c.ports[1].xdp_bind, XdpBindSetting::Auto);
    let c = Config::parse(
        "[port0]\nlink=af_xdp:e0\naddr=10.0.0.2/24\nxdp_mode=native\nxdp_bind=zerocopy\n",
        "x.ini",
    )
    .unwrap();
    assert_eq!(c.ports[0].xdp_mode, XdpModeSetting::Native);
    assert_eq!(c.ports[0].xdp_bind, XdpBindSetting::ZeroCopy);
    assert_eq!(c.ports[0].xdp_program, XdpProgramSetting::Alone);
    let c = Config::parse(
        "[port0]\nlink=af_xdp:e0\naddr=10.0.0.2/24\nxdp_program=libxdp\n",
        "x.ini",
    )
    .unwrap();
    assert_eq!(c.ports[0].xdp_program, XdpProgramSetting::Libxdp);
    let e = Config::parse(
        "[port0]\nlink=af_xdp:e0\naddr=10.0.0.2/24\nxdp_program=dispatcher\n",
        "x.ini",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("xdp_program") && e.contains("is not alone or libxdp"),
        "{e}"
    );
}

#[test]
fn preload_section() {
    let base = "[port0]\nlink=tap:t0\naddr=10.99.1.2/24\n";
    assert_eq!(parse(base).unwrap().preload.mode, PreloadMode::Rtc);
    let c = parse(&format!("{base}[preload]\nmode=RTW\n")).unwrap();
    assert_eq!(c.preload.mode, PreloadMode::Rtw);
    let e = err(&format!("{base}[preload]\nmode=threads\n"));
    assert!(e.contains("rtc") && e.contains("rtw"), "{e}");
    let e = err(&format!("{base}[preload]\nmodes=rtw\n"));
    assert!(e.contains("modes"), "{e}");
    assert_eq!(parse(EXAMPLE).unwrap().preload.mode, PreloadMode::Rtc);
    assert_eq!(
        parse(base).unwrap().preload.exit_linger,
        Duration::from_secs(5)
    );
    let c = parse(&format!("{base}[preload]\nexit_linger=250\n")).unwrap();
    assert_eq!(c.preload.exit_linger, Duration::from_millis(250));
    let e = err(&format!("{base}[preload]\nexit_linger=5s\n"));
    assert!(e.contains("exit_linger"), "{e}");
}

/// Three VLANs on port 0, as the seed's multi-VLAN VIP setup has them.
const VLANS: &str = "\
[dpdk]
vlan_filter=10,20-21
[port0]
link=af_packet:veth0
addr=10.99.1.2/24
[vlan10]
portid=0
addr=10.99.10.2
netmask=255.255.255.0
gateway=10.99.10.1
vip_addr=10.99.110.10;10.99.110.11
ipfw_pr=10.99.110.0 255.255.255.0;10.99.111.7/32
[vlan20]
portid=0
addr=10.99.20.2/24
broadcast=10.99.20.255
gateway=10.99.20.1
addr6=fd99:20::2/64
gateway6=fd99:20::1
vip_addr6=fd99:120::10
vip_prefix_len=128
";

#[test]
fn vlan_sections_as_f_stack_writes_them() {
    let c = parse(VLANS).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.dpdk.vlan_filter, [10, 20, 21]);
    assert_eq!(c.vlans.len(), 2);
    let v10 = &c.vlans[0];
    assert_eq!((v10.id, v10.portid), (10, 0));
    let ip = v10.ipv4.unwrap();
    assert_eq!((ip.addr, ip.prefix_len), (Ipv4Addr::new(10, 99, 10, 2), 24));
    assert_eq!(ip.gateway, Some(Ipv4Addr::new(10, 99, 10, 1)));
    assert_eq!(
        v10.vip_addrs,
        [
            Ipv4Addr::new(10, 99, 110, 10),
            Ipv4Addr::new(10, 99, 110, 11)
        ]
    );
    assert_eq!(
        v10.ipfw_pr,
        [
            SourcePrefix {
                addr: Ipv4Addr::new(10, 99, 110, 0),
                prefix_len: 24
            },
            SourcePrefix {
                addr: Ipv4Addr::new(10, 99, 111, 7),
                prefix_len: 32
            }
        ]
    );
    assert_eq!(v10.if_name(&c.ports[0]), "ustack0.10");
    let v20 = &c.vlans[1];
    let v6 = v20.ipv6.unwrap();
    assert_eq!(v6.addr, "fd99:20::2".parse::<Ipv6Addr>().unwrap());
    assert_eq!(v6.gateway, Some("fd99:20::1".parse().unwrap()));
    assert_eq!(v20.vip_prefix_len, 128);
    // The port's address is dropped, and the warnings say so by name; the
    // filter's id without a section is named too.
    assert_eq!(c.ports[0].ipv4, None);
    assert_eq!(
        c.warnings.iter().map(|w| w.to_string()).collect::<Vec<_>>(),
        [
            "config.ini:2: [dpdk] vlan_filter: VLAN 21 has no [vlan21] section; its frames are dropped (counted in rx_drop_vlan_unknown_id)",
            "config.ini:3: [port0] ignores addr: VLAN interfaces ride on this port and carry the addresses, as in F-Stack (untagged frames on it are dropped)",
        ]
    );
}

#[test]
fn port_ipfw_pr_and_no_port_address_needed_under_vlans() {
    let c =
        parse("[port0]\naddr=10.99.1.2/24\ngateway=10.99.1.1\nipfw_pr=10.99.5.1 255.255.255.0\n")
            .unwrap();
    assert_eq!(
        c.ports[0].ipfw_pr,
        [SourcePrefix {
            addr: Ipv4Addr::new(10, 99, 5, 0),
            prefix_len: 24
        }]
    );
    let c = parse(
        "[dpdk]\nvlan_filter=7\n[port0]\nlink=af_packet:v\n[vlan7]\nportid=0\naddr=10.99.7.2/24\n",
    )
    .unwrap();
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    assert_eq!(c.vlans[0].id, 7);
}

#[test]
fn vlan_errors_name_section_and_key() {
    let with = |extra: &str| format!("{VLANS}{extra}");
    let cases: &[(String, &str)] = &[
        (
            VLANS.replace("vlan_filter=10,20-21", "vlan_filter=10,4095"),
            "config.ini:2: [dpdk] vlan_filter: \"10,4095\" has 4095 above the maximum 4094",
        ),
        (
            VLANS.replace("vlan_filter=10,20-21", "vlan_filter=0,10,20"),
            "config.ini:2: [dpdk] vlan_filter: \"0,10,20\" has 0, which is not a VLAN id (1..=4094)",
        ),
        (
            VLANS.replace("vlan_filter=10,20-21", "vlan_filter=10"),
            "config.ini:13: [vlan20] is not in [dpdk] vlan_filter (10): add 20 there",
        ),
        (
            VLANS.replace("vlan_filter=10,20-21\n", ""),
            "config.ini:5: [vlan10] is not in [dpdk] vlan_filter (it is not set): add 10 there",
        ),
        (
            VLANS.replace("[vlan20]\nportid=0", "[vlan20]\nportid=3"),
            "config.ini:14: [vlan20] portid: port 3 has no [port3] section",
        ),
        (
            VLANS.replace("[vlan20]\nportid=0\n", "[vlan20]\n"),
            "config.ini:13: [vlan20] portid= is required (the port VLAN 20 rides on)",
        ),
        (
            with("[vlan4095]\nportid=0\n"),
            "config.ini:22: [vlan4095]: the VLAN id is 1..=4094 without leading zeros",
        ),
        (
            with("[vlan021]\nportid=0\n"),
            "config.ini:22: [vlan021]: the VLAN id is 1..=4094 without leading zeros",
        ),
        (
            with("[vlan21]\nportid=0\naddr6=fd99::1\n"),
            "config.ini:22: [vlan21] has no address: set addr= and netmask= (addr6= goes beside them)",
        ),
        (
            with("[vlan21]\nportid=0\naddr=10.99.10.2/24\n"),
            "config.ini:24: [vlan21] addr: 10.99.10.2 is also vlan10's",
        ),
        (
            with("[vlan21]\nportid=0\naddr=10.99.21.2/24\ngateway=10.99.22.1\n"),
            "config.ini:25: [vlan21] gateway: \"10.99.22.1\" is not inside the VLAN's subnet 10.99.21.0/24",
        ),
        (
            with("[vlan21]\nportid=0\naddr=10.99.21.2/24\nipfw_pr=10.99.1.0\n"),
            "config.ini:25: [vlan21] ipfw_pr: \"10.99.1.0\" has \"10.99.1.0\", which lacks its netmask (write ADDR NETMASK or ADDR/LEN)",
        ),
        (
            with("[vlan21]\nportid=0\naddr=10.99.21.2/24\nipfw_pr=10.99.1.0 255.0.255.0\n"),
            "config.ini:25: [vlan21] ipfw_pr: \"10.99.1.0 255.0.255.0\" has \"10.99.1.0 255.0.255.0\", which has a netmask that is not a contiguous netmask",
        ),
        (
            with("[vlan21]\nportid=0\naddr=10.99.21.2/24\nipfw_pr=10.99.1.0 255.255.255.0 x\n"),
            "config.ini:25: [vlan21] ipfw_pr: \"10.99.1.0 255.255.255.0 x\" has \"10.99.1.0 255.255.255.0 x\", which is not ADDR NETMASK",
        ),
        (
            with("[vlan21]\nportid=0\naddr=10.99.21.2/24\nif_name=x\n"),
            "config.ini:25: [vlan21] if_name is not a known key",
        ),
    ];
    for (text, want) in cases {
        assert_eq!(&err(text), want, "for:\n{text}");
    }
}

#[test]
fn control_and_metrics_sections() {
    let base = "[port0]\nlink=tap:t0\naddr=10.99.1.2/24\n";
    let c = parse(base).unwrap();
    assert!(c.control.enable);
    assert_eq!(c.control.dir, std::path::PathBuf::from("/run/ustack"));
    assert_eq!(c.metrics.listen, None);
    let c = parse(&format!(
        "{base}[control]\ndir=/tmp/r\n[metrics]\nlisten=127.0.0.1:9100\n"
    ))
    .unwrap();
    assert_eq!(c.control.dir, std::path::PathBuf::from("/tmp/r"));
    assert_eq!(c.metrics.listen, Some("127.0.0.1:9100".parse().unwrap()));
    let c = parse(&format!("{base}[metrics]\nlisten=[::1]:9100\n")).unwrap();
    assert_eq!(c.metrics.listen, Some("[::1]:9100".parse().unwrap()));
    assert_eq!(
        err(&format!("{base}[metrics]\nlisten=9100\n")),
        "config.ini:5: [metrics] listen: \"9100\" is not ADDR:PORT (e.g. 127.0.0.1:9100, [::1]:9100)"
    );
    assert_eq!(
        err(&format!(
            "{base}[control]\nenable=0\n[metrics]\nlisten=127.0.0.1:9100\n"
        )),
        "config.ini:7: [metrics] listen needs the control sockets ([control] enable=1): the \
         endpoint reads the engines through them"
    );
    assert_eq!(
        err(&format!("{base}[control]\ndirectory=/tmp\n")),
        "config.ini:5: [control] directory is not a known key"
    );
    // The example documents both and leaves the endpoint off.
    let c = parse(EXAMPLE).unwrap();
    assert!(c.control.enable && c.metrics.listen.is_none());
}

#[test]
fn gro_acts_on_af_packet_and_is_warned_about_elsewhere() {
    let port = |link: &str, gro: &str| format!("[port0]\nlink={link}\naddr=10.99.1.2/24\n{gro}");
    let c = parse(&port("af_packet:e0", "")).unwrap();
    assert!(c.ports[0].gro, "on by default");
    let c = parse(&port("af_packet:e0", "gro=0\n")).unwrap();
    assert!(!c.ports[0].gro);
    assert!(c.warnings.is_empty());
    assert_eq!(
        warnings(&port("af_packet:e0", "gro=1\n")),
        Vec::<String>::new()
    );
    assert_eq!(
        warnings(&port("tap:t0", "gro=1\n")),
        ["config.ini:4: [port0] gro: only an af_packet link receives large segments; this port's \
          link hands the stack frames of its MTU"]
    );
    assert_eq!(warnings(&port("tap:t0", "gro=0\n")), Vec::<String>::new());
    assert_eq!(
        err(&port("af_packet:e0", "gro=maybe\n")),
        "config.ini:4: [port0] gro: \"maybe\" must be 0 or 1"
    );
}

#[test]
fn gso_is_off_by_default_and_takes_a_flag() {
    let port = |link: &str, g: &str| format!("[port0]\nlink={link}\naddr=10.99.1.2/24\n{g}");
    for link in [
        "af_xdp:e0",
        "af_packet:e0",
        "tap:t0",
        "dpdk",
        "shm_create:/tmp/x",
    ] {
        let c = parse(&port(link, "")).unwrap();
        assert_eq!(c.ports[0].gso, None);
        assert!(!c.ports[0].soft_gso(), "{link}: off by default");
        let c = parse(&port(link, "gso=1\n")).unwrap();
        assert!(c.ports[0].soft_gso(), "{link}: on when asked");
        assert!(c.warnings.is_empty());
    }
    assert_eq!(
        err(&port("af_xdp:e0", "gso=yes\n")),
        "config.ini:4: [port0] gso: \"yes\" must be 0 or 1"
    );
    // The engine's mask: port i of the configuration is the engine's i.
    let two = "[port0]\nlink=af_xdp:e0\naddr=10.99.1.2/24\ngso=0\n\
               [port1]\nlink=tap:t1\naddr=10.99.2.2/24\ngso=1\n";
    let c = parse(two).unwrap();
    assert_eq!(crate::setup::engine_config(&c).soft_gso_ports, 0b10);
}

#[test]
fn rx_ring_chooses_the_af_packet_ring_and_is_refused_or_warned_by_name() {
    let port = |link: &str, r: &str| format!("[port0]\nlink={link}\naddr=10.99.1.2/24\n{r}");
    let c = parse(&port("af_packet:e0", "")).unwrap();
    assert_eq!(c.ports[0].rx_ring, RxRingSetting::V2, "v2 by default");
    let c = parse(&port("af_packet:e0", "rx_ring=v3\n")).unwrap();
    assert_eq!(c.ports[0].rx_ring, RxRingSetting::V3);
    assert!(c.warnings.is_empty());
    assert_eq!(
        err(&port("af_packet:e0", "rx_ring=v1\n")),
        "config.ini:4: [port0] rx_ring: \"v1\" is not v2 or v3"
    );
    assert_eq!(
        warnings(&port("tap:t0", "rx_ring=v2\n")),
        ["config.ini:4: [port0] rx_ring: only an af_packet link has TPACKET rings; ignored here"]
    );
}

#[test]
fn vnet_hdr_is_on_by_default_reaches_the_ring_and_is_warned_elsewhere() {
    let port = |link: &str, r: &str| format!("[port0]\nlink={link}\naddr=10.99.1.2/24\n{r}");
    let c = parse(&port("af_packet:e0", "")).unwrap();
    assert!(c.ports[0].vnet_hdr, "on by default");
    assert!(crate::setup::ring_config(&c.dpdk, &c.ports[0]).vnet_hdr);
    let c = parse(&port("af_packet:e0", "vnet_hdr=0\n")).unwrap();
    assert!(!c.ports[0].vnet_hdr && c.warnings.is_empty());
    assert!(!crate::setup::ring_config(&c.dpdk, &c.ports[0]).vnet_hdr);
    assert_eq!(
        err(&port("af_packet:e0", "vnet_hdr=yes\n")),
        "config.ini:4: [port0] vnet_hdr: \"yes\" must be 0 or 1"
    );
    assert_eq!(
        warnings(&port("tap:t0", "vnet_hdr=1\n")),
        ["config.ini:4: [port0] vnet_hdr: only an af_packet link reads a virtio_net_hdr; ignored here"]
    );
}

/// F-Stack's `tx_csum_offoad_skip=0` (the default) uses a device's
/// transmit checksum offload where it has one: an af_packet port leaves
/// TCP and UDP checksums to the kernel through its `virtio_net_hdr`,
/// with or without `tso`; `tx_csum_offoad_skip=1` keeps them all in the
/// stack, and segmentation only comes with `tso=1`.
#[test]
fn af_packet_offloads_tx_checksums_by_default_unless_skipped() {
    let cfg = |dpdk: &str| {
        parse(&format!(
            "[dpdk]\n{dpdk}[port0]\nlink=af_packet:e0\naddr=10.99.1.2/24\n"
        ))
        .unwrap()
    };
    let ring = |c: &Config| crate::setup::ring_config(&c.dpdk, &c.ports[0]);
    let c = cfg("");
    assert!(ring(&c).tx_checksum && ring(&c).vnet_hdr && !ring(&c).tso);
    let c = cfg("tx_csum_offoad_skip=1\n");
    assert!(!ring(&c).tx_checksum && !ring(&c).tso);
    let c = cfg("tso=1\n");
    assert!(ring(&c).tx_checksum && ring(&c).tso);
    let c = cfg("tso=1\ntx_csum_offoad_skip=1\n");
    assert!(!ring(&c).tx_checksum && !ring(&c).tso);
}

#[test]
fn kernel_rx_drop_acts_on_af_packet_and_is_warned_about_elsewhere() {
    let port = |link: &str, k: &str| format!("[port0]\nlink={link}\naddr=10.99.1.2/24\n{k}");
    let c = parse(&port("af_packet:e0", "")).unwrap();
    assert!(c.ports[0].kernel_rx_drop, "on by default");
    let c = parse(&port("af_packet:e0", "kernel_rx_drop=0\n")).unwrap();
    assert!(!c.ports[0].kernel_rx_drop);
    assert!(c.warnings.is_empty());
    assert_eq!(
        warnings(&port("af_xdp:e0", "kernel_rx_drop=1\n")),
        [
            "config.ini:4: [port0] kernel_rx_drop: only an af_packet link shares its frames with \
          the kernel's IP input; ignored here"
        ]
    );
    assert_eq!(
        warnings(&port("tap:t0", "kernel_rx_drop=0\n")),
        Vec::<String>::new()
    );
    assert_eq!(
        err(&port("af_packet:e0", "kernel_rx_drop=yes\n")),
        "config.ini:4: [port0] kernel_rx_drop: \"yes\" must be 0 or 1"
    );
}
