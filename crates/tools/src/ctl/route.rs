//! `ustack route`: show, add, change and delete routes (IPv4 and IPv6),
//! in FreeBSD's words:
//!
//! ```text
//! ustack route [show] [-fib N] [-4|-6]
//! ustack route add [-net|-host] [-inet6] DEST [GATEWAY] [-interface IFACE] [-fib N]
//! ustack route change DEST GATEWAY ...
//! ustack route delete DEST [-fib N]
//! ```
//!
//! DEST is `10.0.0.0/8`, `10.0.0.0 255.0.0.0` is not taken (write the
//! prefix length), an address (a host route), or `default` (`-inet6
//! default` for IPv6's).  `-fib N` picks a FIB other than the main one
//! (0); `ustack rule` says which packets use it.  A change goes to every
//! engine.

use std::net::IpAddr;
use std::process::ExitCode;

use runtime::control::client::EngineSocket;
use runtime::control::proto::{Reply, Request, RouteSpec};

use super::{ask_all, change, exit, print_json, report_errors, Common, Usage};

pub fn main(c: &Common, sockets: &[EngineSocket], args: &[String]) -> Result<ExitCode, Usage> {
    let mut fib = 0u32;
    let mut v6 = false;
    let mut only: Option<bool> = None;
    let mut iface = None;
    let mut words = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-fib" | "--fib" => {
                let v = it
                    .next()
                    .ok_or_else(|| Usage("-fib needs a number".into()))?;
                fib = v
                    .parse()
                    .map_err(|_| Usage(format!("-fib {v}: not a table number")))?;
            }
            "-inet6" | "-6" => {
                v6 = true;
                only = Some(true);
            }
            "-inet" | "-4" => only = Some(false),
            "-interface" | "-iface" => {
                iface = Some(
                    it.next()
                        .ok_or_else(|| Usage("-interface needs a name".into()))?
                        .clone(),
                );
            }
            "-net" | "-host" | "-n" => {}
            _ => words.push(a.as_str()),
        }
    }
    let dest_of = |d: &str| {
        if d == "default" && v6 {
            "default6".to_string()
        } else {
            d.to_string()
        }
    };
    let gateway_of = |g: Option<&&str>| -> Result<Option<IpAddr>, Usage> {
        g.map(|g| {
            g.parse()
                .map_err(|_| Usage(format!("{g:?} is not a gateway address")))
        })
        .transpose()
    };
    match words.as_slice() {
        [] | ["show"] | ["list"] | ["get"] => show(c, sockets, fib, only),
        ["add", dest, rest @ ..] | ["change", dest, rest @ ..] if rest.len() <= 1 => {
            let route = RouteSpec {
                dest: dest_of(dest),
                gateway: gateway_of(rest.first())?,
                iface,
            };
            let req = if words[0] == "add" {
                Request::RouteAdd { fib, route }
            } else {
                Request::RouteChange { fib, route }
            };
            Ok(change(c, sockets, &req))
        }
        ["delete", dest] | ["del", dest] => Ok(change(
            c,
            sockets,
            &Request::RouteDelete {
                fib,
                dest: dest_of(dest),
            },
        )),
        _ => Err(Usage(format!("cannot read `route {}`", args.join(" ")))),
    }
}

fn show(
    c: &Common,
    sockets: &[EngineSocket],
    fib: u32,
    only: Option<bool>,
) -> Result<ExitCode, Usage> {
    let answers = ask_all(sockets, &Request::Routes { fib });
    if c.json {
        print_json(&answers);
        return Ok(exit(report_errors(&answers)));
    }
    for a in &answers {
        let Ok(Reply::Routes { routes, fib }) = &a.reply else {
            continue;
        };
        println!("engine {} (fib {fib}):", a.label());
        println!(
            "{:<44} {:<40} {:<6} Netif",
            "Destination", "Gateway", "Flags"
        );
        for r in routes {
            let is_v6 = r.dest.contains(':') || r.gateway.is_some_and(|g| g.is_ipv6());
            if only.is_some_and(|want| want != is_v6) {
                continue;
            }
            let gw = r
                .gateway
                .map_or_else(|| format!("link#{}", r.iface), |g| g.to_string());
            println!("{:<44} {:<40} {:<6} {}", r.dest, gw, r.flags, r.iface);
        }
    }
    Ok(exit(report_errors(&answers)))
}
