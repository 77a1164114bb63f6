//! Deployment plans: which worker runs each unit.
//!
//! A *unit* is what a plan places: a stage, the merge of a shard, or the
//! join where the branches of a fan-out, par, choice, merge or choose
//! meet. Units are numbered in description order, the order of
//! [`Run::states`](crate::Run::states): a construct's branches' units,
//! then its merge or join. Units that are neighbours on the same worker are
//! fused; a shard's copies and a construct's branches may sit on different
//! workers (a construct whose units all share the worker before it runs
//! whole there).

use std::fmt;

use crate::unit::UnitInfo;

/// The least estimated work per item (ns) that is worth a station of its
/// own: below it, the ring hop costs more than the parallelism gains.
pub const MIN_STATION_NS: f64 = 200.0;

/// Which worker runs each unit (index = unit number).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// `workers[u]` is the worker of unit `u`.
    pub workers: Vec<usize>,
    /// How many workers the plan uses (some may be left without units).
    pub worker_count: usize,
}

impl Plan {
    /// Everything on worker 0.
    pub fn single(units: usize) -> Plan {
        Plan {
            workers: vec![0; units],
            worker_count: 1,
        }
    }

    /// One worker per unit: the thread-per-stage layout, for comparison.
    pub fn thread_per_stage(units: usize) -> Plan {
        Plan {
            workers: (0..units).collect(),
            worker_count: units.max(1),
        }
    }

    /// The default: cuts the units, in order, into at most `workers`
    /// contiguous runs of about equal estimated cost, so that neighbours
    /// stay fused and every worker gets a similar share. The cut is the
    /// optimal contiguous partition (smallest largest run), found by binary
    /// search on the bound.
    ///
    /// A ring hop costs tens of nanoseconds, so cutting cheap work only
    /// adds cost: the plan uses at most one worker per [`MIN_STATION_NS`]
    /// of total estimated cost.
    pub fn balanced(units: &[UnitInfo], workers: usize) -> Plan {
        let total: f64 = units.iter().map(|u| u.cost_ns.max(0.0)).sum();
        let worth = (total / MIN_STATION_NS).floor().max(1.0) as usize;
        let workers = workers.max(1).min(worth);
        if units.is_empty() || workers == 1 {
            return Plan::single(units.len());
        }
        let costs: Vec<f64> = units.iter().map(|u| u.cost_ns.max(1e-3)).collect();
        let fits = |bound: f64| -> Option<Vec<usize>> {
            let mut out = Vec::with_capacity(costs.len());
            let (mut w, mut load) = (0usize, 0.0);
            for &c in &costs {
                if c > bound {
                    return None;
                }
                if load + c > bound {
                    w += 1;
                    load = 0.0;
                    if w == workers {
                        return None;
                    }
                }
                load += c;
                out.push(w);
            }
            Some(out)
        };
        let sum: f64 = costs.iter().sum();
        let (mut lo, mut hi) = (costs.iter().cloned().fold(0.0, f64::max), sum);
        let mut best = fits(hi).expect("everything on one worker always fits");
        for _ in 0..60 {
            let mid = (lo + hi) / 2.0;
            match fits(mid) {
                Some(p) => {
                    best = p;
                    hi = mid;
                }
                None => lo = mid,
            }
        }
        let used = best.iter().max().map_or(1, |w| w + 1);
        Plan {
            workers: best,
            worker_count: used,
        }
    }

    /// The estimated load of each worker, in nanoseconds per pipeline item,
    /// counting each unit once per item (the [`simulate`](crate::simulate)
    /// function refines this with how many items reach each unit).
    pub fn loads(&self, units: &[UnitInfo]) -> Vec<f64> {
        let mut loads = vec![0.0; self.worker_count];
        for (u, &w) in units.iter().zip(&self.workers) {
            loads[w] += u.cost_ns;
        }
        loads
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let placed: Vec<String> = self.workers.iter().map(|w| w.to_string()).collect();
        write!(
            f,
            "{} worker(s); unit → worker: [{}]",
            self.worker_count,
            placed.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::unit::UnitKind;

    fn unit(cost: f64) -> UnitInfo {
        UnitInfo {
            name: "u".into(),
            stages: vec![],
            cost_ns: cost * 1000.0,
            cost_known: true,
            kind: UnitKind::Stage,
        }
    }

    #[test]
    fn balanced_cuts_into_equal_runs() {
        let units: Vec<_> = [1.0, 1.0, 1.0, 1.0].map(unit).into();
        assert_eq!(Plan::balanced(&units, 2).workers, [0, 0, 1, 1]);
        assert_eq!(Plan::balanced(&units, 4).workers, [0, 1, 2, 3]);
        assert_eq!(Plan::balanced(&units, 1).workers, [0, 0, 0, 0]);
    }

    #[test]
    fn balanced_isolates_the_heavy_unit() {
        let units: Vec<_> = [1.0, 10.0, 1.0, 1.0].map(unit).into();
        let p = Plan::balanced(&units, 2);
        assert_eq!(p.workers, [0, 0, 1, 1]);
        let units: Vec<_> = [1.0, 1.0, 1.0, 10.0].map(unit).into();
        assert_eq!(Plan::balanced(&units, 2).workers, [0, 0, 0, 1]);
    }

    #[test]
    fn cheap_units_stay_fused_on_one_worker() {
        let units: Vec<_> = [0.01, 0.01, 0.01].map(unit).into();
        assert_eq!(Plan::balanced(&units, 2).workers, [0, 0, 0]);
    }

    #[test]
    fn balanced_never_uses_more_workers_than_units() {
        let units: Vec<_> = [5.0, 5.0].map(unit).into();
        let p = Plan::balanced(&units, 8);
        assert_eq!(p.workers, [0, 1]);
        assert_eq!(p.worker_count, 2);
    }
}
