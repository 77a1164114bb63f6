package statepipe.bench.lmax;

import com.lmax.disruptor.BlockingWaitStrategy;
import com.lmax.disruptor.BusySpinWaitStrategy;
import com.lmax.disruptor.WaitStrategy;
import com.lmax.disruptor.YieldingWaitStrategy;

/** The consumer wait strategies offered by `--wait`. */
enum WaitKind {
    BUSY_SPIN("busy-spin"),
    YIELDING("yielding"),
    BLOCKING("blocking");

    final String label;

    WaitKind(final String label) {
        this.label = label;
    }

    WaitStrategy create() {
        switch (this) {
            case BUSY_SPIN:
                return new BusySpinWaitStrategy();
            case YIELDING:
                return new YieldingWaitStrategy();
            case BLOCKING:
                return new BlockingWaitStrategy();
            default:
                throw new AssertionError(this);
        }
    }

    static WaitKind parse(final String s) {
        for (WaitKind w : values()) {
            if (w.label.equals(s)) {
                return w;
            }
        }
        throw new IllegalArgumentException("--wait must be busy-spin, yielding or blocking, not '" + s + "'");
    }
}
