//! `ustack kni`: the exception path (`[kni]`), as F-Stack's knictl shows
//! and sets it:
//!
//! ```text
//! ustack kni [-n]                         what goes to the kernel, and the counters
//! ustack kni -a default|alltokni|alltoff  set kni_action on every engine
//! ```
//!
//! `default` sends frames by `[kni] method` and the listed ports,
//! `alltokni` every frame to the kernel, `alltoff` every frame to ustack
//! (ARP and neighbour discovery go to both whatever the action).

use std::process::ExitCode;

use runtime::control::client::EngineSocket;
use runtime::control::proto::{Reply, Request};

use super::{ask_all, change, exit, print_json, report_errors, Common, Usage};

pub fn main(c: &Common, sockets: &[EngineSocket], args: &[String]) -> Result<ExitCode, Usage> {
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    match words.as_slice() {
        [] | ["-n"] | ["show"] => Ok(show(c, sockets)),
        ["-a", a] | ["set", a] | ["action", a] => {
            if !matches!(*a, "default" | "alltokni" | "alltoff") {
                return Err(Usage(format!(
                    "kni action {a:?}: must be default, alltokni or alltoff"
                )));
            }
            Ok(change(
                c,
                sockets,
                &Request::KniSetAction {
                    action: a.to_string(),
                },
            ))
        }
        ["-a"] => Err(Usage("-a needs default, alltokni or alltoff".into())),
        _ => Err(Usage(format!("cannot read `kni {}`", args.join(" ")))),
    }
}

fn show(c: &Common, sockets: &[EngineSocket]) -> ExitCode {
    let answers = ask_all(sockets, &Request::Kni);
    if c.json {
        print_json(&answers);
        return exit(report_errors(&answers));
    }
    for a in &answers {
        let Ok(Reply::Kni(k)) = &a.reply else {
            continue;
        };
        if !k.enabled {
            println!("engine {}: no exception path ([kni] enable=0)", a.label());
            continue;
        }
        let listed = format!("tcp ports [{}], udp ports [{}]", k.tcp_ports, k.udp_ports);
        let rule = match (k.action.as_str(), k.method.as_str()) {
            ("alltokni", _) => "every frame to the kernel".to_string(),
            ("alltoff", _) => "every frame to ustack".to_string(),
            (_, "accept") => format!("{listed} to the kernel, the rest to ustack"),
            _ => format!("{listed} to ustack, the rest to the kernel"),
        };
        println!(
            "engine {}: kni action {}, method {}: {rule}; ARP and neighbour discovery to both",
            a.label(),
            k.action,
            k.method
        );
        if !k.tap_ports.is_empty() {
            let ports: Vec<String> = k.tap_ports.iter().map(u32::to_string).collect();
            println!("\tholds the TAPs of port(s) {}", ports.join(","));
        }
        for (name, v) in &k.counters {
            println!("\t{name} {v}");
        }
    }
    exit(report_errors(&answers))
}
