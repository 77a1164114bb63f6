//! The targets of `statepipe bench serve`, each with its figure and
//! whether it is met, from a report's rows.

use statepipe_bench::report::{Report, ResultRow};

/// statepipe's row of `case`.
pub fn ours<'a>(rows: &'a [ResultRow], case: &str) -> Option<&'a ResultRow> {
    rows.iter().find(|r| r.case == case && r.imp == "statepipe")
}

/// The targets, each with its figure and whether it is met.
pub fn targets(report: &Report) -> String {
    let rows = &report.results;
    let mut out = String::from("targets:\n");
    let mark = |ok: bool| if ok { "met" } else { "NOT met" };
    let best_peer = |case: &str| {
        rows.iter()
            .filter(|r| r.case == case && !r.imp.starts_with("statepipe"))
            .max_by(|a, b| a.median.total_cmp(&b.median))
    };
    let p99_of = |r: &ResultRow, key: &str| {
        rows.iter()
            .find(|x| x.case == format!("{key}/p99") && x.imp == r.imp && x.config == r.config)
            .map(|x| x.median)
    };
    for (key, need) in [("get-one", 1.1), ("post", 1.2)] {
        let case = format!("{key}/req/s");
        if let (Some(o), Some(p)) = (ours(rows, &case), best_peer(&case)) {
            let ratio = o.median / p.median;
            let (op99, pp99) = (p99_of(o, key), p99_of(p, key));
            out.push_str(&format!(
                "  {key}: statepipe {:.0} req/s = {ratio:.2}x the best peer ({} {}: {:.0}) [need >= {need}x: {}]",
                o.median,
                p.imp,
                p.config,
                p.median,
                mark(ratio >= need)
            ));
            if let (Some(a), Some(b)) = (op99, pp99) {
                out.push_str(&format!(
                    "; p99 {a:.2} ms vs {b:.2} ms{}",
                    if key == "get-one" {
                        format!(" [need <=: {}]", mark(a <= b))
                    } else {
                        String::new()
                    }
                ));
            }
            out.push('\n');
        }
    }
    if let (Some(f), Some(b)) = (
        ours(rows, "post/fsyncs"),
        ours(rows, "post/writes per fsync"),
    ) {
        out.push_str(&format!(
            "  post: {:.0} fsyncs/s, {:.1} writes per fsync (mean)\n",
            f.median, b.median
        ));
    }
    if let Some(r) = rows
        .iter()
        .find(|r| r.case.starts_with("restart after SIGKILL"))
    {
        out.push_str(&format!(
            "  {}: ready in {:.2} s (median; max {:.2}) [need < 2 s: {}]\n",
            r.case,
            r.median,
            r.max,
            mark(r.max < 2.0)
        ));
    }
    if let Some(r) = rows
        .iter()
        .find(|r| r.case.ends_with("idle keep-alive connections"))
    {
        out.push_str(&format!(
            "  {}: {:.0} MB [need < 200 MB: {}]\n",
            r.case,
            r.median,
            mark(r.median < 200.0)
        ));
    }
    let get = |c: &str| ours(rows, c).map(|r| r.median);
    if let (Some(busy_p99), Some(acc_p99), Some(errors), Some(lost), Some(busy)) = (
        get("overload 2x/429 p99"),
        get("overload 2x/accepted p99"),
        get("overload 2x/errors"),
        get("overload 2x/acked writes lost"),
        get("overload 2x/429"),
    ) {
        // Under a quota, the closed-loop POST p99 measured under the same
        // quota; else the rounds'.
        let unloaded = get("overload 2x/capacity p99")
            .or_else(|| get("post/p99"))
            .unwrap_or(f64::NAN);
        if let (Some(offered), Some(sent)) = (get("overload 2x/offered"), get("overload 2x/sent")) {
            out.push_str(&format!(
                "  overload 2x: asked {offered:.0} req/s, the generator sent {sent:.0} req/s ({:.2}x the POST capacity){}\n",
                2.0 * sent / offered,
                if sent < 0.95 * offered { ": the generator, not the server, set the rate" } else { "" }
            ));
        }
        out.push_str(&format!(
            "  overload 2x: {busy:.0} answered 429, their p99 {busy_p99:.2} ms [need < 1 ms: {}]; accepted p99 {acc_p99:.2} ms vs unloaded POST p99 {unloaded:.2} ms [need <= 3x: {}]; errors {errors:.0} [need 0: {}]; acked writes lost {lost:.0} [need 0: {}]\n",
            mark(busy > 0.0 && busy_p99 < 1.0),
            mark(acc_p99 <= 3.0 * unloaded),
            mark(errors == 0.0),
            mark(lost == 0.0),
        ));
        if let (Some(share), Some(longest), Some(floor)) = (
            get("overload 2x/host stalls"),
            get("overload 2x/host longest stall"),
            get("overload 2x/host p99 floor"),
        ) {
            let watch = statepipe_bench::serve::extras::STALL_WATCH.as_secs_f64();
            out.push_str(&format!(
                "  overload 2x: around the run ({watch:.0} s before, {watch:.0} s after) the host took at least {share:.2} % of a CPU's time away (longest {longest:.2} ms), \
                 which alone puts 1 % of arrivals {floor:.2} ms late or more (lower bounds: a stall \
                 between two of the sampler's wake-ups is missed)\n"
            ));
        }
    }
    out
}
