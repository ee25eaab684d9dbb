//! Traffic that counts what it loses, for the restart tests and benches.

/// UDP and TCP between two pods, in Python (run with `python3 <file>`):
/// `recv` counts sequence numbers on UDP 9999 and echoes TCP on 8080
/// until the sender says END, then prints `udp <received> <sent>`; `send
/// <dst> <rate> <secs>` paces UDP at `rate` a second and keeps one TCP
/// connection busy meanwhile, then prints `sent <n> tcp <round trips>`
/// (`tcp failed` when the connection broke).
pub const STREAM_PY: &str = r#"
import socket, struct, sys, threading, time
mode = sys.argv[1]
if mode == "recv":
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    u.bind(("0.0.0.0", 9999))
    t = socket.socket()
    t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    t.bind(("0.0.0.0", 8080))
    t.listen(1)
    def echo():
        c, _ = t.accept()
        while True:
            d = c.recv(4096)
            if not d:
                return
            c.sendall(d)
    threading.Thread(target=echo, daemon=True).start()
    print("ready", flush=True)
    seen = set()
    total = None
    u.settimeout(60)
    while True:
        d, _ = u.recvfrom(64)
        if d.startswith(b"END"):
            total = int(d[3:])
            break
        seen.add(struct.unpack("!I", d[:4])[0])
    print("udp", len(seen), total, flush=True)
else:
    dst, rate, secs = sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    result = {}
    def tcp():
        s = socket.create_connection((dst, 8080), timeout=5)
        n, t0 = 0, time.time()
        while time.time() - t0 < secs:
            s.sendall(struct.pack("!I", n))
            got = b""
            while len(got) < 4:
                got += s.recv(4 - len(got))
            assert struct.unpack("!I", got)[0] == n
            n += 1
            time.sleep(0.002)
        result["tcp"] = n
    th = threading.Thread(target=tcp)
    th.start()
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    seq, t0 = 0, time.time()
    while time.time() - t0 < secs:
        due = int((time.time() - t0) * rate)
        while seq < due:
            u.sendto(struct.pack("!I", seq), (dst, 9999))
            seq += 1
        time.sleep(0.001)
    th.join()
    time.sleep(0.5)
    for _ in range(5):
        u.sendto(b"END%d" % seq, (dst, 9999))
        time.sleep(0.05)
    print("sent", seq, "tcp", result.get("tcp", "failed"), flush=True)
"#;
