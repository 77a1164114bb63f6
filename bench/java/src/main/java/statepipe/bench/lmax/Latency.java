package statepipe.bench.lmax;

import com.lmax.disruptor.EventHandler;
import com.lmax.disruptor.RingBuffer;
import com.lmax.disruptor.dsl.Disruptor;
import com.lmax.disruptor.dsl.ProducerType;
import java.util.Arrays;

/**
 * One-hop latency, 1p1c: a paced producer writes System.nanoTime() into the slot and
 * publishes; the consumer records nanoTime() - slot. Includes one nanoTime() call (~20 ns).
 */
final class Latency {
    private Latency() {
    }

    private static final class Recorder implements EventHandler<LongEvent> {
        final long[] ns;
        int n;

        Recorder(final int capacity) {
            ns = new long[capacity];
        }

        @Override
        public void onEvent(final LongEvent event, final long sequence, final boolean endOfBatch) {
            ns[n++] = System.nanoTime() - event.value;
        }
    }

    /** Returns the sorted one-hop latencies of n events, one every intervalNs (after the previous publish). */
    static long[] run(final WaitKind wait, final int n, final long intervalNs) throws InterruptedException {
        final long hardDeadline = System.nanoTime() + (long) n * (intervalNs + 100_000L) + 30_000_000_000L;
        final Threads consumerThreads = new Threads("lmax-latency");
        final Disruptor<LongEvent> d =
                new Disruptor<>(LongEvent::new, Throughput.RING, consumerThreads, ProducerType.SINGLE, wait.create());
        final Recorder rec = new Recorder(n);
        d.handleEventsWith(rec);
        final RingBuffer<LongEvent> rb = d.start();
        final Thread producer = new Thread(() -> {
            long next = System.nanoTime();
            for (int i = 0; i < n; i++) {
                while (System.nanoTime() - next < 0) {
                    Thread.onSpinWait();
                }
                final long s = rb.next();
                rb.get(s).value = System.nanoTime();
                rb.publish(s);
                next = System.nanoTime() + intervalNs;
            }
        }, "latency-producer");
        producer.setDaemon(true);
        producer.start();
        Threads.join(producer, hardDeadline, "latency");
        final long last = rb.getCursor();
        Threads.await(() -> rb.getMinimumGatingSequence() >= last, hardDeadline, "latency");
        d.halt();
        consumerThreads.joinAll(10_000, "latency");
        if (rec.n != n || last + 1 != n) {
            throw new IllegalStateException("latency: consumer saw " + rec.n + " events, expected " + n);
        }
        final long[] sorted = rec.ns.clone();
        Arrays.sort(sorted);
        return sorted;
    }

    /** Nearest-rank percentile of a sorted array. */
    static double percentile(final long[] sorted, final double p) {
        final int rank = (int) Math.ceil(p / 100.0 * sorted.length);
        return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))];
    }
}
