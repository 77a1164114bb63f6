package statepipe.bench.lmax;

import java.util.Arrays;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Cross-thread ping-pong on one AtomicLong: the main thread writes an odd value, the echo
 * thread answers with the next even one. Tells the reader the state of the host: about
 * 100-200 ns on a quiet machine, microseconds when the two threads share a core.
 */
final class PingPong {
    private PingPong() {
    }

    /** Median round trip in ns over `batches` time-bounded batches (the first 3 are JIT warm-up). */
    static double medianRoundTripNs(final int batches, final int tripsPerBatch, final long maxBatchNs)
            throws InterruptedException {
        final AtomicLong cell = new AtomicLong();
        final AtomicLong stop = new AtomicLong();
        final Thread echo = new Thread(() -> {
            long expect = 1;
            while (true) {
                while (cell.get() != expect) {
                    if (stop.get() != 0) {
                        return;
                    }
                    Thread.onSpinWait();
                }
                cell.set(expect + 1);
                expect += 2;
            }
        }, "pingpong-echo");
        echo.setDaemon(true);
        echo.start();
        final int warm = 3;
        final double[] perTrip = new double[batches];
        long v = 0;
        for (int b = 0; b < warm + batches; b++) {
            final long t0 = System.nanoTime();
            long trips = 0;
            long now = t0;
            while (trips < tripsPerBatch && now - t0 < maxBatchNs) {
                for (int j = 0; j < 64; j++) {
                    cell.set(v + 1);
                    while (cell.get() != v + 2) {
                        Thread.onSpinWait();
                    }
                    v += 2;
                }
                trips += 64;
                now = System.nanoTime();
            }
            if (b >= warm) {
                perTrip[b - warm] = (double) (now - t0) / trips;
            }
        }
        stop.set(1);
        echo.join(1000);
        Arrays.sort(perTrip);
        return perTrip[perTrip.length / 2];
    }
}
