package statepipe.bench.lmax;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/**
 * LMAX Disruptor 4 on the topologies of `statepipe bench ring`; prints (and optionally
 * writes) the JSON shape shared by every `statepipe bench` subcommand, with impl "lmax".
 * Progress and a table go to stderr; the JSON alone goes to stdout.
 */
public final class Main {
    private static final String USAGE = String.join("\n",
            "usage: java -jar statepipe-bench-lmax.jar [options]",
            "  --quick            short run (shorter warm-up and samples)",
            "  --samples N        samples per case (default 5, at least 1)",
            "  --json FILE        also write the JSON to FILE",
            "  --wait W           busy-spin (default) | yielding | blocking",
            "  --only LIST        comma-separated case prefixes, e.g. 1p1c,3p1c/batch,latency",
            "  --sample-ms MS     producer time per throughput sample (default 500, quick 200)",
            "  --warmup-ms MS     warm-up time per case, not measured (default 1000, quick 300)");

    private Main() {
    }

    /** One row of "results". */
    private static final class Row {
        final String caseName;
        final String unit;
        final boolean higherIsBetter;
        final double[] samples;

        Row(final String caseName, final String unit, final boolean higherIsBetter, final double[] samples) {
            this.caseName = caseName;
            this.unit = unit;
            this.higherIsBetter = higherIsBetter;
            this.samples = samples.clone();
            Arrays.sort(this.samples);
        }

        double median() {
            final int n = samples.length;
            return n % 2 == 1 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2;
        }
    }

    public static void main(final String[] args) {
        try {
            System.exit(run(args));
        } catch (Throwable t) {
            System.err.println("lmax bench FAILED: " + t);
            t.printStackTrace();
            System.err.flush();
            // halt, not exit: a stuck busy-spinning thread must not keep the JVM alive.
            Runtime.getRuntime().halt(1);
        }
    }

    private static int run(final String[] args) throws Exception {
        boolean quick = false;
        int samples = 5;
        String jsonPath = null;
        WaitKind wait = WaitKind.BUSY_SPIN;
        List<String> only = new ArrayList<>();
        long sampleMs = -1;
        long warmupMs = -1;
        for (int i = 0; i < args.length; i++) {
            final String a = args[i];
            switch (a) {
                case "--quick":
                    quick = true;
                    break;
                case "--samples":
                    samples = Integer.parseInt(value(args, ++i, a));
                    if (samples < 1) {
                        throw new IllegalArgumentException("--samples must be at least 1");
                    }
                    break;
                case "--json":
                    jsonPath = value(args, ++i, a);
                    break;
                case "--wait":
                    wait = WaitKind.parse(value(args, ++i, a));
                    break;
                case "--only":
                    only = Arrays.asList(value(args, ++i, a).split(","));
                    break;
                case "--sample-ms":
                    sampleMs = Long.parseLong(value(args, ++i, a));
                    break;
                case "--warmup-ms":
                    warmupMs = Long.parseLong(value(args, ++i, a));
                    break;
                case "-h":
                case "--help":
                    System.out.println(USAGE);
                    return 0;
                default:
                    System.err.println("unknown argument: " + a + "\n" + USAGE);
                    return 2;
            }
        }
        if (sampleMs < 0) {
            sampleMs = quick ? 200 : 500;
        }
        if (warmupMs < 0) {
            warmupMs = quick ? 300 : 1000;
        }
        final String config = "wait=" + wait.label;
        final int cpus = Runtime.getRuntime().availableProcessors();

        final double pingpong = PingPong.medianRoundTripNs(quick ? 7 : 11, 20_000, 50_000_000L);
        System.err.printf(Locale.ROOT, "host: %d cpus, ping-pong %.1f ns (quiet host: under ~200 ns)%n", cpus, pingpong);
        System.err.printf(Locale.ROOT, "lmax disruptor 4, %s, ring %d, %d samples x %d ms, warm-up %d ms per case%n",
                config, Throughput.RING, samples, sampleMs, warmupMs);

        final List<Row> rows = new ArrayList<>();
        for (Topology topo : Topology.values()) {
            for (boolean batch : new boolean[] {false, true}) {
                final String name = topo.label + (batch ? "/batch" : "/single");
                if (!selected(only, name)) {
                    continue;
                }
                if (topo.producers + topo.consumers > cpus && wait == WaitKind.BUSY_SPIN) {
                    System.err.printf("%s: %d busy threads on %d cpus (oversubscribed)%n",
                            name, topo.producers + topo.consumers, cpus);
                }
                Throughput.run(topo, batch, wait, warmupMs * 1_000_000L);
                final double[] s = new double[samples];
                for (int i = 0; i < samples; i++) {
                    s[i] = Throughput.run(topo, batch, wait, sampleMs * 1_000_000L).mevs();
                }
                final Row row = new Row(name, "Mev/s", true, s);
                rows.add(row);
                report(row);
            }
        }

        if (selected(only, "latency/p50")) {
            final int n = quick ? 50_000 : 200_000;
            final long interval = 4_000; // one event every 4 µs
            Latency.run(wait, n / 2, interval); // warm-up
            final double[] p50 = new double[samples];
            final double[] p99 = new double[samples];
            final double[] p999 = new double[samples];
            for (int i = 0; i < samples; i++) {
                final long[] sorted = Latency.run(wait, n, interval);
                p50[i] = Latency.percentile(sorted, 50);
                p99[i] = Latency.percentile(sorted, 99);
                p999[i] = Latency.percentile(sorted, 99.9);
            }
            for (Row row : new Row[] {new Row("latency/p50", "ns", false, p50), new Row("latency/p99", "ns", false, p99),
                    new Row("latency/p99.9", "ns", false, p999)}) {
                rows.add(row);
                report(row);
            }
        }

        final String json = json(cpus, pingpong, config, rows);
        System.out.println(json);
        if (jsonPath != null) {
            final Path p = Path.of(jsonPath);
            if (p.getParent() != null) {
                Files.createDirectories(p.getParent());
            }
            Files.writeString(p, json + "\n", StandardCharsets.UTF_8);
            System.err.println("wrote " + p);
        }
        return 0;
    }

    private static String value(final String[] args, final int i, final String flag) {
        if (i >= args.length) {
            throw new IllegalArgumentException(flag + " needs a value");
        }
        return args[i];
    }

    private static boolean selected(final List<String> only, final String name) {
        if (only.isEmpty()) {
            return true;
        }
        for (String p : only) {
            if (!p.isEmpty() && name.startsWith(p)) {
                return true;
            }
        }
        return false;
    }

    private static void report(final Row r) {
        final StringBuilder all = new StringBuilder();
        for (double v : r.samples) {
            all.append(all.length() == 0 ? "" : " ").append(fmt(v));
        }
        System.err.printf(Locale.ROOT, "%-18s median %10s %-5s min %10s max %10s   [%s]%n",
                r.caseName, fmt(r.median()), r.unit, fmt(r.samples[0]), fmt(r.samples[r.samples.length - 1]), all);
    }

    private static String fmt(final double v) {
        return String.format(Locale.ROOT, v >= 100 ? "%.1f" : "%.3f", v);
    }

    private static String json(final int cpus, final double pingpong, final String config, final List<Row> rows) {
        final StringBuilder b = new StringBuilder();
        b.append("{\"bench\": \"ring\", \"host\": {\"cpus\": ").append(cpus)
                .append(", \"pingpong_ns\": ").append(fmt(pingpong)).append("}, \"results\": [");
        for (int i = 0; i < rows.size(); i++) {
            final Row r = rows.get(i);
            b.append(i == 0 ? "\n  " : ",\n  ");
            b.append("{\"case\": \"").append(r.caseName).append("\", \"impl\": \"lmax\", \"config\": \"").append(config)
                    .append("\", \"unit\": \"").append(r.unit).append("\", \"higher_is_better\": ")
                    .append(r.higherIsBetter).append(", \"median\": ").append(fmt(r.median()))
                    .append(", \"min\": ").append(fmt(r.samples[0]))
                    .append(", \"max\": ").append(fmt(r.samples[r.samples.length - 1]))
                    .append(", \"samples\": ").append(r.samples.length).append('}');
        }
        b.append(rows.isEmpty() ? "]}" : "\n]}");
        return b.toString();
    }
}
