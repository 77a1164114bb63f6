package statepipe.bench.lmax;

/** The preallocated slot: a 64-bit counter (a publish timestamp in the latency case). */
public final class LongEvent {
    public long value;
}
