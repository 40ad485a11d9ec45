//! `ustack stats [--prometheus]`: every counter of every engine, per port
//! too; `--prometheus` in Prometheus's text exposition format.

use std::process::ExitCode;

use runtime::control::client::EngineSocket;
use runtime::control::prometheus::{self, EngineCounters};
use runtime::control::proto::{Reply, Request};

use super::{ask_all, exit, print_json, report_errors, Common, Usage};

pub fn main(c: &Common, sockets: &[EngineSocket], args: &[String]) -> Result<ExitCode, Usage> {
    let mut prom = false;
    for a in args {
        match a.as_str() {
            "--prometheus" => prom = true,
            other => return Err(Usage(format!("unknown argument {other:?}"))),
        }
    }
    let answers = ask_all(sockets, &Request::Stats);
    if c.json {
        print_json(&answers);
        return Ok(exit(report_errors(&answers)));
    }
    let got: Vec<_> = answers
        .iter()
        .filter_map(|a| match &a.reply {
            Ok(Reply::Stats { counters }) => Some((a, counters)),
            _ => None,
        })
        .collect();
    if prom {
        let engines: Vec<_> = got
            .iter()
            .map(|(a, counters)| EngineCounters {
                process: &a.socket.process,
                engine: a.socket.engine,
                counters,
            })
            .collect();
        print!("{}", prometheus::render(&engines));
    } else {
        for (a, counters) in &got {
            println!(
                "== process {} engine {} ==",
                a.socket.process, a.socket.engine
            );
            for (name, v) in counters.iter() {
                println!("{name} {v}");
            }
        }
    }
    Ok(exit(report_errors(&answers)))
}
