#!/usr/bin/env python3
"""SIGKILLs a C process sending through the durable outbox (capi-send-stress) KILLS times at random
moments after it is ready, then lets one run finish. Checks after every kill that each message the
killed process printed as pending (its row committed) and never printed as sent is in the outbox
the next process finds, or in its cache as sent (the kill cut the "sent" line off), and at the end
that the outbox drained with every committed message sent. The simulator lives in the process, so
"on the server exactly once" is checked against a real Synapse by MatrixCrashTests, not here.

    send-stress.py PROGRAM WORKDIR KILLS
"""
import os, random, signal, subprocess, sys, time

program, work, kills = sys.argv[1], sys.argv[2], int(sys.argv[3])
root, keys = os.path.join(work, "root"), os.path.join(work, "keys")
os.makedirs(root, mode=0o700, exist_ok=True)
os.makedirs(keys, mode=0o700, exist_ok=True)
rng = random.Random(0x5EED)
committed, sent, unsent = set(), set(), set()
killed_while_unsent = 0


runs = 0


def run(count, kill_after=None):
    global runs
    runs += 1
    # Ids from each run's new server start past every earlier run's (at most 8 new and 50 left a run).
    p = subprocess.Popen([program, root, keys, str(count), str(runs * 64)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lines = []
    ready_at = None
    os.set_blocking(p.stdout.fileno(), False)
    buffered = b""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        chunk = p.stdout.read() or b""
        buffered += chunk
        *complete, buffered = buffered.split(b"\n")
        for line in complete:
            lines.append(line.decode())
            if line == b"ready" and ready_at is None:
                ready_at = time.monotonic()
        if kill_after is not None and ready_at is not None and time.monotonic() - ready_at >= kill_after:
            p.send_signal(signal.SIGKILL)
            break
        if p.poll() is not None:
            break
        time.sleep(0.002)
    p.wait()
    rest = p.stdout.read() or b""
    for line in (buffered + rest).split(b"\n"):
        if line:
            lines.append(line.decode())
    return p.returncode, lines, p.stderr.read().decode()


for round_ in range(kills):
    # Most kills within the first milliseconds (the in-process server answers at once), some later.
    status, lines, err = run(8, kill_after=rng.uniform(0.0, 0.015) if rng.random() < 0.7 else rng.uniform(0.0, 0.15))
    left = {l[5:] for l in lines if l.startswith("left ")}
    cached = {l[7:] for l in lines if l.startswith("cached ")}
    # Sent before the kill whose "sent" line the kill cut off: in the cache as a sent message.
    sent |= unsent & cached
    unsent -= cached
    missing = unsent - left
    if missing:
        sys.exit(f"round {round_}: committed unsent messages missing from the outbox: {sorted(missing)[:5]}")
    if status not in (0, -signal.SIGKILL):
        sys.exit(f"round {round_}: exit {status}: {err[-500:]}")
    pending = {l[8:] for l in lines if l.startswith("pending ")}
    done = {l[5:] for l in lines if l.startswith("sent ")}
    committed |= pending
    sent |= done
    unsent = (unsent | pending) - done
    killed_while_unsent += len(pending - done)

status, lines, err = run(0)
left = {l[5:] for l in lines if l.startswith("left ")}
cached = {l[7:] for l in lines if l.startswith("cached ")}
sent |= unsent & cached
unsent -= cached
if unsent - left:
    sys.exit(f"the last run did not find {sorted(unsent - left)[:5]}")
sent |= {l[5:] for l in lines if l.startswith("sent ")}
if status != 0 or "done" not in lines:
    sys.exit(f"the last run did not drain the outbox: exit {status}: {err[-500:]}")
if not committed or not committed <= sent:
    sys.exit(f"committed messages never sent: {sorted(committed - sent)[:5]}")
if killed_while_unsent <= kills // 4:
    sys.exit(f"only {killed_while_unsent} messages were unsent at a kill: the kills missed the sends")
print(f"send-stress: {kills} kills, {len(committed)} messages committed, {killed_while_unsent} unsent when killed, all sent")
