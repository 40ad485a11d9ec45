//! With the `dpdk` feature: finds libdpdk through pkg-config, compiles the C
//! shim over DPDK's inline fast path (src/dpdk/shim.c) into a static
//! library, and links it and libdpdk.  Without the feature it does nothing,
//! so the default build needs no DPDK.

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if env::var_os("CARGO_FEATURE_LIBXDP").is_some() {
        xdp_program();
    }
    if env::var_os("CARGO_FEATURE_DPDK").is_some() {
        dpdk();
    }
}

/// With the `libxdp` feature: compiles ustack's XDP program
/// (bpf/ustack_xdp.c) with clang into a BPF object with BTF (libxdp reads
/// its run-priority metadata from it; src/af_xdp/dispatched.rs embeds it),
/// and links libxdp and libbpf.
fn xdp_program() {
    println!("cargo:rerun-if-changed=bpf/ustack_xdp.c");
    println!("cargo:rerun-if-env-changed=BPF_CLANG");
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let clang = env::var("BPF_CLANG").unwrap_or_else(|_| "clang".to_string());
    // The multiarch include directory holds <asm/types.h> for -target bpf.
    let multiarch = format!(
        "/usr/include/{}-linux-gnu",
        env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_else(|_| "x86_64".to_string())
    );
    run(
        Command::new(&clang)
            .args(["-O2", "-g", "-target", "bpf", "-Wall", "-Wextra", "-Werror"])
            .arg(format!("-I{multiarch}"))
            .args(["-c", "bpf/ustack_xdp.c", "-o"])
            .arg(out.join("ustack_xdp.o")),
        "compiling bpf/ustack_xdp.c with clang (the libxdp feature needs clang, libbpf-dev, libxdp-dev)",
    );
}

fn dpdk() {
    println!("cargo:rerun-if-changed=src/dpdk/shim.c");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-env-changed=CC");

    let cflags = pkg_config(&["--cflags", "libdpdk"]);
    let libs = pkg_config(&["--libs", "libdpdk"]);

    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let obj = out.join("ustack_dpdk_shim.o");
    let lib = out.join("libustack_dpdk_shim.a");
    let cc = env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let mut cmd = Command::new(&cc);
    cmd.args(["-c", "-O2", "-g", "-fPIC", "-Wall", "-Wextra", "-Werror"])
        // DPDK's headers trip -Wextra in places that are not ours.
        .args(["-Wno-unused-parameter", "-Wno-sign-compare"])
        .args(split(&cflags))
        .arg("src/dpdk/shim.c")
        .arg("-o")
        .arg(&obj);
    run(&mut cmd, "compiling src/dpdk/shim.c");
    let _ = std::fs::remove_file(&lib);
    let ar = env::var("AR").unwrap_or_else(|_| "ar".to_string());
    run(
        Command::new(ar).arg("crs").arg(&lib).arg(&obj),
        "archiving the DPDK shim",
    );
    println!("cargo:rustc-link-search=native={}", out.display());
    println!("cargo:rustc-link-lib=static=ustack_dpdk_shim");

    // libdpdk's own link line: library directories, the rte_* libraries,
    // and linker flags such as --as-needed that must keep their place.
    let words = split(&libs);
    for w in words {
        if let Some(dir) = w.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={dir}");
        } else if let Some(name) = w.strip_prefix("-l") {
            println!("cargo:rustc-link-lib={name}");
        } else if w.starts_with("-Wl,") {
            println!("cargo:rustc-link-arg={w}");
        } else if w == "-pthread" {
            println!("cargo:rustc-link-arg=-pthread");
        } else if w.ends_with(".a") || w.ends_with(".so") {
            println!("cargo:rustc-link-arg={w}");
        }
    }
}

fn pkg_config(args: &[&str]) -> String {
    let out = Command::new("pkg-config").args(args).output();
    match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_string(),
        Ok(o) => panic!(
            "the `dpdk` feature needs libdpdk (Debian: apt-get install libdpdk-dev pkg-config): \
             pkg-config {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => panic!(
            "the `dpdk` feature needs pkg-config and libdpdk (Debian: apt-get install \
             pkg-config libdpdk-dev): cannot run pkg-config: {e}"
        ),
    }
}

fn split(s: &str) -> Vec<String> {
    s.split_whitespace().map(str::to_string).collect()
}

fn run(cmd: &mut Command, what: &str) {
    match cmd.status() {
        Ok(s) if s.success() => {}
        Ok(s) => panic!("{what}: {cmd:?} exited with {s}"),
        Err(e) => panic!("{what}: cannot run {cmd:?}: {e}"),
    }
}
