//! `ustack`: the command line of ustack.
//!
//! ```text
//! ustack run [--config FILE] [--set section.key=value]... [--stats FILE] [--lib PATH] -- PROGRAM ARGS...
//! ```
//!
//! `run` starts PROGRAM with `libustack_preload.so` preloaded and the
//! configuration handed to it through the environment: its AF_INET TCP
//! and UDP sockets are served by ustack over the configuration's ports,
//! one engine per process, and everything else stays with the kernel.
//! The configuration is read here first, so a mistake in it is reported
//! before the program starts.  `--stats FILE`: each process rewrites its
//! counters to `FILE.PID` every 100 ms while it waits.
//!
//! The other subcommands talk to running engines over their control
//! sockets (see `ctl` and `runtime::control`):
//!
//! ```text
//! ustack ifconfig | route | rule | arp | ndp | netstat | sysctl | stats | top | traffic | pcap | kni
//!        [-p PROC] [--json] [--run-dir DIR] [--prefix NAME] ...
//! ```
//!
//! `ustack xdp detach IFACE` removes ustack's XDP program a killed process
//! left on an interface (see `xdp`).

mod ctl;
mod run;
mod xdp;

use std::process::ExitCode;

const USAGE: &str = "usage: ustack run [--config FILE] [--set section.key=value]... \
                         [--stats FILE] [--lib PATH] -- PROGRAM ARGS...";

fn main() -> ExitCode {
    // Output into a closed pipe (`ustack stats | head`) ends the program
    // quietly, as it does other Unix tools, instead of a panic.
    // SAFETY: setting a signal's disposition to the default, before any
    // thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("run") => run::main(&args[1..]),
        Some("xdp") => xdp::main(&args[1..]),
        Some("-h") | Some("--help") | Some("help") => {
            println!("{USAGE}\n{}\n{}", ctl::USAGE, xdp::USAGE);
            ExitCode::SUCCESS
        }
        Some(other) => ctl::main(other, &args[1..]).unwrap_or_else(|| {
            eprintln!("ustack: unknown command '{other}'\n{USAGE}\n{}", ctl::USAGE);
            ExitCode::from(2)
        }),
        None => {
            eprintln!("{USAGE}\n{}", ctl::USAGE);
            ExitCode::from(2)
        }
    }
}
