//! The differential API fuzzer (see `crates/apidiff`): the input is a
//! sequence of socket, epoll and poll calls, run on the Linux kernel (in a
//! network namespace of this process's own: needs root) and on ustack;
//! any difference in what a call returned is a crash, its two traces
//! printed side by side.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let ops = apidiff::decode(data);
    if let Err(d) = apidiff::check(&ops) {
        panic!("{d}");
    }
});
