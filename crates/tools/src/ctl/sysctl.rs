//! `ustack sysctl`: reads every key (`-a`, or none named) or the keys
//! named; `NAME=VALUE` sets a key that can change while the engine runs
//! (every engine), and a key only the configuration sets says so.

use std::process::ExitCode;

use runtime::control::client::EngineSocket;
use runtime::control::proto::{Reply, Request};

use super::{ask_all, change, exit, print_json, report_errors, Common, Usage};

pub fn main(c: &Common, sockets: &[EngineSocket], args: &[String]) -> Result<ExitCode, Usage> {
    let names: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .filter(|a| !matches!(*a, "-a" | "-n"))
        .collect();
    if names.is_empty() {
        return Ok(show(c, sockets, None));
    }
    let mut ok = true;
    for n in names {
        if n.starts_with('-') {
            return Err(Usage(format!("unknown option {n}")));
        }
        let code = match n.split_once('=') {
            Some((name, value)) => change(
                c,
                sockets,
                &Request::SysctlSet {
                    name: name.trim().to_string(),
                    value: value.trim().to_string(),
                },
            ),
            None => show(c, sockets, Some(n)),
        };
        ok &= code == ExitCode::SUCCESS;
    }
    Ok(exit(ok))
}

fn show(c: &Common, sockets: &[EngineSocket], name: Option<&str>) -> ExitCode {
    let answers = ask_all(
        sockets,
        &Request::SysctlGet {
            name: name.map(String::from),
        },
    );
    if c.json {
        print_json(&answers);
        return exit(report_errors(&answers));
    }
    // Every engine of a process has the same values: one listing per
    // process unless they differ.
    let mut last: Option<(&str, &Vec<_>)> = None;
    for a in &answers {
        let Ok(Reply::Sysctls { sysctls }) = &a.reply else {
            continue;
        };
        if last.is_some_and(|(p, s)| p == a.socket.process && s == sysctls) {
            continue;
        }
        if answers.len() > 1 {
            println!("engine {}:", a.label());
        }
        for s in sysctls {
            println!(
                "{}: {}{}",
                s.name,
                s.value,
                if s.live { "" } else { " (config only)" }
            );
        }
        last = Some((&a.socket.process, sysctls));
    }
    exit(report_errors(&answers))
}
