//! `ustack run`: the launcher of the LD_PRELOAD library.

use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use runtime::config::Config;

/// The library's file name.
const LIB: &str = "libustack_preload.so";

/// What `ustack run` was asked.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct RunArgs {
    pub config: Option<PathBuf>,
    pub sets: Vec<String>,
    pub stats: Option<PathBuf>,
    pub lib: Option<PathBuf>,
    pub program: Vec<String>,
}

impl RunArgs {
    pub fn parse(args: &[String]) -> Result<RunArgs, String> {
        let mut out = RunArgs::default();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            if a == "--" {
                out.program = it.cloned().collect();
                break;
            }
            let (flag, inline) = match a.split_once('=') {
                Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
                _ => (a.as_str(), None),
            };
            if !flag.starts_with('-') {
                // The program, without a `--` before it.
                out.program = std::iter::once(a.clone()).chain(it.cloned()).collect();
                break;
            }
            let mut value = || {
                inline
                    .clone()
                    .or_else(|| it.next().cloned())
                    .ok_or_else(|| format!("{flag} needs a value"))
            };
            match flag {
                "--config" | "--conf" | "-c" => out.config = Some(value()?.into()),
                "--set" => out.sets.push(value()?),
                "--stats" => out.stats = Some(value()?.into()),
                "--lib" => out.lib = Some(value()?.into()),
                _ => return Err(format!("unknown option {flag}")),
            }
        }
        if out.program.is_empty() {
            return Err("no program to run".into());
        }
        Ok(out)
    }
}

/// Where the library is: `--lib`, else beside this executable, else in
/// `../lib` from it (an installed copy).
fn find_lib(given: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(p) = given {
        return Ok(p.to_path_buf());
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    let dir = exe.parent().unwrap_or(Path::new("/"));
    for cand in [dir.join(LIB), dir.join("../lib").join(LIB)] {
        if cand.is_file() {
            return cand
                .canonicalize()
                .map_err(|e| format!("{}: {e}", cand.display()));
        }
    }
    Err(format!(
        "{LIB} is neither beside {} nor in {}/../lib: --lib PATH",
        exe.display(),
        dir.display()
    ))
}

fn absolute(p: &Path) -> Result<PathBuf, String> {
    std::path::absolute(p).map_err(|e| format!("{}: {e}", p.display()))
}

pub fn main(args: &[String]) -> ExitCode {
    match prepare(args) {
        Ok(()) => {}
        Err(msg) => {
            eprintln!("ustack run: {msg}\n{}", crate::USAGE);
            return ExitCode::from(2);
        }
    }
    ExitCode::from(127)
}

/// A fanout group id for this run: random, so that runs in one network
/// namespace do not meet (the kernel's ids are 16 bits).
fn fanout_group_id() -> Result<u16, String> {
    let mut b = [0u8; 2];
    let f = std::fs::File::open("/dev/urandom").map_err(|e| format!("/dev/urandom: {e}"))?;
    std::io::Read::read_exact(&mut &f, &mut b).map_err(|e| format!("/dev/urandom: {e}"))?;
    Ok(u16::from_ne_bytes(b).max(1))
}

/// Checks everything, sets the environment and executes the program
/// (returns only on an error).
fn prepare(args: &[String]) -> Result<(), String> {
    let a = RunArgs::parse(args)?;
    let config = a
        .config
        .as_deref()
        .map(absolute)
        .transpose()?
        .ok_or("--config FILE: the ports and addresses ustack serves")?;
    let mut cfg = Config::from_file(&config).map_err(|e| e.to_string())?;
    for s in &a.sets {
        if s.contains('\n') {
            return Err(format!("--set {s:?}: a line break in a setting"));
        }
        cfg.apply_set(s).map_err(|e| e.to_string())?;
    }
    for w in &cfg.warnings {
        eprintln!("ustack run: warning: {w}");
    }
    let lib = find_lib(a.lib.as_deref())?;
    let mut preload = lib.into_os_string();
    if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|o| !o.is_empty()) {
        preload.push(":");
        preload.push(old);
    }
    std::env::set_var("LD_PRELOAD", &preload);
    std::env::set_var("USTACK_CONFIG", &config);
    std::env::set_var("USTACK_SET", a.sets.join("\n"));
    // One fanout group for the program and every process it forks, so
    // each flow reaches exactly one of them (see runtime::procgroup).
    let group = fanout_group_id()?;
    std::env::set_var("USTACK_GROUP", group.to_string());
    match &a.stats {
        Some(s) => std::env::set_var("USTACK_STATS", absolute(s)?),
        None => std::env::remove_var("USTACK_STATS"),
    }
    let argv: Vec<CString> = a
        .program
        .iter()
        .map(|s| {
            CString::new(OsString::from(s).into_vec()).map_err(|_| format!("{s:?}: a NUL byte"))
        })
        .collect::<Result<_, _>>()?;
    let mut ptrs: Vec<*const libc::c_char> = argv.iter().map(|c| c.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    // SAFETY: `ptrs` is a NULL-terminated array of C strings that live
    // until the call (which returns only on failure).
    unsafe { libc::execvp(ptrs[0], ptrs.as_ptr()) };
    Err(format!(
        "cannot run {}: {}",
        a.program[0],
        std::io::Error::last_os_error()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn command_lines() {
        let a = RunArgs::parse(&v(&[
            "--config",
            "a.ini",
            "--set",
            "dpdk.idle_sleep=10",
            "--",
            "nginx",
            "-g",
            "x",
        ]))
        .unwrap();
        assert_eq!(a.config, Some(PathBuf::from("a.ini")));
        assert_eq!(a.sets, v(&["dpdk.idle_sleep=10"]));
        assert_eq!(a.program, v(&["nginx", "-g", "x"]));
        let a = RunArgs::parse(&v(&[
            "--config=b.ini",
            "--stats=s",
            "redis-server",
            "--port",
            "6379",
        ]))
        .unwrap();
        assert_eq!(a.config, Some(PathBuf::from("b.ini")));
        assert_eq!(a.stats, Some(PathBuf::from("s")));
        assert_eq!(a.program, v(&["redis-server", "--port", "6379"]));
        assert!(RunArgs::parse(&v(&["--config", "a.ini"])).is_err());
        assert!(RunArgs::parse(&v(&["--config"])).is_err());
        assert!(RunArgs::parse(&v(&["--bogus", "--", "x"])).is_err());
    }
}
