#!/usr/bin/env python3
"""The per-request table of scripts/nginx-kernel-costs.sh.

    nginx-kernel-costs.py DIR STACK...

DIR holds, per STACK (kernel, ustack): STACK.before and STACK.after
("key value" lines), STACK.cpu0 and STACK.worker (`perf stat -x,`
output) and STACK.wrk (wrk's report). Prints one column per stack.
"""
import re
import sys

USER_HZ = 100


def read_kv(path):
    out = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 2 and re.fullmatch(r"-?\d+", parts[1]):
                out[parts[0]] = int(parts[1])
    return out


def read_perf(path):
    """perf stat -x, lines: value,unit,event,... ; '<not counted>' is 0."""
    out = {}
    with open(path) as f:
        for line in f:
            if line.startswith("#") or "," not in line:
                continue
            cols = line.rstrip("\n").split(",")
            if len(cols) < 3:
                continue
            try:
                value = float(cols[0])
            except ValueError:
                value = 0.0
            out[cols[2]] = out.get(cols[2], 0.0) + value
    return out


def read_wrk(path):
    text = open(path).read()
    m = re.search(r"(\d+) requests in ([\d.]+)(m?s)", text)
    if not m:
        sys.exit(f"cannot read wrk's report {path}:\n{text}")
    secs = float(m.group(2)) / (1000 if m.group(3) == "ms" else 1)
    return int(m.group(1)), secs


def column(d, stack):
    b = read_kv(f"{d}/{stack}.before")
    a = read_kv(f"{d}/{stack}.after")
    delta = {k: a[k] - b[k] for k in a if k in b}
    cpu0 = read_perf(f"{d}/{stack}.cpu0")
    worker = read_perf(f"{d}/{stack}.worker")
    reqs, secs = read_wrk(f"{d}/{stack}.wrk")
    r = float(reqs)
    rows = {}
    rows["requests/s"] = reqs / secs
    # /proc/stat ticks are USER_HZ: microseconds of core 0 per request.
    us = 1e6 / USER_HZ / r
    busy = sum(delta.get(f"cpu_{k}", 0) for k in ("user", "nice", "sys", "irq", "softirq", "steal"))
    rows["core0 busy us/request"] = busy * us
    for k in ("user", "sys", "softirq", "irq", "steal"):
        rows[f"  core0 {k} us/request"] = delta.get(f"cpu_{k}", 0) * us
    rows["worker cpu us/request"] = (delta.get("worker_utime", 0) + delta.get("worker_stime", 0)) * us
    rows["  worker user us/request"] = delta.get("worker_utime", 0) * us
    rows["  worker system us/request"] = delta.get("worker_stime", 0) * us
    sent = cpu0.get("ipi:ipi_send_cpu", 0) + cpu0.get("ipi:ipi_send_cpumask", 0)
    rows["IPIs sent by core 0"] = sent / r
    for k in ("CAL", "RES", "TLB", "LOC", "IWI"):
        rows[f"  {k} received by core 0"] = delta.get(f"irq_{k}_cpu0", 0) / r
        rows[f"  {k} received by core 1"] = delta.get(f"irq_{k}_cpu1", 0) / r
    for k in ("NET_RX", "NET_TX", "TIMER", "SCHED", "RCU", "HRTIMER", "TASKLET"):
        rows[f"softirq {k} on core 0"] = delta.get(f"softirq_{k}", 0) / r
    rows["softirqs raised on core 0"] = cpu0.get("irq:softirq_raise", 0) / r
    rows["page faults, core 0"] = cpu0.get("page-faults", 0) / r
    rows["  worker minflt (/proc)"] = delta.get("worker_minflt", 0) / r
    rows["  worker majflt (/proc)"] = delta.get("worker_majflt", 0) / r
    rows["context switches, core 0"] = cpu0.get("context-switches", 0) / r
    rows["  worker voluntary"] = delta.get("worker_vcsw", 0) / r
    rows["  worker involuntary"] = delta.get("worker_ivcsw", 0) / r
    rows["cpu migrations, core 0"] = cpu0.get("cpu-migrations", 0) / r
    calls = {
        k.split("sys_enter_", 1)[1]: v for k, v in worker.items() if "sys_enter_" in k and v > 0
    }
    rows["worker syscalls"] = sum(calls.values()) / r
    for k, v in sorted(calls.items(), key=lambda kv: -kv[1]):
        rows[f"  {k}"] = v / r
    rows["veth frames sent"] = delta.get("veth_tx_packets", 0) / r
    rows["veth frames received"] = delta.get("veth_rx_packets", 0) / r
    if stack == "ustack":
        kicks = calls.get("sendto", 0)
        rows["TX kicks (sendto)"] = kicks / r
        rows["  frames per kick"] = delta.get("veth_tx_packets", 0) / max(kicks, 1)
        rows["  engine flushes (tx_bursts)"] = delta.get("ustack_engine_tx_bursts", 0) / r
        rows["  short kicks (tx_kick_short)"] = delta.get("ustack_port0_link_tx_kick_short", 0) / r
        rows["engine turns (loops)"] = delta.get("ustack_engine_loops", 0) / r
        # The stats file is rewritten every 100 ms: a share, not exact.
        rows["  engine idle share (idle_us / window)"] = delta.get("ustack_engine_idle_us", 0) / (
            secs * 1e6
        )
    return rows


# x86-64 system call numbers of the calls nginx's worker makes.
SYSCALL_NAMES = {
    0: "read", 1: "write", 3: "close", 7: "poll", 17: "pread64", 19: "readv", 20: "writev",
    40: "sendfile64", 43: "accept", 44: "sendto", 45: "recvfrom", 46: "sendmsg", 47: "recvmsg",
    54: "setsockopt", 55: "getsockopt", 72: "fcntl", 82: "rename", 232: "epoll_wait",
    233: "epoll_ctl", 257: "openat", 262: "newfstatat", 270: "pselect6", 271: "ppoll",
    281: "epoll_pwait", 288: "accept4", 12: "brk", 18: "pwrite64", 77: "ftruncate",
    316: "renameat2", 16: "ioctl",
}


def timings(d, stack):
    """Durations from STACK.events (perf script -F time,event,trace of
    core 0): NET_RX softirq time, and each system call's time less the
    softirqs run inside it; per request of the timing window."""
    net_rx_ns = 0
    softirqs = 0
    calls = {}
    softirq_at = None
    call = None  # (name, entered at, softirq time inside so far)
    with open(f"{d}/{stack}.events") as f:
        for line in f:
            m = re.match(r"\s*([\d.]+):\s+(\S+):\s*(.*)", line)
            if not m:
                continue
            t = float(m.group(1)) * 1e9
            event, rest = m.group(2), m.group(3)
            if event == "irq:softirq_entry":
                softirq_at = t
            elif event == "irq:softirq_exit" and softirq_at is not None:
                dt = t - softirq_at
                net_rx_ns += dt
                softirqs += 1
                softirq_at = None
                if call is not None:
                    call = (call[0], call[1], call[2] + dt)
            elif event == "raw_syscalls:sys_enter":
                nr = re.search(r"NR (\d+)", rest)
                if nr:
                    n = int(nr.group(1))
                    call = (SYSCALL_NAMES.get(n, f"nr{n}"), t, 0.0)
            elif event == "raw_syscalls:sys_exit" and call is not None:
                name, at, inner = call
                c = calls.setdefault(name, [0, 0.0])
                c[0] += 1
                c[1] += t - at - inner
                call = None
    b = read_kv(f"{d}/{stack}.tbefore")
    a = read_kv(f"{d}/{stack}.tafter")
    reqs, secs = read_wrk(f"{d}/{stack}.twrk")
    r = float(reqs)
    frames_in = a.get("veth_rx_packets", 0) - b.get("veth_rx_packets", 0)
    frames_out = a.get("veth_tx_packets", 0) - b.get("veth_tx_packets", 0)
    rows = {}
    rows["timing window requests/s"] = reqs / secs
    rows["NET_RX softirq us/request (core 0)"] = net_rx_ns / 1e3 / r
    rows["  NET_RX softirqs/request"] = softirqs / r
    rows["  NET_RX ns per frame received"] = net_rx_ns / max(frames_in, 1)
    total = sum(c[1] for c in calls.values())
    rows["worker syscall us/request (less softirqs)"] = total / 1e3 / r
    for name, (n, ns) in sorted(calls.items(), key=lambda kv: -kv[1][1]):
        rows[f"  {name} us/request"] = ns / 1e3 / r
        rows[f"  {name} ns/call"] = ns / n
    if "sendto" in calls and stack == "ustack":
        rows["  sendto ns per frame sent"] = calls["sendto"][1] / max(frames_out, 1)
    return rows


def main():
    d, stacks = sys.argv[1], sys.argv[2:]
    cols = []
    for s in stacks:
        c = column(d, s)
        c.update(timings(d, s))
        cols.append(c)
    names = []
    for c in cols:
        for k in c:
            if k not in names:
                names.append(k)
    print(f"per request (wrk's count) {'':24}" + "".join(f"{s:>12}" for s in stacks))
    for k in names:
        vals = []
        for c in cols:
            v = c.get(k)
            if v is None:
                vals.append(f"{'-':>12}")
            elif k == "requests/s":
                vals.append(f"{v:>12.0f}")
            else:
                vals.append(f"{v:>12.4f}")
        print(f"{k:50}" + "".join(vals))


if __name__ == "__main__":
    main()
