//! The cost simulator: what a plan will do, before running it.
//!
//! Each unit `u` has a service time `c_u` (ns per item reaching it, declared
//! with [`Pipeline::cost`] or measured by [`Pipeline::calibrate`]) and a
//! visit ratio `v_u` (items reaching it per pipeline input: below 1 after a
//! filter or inside a shard copy, above 1 after a stage that emits several).
//! A worker runs its stations one after the other, so its time per
//! pipeline input is `L_w = Σ v_u c_u` over its units, plus a hop cost per
//! message for every ring it reads or writes. The pipeline's period is the
//! largest `L_w`; throughput is its inverse and the bottleneck is the unit
//! with the largest `v_u c_u` on that worker. For a finite run of `n` items
//! the makespan is about `(n − 1) · period + latency`, the latency being the
//! sum of `c_u` along the path of one item.
//!
//! The model ignores what it cannot see: contention for cores beyond the
//! workers (the user's own threads), cache effects of fusing, and a
//! slow consumer of the output.

use std::fmt;

use super::config::Config;
use super::error::DeployError;
use super::plan::Plan;
use crate::pipeline::Pipeline;
use crate::unit::{UnitInfo, UnitKind};

/// What one message costs to pass through a ring, each side, in ns: a slot
/// write or read and, once per batch, a cursor store and a wake-up check.
pub const HOP_NS: f64 = 15.0;

/// One unit's service time and visit ratio.
#[derive(Debug, Clone, PartialEq)]
pub struct UnitCost {
    /// The unit's name.
    pub name: String,
    /// Nanoseconds per item reaching it.
    pub cost_ns: f64,
    /// Items reaching it per pipeline input.
    pub visits: f64,
}

/// What the simulator predicts for a plan.
#[derive(Debug, Clone, PartialEq)]
pub struct Prediction {
    /// Pipeline inputs per second in steady state.
    pub throughput: f64,
    /// The unit that limits it.
    pub bottleneck: String,
    /// The worker it runs on.
    pub bottleneck_worker: usize,
    /// Each worker's time per pipeline input, in ns.
    pub worker_ns: Vec<f64>,
    /// Time for one item to cross the pipeline alone, in ns.
    pub latency_ns: f64,
}

impl Prediction {
    /// The predicted wall time of a run of `items` inputs, in seconds.
    pub fn makespan_s(&self, items: u64) -> f64 {
        let period = 1.0 / self.throughput;
        (items.saturating_sub(1)) as f64 * period + self.latency_ns * 1e-9
    }
}

impl fmt::Display for Prediction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let loads: Vec<String> = self
            .worker_ns
            .iter()
            .enumerate()
            .map(|(w, ns)| format!("w{w} {ns:.0} ns"))
            .collect();
        write!(
            f,
            "{:.3} M items/s, bottleneck `{}` on worker {} (per item: {})",
            self.throughput / 1e6,
            self.bottleneck,
            self.bottleneck_worker,
            loads.join(", ")
        )
    }
}

/// Predicts throughput and the bottleneck of `plan` for units with `costs`
/// (same order as [`Pipeline::units`]).
///
/// # Panics
/// If `costs`, `units` and the plan differ in length.
pub fn simulate(units: &[UnitInfo], costs: &[UnitCost], plan: &Plan) -> Prediction {
    assert_eq!(units.len(), costs.len(), "one cost per unit");
    assert_eq!(units.len(), plan.workers.len(), "one worker per unit");
    let mut worker_ns = vec![0.0; plan.worker_count.max(1)];
    let mut heaviest: Vec<Option<(usize, f64)>> = vec![None; worker_ns.len()];
    for (u, (c, &w)) in costs.iter().zip(&plan.workers).enumerate() {
        let load = c.visits * c.cost_ns;
        worker_ns[w] += load;
        // A unit whose predecessor in the list sits elsewhere reads a ring;
        // so does a merge (one ring per copy and the route log). A join is
        // counted like a stage: the fork it ends runs whole (no ring) when
        // its units share a worker, which is what a cheap fork's plan does.
        let cut = u == 0 || plan.workers[u - 1] != w || units[u].kind == UnitKind::Merge;
        if cut && plan.worker_count > 1 {
            worker_ns[w] += 2.0 * HOP_NS * c.visits;
            if u > 0 {
                worker_ns[plan.workers[u - 1]] += HOP_NS * c.visits;
            }
        }
        if heaviest[w].map_or(true, |(_, l)| load > l) {
            heaviest[w] = Some((u, load));
        }
    }
    let (bw, period) = worker_ns
        .iter()
        .copied()
        .enumerate()
        .fold(
            (0, 0.0),
            |best, (w, l)| if l > best.1 { (w, l) } else { best },
        );
    let bottleneck = heaviest[bw].map_or(String::from("(none)"), |(u, _)| costs[u].name.clone());
    // Along one item's path every visited unit runs once per visit; shard
    // copies are alternatives, so only the share that item visits counts.
    let latency_ns: f64 = costs
        .iter()
        .map(|c| c.cost_ns * c.visits.min(1.0))
        .sum::<f64>()
        .max(1.0);
    Prediction {
        throughput: 1e9 / period.max(1.0),
        bottleneck,
        bottleneck_worker: bw,
        worker_ns,
        latency_ns,
    }
}

impl<I: Send + 'static, O: Send + 'static> Pipeline<I, O> {
    /// Measures every unit's service time and visit ratio by running
    /// `inputs` through the pipeline with each unit a station of its own,
    /// all on one worker (so units do not compete for cores), the inputs
    /// made on that worker, then hands the costs back in
    /// [`Pipeline::units`] order.
    ///
    /// The pipeline is consumed (its stages ran, their states moved on):
    /// build a fresh one to deploy.
    ///
    /// # Errors
    /// As [`Pipeline::deploy`] and [`Running::join`](crate::Running::join).
    pub fn calibrate(
        self,
        inputs: impl IntoIterator<Item = I>,
    ) -> Result<Vec<UnitCost>, DeployError> {
        let units = self.units();
        let config = Config::new().isolated();
        let inputs: Vec<I> = inputs.into_iter().collect();
        let sent = inputs.len() as u64;
        let running = self.deploy_with(&config, inputs, |_, _| {})?;
        let done = running.join()?;
        let probe = Overheads::measure()?;
        let inputs = sent.max(1) as f64;
        Ok(units
            .iter()
            .zip(&done.metrics.units)
            .enumerate()
            .map(|(u, (info, m))| {
                let busy_ns = m.busy_ns as f64 / m.items_in.max(1) as f64;
                // Trade the isolated layout's overhead (ring in, ring out, a
                // station of its own) for a fused call; the first unit also
                // carries the pipeline's source and sink.
                let ends = if u == 0 { probe.ends_ns } else { 0.0 };
                UnitCost {
                    name: info.name.clone(),
                    cost_ns: (busy_ns - probe.isolated_ns).max(0.0) + probe.call_ns + ends,
                    visits: m.items_in as f64 / inputs,
                }
            })
            .collect())
    }
}

impl<I: Send + 'static, O: Send + 'static> Pipeline<I, O> {
    /// Runs `inputs` through the whole pipeline on one worker (inputs made
    /// and outputs dropped on that worker, so it never waits) and returns
    /// the run's wall time per input, in nanoseconds: what the units cost
    /// together when nothing but the plan's own rings (shards) separates
    /// them. See [`fit_fused`].
    ///
    /// # Errors
    /// As [`Pipeline::deploy`] and [`Running::join`](crate::Running::join).
    pub fn fused_cost(self, inputs: impl IntoIterator<Item = I>) -> Result<f64, DeployError> {
        let inputs: Vec<I> = inputs.into_iter().collect();
        let sent = inputs.len().max(1) as f64;
        let done = self
            .deploy_with(&Config::new().workers(1), inputs, |_, _| {})?
            .join()?;
        // The worker is never idle, so its wall time is its busy time,
        // summed over all its stations (a shard's copies have their own).
        Ok(done.metrics.elapsed.as_nanos() as f64 / sent)
    }
}

/// Scales calibrated `costs` so that, on one worker, the model predicts
/// `fused_ns` per input ([`Pipeline::fused_cost`]).
///
/// [`Pipeline::calibrate`] measures each unit on a station of its own and
/// subtracts what such a station costs; for a stage of a few nanoseconds
/// that is a small difference of two large numbers, and it comes out too
/// low. The fused run measures the sum directly; the isolated run still
/// says how it splits between the units.
pub fn fit_fused(costs: &mut [UnitCost], fused_ns: f64) {
    let modelled: f64 = costs.iter().map(|c| c.visits * c.cost_ns).sum();
    if modelled > 0.0 && fused_ns > 0.0 {
        let scale = fused_ns / modelled;
        for c in costs {
            c.cost_ns *= scale;
        }
    }
}

/// What a unit that does nothing costs per item on this machine, measured
/// with chains of identity stages on `u64`.
#[derive(Debug, Clone, Copy)]
struct Overheads {
    /// On a station of its own, between two rings (the calibration layout).
    isolated_ns: f64,
    /// One more unit fused on a station: the call from its neighbour.
    call_ns: f64,
    /// A fused station's source and sink (`deploy_with`'s iterator and
    /// closure) and its per-batch work, per item.
    ends_ns: f64,
}

impl Overheads {
    /// Items per probe run: a few milliseconds.
    const ITEMS: u64 = 100_000;
    /// Units in the long probe chain.
    const UNITS: usize = 5;
    /// Runs per measurement.
    const RUNS: usize = 5;

    fn chain(units: usize) -> Pipeline<u64, u64> {
        (1..units).fold(Pipeline::map("probe 0", |x: u64| x), |p, i| {
            p.then(Pipeline::map(&format!("probe {i}"), |x: u64| x))
        })
    }

    /// Busy ns per item of a fused station of `units` identity units.
    fn fused(units: usize) -> Result<f64, DeployError> {
        let done = Self::chain(units)
            .deploy_with(&Config::new().workers(1), 0..Self::ITEMS, |_, _| {})?
            .join()?;
        // One station: every unit reports the station's busy time.
        Ok(done
            .metrics
            .units
            .first()
            .map_or(0.0, |m| m.busy_ns as f64 / m.items_in.max(1) as f64))
    }

    /// Busy ns per item of a unit on a station of its own between rings.
    fn isolated() -> Result<f64, DeployError> {
        let done = Self::chain(Self::UNITS)
            .deploy_with(&Config::new().isolated(), 0..Self::ITEMS, |_, _| {})?
            .join()?;
        // The inner units read a ring and write one, as most units do.
        let inner = &done.metrics.units[1..Self::UNITS - 1];
        Ok(inner
            .iter()
            .map(|m| m.busy_ns as f64 / m.items_in.max(1) as f64)
            .sum::<f64>()
            / inner.len() as f64)
    }

    /// The median of [`RUNS`](Self::RUNS) measurements: what a run of the
    /// real pipeline will typically meet on this host (the least would be
    /// the cost on a perfectly quiet one, and predict too high).
    fn median(f: impl Fn() -> Result<f64, DeployError>) -> Result<f64, DeployError> {
        let mut runs = (0..Self::RUNS)
            .map(|_| f())
            .collect::<Result<Vec<f64>, _>>()?;
        runs.sort_by(f64::total_cmp);
        Ok(runs[runs.len() / 2])
    }

    fn measure() -> Result<Overheads, DeployError> {
        let isolated_ns = Self::median(Self::isolated)?;
        let one = Self::median(|| Self::fused(1))?;
        let many = Self::median(|| Self::fused(Self::UNITS))?;
        let call_ns = ((many - one) / (Self::UNITS - 1) as f64).max(0.0);
        Ok(Overheads {
            isolated_ns,
            call_ns,
            ends_ns: (one - call_ns).max(0.0),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn units(n: usize) -> Vec<UnitInfo> {
        (0..n)
            .map(|i| UnitInfo {
                name: format!("u{i}"),
                stages: vec![format!("u{i}")],
                cost_ns: 1000.0,
                cost_known: true,
                kind: UnitKind::Stage,
            })
            .collect()
    }

    fn cost(name: &str, ns: f64, visits: f64) -> UnitCost {
        UnitCost {
            name: name.into(),
            cost_ns: ns,
            visits,
        }
    }

    #[test]
    fn one_worker_runs_at_the_sum_of_its_units() {
        let u = units(3);
        let c = [
            cost("u0", 100.0, 1.0),
            cost("u1", 300.0, 1.0),
            cost("u2", 100.0, 2.0),
        ];
        let p = simulate(&u, &c, &Plan::single(3));
        assert_eq!(p.worker_ns, [600.0]);
        assert_eq!(p.bottleneck, "u1");
        assert!((p.throughput - 1e9 / 600.0).abs() < 1e-6);
    }

    #[test]
    fn the_busiest_worker_sets_the_pace() {
        let u = units(4);
        let c = [
            cost("u0", 1000.0, 1.0),
            cost("u1", 1000.0, 1.0),
            cost("u2", 3000.0, 1.0),
            cost("u3", 1000.0, 1.0),
        ];
        let plan = Plan {
            workers: vec![0, 0, 1, 1],
            worker_count: 2,
        };
        let p = simulate(&u, &c, &plan);
        assert_eq!(p.bottleneck, "u2");
        assert_eq!(p.bottleneck_worker, 1);
        // 4000 ns of work plus reading one ring (two sides of a hop).
        assert!((p.worker_ns[1] - (4000.0 + 2.0 * HOP_NS)).abs() < 1e-9);
        assert!(
            (p.makespan_s(1) - 6e-6).abs() < 1e-12,
            "one item: the latency"
        );
    }
}
