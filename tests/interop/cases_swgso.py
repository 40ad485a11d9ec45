"""Interop tests of software GSO (`[portN] gso=1`, acting where the link
has no TSO): ustack's TCP sends super-frames of up to 64 KB and the
engine cuts them into MTU-sized frames, each with its headers and a whole
checksum, above the link. One connection from the kernel carries 8 MB to
ustack-echo and back; the kernel checks the bytes by SHA-256 and drops
any segment whose checksum fails, so a wrong cut shows as a stalled or
corrupted stream.

- Over AF_XDP (native mode on a veth) and over TAP.
- Under `[fault] loss` (both ways): the segments the injector drops are
  cut from super-frames, so TCP recovers holes inside what it sent as one
  segment, from the kernel's SACK blocks."""

import hashlib
import random

import harness as h
import tcp_tools as tt
from cases import SUBNETS, no_tcp_trouble, test
from cases_xdp import XdpCtx
from harness import check

SUBNETS.update({"tcp_stream_swgso_af_xdp": 60, "tcp_stream_swgso_tap": 61,
                "tcp_stream_swgso_loss_af_xdp": 62, "tcp_stream_swgso_loss_tap": 63})

STREAM = 8 * 1024 * 1024
GSO = ["port0.gso=1"]


def stream_back_intact(t, seed):
    """8 MB to ustack-echo and back on one connection; ustack's counters
    once every connection closed."""
    payload = random.Random(seed).randbytes(STREAM)
    (got,) = tt.echo_many(t.ns_k, (t.ustack_ip, 7), [payload], timeout=60)
    want, back = hashlib.sha256(payload).hexdigest(), hashlib.sha256(got).hexdigest()
    check(len(got) == len(payload) and back == want,
          f"{len(got)} bytes back of {len(payload)}, sha256 {back[:16]}... expected {want[:16]}...")
    st = t.ustack.wait_stats(lambda s: s.get("tcp_connections", 0) == 0, timeout=5,
                             what="the connection closed")
    no_tcp_trouble(st, "stream")
    supers, segs = st.get("engine_gso_super_frames", 0), st.get("engine_gso_segments_sent", 0)
    print(f"    {STREAM} bytes each way, sha256 {want[:16]}...; super-frames cut {supers} into {segs} "
          f"segments; TCP frames {st.get('tx_frames', 0)}, link frames {st.get('port0_link_tx_frames', 0)}; "
          f"retransmitted {st.get('tcp_retransmitted_segments', 0)}")
    check(supers > 0 and segs > 2 * supers, f"no super-frame was cut in software: {h.nonzero(st)}")
    check(st.get("engine_gso_refused", 0) == 0 and st.get("engine_tx_drop_oversize", 0) == 0,
          f"super-frames refused or frames too large: {h.nonzero(st)}")
    return st


def clean(st):
    check(st.get("port0_link_tx_dropped", 0) == 0, f"frames dropped on the way out: {h.nonzero(st)}")


def lossy(st):
    lost = st.get("port0_fault_tx_lost", 0)
    check(lost > 0, f"the injector lost nothing on the way out: {h.nonzero(st)}")
    check(st.get("tcp_retransmitted_segments", 0) > 0, f"{lost} frames lost, none resent: {h.nonzero(st)}")
    print(f"    port0_fault_tx_lost {lost}, tcp_fast_retransmits {st.get('tcp_fast_retransmits', 0)}, "
          f"tcp_rto_timeouts {st.get('tcp_rto_timeouts', 0)}")


@test("tcp_stream_swgso_af_xdp", budget=90)
def _(ctx):
    t = XdpCtx(ctx, "native").topo("af_xdp", SUBNETS["tcp_stream_swgso_af_xdp"], sets=GSO).start()
    clean(stream_back_intact(t, 60))
    t.ustack.stop()


@test("tcp_stream_swgso_tap", budget=90)
def _(ctx):
    t = ctx.topo("tap", SUBNETS["tcp_stream_swgso_tap"], sets=GSO).start()
    clean(stream_back_intact(t, 61))
    t.ustack.stop()


@test("tcp_stream_swgso_loss_af_xdp", budget=120)
def _(ctx):
    t = XdpCtx(ctx, "native").topo("af_xdp", SUBNETS["tcp_stream_swgso_loss_af_xdp"],
                                   sets=GSO + ["fault.loss=0.005"]).start()
    lossy(stream_back_intact(t, 62))
    t.ustack.stop()


@test("tcp_stream_swgso_loss_tap", budget=120)
def _(ctx):
    t = ctx.topo("tap", SUBNETS["tcp_stream_swgso_loss_tap"], sets=GSO + ["fault.loss=0.005"]).start()
    lossy(stream_back_intact(t, 63))
    t.ustack.stop()
