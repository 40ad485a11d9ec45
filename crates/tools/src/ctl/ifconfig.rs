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
//! ustack ifconfig IFACE up|down
//! ```

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
    let change_req = match rest {
        [] => return Ok(show(c, sockets, Some(&iface))),
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
