#!/usr/bin/env python3
"""SIGKILLs a C process sending through the durable outbox (capi-send-stress) KILLS times at random
moments after it is ready, then lets one run finish. Checks after every kill that each message the
killed process printed as pending (its row committed) and never printed as sent is in the outbox
the next process finds, or in its cache as sent (the kill cut the "sent" line off), and at the end
that the outbox drained with every committed message sent.

Against the in-process simulator a server lives as long as its process. With --matrix, the
program's vault is a Matrix one over a real homeserver (Synapse) that outlives every kill, and at
the end every committed message is counted on the server: each exactly once, none twice.

    send-stress.py PROGRAM WORKDIR KILLS [--matrix HOMESERVER USER PEER PASSWORD_FILE]
"""
import json, os, random, signal, subprocess, sys, time, urllib.parse, urllib.request

program, work, kills = sys.argv[1], sys.argv[2], int(sys.argv[3])
matrix = sys.argv[5:9] if len(sys.argv) >= 9 and sys.argv[4] == "--matrix" else None
root, keys = os.path.join(work, "root"), os.path.join(work, "keys")
os.makedirs(root, mode=0o700, exist_ok=True)
os.makedirs(keys, mode=0o700, exist_ok=True)
rng = random.Random(0x5EED)
committed, sent, unsent = set(), set(), set()
texts = {}  # local id -> its unique text
killed_while_unsent = 0


runs = 0


def run(count, kill_after=None):
    global runs
    runs += 1
    # Ids from each run's new server start past every earlier run's (at most 8 new and 50 left a run).
    command, env = [program, root, keys, str(count), str(runs * 64)], None
    if matrix:
        homeserver, user, peer, password_file = matrix
        env = dict(os.environ, CHATVAULT_STRESS_HOMESERVER=homeserver, CHATVAULT_STRESS_USER=user, CHATVAULT_STRESS_PEER=peer)
        if runs == 1:  # the password once, from descriptor 3; the session is kept after that
            command = ["sh", "-c", 'exec "$0" "$@" 3<"$CHATVAULT_STRESS_PASSWORD_FILE"'] + command
            env["CHATVAULT_STRESS_PASSWORD_FILE"] = password_file
    p = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
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
    if matrix:
        # A homeserver takes tens of milliseconds a send: half the kills land among this run's
        # sends, half later, so that the outbox drains across runs instead of filling up (a full
        # outbox refuses new sends, and nothing would be committed to kill).
        after = rng.uniform(0.0, 0.1) if rng.random() < 0.5 else rng.uniform(0.2, 1.0)
        count = 3
    else:
        # Most kills within the first milliseconds (the in-process server answers at once), some later.
        after = rng.uniform(0.0, 0.015) if rng.random() < 0.7 else rng.uniform(0.0, 0.15)
        count = 8
    status, lines, err = run(count, kill_after=after)
    if os.environ.get("STRESS_DEBUG"):
        print(round_, f"{after:.3f}", status, [l.split(" ")[0] for l in lines], err[-200:], file=sys.stderr)
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
    pending = {l.split(" ")[1] for l in lines if l.startswith("pending ")}
    texts.update({l.split(" ")[1]: l.split(" ", 2)[2] for l in lines if l.startswith("pending ")})
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
    sys.exit(f"only {killed_while_unsent} of {len(committed)} committed messages were unsent at a kill: the kills missed the sends")
if matrix:
    # Every committed message on the homeserver exactly once: counted in the direct room with PEER.
    homeserver, user, peer, password_file = matrix

    def call(method, path, body=None, token=None):
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = "Bearer " + token
        request = urllib.request.Request(homeserver + path, method=method, headers=headers,
                                         data=json.dumps(body).encode() if body is not None else None)
        return json.load(urllib.request.urlopen(request, timeout=60))

    with open(password_file) as f:
        password = f.read().strip()
    token = call("POST", "/_matrix/client/v3/login", {"type": "m.login.password", "password": password,
                                                      "identifier": {"type": "m.id.user", "user": user}})["access_token"]
    quoted = urllib.parse.quote
    direct = call("GET", f"/_matrix/client/v3/user/{quoted(user)}/account_data/m.direct", token=token)
    counts = {}
    for room in direct.get(peer, []):
        start = None
        while True:
            query = "dir=b&limit=500" + (f"&from={quoted(start)}" if start else "")
            page = call("GET", f"/_matrix/client/v3/rooms/{quoted(room)}/messages?{query}", token=token)
            for event in page.get("chunk", []):
                body = event.get("content", {}).get("body")
                if event.get("type") == "m.room.message" and isinstance(body, str) and body.startswith("stress "):
                    counts[body] = counts.get(body, 0) + 1
            if not page.get("chunk") or not page.get("end"):
                break
            start = page["end"]
    twice = sorted(b for b, n in counts.items() if n > 1)
    if twice:
        sys.exit(f"messages on the server more than once: {twice[:5]}")
    absent = sorted(texts[l] for l in committed if counts.get(texts[l], 0) != 1)
    if absent:
        sys.exit(f"committed messages not on the server exactly once: {absent[:5]}")
    print(f"send-stress: on the homeserver, each of the {len(committed)} committed messages exactly once ({len(counts)} in all)")

print(f"send-stress: {kills} kills, {len(committed)} messages committed, {killed_while_unsent} unsent when killed, all sent")
