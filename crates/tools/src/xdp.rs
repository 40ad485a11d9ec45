//! `ustack xdp detach IFACE`: removes ustack's classifying XDP program
//! (`xdp_program=libxdp`) that a process killed before it could detach left
//! on interface IFACE of the current network namespace, putting back the
//! program it displaced (chained). A program whose process still runs, and
//! programs that are not ustack's, are left alone. It talks to the kernel,
//! not to engines (run it in the interface's namespace: `ip netns exec`).

use std::process::ExitCode;

pub const USAGE: &str =
    "       ustack xdp detach IFACE     (ustack's XDP program left by a process that is gone)";

pub fn main(args: &[String]) -> ExitCode {
    let [verb, ifname] = args else {
        eprintln!("ustack xdp: expected `detach IFACE`\nusage:\n{USAGE}");
        return ExitCode::from(2);
    };
    if verb != "detach" {
        eprintln!("ustack xdp: unknown verb '{verb}'\nusage:\n{USAGE}");
        return ExitCode::from(2);
    }
    match link::af_xdp::stale::detach_stale(ifname) {
        Ok(said) => {
            println!("{said}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("ustack xdp detach: {e}");
            ExitCode::FAILURE
        }
    }
}
