//! The rows through the public ways in: `crates/bench/c/pingpong.c`, one C
//! program, built by `make bench-c` against the installed headers
//! (`target/c-bench`) three times: `pingpong` on Linux's sockets and
//! epoll, `pingpong_capi` on ustack's C ABI (`-DUSE_USTACK`, `ustack.h`)
//! and `pingpong_ff` on F-Stack's layer with kqueue (`-DUSE_FF`,
//! `ff_api.h`).
//!
//! Per run, a server on core 0 and a client on core 1 (`taskset`), as the
//! core rows:
//! - `linux`: `pingpong` on both ends over 127.0.0.1;
//! - `capi_epoll`: `pingpong_capi` on both ends, each its own engine
//!   (`ustack_init` then `ustack_run`), joined by the shared-memory link
//!   the core rows use (`link=shm_create:` on the server, `shm_attach:` on
//!   the client), busy polling and `pkt_tx_delay` 0 as there;
//! - `ff_kqueue`: `pingpong_ff` likewise (`ff_init`, `ff_run`); Linux has
//!   no kqueue, so its kernel side is `pingpong` on epoll;
//! - `preload`: `pingpong` (the kernel's binary, unchanged) on both ends
//!   under `ustack run` with those configurations.
//!
//! So a row's ustack figure pays for everything a C program does on
//! ustack (fd table, epoll layer, C ABI, clock reads, the loop), and its
//! kernel figure is the same program on the kernel.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::specs::{Spec, Way};

/// The server's and the client's addresses on the shm link.
const SERVER_IP: &str = "10.77.0.1";
const CLIENT_IP: &str = "10.77.0.2";

/// Where `make bench-c` put the C programs: `USTACK_BENCH_C_DIR`, or
/// `target/c-bench` beside `target/release`.
pub fn c_dir(exe: &Path) -> PathBuf {
    if let Some(d) = std::env::var_os("USTACK_BENCH_C_DIR") {
        return PathBuf::from(d);
    }
    exe.parent()
        .and_then(Path::parent)
        .unwrap_or(Path::new("target"))
        .join("c-bench")
}

/// The engine configuration of one end (`create`: the server's end, which
/// makes the link's file).
pub fn ustack_ini(link: &str, create: bool) -> String {
    let (kind, ip) = if create {
        ("shm_create", SERVER_IP)
    } else {
        ("shm_attach", CLIENT_IP)
    };
    format!("[dpdk]\nidle_sleep=0\npkt_tx_delay=0\n[port0]\nlink={kind}:{link}\naddr={ip}/24\n")
}

/// One end's command line: the program (and its launcher) pinned to
/// `cpu`, with `args`; `ini` is ustack's configuration file (ustack only).
pub struct Launch {
    pub program: PathBuf,
    pub args: Vec<String>,
}

/// The command of one end of a run of `spec` on `which`.
pub fn command(
    exe: &Path,
    spec: &Spec,
    which: &str,
    cpu: usize,
    ini: Option<&Path>,
    role_args: &[String],
) -> Result<Launch, String> {
    let dir = c_dir(exe);
    let plain = dir.join("pingpong");
    let capi = dir.join("pingpong_capi");
    let ff = dir.join("pingpong_ff");
    for p in [&plain, &capi, &ff] {
        if !p.is_file() {
            return Err(format!(
                "no {}: `make bench-c` builds the C programs",
                p.display()
            ));
        }
    }
    let mut args = vec!["-c".to_string(), cpu.to_string()];
    let ustack = which == "ustack";
    let ini = || {
        ini.map(|p| p.display().to_string())
            .ok_or_else(|| "no configuration for ustack".to_string())
    };
    match (ustack, spec.way) {
        (false, _) => args.push(plain.display().to_string()),
        (true, Way::CapiEpoll | Way::FfKqueue) => {
            let prog = if spec.way == Way::CapiEpoll {
                &capi
            } else {
                &ff
            };
            args.push(prog.display().to_string());
            args.extend(role_args.iter().cloned());
            args.extend(["--conf".to_string(), ini()?]);
            return Ok(Launch {
                program: PathBuf::from("taskset"),
                args,
            });
        }
        (true, Way::Preload) => {
            let launcher = exe.parent().unwrap_or(Path::new(".")).join("ustack");
            if !launcher.is_file() {
                return Err(format!(
                    "no {}: cargo build --release -p tools",
                    launcher.display()
                ));
            }
            args.push(launcher.display().to_string());
            args.extend([
                "run".to_string(),
                "--config".to_string(),
                ini()?,
                "--".to_string(),
            ]);
            args.push(plain.display().to_string());
        }
        (true, other) => return Err(format!("no C program for the way {}", other.name())),
    }
    args.extend(role_args.iter().cloned());
    Ok(Launch {
        program: PathBuf::from("taskset"),
        args,
    })
}

/// The client's address of the server on `which`.
pub fn server_ip(which: &str) -> &'static str {
    if which == "ustack" {
        SERVER_IP
    } else {
        "127.0.0.1"
    }
}

/// How long a client may take beyond its warm-up and window.
pub const SLACK: Duration = Duration::from_secs(20);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::specs::SPECS;

    #[test]
    fn each_way_gets_its_program() {
        let exe = Path::new("/nonexistent/target/release/ustack-bench");
        assert_eq!(c_dir(exe), Path::new("/nonexistent/target/c-bench"));
        let spec = SPECS
            .iter()
            .find(|s| s.way == Way::CapiEpoll)
            .expect("a capi_epoll row");
        let err = command(exe, spec, "ustack", 0, None, &[]).err().unwrap();
        assert!(err.contains("make bench-c"), "{err}");
        let ini = ustack_ini("/dev/shm/x.link", true);
        assert!(ini.contains("link=shm_create:/dev/shm/x.link\naddr=10.77.0.1/24\n"));
        assert!(ustack_ini("/dev/shm/x.link", false).contains("shm_attach:/dev/shm/x.link"));
        assert_eq!(server_ip("linux"), "127.0.0.1");
    }
}
