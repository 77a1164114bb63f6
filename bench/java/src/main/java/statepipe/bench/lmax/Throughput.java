package statepipe.bench.lmax;

import com.lmax.disruptor.RingBuffer;
import com.lmax.disruptor.dsl.Disruptor;
import com.lmax.disruptor.dsl.ProducerType;
import java.util.concurrent.CountDownLatch;

/**
 * One throughput sample: a fresh Disruptor, producers that publish for a fixed time, then
 * the consumers drain; throughput = events handled by every consumer / (drained - first start).
 * Every sample is bounded in time (producers stop at their deadline whatever the rate), so an
 * oversubscribed host gives a low figure, never a hang.
 */
final class Throughput {
    static final int RING = 65_536;
    static final int BATCH = 64;
    /** The producers look at the clock once every this many events. */
    private static final int CHECK_EVERY = 1024;

    private Throughput() {
    }

    static final class Result {
        final long events;
        final long elapsedNs;

        Result(final long events, final long elapsedNs) {
            this.events = events;
            this.elapsedNs = elapsedNs;
        }

        double mevs() {
            return events * 1e3 / elapsedNs;
        }
    }

    private static final class Producer implements Runnable {
        private final RingBuffer<LongEvent> rb;
        private final boolean batch;
        private final long durationNs;
        private final CountDownLatch go;
        volatile long start;
        long published;

        Producer(final RingBuffer<LongEvent> rb, final boolean batch, final long durationNs, final CountDownLatch go) {
            this.rb = rb;
            this.batch = batch;
            this.durationNs = durationNs;
            this.go = go;
        }

        @Override
        public void run() {
            try {
                go.await();
            } catch (InterruptedException e) {
                return;
            }
            final long t0 = System.nanoTime();
            start = t0;
            published = batch ? runBatch(rb, t0 + durationNs) : runSingle(rb, t0 + durationNs);
        }

        /** One event per next()/publish(). Values 0, 1, 2, ... */
        private static long runSingle(final RingBuffer<LongEvent> rb, final long deadline) {
            long v = 0;
            do {
                for (int j = 0; j < CHECK_EVERY; j++) {
                    final long s = rb.next();
                    rb.get(s).value = v++;
                    rb.publish(s);
                }
            } while (System.nanoTime() - deadline < 0);
            return v;
        }

        /** 64 events per claim: next(64), fill in place, publish(lo, hi). */
        private static long runBatch(final RingBuffer<LongEvent> rb, final long deadline) {
            long v = 0;
            do {
                for (int j = 0; j < CHECK_EVERY / BATCH; j++) {
                    final long hi = rb.next(BATCH);
                    final long lo = hi - (BATCH - 1);
                    for (long s = lo; s <= hi; s++) {
                        rb.get(s).value = v++;
                    }
                    rb.publish(lo, hi);
                }
            } while (System.nanoTime() - deadline < 0);
            return v;
        }
    }

    static Result run(final Topology topo, final boolean batch, final WaitKind wait, final long durationNs)
            throws InterruptedException {
        final String what = topo.label + (batch ? "/batch" : "/single");
        final long hardDeadline = System.nanoTime() + durationNs + 30_000_000_000L;
        final Threads consumerThreads = new Threads("lmax-" + topo.label);
        final ProducerType type = topo.producers == 1 ? ProducerType.SINGLE : ProducerType.MULTI;
        final Disruptor<LongEvent> d = new Disruptor<>(LongEvent::new, RING, consumerThreads, type, wait.create());
        final SumHandler[] handlers = new SumHandler[topo.consumers];
        for (int i = 0; i < handlers.length; i++) {
            handlers[i] = new SumHandler();
        }
        topo.wire(d, handlers);
        final RingBuffer<LongEvent> rb = d.start();

        final CountDownLatch go = new CountDownLatch(1);
        final Producer[] producers = new Producer[topo.producers];
        final Thread[] producerThreads = new Thread[topo.producers];
        for (int i = 0; i < producers.length; i++) {
            producers[i] = new Producer(rb, batch, durationNs, go);
            producerThreads[i] = new Thread(producers[i], "producer-" + i);
            producerThreads[i].setDaemon(true);
            producerThreads[i].start();
        }
        go.countDown();
        for (Thread t : producerThreads) {
            Threads.join(t, hardDeadline, what);
        }
        final long last = rb.getCursor();
        Threads.await(() -> rb.getMinimumGatingSequence() >= last, hardDeadline, what);
        final long t1 = System.nanoTime();
        d.halt();
        consumerThreads.joinAll(10_000, what);

        long t0 = Long.MAX_VALUE;
        long expectedCount = 0;
        long expectedSum = 0;
        for (Producer p : producers) {
            t0 = Math.min(t0, p.start);
            final long k = p.published;
            expectedCount += k;
            expectedSum += k * (k - 1) / 2; // each producer published 0..k-1
        }
        if (last + 1 != expectedCount) {
            throw new IllegalStateException(what + ": cursor " + last + " but producers published " + expectedCount);
        }
        for (int i = 0; i < handlers.length; i++) {
            final SumHandler h = handlers[i];
            if (h.count() != expectedCount || h.sum() != expectedSum) {
                throw new IllegalStateException(what + ": consumer " + i + " saw " + h.count() + " events summing to "
                        + h.sum() + ", expected " + expectedCount + " summing to " + expectedSum);
            }
        }
        return new Result(expectedCount, t1 - t0);
    }
}
