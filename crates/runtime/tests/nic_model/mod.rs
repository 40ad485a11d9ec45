//! A peer and server engines behind a model NIC
//! (`MemoryLink::multi_queue`), shared by the tests of how the engines
//! split traffic over its queues (`rss_nic.rs` over IPv4, `ipv6_steer.rs`
//! over IPv6): every node echoes what its accepted connections send and
//! drives connections it opens itself.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use link::{MemoryConfig, MemoryLink, QueueChooser};
use runtime::engine::{mesh, Dispatcher};
use runtime::{AppContext, Application, Engine, EngineConfig};
use stack::steer::{FlowSteering, RssSteering};
use stack::{SocketError, SocketHandle, Stack};

/// Echoes what its accepted connections send (accepting on `listener`),
/// and drives connections it opens itself: each sends `hello` and waits
/// for the echo, which must be `hello`.
pub struct EchoNode {
    pub listener: Option<SocketHandle>,
    pub echo: Vec<SocketHandle>,
    pub accepted: usize,
    /// Connections still to open, and where to.
    pub to_open: usize,
    pub open_to: Option<SocketAddr>,
    pub opened: Vec<(SocketHandle, Vec<u8>, bool)>,
    pub echoed: usize,
    pub hello: &'static [u8],
}

impl EchoNode {
    /// A node listening on `addr` in `engine`'s stack.
    pub fn listening(
        engine: &mut Engine<MemoryLink>,
        addr: SocketAddr,
        hello: &'static [u8],
    ) -> EchoNode {
        EchoNode {
            listener: Some(engine.stack.tcp_listen(addr, 128).unwrap()),
            echo: Vec::new(),
            accepted: 0,
            to_open: 0,
            open_to: None,
            opened: Vec::new(),
            echoed: 0,
            hello,
        }
    }
}

impl Application for EchoNode {
    fn poll(&mut self, ctx: &mut AppContext<'_>) -> bool {
        let mut work = false;
        if let Some(to) = self.open_to {
            for _ in 0..std::mem::take(&mut self.to_open) {
                let s = ctx.stack.tcp_connect(ctx.now, to, None, ctx.sink).unwrap();
                self.opened.push((s, Vec::new(), false));
                work = true;
            }
        }
        if let Some(l) = self.listener {
            while let Ok((s, _)) = ctx.stack.tcp_accept(l) {
                self.echo.push(s);
                self.accepted += 1;
                work = true;
            }
        }
        let mut buf = [0u8; 2048];
        for &s in &self.echo {
            while let Ok(n) = ctx.stack.tcp_recv(ctx.now, s, &mut buf, ctx.sink) {
                if n == 0 {
                    break;
                }
                ctx.stack.tcp_send(ctx.now, s, &buf[..n], ctx.sink).unwrap();
                work = true;
            }
        }
        for (s, got, sent) in &mut self.opened {
            if !*sent {
                match ctx.stack.tcp_send(ctx.now, *s, self.hello, ctx.sink) {
                    Ok(_) => *sent = true,
                    Err(SocketError::WouldBlock | SocketError::NotConnected) => {}
                    Err(e) => panic!("send: {e}"),
                }
            }
            while let Ok(n) = ctx.stack.tcp_recv(ctx.now, *s, &mut buf, ctx.sink) {
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
                if got.len() == self.hello.len() {
                    assert_eq!(got, self.hello);
                    self.echoed += 1;
                }
                work = true;
            }
        }
        work
    }
}

/// What the servers stand behind.
pub struct Nic {
    pub queues: usize,
    /// The queue the NIC puts a frame on.
    pub choose: QueueChooser,
    /// The NIC's RSS, when the engines know it (else they steer by
    /// ustack's flow hash).
    pub known: Option<Arc<RssSteering>>,
}

/// The peer on the NIC's wire and a server engine on each of its queues,
/// each with its echo node: the peer listening on port 7, the servers on
/// port 80 (of the unspecified address of `any`'s family).
pub struct Setup {
    pub peer: (Engine<MemoryLink>, EchoNode),
    pub servers: Vec<(Engine<MemoryLink>, EchoNode)>,
}

impl Setup {
    /// `server(e)` makes server `e`'s stack; every server's queue takes
    /// `server_mac`.
    pub fn new(
        nic: Nic,
        peer: Stack,
        mut server: impl FnMut(usize) -> Stack,
        server_mac: [u8; 6],
        any: IpAddr,
        hello: &'static [u8],
    ) -> Setup {
        let (wire, queues) =
            MemoryLink::multi_queue(&MemoryConfig::new(1500, 2048), nic.queues, nic.choose);
        let cfg = EngineConfig {
            pkt_tx_delay: std::time::Duration::ZERO,
            ..EngineConfig::default()
        };
        let mut peer = Engine::new(peer, vec![wire], cfg);
        let peer_app = EchoNode::listening(&mut peer, SocketAddr::new(any, 7), hello);
        let mut ends = mesh(nic.queues, 256);
        let mut servers = Vec::new();
        for (e, mut q) in queues.into_iter().enumerate() {
            q.set_mac(server_mac);
            let mut s = server(e);
            s.set_flow_steering(Some(FlowSteering {
                rss: nic.known.clone(),
                ..FlowSteering::new(nic.queues as u16, e as u16)
            }));
            let mut engine = Engine::new(s, vec![q], cfg);
            let mut d = Dispatcher::new(e, nic.queues, Some(ends.remove(0)), None, vec![None]);
            d.set_rss(nic.known.clone());
            engine.set_dispatcher(d);
            let app = EchoNode::listening(&mut engine, SocketAddr::new(any, 80), hello);
            servers.push((engine, app));
        }
        Setup {
            peer: (peer, peer_app),
            servers,
        }
    }

    /// Turns every engine until `done`, or fails after 20 s.
    pub fn run_until(
        &mut self,
        done: impl Fn(&EchoNode, &[(Engine<MemoryLink>, EchoNode)]) -> bool,
    ) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !done(&self.peer.1, &self.servers) {
            assert!(
                std::time::Instant::now() < deadline,
                "the peer's connections echoed {}; the engines' {:?}; dispatch {:?}",
                self.peer.1.echoed,
                self.servers
                    .iter()
                    .map(|(_, a)| a.echoed)
                    .collect::<Vec<_>>(),
                self.servers
                    .iter()
                    .map(|(e, _)| e.dispatch_counters().unwrap().clone())
                    .collect::<Vec<_>>()
            );
            let (peer, app) = &mut self.peer;
            peer.turn(app);
            for (engine, app) in &mut self.servers {
                engine.turn(app);
            }
        }
    }

    /// The peer opens `passive` connections to `server`, and each engine
    /// `active` to `peer`; runs until every one has echoed.
    pub fn connect_both_ways(
        &mut self,
        (passive, server): (usize, SocketAddr),
        (active, peer): (usize, SocketAddr),
    ) {
        self.peer.1.to_open = passive;
        self.peer.1.open_to = Some(server);
        for (_, app) in &mut self.servers {
            app.to_open = active;
            app.open_to = Some(peer);
        }
        self.run_until(|peer, servers| {
            peer.echoed == passive && servers.iter().all(|(_, a)| a.echoed == active)
        });
    }
}
