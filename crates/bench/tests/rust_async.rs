//! The `rust_async` way's programs (`ustack-bench server|client --stack
//! rust_async`), run as `ustack-bench run` runs them: a server and a client
//! process joined by a shared-memory link; every workload the way's rows
//! use must make round trips (or connections) and answer with the client's
//! `result` line, and the server must have served at least what the client
//! counted.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const EXE: &str = env!("CARGO_BIN_EXE_ustack-bench");

fn spawn(args: &[&str]) -> Child {
    Command::new(EXE)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ustack-bench starts")
}

/// The first line of `child`'s standard output that starts with `prefix`.
fn line(child: &mut Child, prefix: &str) -> String {
    let out = child.stdout.as_mut().expect("piped");
    let mut r = BufReader::new(out);
    let mut l = String::new();
    loop {
        l.clear();
        let n = r.read_line(&mut l).expect("reads its output");
        assert!(n > 0, "no {prefix:?} line before the end of the output");
        if l.starts_with(prefix) {
            return l.trim().to_string();
        }
    }
}

fn value(line: &str, key: &str) -> u64 {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {line:?}"))
}

/// Runs `workload` once; returns the client's (units, errors) and the
/// requests the server says it served.
fn run(workload: &str, family: &str, port: u16) -> (u64, u64, u64) {
    let link = format!(
        "/dev/shm/ustack-bench-test-async-{}-{port}.link",
        std::process::id()
    );
    let port_s = port.to_string();
    let common = [
        "--stack",
        "rust_async",
        "--family",
        family,
        "--port",
        &port_s,
        "--link",
        &link,
    ];
    let mut server = spawn(&[&["server"][..], &common].concat());
    assert_eq!(line(&mut server, "ready"), "ready");
    let mut client = spawn(
        &[
            &["client"][..],
            &common,
            &[
                "--workload",
                workload,
                "--warmup-ms",
                "200",
                "--window-ms",
                "500",
            ],
        ]
        .concat(),
    );
    let result = line(&mut client, "result");
    drop(client.stdin.take());
    let status = client.wait().expect("the client ends");
    assert!(status.success(), "{workload}: client {status}");
    // The stop request: standard input closed.
    drop(server.stdin.take());
    let deadline = Instant::now() + Duration::from_secs(10);
    while server.try_wait().expect("waits").is_none() {
        assert!(Instant::now() < deadline, "the server did not stop");
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut err = String::new();
    std::io::Read::read_to_string(server.stderr.as_mut().expect("piped"), &mut err)
        .expect("reads the server's errors");
    let served = err
        .lines()
        .find_map(|l| {
            l.strip_prefix("ustack-bench: rust_async server: ")?
                .strip_suffix(" requests served")?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no count of requests served in {err:?}"));
    let _ = std::fs::remove_file(&link);
    (value(&result, "units"), value(&result, "errors"), served)
}

#[test]
fn every_workload_of_the_way_makes_progress() {
    for (i, (workload, family)) in [
        ("pingpong:10", "4"),
        ("pingpong:10", "6"),
        ("short:8", "4"),
        ("udp:10", "4"),
        ("udp:10", "6"),
    ]
    .into_iter()
    .enumerate()
    {
        let (units, errors, served) = run(workload, family, 26000 + 10 * i as u16);
        assert!(
            units > 0,
            "{workload} over IPv{family}: no unit in the window"
        );
        assert!(
            served >= units,
            "{workload} over IPv{family}: the server served {served}, the client counted {units}"
        );
        if !workload.starts_with("udp") {
            // A TCP error is a failed connection: none is expected.
            assert_eq!(errors, 0, "{workload} over IPv{family}");
        }
    }
}

#[test]
fn a_workload_the_way_has_no_client_for_is_refused_by_name() {
    let out = Command::new(EXE)
        .args([
            "client",
            "--stack",
            "rust_async",
            "--workload",
            "stream",
            "--link",
            "/dev/shm/ustack-bench-test-async-none.link",
        ])
        .stdin(Stdio::null())
        .output()
        .expect("runs");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no rust_async client for the workload stream"),
        "{err}"
    );
}
