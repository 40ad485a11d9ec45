//! What the library does not handle, said once per name on stderr.

use std::collections::HashSet;
use std::sync::Mutex;

static SAID: Mutex<Option<HashSet<String>>> = Mutex::new(None);

/// Prints `libustack_preload: {what}` the first time `what` comes up.
pub fn once(what: impl Into<String>) {
    let what = what.into();
    let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
    if said.get_or_insert_with(HashSet::new).insert(what.clone()) {
        eprintln!("libustack_preload[{}]: {what}", std::process::id());
    }
}
