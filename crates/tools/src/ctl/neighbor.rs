//! `ustack arp` and `ustack ndp`: the neighbour caches of IPv4 and IPv6.
//!
//! ```text
//! ustack arp [-a]                  show
//! ustack arp -s IP MAC [IFACE]     add a static entry
//! ustack arp -d IP [IFACE]         delete an entry
//! ustack arp -F                    flush (ndp: -c as FreeBSD's)
//! ```

use std::net::IpAddr;
use std::process::ExitCode;

use runtime::control::client::EngineSocket;
use runtime::control::proto::{Family, Reply, Request};

use super::{ask_all, change, exit, print_json, report_errors, Common, Usage};

pub fn arp(c: &Common, sockets: &[EngineSocket], args: &[String]) -> Result<ExitCode, Usage> {
    main(c, sockets, args, false)
}

pub fn ndp(c: &Common, sockets: &[EngineSocket], args: &[String]) -> Result<ExitCode, Usage> {
    main(c, sockets, args, true)
}

fn main(
    c: &Common,
    sockets: &[EngineSocket],
    args: &[String],
    v6: bool,
) -> Result<ExitCode, Usage> {
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    let ip = |s: &str| -> Result<IpAddr, Usage> {
        let ip: IpAddr = s
            .parse()
            .map_err(|_| Usage(format!("{s:?} is not an address")))?;
        if ip.is_ipv6() != v6 {
            return Err(Usage(format!(
                "{ip} is an {} address: use ustack {}",
                if v6 { "IPv4" } else { "IPv6" },
                if v6 { "arp" } else { "ndp" }
            )));
        }
        Ok(ip)
    };
    let family = if v6 { Family::Inet6 } else { Family::Inet };
    match words.as_slice() {
        [] | ["-a"] | ["-an"] | ["-n"] => show(c, sockets, v6),
        ["-s", addr, mac, rest @ ..] if rest.len() <= 1 => Ok(change(
            c,
            sockets,
            &Request::NeighborAdd {
                ip: ip(addr)?,
                mac: mac.to_string(),
                iface: rest.first().map(|s| s.to_string()),
            },
        )),
        ["-d", addr, rest @ ..] if rest.len() <= 1 => Ok(change(
            c,
            sockets,
            &Request::NeighborDelete {
                ip: ip(addr)?,
                iface: rest.first().map(|s| s.to_string()),
            },
        )),
        ["-F"] | ["-c"] | ["-da"] => Ok(change(c, sockets, &Request::NeighborFlush { family })),
        _ => Err(Usage(format!("cannot read `{}`", args.join(" ")))),
    }
}

fn show(c: &Common, sockets: &[EngineSocket], v6: bool) -> Result<ExitCode, Usage> {
    let answers = ask_all(sockets, &Request::Neighbors);
    if c.json {
        print_json(&answers);
        return Ok(exit(report_errors(&answers)));
    }
    for a in &answers {
        let Ok(Reply::Neighbors { neighbors }) = &a.reply else {
            continue;
        };
        println!("engine {}:", a.label());
        println!(
            "{:<40} {:<18} {:<8} {:<11} Expire",
            "Neighbor", "Linklayer Address", "Netif", "State"
        );
        for n in neighbors.iter().filter(|n| n.ip.is_ipv6() == v6) {
            let expire = match (n.state.as_str(), n.expires_ms) {
                ("permanent", _) => "permanent".to_string(),
                (_, Some(ms)) => format!("{}s", ms / 1000),
                (_, None) => "-".to_string(),
            };
            println!(
                "{:<40} {:<18} {:<8} {:<11} {expire}",
                n.ip.to_string(),
                n.mac.as_deref().unwrap_or("(incomplete)"),
                n.iface,
                n.state
            );
        }
    }
    Ok(exit(report_errors(&answers)))
}
