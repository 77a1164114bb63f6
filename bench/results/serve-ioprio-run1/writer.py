import os, sys, time
p = sys.argv[1]; end = time.time() + float(sys.argv[2])
fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
buf = b"y" * (1 << 20); n = 0
while time.time() < end:
    os.write(fd, buf); os.fdatasync(fd); n += 1
    if n % 64 == 0: os.ftruncate(fd, 0); os.lseek(fd, 0, 0)
os.close(fd); os.remove(p)
