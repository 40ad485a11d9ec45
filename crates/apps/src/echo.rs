//! The echo service (RFC 862) over UDP.  TCP echo arrives with TCP.

use core::net::{IpAddr, Ipv6Addr, SocketAddr};

use runtime::{AppContext, Application};
use stack::{SocketError, SocketHandle, Stack};

/// Echoes every datagram back to its sender, from the address it was sent to.
pub struct EchoApp {
    udp: SocketHandle,
    buf: Vec<u8>,
    /// Replies that could not be sent (no buffer, no route).
    pub send_errors: u64,
    /// Of those, the ones refused for want of a packet buffer (ENOBUFS: the
    /// pool is down to its reserve).
    pub send_no_buffer: u64,
}

impl EchoApp {
    /// Echoes on `port` of every address, IPv4 and IPv6.
    pub fn new(stack: &mut Stack, port: u16) -> Result<EchoApp, SocketError> {
        EchoApp::bind(
            stack,
            SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port),
        )
    }

    /// Echoes on `local` (`[::]:p` takes IPv4 too: a dual-stack socket).
    pub fn bind(stack: &mut Stack, local: SocketAddr) -> Result<EchoApp, SocketError> {
        let udp = stack.udp_bind(local)?;
        Ok(EchoApp {
            udp,
            buf: vec![0u8; 65536],
            send_errors: 0,
            send_no_buffer: 0,
        })
    }
}

impl Application for EchoApp {
    fn poll(&mut self, ctx: &mut AppContext<'_>) -> bool {
        let mut work = false;
        // A bounded batch per turn, so receive and timers keep running.
        for _ in 0..64 {
            let Ok(got) = ctx.stack.udp_recv_from(self.udp, &mut self.buf) else {
                break;
            };
            work = true;
            let data = &self.buf[..got.len];
            if let Err(e) = ctx.stack.udp_send_to(
                ctx.now,
                self.udp,
                got.meta.src,
                Some(got.meta.dst.ip()),
                data,
                ctx.sink,
            ) {
                self.send_errors += 1;
                self.send_no_buffer += u64::from(e == SocketError::NoBufferSpace);
            }
        }
        work
    }
}
