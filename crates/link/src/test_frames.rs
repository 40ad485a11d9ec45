//! Hand-built frames for the tests of the offload code (GSO, GRO, UDP
//! segmentation, the AF_PACKET receive paths): Ethernet 02:..:01 ->
//! 02:..:02, then IPv4 10.99.30.1 -> 10.99.30.2 (DF, TTL 64, header sum
//! whole) or IPv6 fd99::1 -> fd99::2 (hop limit 64), then the L4 bytes.

use wire::checksum;

/// Offset of the IP header in every frame built here.
const IP: usize = 14;

/// A frame with its Ethernet and IP headers filled in for `l4_bytes`
/// bytes of protocol `proto` (left zero), and the offset of those bytes.
/// `ip_id` is the IPv4 identification (IPv6 has none).
pub(crate) fn eth_ip(v6: bool, proto: u8, ip_id: u16, l4_bytes: usize) -> (Vec<u8>, usize) {
    let ip_len = if v6 { 40 } else { 20 };
    let mut f = vec![0u8; IP + ip_len + l4_bytes];
    f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    let ip = IP;
    if v6 {
        f[12..14].copy_from_slice(&[0x86, 0xdd]);
        f[ip] = 0x60;
        f[ip + 4..ip + 6].copy_from_slice(&(l4_bytes as u16).to_be_bytes());
        f[ip + 6] = proto;
        f[ip + 7] = 64;
        f[ip + 8] = 0xfd;
        f[ip + 9] = 0x99;
        f[ip + 23] = 1;
        f[ip + 24] = 0xfd;
        f[ip + 25] = 0x99;
        f[ip + 39] = 2;
    } else {
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[ip] = 0x45;
        f[ip + 2..ip + 4].copy_from_slice(&((20 + l4_bytes) as u16).to_be_bytes());
        f[ip + 4..ip + 6].copy_from_slice(&ip_id.to_be_bytes());
        f[ip + 6] = 0x40;
        f[ip + 8] = 64;
        f[ip + 9] = proto;
        f[ip + 12..ip + 16].copy_from_slice(&[10, 99, 30, 1]);
        f[ip + 16..ip + 20].copy_from_slice(&[10, 99, 30, 2]);
        let sum = !checksum::data(&f[ip..ip + 20]);
        f[ip + 10..ip + 12].copy_from_slice(&sum.to_be_bytes());
    }
    (f, ip + ip_len)
}

/// The one's complement sum of the pseudo-header of frame `f` (built by
/// [`eth_ip`]) for `l4_bytes` bytes of protocol `proto`.
fn pseudo_sum(f: &[u8], proto: u8, l4_bytes: usize) -> u16 {
    let addrs = if f[IP] >> 4 == 6 {
        &f[IP + 8..IP + 40]
    } else {
        &f[IP + 12..IP + 20]
    };
    let mut tail = [0u8; 8];
    tail[..4].copy_from_slice(&(l4_bytes as u32).to_be_bytes());
    tail[7] = proto;
    checksum::combine(&[checksum::data(addrs), checksum::data(&tail)])
}

/// A TCP frame from port `sport` to 80 with `seq`, ack 777, `flags`,
/// window 512, the options NOP NOP timestamp(`tsval`, 2) (a 32-byte
/// header) and `payload`; its TCP checksum whole.
pub(crate) fn tcp_frame(
    v6: bool,
    ip_id: u16,
    sport: u16,
    seq: u32,
    flags: u8,
    tsval: u32,
    payload: &[u8],
) -> Vec<u8> {
    let tcp_len = 32;
    let len = tcp_len + payload.len();
    let (mut f, t) = eth_ip(v6, 6, ip_id, len);
    f[t..t + 2].copy_from_slice(&sport.to_be_bytes());
    f[t + 2..t + 4].copy_from_slice(&80u16.to_be_bytes());
    f[t + 4..t + 8].copy_from_slice(&seq.to_be_bytes());
    f[t + 8..t + 12].copy_from_slice(&777u32.to_be_bytes());
    f[t + 12] = ((tcp_len / 4) as u8) << 4;
    f[t + 13] = flags;
    f[t + 14..t + 16].copy_from_slice(&512u16.to_be_bytes());
    f[t + 20..t + 24].copy_from_slice(&[1, 1, 8, 10]);
    f[t + 24..t + 28].copy_from_slice(&tsval.to_be_bytes());
    f[t + 28..t + 32].copy_from_slice(&2u32.to_be_bytes());
    f[t + tcp_len..].copy_from_slice(payload);
    let sum = !checksum::combine(&[pseudo_sum(&f, 6, len), checksum::data(&f[t..])]);
    f[t + 16..t + 18].copy_from_slice(&sum.to_be_bytes());
    f
}

/// A UDP frame from port 5000 to 7 carrying `payload`, IPv4
/// identification `ip_id`, its UDP checksum field zero.
pub(crate) fn udp_frame(v6: bool, ip_id: u16, payload: &[u8]) -> Vec<u8> {
    let udp_bytes = 8 + payload.len();
    let (mut f, u) = eth_ip(v6, 17, ip_id, udp_bytes);
    f[u..u + 2].copy_from_slice(&5000u16.to_be_bytes());
    f[u + 2..u + 4].copy_from_slice(&7u16.to_be_bytes());
    f[u + 4..u + 6].copy_from_slice(&(udp_bytes as u16).to_be_bytes());
    f[u + 8..].copy_from_slice(payload);
    f
}

/// Frames of pseudo-random bytes (from `seed`), one of each length in
/// `lens`; those longer than 34 bytes made to look like IPv4 carrying
/// `proto`, so that a parser gets past its first checks.
pub(crate) fn noise_frames(seed: u32, lens: &[usize], proto: u8) -> Vec<Vec<u8>> {
    let mut x = seed;
    lens.iter()
        .map(|&len| {
            let mut g: Vec<u8> = (0..len)
                .map(|_| {
                    x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                    (x >> 16) as u8
                })
                .collect();
            if len > 34 {
                g[12..14].copy_from_slice(&[0x08, 0x00]);
                g[14] = 0x45;
                g[23] = proto;
            }
            g
        })
        .collect()
}

/// An IPv4/UDP frame from `src`:40000 to `dst`:`dport` whose checksum
/// field holds only the pseudo-header sum (what a stack leaves for the
/// NIC); its IPv4 header sum whole. For the DPDK link's checksum
/// completion.
#[cfg(feature = "dpdk")]
pub(crate) fn partial_udp_frame(
    dst_mac: [u8; 6],
    src_mac: [u8; 6],
    src: [u8; 4],
    dst: [u8; 4],
    dport: u16,
    payload: &[u8],
) -> Vec<u8> {
    let udp_len = 8 + payload.len();
    let ip_len = 20 + udp_len;
    let mut f = Vec::new();
    f.extend_from_slice(&dst_mac);
    f.extend_from_slice(&src_mac);
    f.extend_from_slice(&[0x08, 0x00]);
    let mut ip = vec![0x45, 0, 0, 0, 0, 1, 0x40, 0, 64, 17, 0, 0];
    ip[2..4].copy_from_slice(&(ip_len as u16).to_be_bytes());
    ip.extend_from_slice(&src);
    ip.extend_from_slice(&dst);
    let sum = checksum::data(&ip);
    ip[10..12].copy_from_slice(&(!sum).to_be_bytes());
    f.extend_from_slice(&ip);
    let mut pseudo = Vec::new();
    pseudo.extend_from_slice(&src);
    pseudo.extend_from_slice(&dst);
    pseudo.extend_from_slice(&[0, 17]);
    pseudo.extend_from_slice(&(udp_len as u16).to_be_bytes());
    f.extend_from_slice(&40000u16.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&(udp_len as u16).to_be_bytes());
    f.extend_from_slice(&checksum::data(&pseudo).to_be_bytes()); // not inverted
    f.extend_from_slice(payload);
    f
}
