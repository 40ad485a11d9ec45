//! The ustack side: [`Net`] over a stack inside an engine's turn, and the
//! engines of the server and the client, each on its own core, joined by a
//! shared-memory link.
//!
//! Engine settings, chosen for the lowest latency per round trip: busy
//! polling (`idle_sleep` 0) and `pkt_tx_delay` 0, so every turn that did
//! work sends what it queued at its end (a turn batches on its own: a
//! received burst of up to 32 frames is answered by one transmit burst).

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use link::{Link, ShmConfig, ShmLink};
use runtime::{AppContext, Application, Engine, EngineConfig};
use stack::{
    Instant, InterfaceConfig, Ipv6Config, SocketError, SocketHandle, Stack, StackConfig, TcpConfig,
};

use crate::net::{Family, Net};

/// The server's address on the link.
pub const SERVER_IP: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
/// The client's.
pub const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 2);
/// Their IPv6 addresses, when the run is over IPv6 (`--family 6`).
pub const SERVER_IP6: Ipv6Addr = Ipv6Addr::new(0xfd99, 0x77, 0, 0, 0, 0, 0, 1);
pub const CLIENT_IP6: Ipv6Addr = Ipv6Addr::new(0xfd99, 0x77, 0, 0, 0, 0, 0, 2);

/// The server's address in `family`.
pub fn server_ip(family: Family) -> IpAddr {
    match family {
        Family::V4 => IpAddr::V4(SERVER_IP),
        Family::V6 => IpAddr::V6(SERVER_IP6),
    }
}
/// The link's MTU. Linux loopback has 65536, and the link and the stack
/// take up to 65535, but the shm link uses its slots in turn, so a ring
/// whose slots span more than the last-level cache sends every frame of a
/// stream through memory: on this machine's 32 MiB L3 one stream measured
/// 44 Gbit/s at 65535 and 32768, 111 at 16384 and 100 at 8192 (1024
/// slots). A smaller MTU only costs ustack more segments than Linux.
pub const MTU: usize = 16384;
/// The initial receive buffer (`net.inet.tcp.recvspace`), where Linux
/// starts at 128 KB and auto-tunes to 6 MB. ustack's auto-tuning doubles
/// the buffer when one read takes half of it, which 64 KB reads stop at
/// 256 KB; 1 MB lets one stream keep the
/// pipe full. Buffers are allocated as data arrives, so an idle connection
/// pays nothing for it.
pub const RECV_SPACE: usize = 1 << 20;
/// Frames per direction of the link: room for one request of each of
/// 1000 connections in flight at once (a slot holds a whole frame, so
/// the link file is 2 × (1024 + 64 spares) × 16 KB).
pub const SLOTS: usize = 1024;

fn sock_err(e: SocketError) -> io::Error {
    io::Error::from_raw_os_error(e.errno())
}

/// [`Net`] on a stack, for the length of one application poll.
pub struct UsNet<'a, 'b> {
    pub ctx: &'a mut AppContext<'b>,
}

impl Net for UsNet<'_, '_> {
    type Sock = SocketHandle;

    fn now(&self) -> Duration {
        Duration::from_micros(self.ctx.now.total_micros())
    }

    fn tcp_listen(&mut self, at: SocketAddr) -> io::Result<SocketHandle> {
        self.ctx.stack.tcp_listen(at, 4096).map_err(sock_err)
    }

    fn tcp_accept(&mut self, listener: SocketHandle) -> io::Result<SocketHandle> {
        let (h, _) = self.ctx.stack.tcp_accept(listener).map_err(sock_err)?;
        let ctx = &mut *self.ctx;
        ctx.stack
            .tcp_set_nodelay(ctx.now, h, true, ctx.sink)
            .map_err(sock_err)?;
        Ok(h)
    }

    fn tcp_connect(&mut self, to: SocketAddr) -> io::Result<SocketHandle> {
        let ctx = &mut *self.ctx;
        let h = ctx
            .stack
            .tcp_connect(ctx.now, to, None, ctx.sink)
            .map_err(sock_err)?;
        ctx.stack
            .tcp_set_nodelay(ctx.now, h, true, ctx.sink)
            .map_err(sock_err)?;
        Ok(h)
    }

    fn tcp_send(&mut self, s: SocketHandle, data: &[u8]) -> io::Result<usize> {
        let ctx = &mut *self.ctx;
        ctx.stack
            .tcp_send(ctx.now, s, data, ctx.sink)
            .map_err(sock_err)
    }

    fn tcp_recv(&mut self, s: SocketHandle, buf: &mut [u8]) -> io::Result<usize> {
        let ctx = &mut *self.ctx;
        ctx.stack
            .tcp_recv(ctx.now, s, buf, ctx.sink)
            .map_err(sock_err)
    }

    fn tcp_close(&mut self, s: SocketHandle) {
        let ctx = &mut *self.ctx;
        let _ = ctx.stack.tcp_close(ctx.now, s, ctx.sink);
    }

    fn udp_bind(&mut self, at: SocketAddr) -> io::Result<SocketHandle> {
        self.ctx.stack.udp_bind(at).map_err(sock_err)
    }

    fn udp_send_to(&mut self, s: SocketHandle, data: &[u8], to: SocketAddr) -> io::Result<usize> {
        let ctx = &mut *self.ctx;
        ctx.stack
            .udp_send_to(ctx.now, s, to, None, data, ctx.sink)
            .map_err(sock_err)
    }

    fn udp_recv_from(
        &mut self,
        s: SocketHandle,
        buf: &mut [u8],
    ) -> io::Result<(usize, SocketAddr)> {
        let got = self.ctx.stack.udp_recv_from(s, buf).map_err(sock_err)?;
        Ok((got.len, got.meta.src))
    }

    fn ready(&mut self, out: &mut Vec<SocketHandle>) {
        self.ctx.stack.drain_ready(out);
    }
}

/// The engine timing of both sides (see the module doc), with the stack's
/// timers run every `timer_tick`.
pub fn engine_config(timer_tick: Duration) -> EngineConfig {
    EngineConfig {
        idle_sleep: Duration::ZERO,
        pkt_tx_delay: Duration::ZERO,
        timer_tick,
        // Shared memory: no software GSO, as `[portN] gso` on shm.
        soft_gso_ports: 0,
    }
}

/// The engines' usual timer tick.
pub const TIMER_TICK: Duration = Duration::from_millis(1);

/// A stack with one interface, `ip`/24 (and `ip6`/64 when given), on
/// `link`.
pub fn stack_on(
    link: &ShmLink,
    ip: Ipv4Addr,
    ip6: Option<Ipv6Addr>,
    seed: u64,
) -> io::Result<Stack> {
    let defaults = StackConfig::default();
    let mut stack = Stack::new(StackConfig {
        seed,
        tcp: TcpConfig {
            recv_space: RECV_SPACE,
            ..defaults.tcp.clone()
        },
        // Nobody else is on the link: the addresses are usable at once.
        ip6_dad_count: 0,
        ..defaults
    });
    stack
        .add_interface(&InterfaceConfig {
            mtu: MTU.min(link.info().mtu),
            ..InterfaceConfig::new("shm0", link.info().mac, ip, 24)
        })
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
    if let Some(ip6) = ip6 {
        let v6 = Ipv6Config {
            addrs: vec![(ip6, 64)],
            gateway: None,
        };
        stack
            .enable_ipv6(Instant::ZERO, stack::IfaceId(0), &v6)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
    }
    Ok(stack)
}

/// The link's layout.
pub fn shm_config() -> ShmConfig {
    ShmConfig::new(MTU, SLOTS)
}

/// The server side's engine: creates the link file at `path`.
pub fn server_engine(
    path: &Path,
    seed: u64,
    tick: Duration,
    family: Family,
) -> io::Result<Engine<ShmLink>> {
    let link = ShmLink::create(path, &shm_config())?;
    let ip6 = (family == Family::V6).then_some(SERVER_IP6);
    let stack = stack_on(&link, SERVER_IP, ip6, seed)?;
    Ok(Engine::new(stack, vec![link], engine_config(tick)))
}

/// The client side's engine: opens the link file the server made.
pub fn client_engine(
    path: &Path,
    seed: u64,
    tick: Duration,
    family: Family,
) -> io::Result<Engine<ShmLink>> {
    let mut link = ShmLink::open_wait(path, Duration::from_secs(10))?;
    // Both ends are attached: nobody else needs the name.
    let _ = link.unlink();
    let ip6 = (family == Family::V6).then_some(CLIENT_IP6);
    let stack = stack_on(&link, CLIENT_IP, ip6, seed)?;
    Ok(Engine::new(stack, vec![link], engine_config(tick)))
}

/// What a stack holds for its connections: the TCP connections' own memory
/// (`Stack::tcp_memory`) and the link's frame slots the engine holds.
#[derive(Debug, Clone, Copy, Default)]
pub struct UsMemory {
    pub tcp_bytes: usize,
    pub tcp_conns: usize,
    pub pool_bytes_held: usize,
}

pub fn memory(engine: &Engine<ShmLink>) -> UsMemory {
    let (tcp_bytes, tcp_conns) = engine.stack.tcp_memory();
    let pool_bytes_held = engine
        .ports()
        .map(|l| {
            let (tx, rx) = l.frames_held();
            // Slots hold a whole frame each.
            (tx + rx) * (l.info().mtu + link::shm::FRAME_OVERHEAD)
        })
        .sum();
    UsMemory {
        tcp_bytes,
        tcp_conns,
        pool_bytes_held,
    }
}

/// An [`Application`] from a closure over [`UsNet`].
pub struct NetApp<F: FnMut(&mut UsNet<'_, '_>) -> bool>(pub F);

impl<F: FnMut(&mut UsNet<'_, '_>) -> bool> Application for NetApp<F> {
    fn poll(&mut self, ctx: &mut AppContext<'_>) -> bool {
        (self.0)(&mut UsNet { ctx })
    }
}

/// Runs `f` once inside an application poll of `engine` (to open sockets
/// before the loop starts).
pub fn with_net<T>(engine: &mut Engine<ShmLink>, f: impl FnOnce(&mut UsNet<'_, '_>) -> T) -> T {
    let mut f = Some(f);
    let mut out = None;
    {
        let mut app = NetApp(|net: &mut UsNet<'_, '_>| {
            if let Some(f) = f.take() {
                out = Some(f(net));
            }
            true
        });
        engine.turn(&mut app);
    }
    out.expect("the application ran")
}
