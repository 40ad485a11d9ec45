#!/usr/bin/python3
"""Interop tests of ustack against the Linux kernel.

    sudo /usr/bin/python3 tests/interop/run.py [--bin-dir DIR] [-k NAME]... [-v] [--list]

Runs ustack's programs (ustack-echo: UDP and TCP echo on port 7, ping;
ustack-http; ustack-get; ustack-connect) on one end of a veth pair
(AF_PACKET, AF_XDP, DPDK) or a TAP device, and the kernel's tools and
sockets on the other, each test in network namespaces of its own
(addresses in 10.99.0.0/16 only).  Needs root, /usr/bin/python3 with scapy
(python3-scapy), the tools of TOOLS (ip, ss, ping, ethtool, curl, wrk,
sysctl) and the programs of PROGRAMS in --bin-dir; the preflight checks
them all before any test runs.

The last line is "N passed, N failed"; the exit status is non-zero when a
test failed.  A test that cannot run (not root, a tool missing) fails.
"""

import argparse
import os
import shutil
import signal
import sys
import time
import traceback

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import harness as h  # noqa: E402


# ustack's programs the cases run, all from --bin-dir.
PROGRAMS = ("ustack-echo", "ustack-http", "ustack-get", "ustack-connect", "ustack-async-echo",
            "ustack-async-client", "ustack")

# The kernel side's tools the cases run, and the Debian package of each.
TOOLS = {
    "ip": "iproute2", "ss": "iproute2", "ping": "iputils-ping", "ethtool": "ethtool", "curl": "curl",
    "wrk": "wrk", "sysctl": "procps",
    # The unmodified programs of cases_preload.py and their clients.
    "nginx": "nginx", "redis-server": "redis-server", "redis-benchmark": "redis-tools", "redis-cli": "redis-tools",
    "knotd": "knot", "dig": "bind9-dnsutils", "dnsperf": "dnsperf", "iperf3": "iperf3",
    # `ustack top` in a terminal (cases_ctl.py).
    "tmux": "tmux",
}


def preflight(binaries):
    """Reasons the suite cannot run here (empty when it can)."""
    problems = []
    if os.geteuid() != 0:
        problems.append("not root: the tests create network namespaces, veths and TAPs (run with sudo)")
    try:
        import scapy  # noqa: F401
        import scapy.all  # noqa: F401
    except ImportError as e:
        problems.append(f"scapy is missing for {sys.executable} ({e}): apt-get install python3-scapy, "
                        "and run the suite with /usr/bin/python3")
    for tool, package in TOOLS.items():
        if not shutil.which(tool):
            problems.append(f"'{tool}' not found (apt-get install {package})")
    for name, binary in binaries.items():
        if not os.path.isfile(binary) or not os.access(binary, os.X_OK):
            problems.append(f"no {name} binary at {binary} (cargo build --release -p apps, or --bin-dir DIR)")
    if not os.path.exists("/dev/net/tun"):
        problems.append("/dev/net/tun is missing (TAP tests)")
    return problems


class Interrupted(BaseException):
    pass


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin-dir", default=os.path.join(REPO, "target", "release"),
                    help="where ustack's programs (PROGRAMS) are (default: target/release)")
    ap.add_argument("--binary", default=None,
                    help="the ustack-echo to test (default: ustack-echo in --bin-dir)")
    ap.add_argument("-k", action="append", default=[], metavar="NAME",
                    help="run only tests whose name contains NAME (repeatable)")
    ap.add_argument("--list", action="store_true", help="list the tests and exit")
    ap.add_argument("--known-bugs", action="store_true",
                    help="also run the tests that show known stack bugs (cases.KNOWN_BUGS)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print more of what the tests see")
    args = ap.parse_args()
    binaries = {p: os.path.abspath(os.path.join(args.bin_dir, p)) for p in PROGRAMS}
    if args.binary:
        binaries["ustack-echo"] = os.path.abspath(args.binary)
    h.VERBOSE = args.verbose

    import cases
    import cases_preload  # noqa: F401 - registers its tests in cases.TESTS

    selected = [t for t in cases.TESTS if not args.k or any(k in t[0] for k in args.k)]
    left_out = [t[0] for t in selected if t[0] in cases.KNOWN_BUGS and not args.known_bugs]
    selected = [t for t in selected if t[0] not in left_out]
    if args.list:
        for name, _, _ in selected:
            print(name)
        for name in left_out:
            print(f"{name}  (known bug, with --known-bugs)")
        return 0
    for name in left_out:
        print(f"not run (known stack bug, see --known-bugs): {name}: {cases.KNOWN_BUGS[name]}")
    if not selected:
        print(f"no test matches {args.k}")
        print("0 passed, 1 failed")
        return 1

    passed = failed = 0
    problems = preflight(binaries)
    if problems:
        for name, _, _ in selected:
            print(f"FAIL {name}: cannot run: " + "; ".join(problems), flush=True)
        print(f"0 passed, {len(selected)} failed")
        return 1

    def on_signal(signum, frame):
        raise Interrupted(signal.Signals(signum).name)

    def on_alarm(signum, frame):
        raise h.TestTimeout()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    signal.signal(signal.SIGALRM, on_alarm)

    h.remove_stale_namespaces()
    ctx = cases.Ctx(binaries)
    t_suite = time.monotonic()
    interrupted = None
    for name, fn, budget in selected:
        if interrupted:
            break
        print(f"RUN  {name}", flush=True)
        t0 = time.monotonic()
        error = None
        try:
            ctx.workdir = h.make_workdir()
            signal.alarm(budget)
            try:
                fn(ctx)
            finally:
                signal.alarm(0)
        except Interrupted as e:
            interrupted = str(e)
            error = f"interrupted by {e}"
        except h.TestTimeout:
            error = f"timed out after {budget}s"
        except h.TestFailure as e:
            error = str(e)
        except Exception:  # noqa: BLE001 - any error fails the test
            error = traceback.format_exc().rstrip()
        outputs = h.take_outputs()
        if error is not None:
            # Print ustack's output before cleanup deletes the files.
            for u in outputs:
                text = u.stderr().rstrip()
                lines = text.splitlines()
                if len(lines) > 60:
                    lines = lines[:20] + ["..."] + lines[-40:]
                print(f"  --- output of: {' '.join(u.args)}")
                for line in lines:
                    print(f"  | {line}")
        # Cleanup must not be cut short by a second Ctrl-C.
        old = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            h.run_cleanups()
        finally:
            signal.signal(signal.SIGINT, old)
        dt = time.monotonic() - t0
        if error is None:
            passed += 1
            print(f"PASS {name} ({dt:.1f}s)", flush=True)
        else:
            failed += 1
            print(f"FAIL {name} ({dt:.1f}s): " + error.replace("\n", "\n  "), flush=True)
    if interrupted:
        not_run = len(selected) - passed - failed
        failed += not_run
        print(f"interrupted ({interrupted}); {not_run} test(s) not run count as failed")
    print(f"suite took {time.monotonic() - t_suite:.1f}s")
    print(f"{passed} passed, {failed} failed", flush=True)
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    try:
        rc = main()
    except SystemExit as e:  # argparse: --help, or bad arguments (no test ran)
        rc = e.code
    except BaseException:  # noqa: BLE001 - the summary line must come last
        traceback.print_exc()
        print("0 passed, 1 failed", flush=True)
        rc = 1
    finally:
        h.run_cleanups()
    sys.exit(rc)
