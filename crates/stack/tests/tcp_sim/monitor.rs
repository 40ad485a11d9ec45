//! A watcher on the wire: no stack may send data past the right edge of
//! the window its peer advertised to it (RFC 9293 3.8.6), but to probe a
//! closed one.  Old duplicates of earlier connections on the same ports
//! only ever make it more lenient.

use std::collections::HashMap;

use crate::net::tcp_bounds;

/// The sequence-space view of one connection (a pair of ports), per side
/// (0: host a's, 1: host b's).
#[derive(Default)]
struct Flow {
    /// The ISN of each side's SYN (another one starts a new connection).
    isn: [Option<u32>; 2],
    /// The window scale each side offered in its SYN.
    wscale: [Option<u8>; 2],
    /// The right edge of the window each side has heard from the other,
    /// the largest so far (the other side never moves it left).
    edge: [Option<u32>; 2],
    /// The last window each side heard was zero: it may probe past it.
    closed: [bool; 2],
}

fn after(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

/// The fields of a TCP frame the monitor reads.
struct Seg {
    ports: (u16, u16),
    seq: u32,
    ack: Option<u32>,
    flags: u8,
    window: u32,
    len: u32,
    wscale: Option<u8>,
}

fn parse(frame: &[u8]) -> Option<Seg> {
    let (tcp, end) = tcp_bounds(frame)?;
    let t = &frame[tcp..end];
    let be16 = |i: usize| u16::from_be_bytes([t[i], t[i + 1]]);
    let be32 = |i: usize| u32::from_be_bytes([t[i], t[i + 1], t[i + 2], t[i + 3]]);
    let doff = usize::from(t[12] >> 4) * 4;
    if doff < 20 || doff > t.len() {
        return None;
    }
    let flags = t[13];
    let mut wscale = None;
    let mut i = 20;
    while i < doff {
        match t[i] {
            0 => break,
            1 => i += 1,
            kind => {
                let len = usize::from(*t.get(i + 1)?);
                if len < 2 || i + len > doff {
                    break;
                }
                if kind == 3 && len == 3 {
                    wscale = Some(t[i + 2].min(14));
                }
                i += len;
            }
        }
    }
    Some(Seg {
        ports: (be16(0), be16(2)),
        seq: be32(4),
        ack: (flags & 0x10 != 0).then(|| be32(8)),
        flags,
        window: u32::from(be16(14)),
        len: (t.len() - doff) as u32,
        wscale,
    })
}

const SYN: u8 = 0x02;
const RST: u8 = 0x04;

/// Keeps every connection's view, keyed by (a's port, b's port).
#[derive(Default)]
pub struct Monitor {
    flows: HashMap<(u16, u16), Flow>,
}

impl Monitor {
    /// The flow of a segment `side` sent.
    fn key(side: usize, s: &Seg) -> (u16, u16) {
        if side == 0 {
            s.ports
        } else {
            (s.ports.1, s.ports.0)
        }
    }

    /// Side `side` sends `frame`: its data must fit the window it heard of.
    pub fn sent(&mut self, side: usize, frame: &[u8]) -> Result<(), String> {
        let Some(s) = parse(frame) else { return Ok(()) };
        let flow = self.flows.entry(Self::key(side, &s)).or_default();
        if s.flags & SYN != 0 {
            if s.ack.is_none() && flow.isn[side].is_some_and(|isn| isn != s.seq) {
                // A new connection on the same ports.  (A SYN-ACK may come
                // with another ISN, a SYN cookie's or not: same connection.)
                *flow = Flow::default();
            }
            flow.isn[side] = Some(s.seq);
        }
        if s.flags & RST != 0 || s.len == 0 || flow.closed[side] {
            return Ok(());
        }
        let data_end = s.seq.wrapping_add(s.len);
        match flow.edge[side] {
            Some(edge) if after(data_end, edge) => Err(format!(
                "{} sent {}..{} on ports {:?}, past the window's right edge {edge}",
                if side == 0 { 'a' } else { 'b' },
                s.seq,
                data_end,
                s.ports
            )),
            _ => Ok(()),
        }
    }

    /// Side `side` receives `frame` intact: it learns the other's window.
    pub fn received(&mut self, side: usize, frame: &[u8]) {
        let Some(s) = parse(frame) else { return };
        let other = 1 - side;
        let flow = self.flows.entry(Self::key(other, &s)).or_default();
        if s.flags & RST != 0 {
            return;
        }
        if s.flags & SYN != 0 {
            flow.wscale[other] = s.wscale;
        }
        let Some(ack) = s.ack else { return };
        let shift = match (s.flags & SYN != 0, flow.wscale) {
            (false, [Some(x), Some(y)]) => [x, y][other],
            _ => 0,
        };
        let edge = ack.wrapping_add(s.window << shift);
        if flow.edge[side].is_none_or(|e| after(edge, e)) {
            flow.edge[side] = Some(edge);
        }
        flow.closed[side] = s.window == 0;
    }
}
