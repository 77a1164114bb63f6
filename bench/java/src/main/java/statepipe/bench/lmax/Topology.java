package statepipe.bench.lmax;

import com.lmax.disruptor.dsl.Disruptor;

/** The topologies of `statepipe bench ring`, wired with LMAX's DSL. */
enum Topology {
    P1C1("1p1c", 1, 1),
    P3C1("3p1c", 3, 1),
    /** Multicast: every consumer sees every event. */
    P1C3("1p3c", 1, 3),
    /** P -> A -> B -> C. */
    PIPELINE3("pipeline3", 1, 3),
    /** P -> A, B -> C (C handles s only after A and B did). */
    DIAMOND("diamond", 1, 3);

    final String label;
    final int producers;
    final int consumers;

    Topology(final String label, final int producers, final int consumers) {
        this.label = label;
        this.producers = producers;
        this.consumers = consumers;
    }

    void wire(final Disruptor<LongEvent> d, final SumHandler[] h) {
        switch (this) {
            case P1C1:
            case P3C1:
                d.handleEventsWith(h[0]);
                break;
            case P1C3:
                d.handleEventsWith(h[0], h[1], h[2]);
                break;
            case PIPELINE3:
                d.handleEventsWith(h[0]).then(h[1]).then(h[2]);
                break;
            case DIAMOND:
                d.handleEventsWith(h[0], h[1]).then(h[2]);
                break;
            default:
                throw new AssertionError(this);
        }
    }
}
