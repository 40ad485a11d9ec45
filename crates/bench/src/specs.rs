//! The workloads of `ustack-bench run`: what each row measures, through
//! which way into ustack, its unit and its goal.

use crate::net::Family;

/// How a figure compares with the goal.
#[derive(Debug, Clone, Copy)]
pub enum Goal {
    /// ustack at least this many times the kernel.
    RatioAtLeast(f64),
    /// ustack's figure below this.
    Below(f64),
    None,
}

impl Goal {
    pub fn describe(self) -> String {
        match self {
            Goal::RatioAtLeast(r) if r <= 1.0 => ">= kernel".into(),
            Goal::RatioAtLeast(r) => format!(">= {r}x"),
            Goal::Below(v) => format!("< {v}"),
            Goal::None => "-".into(),
        }
    }

    pub fn met(self, ustack: Option<f64>, ratio: Option<f64>) -> Option<bool> {
        match self {
            Goal::RatioAtLeast(r) => ratio.map(|x| x >= r),
            Goal::Below(v) => ustack.map(|x| x < v),
            Goal::None => None,
        }
    }
}

/// The way a program reaches ustack (each row's ustack side), beside the
/// same program on the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Way {
    /// `Stack` calls inside the engine's turn (`us.rs`): the protocol
    /// core with no socket layer.
    Core,
    /// `ustack run` (`libustack_preload.so`) under an unmodified Linux
    /// program.
    Preload,
    /// The C ABI (`ustack.h`) with its epoll: `ustack_epoll_wait` inside
    /// `ustack_run`'s loop.
    CapiEpoll,
    /// F-Stack's `ff_*` layer with kqueue: `ff_kevent` inside `ff_run`'s
    /// loop (the kernel's side: the same program on epoll).
    FfKqueue,
    /// The async Rust API (`crates/rt` over the socket layer): a task per
    /// connection inside the engine's loop (`rust_async.rs`); the kernel's
    /// side is the core rows' program on epoll.
    RustAsync,
}

impl Way {
    /// The name in the table and the JSON.
    pub fn name(self) -> &'static str {
        match self {
            Way::Core => "core",
            Way::Preload => "preload",
            Way::CapiEpoll => "capi_epoll",
            Way::FfKqueue => "ff_kqueue",
            Way::RustAsync => "rust_async",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A client workload measured over a time window, both stacks.
    Rate,
    /// Idle connections' memory, both stacks.
    Memory,
    /// A program people run (nginx) under `ustack run` and on the kernel,
    /// driven by a load generator (`nginx.rs`).
    Program,
    /// One TCP stream into iperf3 under `ustack run` and on the kernel,
    /// over a veth with its default offloads (`stream.rs`).
    Stream,
    /// Callgrind, ustack only.
    Instructions,
    /// redis-server under redis-benchmark, or Knot DNS under dnsperf, under
    /// `ustack run` and on the kernel over a veth (`servers.rs`).
    Server,
    /// Callgrind on the server of the C ping-pong through `way` (a real
    /// serving engine: clock reads, idle turns and the API included),
    /// ustack only.
    CInstructions,
    /// A client workload measured over a time window, both stacks, by the
    /// C programs (`crates/bench/c/pingpong.c`, `cprog.rs`) through `way`.
    CRate,
}

pub struct Spec {
    pub name: &'static str,
    pub kind: Kind,
    /// How the programs reach ustack.
    pub way: Way,
    /// The client's `--workload`.
    pub workload: &'static str,
    pub unit: &'static str,
    /// From units per second to the unit shown.
    pub scale: f64,
    pub goal: Goal,
    /// Higher figures are better (else lower).
    pub higher_better: bool,
    /// IPv4 or IPv6 (rate and instruction workloads).
    pub family: Family,
}

// The core rate rows that the async Rust way runs too (`rust_async`).
const CORE_PINGPONG_100: Spec = Spec {
    name: "tcp_pingpong_64b_100conn",
    kind: Kind::Rate,
    way: Way::Core,
    workload: "pingpong:100",
    unit: "round trips/s",
    scale: 1.0,
    goal: Goal::RatioAtLeast(10.0),
    higher_better: true,
    family: Family::V4,
};

const CORE_PINGPONG_100_V6: Spec = Spec {
    name: "tcp_pingpong_64b_100conn_ipv6",
    kind: Kind::Rate,
    way: Way::Core,
    workload: "pingpong:100",
    unit: "round trips/s",
    scale: 1.0,
    goal: Goal::RatioAtLeast(10.0),
    higher_better: true,
    family: Family::V6,
};

const CORE_SHORT_CONN: Spec = Spec {
    name: "tcp_short_conn",
    kind: Kind::Rate,
    way: Way::Core,
    workload: "short:64",
    unit: "connections/s",
    scale: 1.0,
    goal: Goal::RatioAtLeast(10.0),
    higher_better: true,
    family: Family::V4,
};

const CORE_UDP_REQRESP: Spec = Spec {
    name: "udp_reqresp_64b",
    kind: Kind::Rate,
    way: Way::Core,
    workload: "udp:100",
    unit: "round trips/s",
    scale: 1.0,
    goal: Goal::RatioAtLeast(10.0),
    higher_better: true,
    family: Family::V4,
};

const CORE_UDP_REQRESP_V6: Spec = Spec {
    name: "udp_reqresp_64b_ipv6",
    kind: Kind::Rate,
    way: Way::Core,
    workload: "udp:100",
    unit: "requests/s",
    scale: 1.0,
    goal: Goal::RatioAtLeast(10.0),
    higher_better: true,
    family: Family::V6,
};

/// A core row through the async Rust API: the same workload and unit,
/// no goal (the kernel's side is the core row's program).
const fn rust_async(core: Spec) -> Spec {
    Spec {
        way: Way::RustAsync,
        goal: Goal::None,
        ..core
    }
}

pub const SPECS: &[Spec] = &[
    Spec {
        name: "tcp_pingpong_64b_1conn",
        kind: Kind::Rate,
        way: Way::Core,
        workload: "pingpong:1",
        unit: "round trips/s",
        scale: 1.0,
        goal: Goal::None,
        higher_better: true,
        family: Family::V4,
    },
    CORE_PINGPONG_100,
    CORE_PINGPONG_100_V6,
    Spec {
        name: "tcp_pingpong_64b_1000conn",
        kind: Kind::Rate,
        way: Way::Core,
        workload: "pingpong:1000",
        unit: "round trips/s",
        scale: 1.0,
        goal: Goal::RatioAtLeast(10.0),
        higher_better: true,
        family: Family::V4,
    },
    CORE_SHORT_CONN,
    Spec {
        name: "tcp_pingpong_64b_100conn",
        kind: Kind::CRate,
        way: Way::CapiEpoll,
        workload: "pingpong:100",
        unit: "round trips/s",
        scale: 1.0,
        goal: Goal::RatioAtLeast(10.0),
        higher_better: true,
        family: Family::V4,
    },
    Spec {
        name: "tcp_short_conn",
        kind: Kind::CRate,
        way: Way::CapiEpoll,
        workload: "short:64",
        unit: "connections/s",
        scale: 1.0,
        goal: Goal::RatioAtLeast(5.0),
        higher_better: true,
        family: Family::V4,
    },
    Spec {
        name: "tcp_pingpong_64b_100conn",
        kind: Kind::CRate,
        way: Way::FfKqueue,
        workload: "pingpong:100",
        unit: "round trips/s",
        scale: 1.0,
        goal: Goal::RatioAtLeast(10.0),
        higher_better: true,
        family: Family::V4,
    },
    Spec {
        name: "tcp_short_conn",
        kind: Kind::CRate,
        way: Way::FfKqueue,
        workload: "short:64",
        unit: "connections/s",
        scale: 1.0,
        goal: Goal::None,
        higher_better: true,
        family: Family::V4,
    },
    Spec {
        name: "tcp_pingpong_64b_100conn",
        kind: Kind::CRate,
        way: Way::Preload,
        workload: "pingpong:100",
        unit: "round trips/s",
        scale: 1.0,
        goal: Goal::None,
        higher_better: true,
        family: Family::V4,
    },
    Spec {
        name: "tcp_short_conn",
        kind: Kind::CRate,
        way: Way::Preload,
        workload: "short:64",
        unit: "connections/s",
        scale: 1.0,
        goal: Goal::None,
        higher_better: true,
        family: Family::V4,
    },
    rust_async(CORE_PINGPONG_100),
    rust_async(CORE_PINGPONG_100_V6),
    rust_async(CORE_SHORT_CONN),
    rust_async(CORE_UDP_REQRESP),
    rust_async(CORE_UDP_REQRESP_V6),
    Spec {
        name: "tcp_stream_1conn",
        kind: Kind::Rate,
        way: Way::Core,
        workload: "stream",
        unit: "Gbit/s",
        scale: 8e-9,
        goal: Goal::RatioAtLeast(1.0),
        higher_better: true,
        family: Family::V4,
    },
    Spec {
        name: "tcp_stream_preload_af_packet",
        kind: Kind::Stream,
        way: Way::Preload,
        workload: "iperf3:af_packet",
        unit: "Gbit/s",
        scale: 1.0,
        goal: Goal::RatioAtLeast(1.0),
        higher_better: true,
        family: Family::V4,
    },
    Spec {
        name: "tcp_stream_preload_af_packet_send",
        kind: Kind::Stream,
        way: Way::Preload,
        workload: "iperf3:af_packet:send",
        unit: "Gbit/s",
        scale: 1.0,
        goal: Goal::RatioAtLeast(1.0),
        higher_better: true,
        family: Family::V4,
    },
    CORE_UDP_REQRESP,
    CORE_UDP_REQRESP_V6,
    Spec {
        name: "nginx_preload_keepalive_600b",
        kind: Kind::Program,
        way: Way::Preload,
        workload: "nginx:rps=both",
        unit: "requests/s",
        scale: 1.0,
        goal: Goal::RatioAtLeast(2.0),
        higher_better: true,
        family: Family::V4,
    },
    Spec {
        name: "nginx_preload_keepalive_600b_af_xdp",
        kind: Kind::Program,
        way: Way::Preload,
        workload: "nginx:rps=both:link=af_xdp",
        unit: "requests/s",
        scale: 1.0,
        goal: Goal::RatioAtLeast(2.0),
        higher_better: true,
        family: Family::V4,
    },
    Spec {
        name: "nginx_preload_keepalive_600b_rps_server",
        kind: Kind::Program,
        way: Way::Preload,
        workload: "nginx:rps=server",
        unit: "requests/s",
        scale: 1.0,
        goal: Goal::None,
        higher_better: true,
        family: Family::V4,
    },
    Spec {
        name: "redis_set_64b",
        kind: Kind::Server,
        way: Way::Preload,
        workload: "redis:set",
        unit: "requests/s",
        scale: 1.0,
        goal: Goal::None,
        higher_better: true,
        family: Family::V4,
    },
    Spec {
        name: "redis_get_64b",
        kind: Kind::Server,
        way: Way::Preload,
        workload: "redis:get",
        unit: "requests/s",
        scale: 1.0,
        goal: Goal::None,
        higher_better: true,
        family: Family::V4,
    },
    Spec {
        name: "dns_knot_udp",
        kind: Kind::Server,
        way: Way::Preload,
        workload: "dns:knot",
        unit: "queries/s",
        scale: 1.0,
        goal: Goal::None,
        higher_better: true,
        family: Family::V4,
    },
    Spec {
        name: "mem_per_idle_conn",
        kind: Kind::Memory,
        way: Way::Core,
        workload: "idle:10000",
        unit: "bytes",
        scale: 1.0,
        goal: Goal::RatioAtLeast(2.0),
        higher_better: false,
        family: Family::V4,
    },
    Spec {
        name: "mem_per_idle_conn_100k",
        kind: Kind::Memory,
        way: Way::Core,
        workload: "idle:100000",
        unit: "bytes",
        scale: 1.0,
        goal: Goal::RatioAtLeast(2.0),
        higher_better: false,
        family: Family::V4,
    },
    Spec {
        name: "instr_per_pingpong",
        kind: Kind::Instructions,
        way: Way::Core,
        workload: "pingpong:1",
        unit: "instructions",
        scale: 1.0,
        goal: Goal::Below(1500.0),
        higher_better: false,
        family: Family::V4,
    },
    Spec {
        name: "instr_per_pingpong_ipv6",
        kind: Kind::Instructions,
        way: Way::Core,
        workload: "pingpong:1",
        unit: "instructions",
        scale: 1.0,
        goal: Goal::Below(1500.0),
        higher_better: false,
        family: Family::V6,
    },
    Spec {
        name: "instr_per_pingpong",
        kind: Kind::CInstructions,
        way: Way::CapiEpoll,
        workload: "pingpong:100",
        unit: "instructions",
        scale: 1.0,
        goal: Goal::None,
        higher_better: false,
        family: Family::V4,
    },
    Spec {
        name: "instr_per_pingpong",
        kind: Kind::CInstructions,
        way: Way::FfKqueue,
        workload: "pingpong:100",
        unit: "instructions",
        scale: 1.0,
        goal: Goal::None,
        higher_better: false,
        family: Family::V4,
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    /// Every rate workload of the core rows among the async way's
    /// (ping-pong at 100 connections, short connections, UDP, both
    /// families where the core has them) has its `rust_async` row.
    #[test]
    fn the_async_way_runs_the_core_rows_it_can() {
        let has = |name: &str, way: Way| SPECS.iter().any(|s| s.name == name && s.way == way);
        for core in SPECS
            .iter()
            .filter(|s| s.way == Way::Core && s.kind == Kind::Rate)
        {
            let async_client = matches!(core.workload, "pingpong:100" | "udp:100" | "short:64");
            assert_eq!(
                has(core.name, Way::RustAsync),
                async_client,
                "{} ({})",
                core.name,
                core.workload
            );
        }
        assert!(SPECS
            .iter()
            .filter(|s| s.way == Way::RustAsync)
            .all(|s| s.kind == Kind::Rate));
    }
}
