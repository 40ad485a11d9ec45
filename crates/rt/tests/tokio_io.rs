//! tokio's AsyncRead/AsyncWrite on TcpStream (cargo feature `tokio-io`):
//! `cargo test -p rt --features tokio-io --test tokio_io`.

#![cfg(feature = "tokio-io")]

mod common;

use std::future::poll_fn;
use std::pin::Pin;

use common::*;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

#[test]
fn tokio_traits_carry_a_stream_both_ways() {
    let net = net();
    net.block_on(async {
        let listener = rt::TcpListener::bind(server(8100)).unwrap();
        let mut c = rt::TcpStream::connect(server(8100)).await.unwrap();
        let (mut s, _) = listener.accept().await.unwrap();
        let data = pattern(3, 100_000);
        let mut sent = 0;
        let mut got = Vec::new();
        let mut buf = vec![0u8; 4096];
        while got.len() < data.len() {
            if sent < data.len() {
                let w = woken(
                    "space",
                    poll_fn(|cx| Pin::new(&mut c).poll_write(cx, &data[sent..])),
                )
                .await
                .unwrap();
                sent += w;
            }
            let mut rb = ReadBuf::new(&mut buf);
            woken(
                "data",
                poll_fn(|cx| Pin::new(&mut s).poll_read(cx, &mut rb)),
            )
            .await
            .unwrap();
            assert!(!rb.filled().is_empty());
            got.extend_from_slice(rb.filled());
        }
        assert!(got == data);
        poll_fn(|cx| Pin::new(&mut c).poll_shutdown(cx))
            .await
            .unwrap();
        let mut rb = ReadBuf::new(&mut buf);
        woken("EOF", poll_fn(|cx| Pin::new(&mut s).poll_read(cx, &mut rb)))
            .await
            .unwrap();
        assert!(rb.filled().is_empty(), "EOF after poll_shutdown");
    });
}
