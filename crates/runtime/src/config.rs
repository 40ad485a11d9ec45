//! placeholder replaced by the config work
