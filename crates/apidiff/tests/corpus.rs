//! Replays the kept corpus of the differential API fuzzer
//! (`fuzz/seeds/api_diff`, written by `make fuzz-long` and by hand) on
//! stable Rust: every sequence must give the same trace on ustack as on
//! the Linux kernel.  Needs root (the kernel's side runs in a network
//! namespace of its own).

use std::path::PathBuf;

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/api_diff")
}

fn corpus() -> Vec<(String, Vec<u8>)> {
    let dir = corpus_dir();
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| {
            let p = e.expect("a directory entry").path();
            let name = p
                .file_name()
                .expect("a file name")
                .to_string_lossy()
                .into_owned();
            (name, std::fs::read(&p).expect("a corpus file"))
        })
        .collect();
    files.sort();
    files
}

fn require_root() {
    // SAFETY: geteuid takes no arguments and cannot fail.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "this test needs root: the kernel's side runs in a network namespace of its own"
    );
}

/// The `seed_*` files are what `apidiff::seeds` encode to
/// (`APIDIFF_WRITE_SEEDS=1` writes them).
#[test]
fn the_seed_files_are_the_seeds() {
    let dir = corpus_dir();
    for (name, ops) in apidiff::seeds::seeds() {
        let path = dir.join(name);
        let bytes = apidiff::encode(&ops);
        if std::env::var_os("APIDIFF_WRITE_SEEDS").is_some() {
            std::fs::create_dir_all(&dir).expect("the corpus directory");
            std::fs::write(&path, &bytes).expect("a seed file");
        }
        let kept = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(
            kept, bytes,
            "{name} is not what apidiff::seeds says (APIDIFF_WRITE_SEEDS=1 writes it)"
        );
    }
}

#[test]
fn the_kept_corpus_gives_the_same_trace_on_ustack_and_linux() {
    require_root();
    let files = corpus();
    assert!(
        files.len() >= 10,
        "the kept corpus has {} sequences",
        files.len()
    );
    let mut failures = Vec::new();
    let show = std::env::var("APIDIFF_SHOW").ok();
    for (name, data) in &files {
        let ops = apidiff::decode(data);
        // `APIDIFF_SHOW=NAME ... -- --nocapture` prints a sequence's trace.
        if show.as_deref() == Some(name.as_str()) {
            println!(
                "{name} on Linux:\n{}",
                apidiff::run_linux(&ops, false).join("\n")
            );
            println!(
                "{name} on ustack:\n{}",
                apidiff::run_ustack(&ops).join("\n")
            );
        }
        if let Err(d) = apidiff::check(&ops) {
            failures.push(format!("{name}:\n{d}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} sequences differ:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
}

/// `APIDIFF_RANDOM=N APIDIFF_SEED=S cargo test -p apidiff --test corpus
/// -- --ignored --nocapture` runs N random sequences drawn from seed S
/// (the same ones for the same S), prints each difference (its bytes
/// saved under APIDIFF_SAVE) and fails if there was one.  `make
/// fuzz-short` runs it with a fixed seed; ignored in a plain `cargo test`
/// for its length.
#[test]
#[ignore]
fn random_sequences() {
    require_root();
    let n: u64 = std::env::var("APIDIFF_RANDOM")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let mut x: u64 = std::env::var("APIDIFF_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let mut found = 0;
    for i in 0..n {
        let mut data = vec![0u8; 3 * 40];
        for b in &mut data {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = (x >> 24) as u8;
        }
        let ops = apidiff::decode(&data);
        if let Err(d) = apidiff::check(&ops) {
            found += 1;
            println!("sequence {i}:\n{d}");
            let dir = std::env::var("APIDIFF_SAVE").unwrap_or_else(|_| "/tmp/apidiff-found".into());
            let _ = std::fs::create_dir_all(&dir);
            let _ = std::fs::write(format!("{dir}/seq{i}"), &data);
        }
    }
    println!("{found} of {n} sequences differ");
    assert_eq!(found, 0, "{found} of {n} random sequences differ (above)");
}
