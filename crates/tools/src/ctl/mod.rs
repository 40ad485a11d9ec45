//! The subcommands that talk to running engines over their control
//! sockets (`runtime::control`): common options, finding the engines, and
//! sending a request to each.
//!
//! Common options: `-p N` (only process N, its `--proc-id`; default every
//! process found), `--json` (machine-readable output), `--run-dir DIR`
//! (default `$USTACK_RUN_DIR`, else `/run/ustack`), `--prefix NAME` (only
//! the processes of `file_prefix` NAME).

mod ifconfig;
mod kni;
mod neighbor;
mod netstat;
mod pcap;
mod route;
mod rule;
mod stats;
mod sysctl;
mod top;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use runtime::control::client::{self, AskError, EngineSocket};
use runtime::control::proto::{Reply, Request};
use serde_json::json;

/// How long one engine may take to answer.
const TIMEOUT: Duration = Duration::from_secs(2);

/// The usage lines of the subcommands.
pub const USAGE: &str = "\
       ustack ifconfig [IFACE [inet|inet6 ADDR[/LEN] [alias|-alias]] [mtu N]]
       ustack ifconfig IFACE up|down | NAME destroy
       ustack ifconfig NAME create [vlan N] [vlandev PORT] inet ADDR/LEN [gateway GW] [inet6 ADDR[/LEN] [gateway6 GW6]] [mtu N]
       ustack route [show] [-fib N] | add|change DEST [GATEWAY] [-interface IFACE] | delete DEST
       ustack rule [show] | add|delete [PRIORITY] from PREFIX|iface IFACE|mark M fib N
       ustack arp [-a] | -s IP MAC [IFACE] | -d IP | -F          (ndp: the same for IPv6)
       ustack netstat [-a] [-s] [-i]
       ustack sysctl [-a] [NAME[=VALUE]]...
       ustack pcap [-i IFACE] [-c COUNT] [-s SNAPLEN] [-t SECONDS] [-w FILE|-] [FILTER]
       ustack kni [-n] | -a default|alltokni|alltoff
       ustack stats [--prometheus]
       ustack top [-n COUNT] | ustack traffic [-n COUNT]
  common options: -p N (process --proc-id N; default all), --json, --run-dir DIR, --prefix NAME";

/// What every subcommand takes.
pub struct Common {
    pub proc_id: Option<u32>,
    pub json: bool,
    pub run_dir: PathBuf,
    pub prefix: Option<String>,
}

/// A usage error.
#[derive(Debug)]
pub struct Usage(pub String);

/// Splits the common options out of `args`; the rest, in order, is the
/// subcommand's.
fn common(args: &[String]) -> Result<(Common, Vec<String>), Usage> {
    let mut c = Common {
        proc_id: None,
        json: false,
        run_dir: std::env::var_os("USTACK_RUN_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(runtime::control::DEFAULT_RUN_DIR)),
        prefix: None,
    };
    let mut rest = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| Usage(format!("{name} needs a value")))
        };
        match a.as_str() {
            "-p" | "--proc-id" => {
                let v = value(a)?;
                c.proc_id = Some(
                    v.parse()
                        .map_err(|_| Usage(format!("-p {v}: not a process number")))?,
                );
            }
            "--json" => c.json = true,
            "--run-dir" => c.run_dir = PathBuf::from(value(a)?),
            "--prefix" => c.prefix = Some(value(a)?),
            _ => rest.push(a.clone()),
        }
    }
    Ok((c, rest))
}

/// The engines to talk to.
fn engines(c: &Common) -> Result<Vec<EngineSocket>, String> {
    let all = client::find_sockets(&c.run_dir, c.prefix.as_deref())
        .map_err(|e| format!("cannot read {}: {e}", c.run_dir.display()))?;
    let found: Vec<_> = all
        .into_iter()
        .filter(|s| c.proc_id.is_none() || s.proc_id() == c.proc_id)
        .collect();
    if found.is_empty() {
        return Err(format!(
            "no running engine{} found in {} (is the program running? its [control] dir?)",
            c.proc_id
                .map(|p| format!(" of process {p}"))
                .unwrap_or_default(),
            c.run_dir.display()
        ));
    }
    Ok(found)
}

/// One engine's answer.
pub struct Answer {
    pub socket: EngineSocket,
    pub reply: Result<Reply, AskError>,
}

impl Answer {
    /// `0/1` (process/engine) for text output.
    pub fn label(&self) -> String {
        format!("{}/{}", self.socket.process, self.socket.engine)
    }
}

/// Whether an answer says the engine is gone: its socket file is left
/// from a process that ended without removing it (killed).
fn gone(a: &Answer) -> bool {
    matches!(&a.reply, Err(AskError::Io(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused)
}

/// Asks every engine `req`, all at once (one thread per engine): a slow
/// engine does not hold up the others' answers.  Engines that are gone
/// (a socket file nobody listens on) are left out.
pub fn ask_all(sockets: &[EngineSocket], req: &Request) -> Vec<Answer> {
    let answers: Vec<Answer> = std::thread::scope(|s| {
        let handles: Vec<_> = sockets
            .iter()
            .map(|sock| s.spawn(move || client::ask(&sock.path, req, TIMEOUT)))
            .collect();
        sockets
            .iter()
            .zip(handles)
            .map(|(sock, h)| Answer {
                socket: sock.clone(),
                reply: h.join().unwrap_or_else(|_| {
                    Err(AskError::Io(std::io::Error::other(
                        "the asking thread failed",
                    )))
                }),
            })
            .collect()
    });
    if answers.iter().all(gone) {
        // Nothing runs: say so once rather than once per file.
        return answers
            .into_iter()
            .take(1)
            .map(|a| Answer {
                socket: a.socket,
                reply: Err(AskError::Io(std::io::Error::other(
                    "no running engine answers (the socket files are left from processes that \
                     ended)",
                ))),
            })
            .collect();
    }
    answers.into_iter().filter(|a| !gone(a)).collect()
}

/// The JSON of one engine's answer: who, and the reply or the error.
pub fn answer_json(a: &Answer) -> serde_json::Value {
    let mut v = json!({
        "prefix": a.socket.prefix,
        "process": a.socket.process,
        "engine": a.socket.engine,
    });
    match &a.reply {
        Ok(r) => v["reply"] = serde_json::to_value(r).unwrap_or(serde_json::Value::Null),
        Err(e) => v["error"] = json!(e.to_string()),
    }
    v
}

/// Prints every answer as one JSON array.
pub fn print_json(answers: &[Answer]) {
    let all: Vec<_> = answers.iter().map(answer_json).collect();
    println!(
        "{}",
        serde_json::to_string_pretty(&all).unwrap_or_else(|_| "[]".to_string())
    );
}

/// Says each failed answer on stderr; returns whether all succeeded.
pub fn report_errors(answers: &[Answer]) -> bool {
    let mut ok = true;
    for a in answers {
        if let Err(e) = &a.reply {
            eprintln!("ustack: engine {}: {e}", a.label());
            ok = false;
        }
    }
    ok
}

/// Sends a change to every engine (changes apply to every engine of a
/// process) and says what each did.
pub fn change(c: &Common, sockets: &[EngineSocket], req: &Request) -> ExitCode {
    let answers = ask_all(sockets, req);
    if c.json {
        print_json(&answers);
    } else {
        for a in &answers {
            if let Ok(Reply::Done { message }) = &a.reply {
                println!("{}: {message}", a.label());
            }
        }
    }
    exit(report_errors(&answers))
}

pub fn exit(ok: bool) -> ExitCode {
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Runs subcommand `cmd`; `None` when it is not one of these.
pub fn main(cmd: &str, args: &[String]) -> Option<ExitCode> {
    type Sub = fn(&Common, &[EngineSocket], &[String]) -> Result<ExitCode, Usage>;
    let sub: Sub = match cmd {
        "stats" => stats::main,
        "netstat" => netstat::main,
        "route" => route::main,
        "rule" => rule::main,
        "pcap" => pcap::main,
        "kni" => kni::main,
        "arp" => neighbor::arp,
        "ndp" => neighbor::ndp,
        "sysctl" => sysctl::main,
        "ifconfig" => ifconfig::main,
        "top" => top::top,
        "traffic" => top::traffic,
        _ => return None,
    };
    let run = || -> Result<ExitCode, Usage> {
        let (c, rest) = common(args)?;
        let sockets = match engines(&c) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("ustack {cmd}: {e}");
                return Ok(ExitCode::FAILURE);
            }
        };
        sub(&c, &sockets, &rest)
    };
    Some(match run() {
        Ok(code) => code,
        Err(Usage(msg)) => {
            eprintln!("ustack {cmd}: {msg}\nusage:\n{USAGE}");
            ExitCode::from(2)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn common_options_are_taken_out_wherever_they_are() {
        let Ok((c, rest)) = common(&args(&[
            "add",
            "-p",
            "2",
            "10.0.0.0/8",
            "--json",
            "--run-dir",
            "/x",
            "10.1.1.1",
            "--prefix",
            "nginx",
        ])) else {
            panic!("valid options refused");
        };
        assert_eq!(c.proc_id, Some(2));
        assert!(c.json);
        assert_eq!(c.run_dir, PathBuf::from("/x"));
        assert_eq!(c.prefix.as_deref(), Some("nginx"));
        assert_eq!(rest, args(&["add", "10.0.0.0/8", "10.1.1.1"]));
    }

    #[test]
    fn a_bad_or_missing_value_is_a_usage_error() {
        for bad in [&["-p", "x"][..], &["-p"], &["--run-dir"], &["--prefix"]] {
            match common(&args(bad)) {
                Err(Usage(msg)) => assert!(msg.contains(bad[0]), "{msg}"),
                Ok(_) => panic!("{bad:?} accepted"),
            }
        }
    }
}
