//! `ustack ifconfig`: the interfaces (addresses, VIPs, IPv6, MAC, MTU,
//! flags, counters), and changes to one:
//!
//! ```text
//! ustack ifconfig [IFACE]
//! ustack ifconfig IFACE inet ADDR[/LEN] alias      add an IPv4 address (a VIP)
//! ustack ifconfig IFACE inet ADDR -alias           remove it
//! ustack ifconfig IFACE inet6 ADDR/LEN alias       add an IPv6 address
//! ustack ifconfig IFACE inet6 ADDR -alias          remove it
//! ustack ifconfig IFACE mtu N
//! ustack ifconfig IFACE up|down                   a port (with its VLANs), or one VLAN
//! ustack ifconfig NAME create [vlan N] [vlandev PORT] inet ADDR/LEN [gateway GW]
//!                             [inet6 ADDR[/LEN] [gateway6 GW6]] [mtu N]
//! ustack ifconfig NAME destroy                    a VLAN interface
//! ```
//!
//! `create` makes a VLAN interface live; NAME `PORT.N` (`ustack0.40`)
//! gives the VLAN id and the port when `vlan` and `vlandev` are left out.
//! `destroy` takes a VLAN interface away live: its addresses, the routes
//! (in every FIB), rules and neighbours through it go; its tag is then
//! dropped as unknown.  The first `inet6` address given to an interface
//! without IPv6 turns IPv6 on for it.

use std::net::IpAddr;
use std::process::ExitCode;

use runtime::control::client::EngineSocket;
use runtime::control::proto::{InterfaceChange, InterfaceInfo, Reply, Request};

use super::{ask_all, change, exit, print_json, report_errors, Common, Usage};

pub fn main(c: &Common, sockets: &[EngineSocket], args: &[String]) -> Result<ExitCode, Usage> {
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    let (iface, rest) = match words.split_first() {
        None => return Ok(show(c, sockets, None)),
        Some((i, rest)) => (i.to_string(), rest),
    };
    let addr = |family: &str, s: &str| -> Result<(IpAddr, Option<u8>), Usage> {
        let (a, len) = match s.split_once('/') {
            Some((a, l)) => (
                a,
                Some(
                    l.parse::<u8>()
                        .map_err(|_| Usage(format!("{s:?}: bad prefix length")))?,
                ),
            ),
            None => (s, None),
        };
        let ip: IpAddr = a
            .parse()
            .map_err(|_| Usage(format!("{a:?} is not an address")))?;
        if ip.is_ipv6() != (family == "inet6") {
            return Err(Usage(format!("{ip} is not an {family} address")));
        }
        Ok((ip, len))
    };
    if rest.first() == Some(&"create") {
        return Ok(change(c, sockets, &parse_create(&iface, &rest[1..])?));
    }
    let change_req = match rest {
        [] => return Ok(show(c, sockets, Some(&iface))),
        ["destroy"] => InterfaceChange::Destroy,
        [family @ ("inet" | "inet6"), a, "alias"] | [family @ ("inet" | "inet6"), a, "add"] => {
            let (addr, prefix_len) = addr(family, a)?;
            InterfaceChange::AddAddr { addr, prefix_len }
        }
        [family @ ("inet" | "inet6"), a, "-alias"] | [family @ ("inet" | "inet6"), a, "delete"] => {
            let (addr, _) = addr(family, a)?;
            InterfaceChange::RemoveAddr { addr }
        }
        ["mtu", n] => InterfaceChange::Mtu {
            mtu: n
                .parse()
                .map_err(|_| Usage(format!("mtu {n}: not a number")))?,
        },
        ["up"] => InterfaceChange::Up { up: true },
        ["down"] => InterfaceChange::Up { up: false },
        _ => return Err(Usage(format!("cannot read `ifconfig {}`", args.join(" ")))),
    };
    Ok(change(
        c,
        sockets,
        &Request::InterfaceSet {
            iface,
            change: change_req,
        },
    ))
}

/// `NAME create [vlan N] [vlandev PORT] inet ADDR/LEN [gateway GW] [mtu N]`.
pub(crate) fn parse_create(name: &str, words: &[&str]) -> Result<Request, Usage> {
    let (mut port, mut vid) = match name.rsplit_once('.') {
        Some((p, v)) => (Some(p.to_string()), v.parse::<u16>().ok()),
        None => (None, None),
    };
    let (mut inet, mut gateway, mut mtu) = (None, None, None);
    let (mut inet6, mut gateway6) = (None, None);
    let mut it = words.iter();
    while let Some(&w) = it.next() {
        let v = *it
            .next()
            .ok_or_else(|| Usage(format!("create: `{w}` needs a value")))?;
        match w {
            "vlan" => {
                vid = Some(
                    v.parse()
                        .map_err(|_| Usage(format!("vlan {v}: not a VLAN id 1..4094")))?,
                )
            }
            "vlandev" => port = Some(v.to_string()),
            "inet" => {
                let (a, l) = v
                    .split_once('/')
                    .ok_or_else(|| Usage(format!("inet {v}: give the prefix length (ADDR/LEN)")))?;
                let a: std::net::Ipv4Addr = a
                    .parse()
                    .map_err(|_| Usage(format!("inet {v}: {a:?} is not an IPv4 address")))?;
                let l: u8 = l
                    .parse()
                    .ok()
                    .filter(|&l| l <= 32)
                    .ok_or_else(|| Usage(format!("inet {v}: not a prefix length 0..32")))?;
                inet = Some((a, l));
            }
            "inet6" => {
                let (a, l) = match v.split_once('/') {
                    Some((a, l)) => (
                        a,
                        Some(l.parse::<u8>().ok().filter(|&l| l <= 128).ok_or_else(|| {
                            Usage(format!("inet6 {v}: not a prefix length 0..128"))
                        })?),
                    ),
                    None => (v, None),
                };
                let a: std::net::Ipv6Addr = a
                    .parse()
                    .map_err(|_| Usage(format!("inet6 {v}: {a:?} is not an IPv6 address")))?;
                inet6 = Some((a, l));
            }
            "gateway6" => {
                gateway6 = Some(
                    v.parse()
                        .map_err(|_| Usage(format!("gateway6 {v}: not an IPv6 address")))?,
                )
            }
            "gateway" => {
                gateway = Some(
                    v.parse()
                        .map_err(|_| Usage(format!("gateway {v}: not an IPv4 address")))?,
                )
            }
            "mtu" => {
                mtu = Some(
                    v.parse()
                        .map_err(|_| Usage(format!("mtu {v}: not a number")))?,
                )
            }
            _ => return Err(Usage(format!("create: unexpected `{w}`"))),
        }
    }
    let vid = vid.ok_or_else(|| {
        Usage(format!(
            "create: give the VLAN id (`vlan N`, or a name PORT.N): {name} has none"
        ))
    })?;
    let port = port.ok_or_else(|| {
        Usage(format!(
            "create: give the port (`vlandev PORT`, or a name PORT.N): {name} has none"
        ))
    })?;
    let (addr, prefix_len) =
        inet.ok_or_else(|| Usage("create: a VLAN interface needs `inet ADDR/LEN`".into()))?;
    if gateway6.is_some() && inet6.is_none() {
        return Err(Usage("create: `gateway6` needs `inet6 ADDR/LEN`".into()));
    }
    Ok(Request::VlanCreate {
        name: name.to_string(),
        port,
        vid,
        addr,
        prefix_len,
        gateway,
        mtu,
        addr6: inet6.map(|(a, _)| a),
        prefix_len6: inet6.and_then(|(_, l)| l),
        gateway6,
    })
}

fn show(c: &Common, sockets: &[EngineSocket], only: Option<&str>) -> ExitCode {
    let answers = ask_all(sockets, &Request::Interfaces);
    if c.json {
        print_json(&answers);
        return exit(report_errors(&answers));
    }
    let mut found = only.is_none();
    for a in &answers {
        let Ok(Reply::Interfaces { interfaces }) = &a.reply else {
            continue;
        };
        println!("engine {}:", a.label());
        for i in interfaces
            .iter()
            .filter(|i| only.is_none_or(|n| n == i.name))
        {
            found = true;
            print_iface(i);
        }
    }
    if !found {
        eprintln!("ustack ifconfig: no interface {}", only.unwrap_or_default());
        return ExitCode::FAILURE;
    }
    exit(report_errors(&answers))
}

fn print_iface(i: &InterfaceInfo) {
    println!("{}: flags=<{}> mtu {}", i.name, i.flags.join(","), i.mtu);
    println!("\tether {}", i.mac);
    if let Some(v) = &i.vlan {
        println!("\tvlan: {} parent interface: {}", v.vid, v.port);
    }
    for a in &i.inet {
        println!(
            "\tinet {}/{} broadcast {}",
            a.addr, a.prefix_len, i.broadcast
        );
    }
    for v in &i.vips {
        println!("\tinet {v} (vip)");
    }
    for a in &i.inet6 {
        println!("\tinet6 {}/{} {}", a.addr, a.prefix_len, a.state);
    }
    if let Some(g) = &i.gateway {
        println!("\tgateway {g}");
    }
    if let Some(g) = &i.gateway6 {
        println!("\tgateway6 {g}");
    }
    let get = |n: &str| {
        i.counters
            .iter()
            .find(|(k, _)| k == n)
            .map_or(0, |(_, v)| *v)
    };
    println!(
        "\tRX packets {} bytes {} dropped {}",
        get("rx_frames"),
        get("rx_bytes"),
        get("rx_dropped")
    );
    println!(
        "\tTX packets {} bytes {} dropped {}",
        get("tx_frames"),
        get("tx_bytes"),
        get("tx_dropped")
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn create(name: &str, s: &str) -> Result<Request, String> {
        let words: Vec<&str> = s.split_whitespace().collect();
        parse_create(name, &words).map_err(|Usage(m)| m)
    }

    #[test]
    fn create_takes_the_vlan_and_port_from_the_name_or_the_words() {
        assert_eq!(
            create("ustack0.40", "inet 10.99.78.2/24 gateway 10.99.78.1").unwrap(),
            Request::VlanCreate {
                name: "ustack0.40".into(),
                port: "ustack0".into(),
                vid: 40,
                addr: "10.99.78.2".parse().unwrap(),
                prefix_len: 24,
                gateway: Some("10.99.78.1".parse().unwrap()),
                mtu: None,
                addr6: None,
                prefix_len6: None,
                gateway6: None,
            }
        );
        let Request::VlanCreate {
            addr6,
            prefix_len6,
            gateway6,
            ..
        } = create(
            "ustack0.41",
            "inet 10.99.78.2/24 inet6 fd99:78::2/80 gateway6 fd99:78::1",
        )
        .unwrap()
        else {
            panic!("not a create");
        };
        assert_eq!(
            (addr6, prefix_len6, gateway6),
            (
                Some("fd99:78::2".parse().unwrap()),
                Some(80),
                Some("fd99:78::1".parse().unwrap())
            )
        );
        let Request::VlanCreate { port, vid, mtu, .. } =
            create("v40", "vlan 41 vlandev eth1 inet 10.0.0.1/8 mtu 1400").unwrap()
        else {
            panic!("not a create");
        };
        assert_eq!((port.as_str(), vid, mtu), ("eth1", 41, Some(1400)));
    }

    #[test]
    fn create_says_what_is_missing_or_wrong() {
        for (name, words, says) in [
            ("v40", "inet 10.0.0.1/8", "give the VLAN id"),
            ("v40", "vlan 40 inet 10.0.0.1/8", "give the port"),
            ("p.40", "", "needs `inet ADDR/LEN`"),
            ("p.40", "inet 10.0.0.1", "give the prefix length"),
            ("p.40", "inet 10.0.0.1/40", "not a prefix length"),
            ("p.40", "inet fd00::1/64", "not an IPv4 address"),
            ("p.40", "vlan x inet 10.0.0.1/8", "not a VLAN id"),
            ("p.40", "inet 10.0.0.1/8 color red", "unexpected `color`"),
            ("p.40", "inet", "needs a value"),
            (
                "p.40",
                "inet 10.0.0.1/8 inet6 10.0.0.2",
                "not an IPv6 address",
            ),
            (
                "p.40",
                "inet 10.0.0.1/8 inet6 fd00::1/129",
                "not a prefix length",
            ),
            ("p.40", "inet 10.0.0.1/8 gateway6 fd00::1", "needs `inet6"),
        ] {
            let e = create(name, words).unwrap_err();
            assert!(e.contains(says), "{name} {words}: {e}");
        }
    }
}
