package statepipe.bench.lmax;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.locks.LockSupport;

/** A thread factory that remembers its threads so a sample can join them before the next one starts. */
final class Threads implements ThreadFactory {
    private final String prefix;
    private final List<Thread> threads = new ArrayList<>();

    Threads(final String prefix) {
        this.prefix = prefix;
    }

    @Override
    public synchronized Thread newThread(final Runnable r) {
        final Thread t = new Thread(r, prefix + "-" + threads.size());
        t.setDaemon(true);
        threads.add(t);
        return t;
    }

    /** Joins every thread this factory made; fails loudly if one is still alive after the timeout. */
    synchronized void joinAll(final long timeoutMs, final String what) throws InterruptedException {
        final long deadline = System.nanoTime() + timeoutMs * 1_000_000L;
        for (Thread t : threads) {
            final long left = Math.max(1, (deadline - System.nanoTime()) / 1_000_000L);
            t.join(left);
            if (t.isAlive()) {
                throw new IllegalStateException(what + ": thread " + t.getName() + " still running after halt");
            }
        }
    }

    /**
     * Waits until cond holds: spins a little (the producer's core is free by now), then parks
     * in 10 µs steps so an oversubscribed host is not starved further. Fails after hardDeadline.
     */
    static void await(final java.util.function.BooleanSupplier cond, final long hardDeadline, final String what) {
        int spins = 0;
        while (!cond.getAsBoolean()) {
            if (spins < 20_000) {
                spins++;
                Thread.onSpinWait();
            } else {
                LockSupport.parkNanos(10_000);
                if (System.nanoTime() - hardDeadline > 0) {
                    throw new IllegalStateException(what + ": consumers did not drain before the deadline");
                }
            }
        }
    }

    static void join(final Thread t, final long hardDeadline, final String what) throws InterruptedException {
        final long leftMs = Math.max(1, (hardDeadline - System.nanoTime()) / 1_000_000L);
        t.join(leftMs);
        if (t.isAlive()) {
            throw new IllegalStateException(what + ": " + t.getName() + " did not finish before the deadline");
        }
    }
}
