//! Compiles F-Stack's variadic calls (src/ff_variadic.c: ff_ioctl,
//! ff_fcntl and the log of ff_log.h, which stable Rust cannot define)
//! against the installed headers' declarations (include/fstack), archives
//! them, links the whole archive into every form of the library, and adds
//! their names to libustack.so's exported symbols (rustc's own version
//! script exports only Rust's).

use std::env;
use std::path::PathBuf;
use std::process::Command;

/// What src/ff_variadic.c defines for programs.
const EXPORTS: &[&str] = &[
    "ff_ioctl",
    "ff_fcntl",
    "ff_log",
    "ff_vlog",
    "ff_log_set_global_level",
    "ff_log_set_level",
    "ff_log_reset_stream",
    "ff_openlog_stream",
    "ff_log_open_set",
    "ff_log_close",
];

fn main() {
    let src = "src/ff_variadic.c";
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed={src}");
    println!("cargo:rerun-if-changed=../../include/fstack");
    println!("cargo:rerun-if-env-changed=CC");
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let obj = out.join("ff_variadic.o");
    let lib = out.join("libustack_ff_variadic.a");
    let cc = env::var("CC").unwrap_or_else(|_| "cc".to_string());
    run(
        Command::new(&cc)
            .args(["-c", "-O2", "-g", "-fPIC", "-std=gnu11"])
            .args(["-Wall", "-Wextra", "-Werror"])
            .arg("-I../../include/fstack")
            .arg(src)
            .arg("-o")
            .arg(&obj),
        "compiling src/ff_variadic.c",
    );
    let _ = std::fs::remove_file(&lib);
    let ar = env::var("AR").unwrap_or_else(|_| "ar".to_string());
    run(
        Command::new(ar).arg("crs").arg(&lib).arg(&obj),
        "archiving src/ff_variadic.c",
    );
    println!("cargo:rustc-link-search=native={}", out.display());
    // Whole: nothing in Rust calls these, and they must all be there.
    println!("cargo:rustc-link-lib=static:+whole-archive=ustack_ff_variadic");
    let map = out.join("ff_variadic.map");
    let globals: String = EXPORTS.iter().map(|s| format!("{s}; ")).collect();
    std::fs::write(&map, format!("{{ global: {globals}}};\n")).expect("writing the version script");
    println!(
        "cargo:rustc-cdylib-link-arg=-Wl,--version-script={}",
        map.display()
    );
}

fn run(cmd: &mut Command, what: &str) {
    match cmd.status() {
        Ok(s) if s.success() => {}
        Ok(s) => panic!("{what}: {cmd:?} failed ({s})"),
        Err(e) => {
            panic!("{what}: cannot run {cmd:?}: {e} (a C compiler is needed: apt-get install gcc)")
        }
    }
}
