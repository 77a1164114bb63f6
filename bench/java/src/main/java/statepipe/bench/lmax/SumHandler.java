package statepipe.bench.lmax;

import com.lmax.disruptor.EventHandler;

/** Padding before the hot fields, so two handlers allocated side by side never share a cache line. */
abstract class SumLhsPadding {
    protected long p01, p02, p03, p04, p05, p06, p07, p08, p09, p10, p11, p12, p13, p14, p15;
}

abstract class SumFields extends SumLhsPadding {
    protected long sum;
    protected long count;
}

/**
 * The consumer used in every throughput topology: sums the counter and counts events.
 * One class for every consumer, so the handler call in LMAX's BatchEventProcessor stays
 * monomorphic across cases. Fields are read by the driver only after the thread was joined.
 */
final class SumHandler extends SumFields implements EventHandler<LongEvent> {
    protected long q01, q02, q03, q04, q05, q06, q07, q08, q09, q10, q11, q12, q13, q14, q15;

    @Override
    public void onEvent(final LongEvent event, final long sequence, final boolean endOfBatch) {
        sum += event.value;
        count++;
    }

    long sum() {
        return sum;
    }

    long count() {
        return count;
    }
}
