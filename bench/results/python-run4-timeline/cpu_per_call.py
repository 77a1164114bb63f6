"""Workers' CPU per evolve call (from /proc/PID/stat) over the chunked filter at W workers: target/bench-pyenv/bin/python bench/results/python-run4-timeline/cpu_per_call.py W"""
import sys, time, os
sys.path.insert(0, "python/bench")
import bench_python as b
import numpy as np
import statepipe
W = int(sys.argv[1])
tick = os.sysconf("SC_CLK_TCK")
def cpu(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / tick
y = b.load_nile()[: b.STEPS]
e = statepipe.Engine(b.ChunkModel(y), workers=W, seed=1, placement="workers")
step = b.engine_step(e)
pids = e.pids()
c0 = sum(cpu(p) for p in pids); m0 = time.process_time(); busy0 = b.host_busy_s(); t0 = time.perf_counter()
b.chunked_filter(step, y, 1)
wall = time.perf_counter() - t0
c1 = sum(cpu(p) for p in pids); m1 = time.process_time(); busy1 = b.host_busy_s()
calls = b.STEPS * b.PARTICLES // b.CHUNK
print(f"W={W}: wall {wall:.2f} s; workers' CPU {c1-c0:.2f} s = {1000*(c1-c0)/calls:.3f} ms per call; driver+master CPU {m1-m0:.2f} s; host busy {busy1-busy0:.2f} s")
e.close()
