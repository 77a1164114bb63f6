import subprocess, time, os, re, sys
out = open('/tmp/netns10.txt','w')
p = subprocess.Popen(['bash','deploy/netns/run.sh','--pipeline'], stdout=out, stderr=subprocess.STDOUT, env=dict(os.environ, OUT='/tmp/netns-pipe-10'))
tick = os.sysconf('SC_CLK_TCK')
seen = {}   # pid -> (cpu seconds, first seen, last seen)
phase_lines = []
t0 = time.monotonic()
def cpu(pid):
    with open(f'/proc/{pid}/stat') as f:
        parts = f.read().rsplit(')',1)[1].split()
    return (int(parts[11]) + int(parts[12])) / tick
samples = []
while p.poll() is None:
    now = time.monotonic() - t0
    tot_fwd = 0.0
    for pid in os.listdir('/proc'):
        if not pid.isdigit(): continue
        try:
            cmd = open(f'/proc/{pid}/cmdline','rb').read().replace(b'\0',b' ').decode(errors='replace')
        except OSError: continue
        if 'link.py' in cmd and 'python' in cmd:
            try:
                c = cpu(pid)
            except OSError: continue
            first = seen.get(pid, (0, now, now))[1]
            seen[pid] = (c, first, now)
    fwd = sum(v[0] for v in seen.values())
    samples.append((now, fwd))
    time.sleep(0.1)
out.close()
text = open('/tmp/netns10.txt').read()
print(text[-900:])
print('forwarder processes:', len(seen), 'total CPU s:', round(sum(v[0] for v in seen.values()),2))
# CPU share of the forwarders over the window they existed
if seen:
    start = min(v[1] for v in seen.values()); end = max(v[2] for v in seen.values())
    tot = sum(v[0] for v in seen.values())
    print(f'forwarders alive {end-start:.1f} s; CPU {tot:.2f} s = {tot/(end-start):.2f} CPUs of 2 on average')
# the busiest 1-second windows
best = 0
for i,(t,c) in enumerate(samples):
    for j in range(i, len(samples)):
        if samples[j][0]-t >= 1.0:
            best = max(best, (samples[j][1]-c)/(samples[j][0]-t)); break
print(f'busiest second: forwarders used {best:.2f} CPUs')
