import os, time, statistics, sys
d = sys.argv[1]; n = int(sys.argv[2]); rounds = int(sys.argv[3])
rec = b"x" * 200
def run(mode):
    p = os.path.join(d, f"j-{mode}")
    if os.path.exists(p): os.remove(p)
    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
    if mode == "prezeroed":
        os.write(fd, b"\0" * (n * len(rec) + 4096)); os.fsync(fd); os.lseek(fd, 0, 0)
    lat = []
    for i in range(n):
        os.write(fd, rec)
        t = time.perf_counter(); os.fdatasync(fd); lat.append(time.perf_counter() - t)
    os.close(fd); os.remove(p)
    lat.sort()
    return statistics.median(lat) * 1e6, lat[int(len(lat) * 0.99)] * 1e6
print(f"{os.uname().release}; fdatasync after each 200-byte write, {n} writes per run")
for r in range(rounds):
    for mode in ("append", "prezeroed"):
        m, p99 = run(mode)
        print(f"round {r+1} {mode:<9} p50 {m:7.0f} us  p99 {p99:7.0f} us")
