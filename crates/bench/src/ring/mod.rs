//! `statepipe bench ring`: the statepipe ring against its peers, in one process.
//!
//! Cases, each a [`Group`] of contenders sampled round-robin by [`crate::harness`]:
//!
//! | case | who |
//! |---|---|
//! | `{1p1c,3p1c,1p3c,pipeline3,diamond}/{single,batch}` | statepipe (adaptive), `disruptor`, and where the topology fits: rtrb (1p1c), crossbeam (1p1c, 3p1c, pipeline3), std-mpsc (1p1c, 3p1c) |
//! | `oversub/3p1c` (`Np1c`, N = max(3, CPUs)), `oversub/1p1c+hog` | statepipe under every wait strategy, `disruptor`, crossbeam (and rtrb with the hog) |
//! | `latency/p50`, `latency/p99`, `latency/p99.9` | statepipe stamped (adaptive, busy-spin), statepipe single (adaptive, busy-spin), `disruptor`, crossbeam |
//!
//! Each case's ratios are taken against its first statepipe row: the default ring
//! (`build_single`, or `build_multi` with many producers, adaptive wait) in the
//! throughput cases, where `1p1c/*` also shows the stamped ring beside it; the
//! stamped ring (`build_stamped`, the kind made for latency) in `latency/*`, where
//! the default ring's rows follow it.
//!
//! Same payload (a `u64` counter), same capacity ([`CAPACITY`]) for all; a fresh ring
//! and fresh threads per sample; every consumer's sum checked. See [`workload`] for how
//! a sample is timed.

pub mod crossbeam;
pub mod disruptor;
pub mod latency;
pub mod oversub;
pub mod rtrb;
pub mod statepipe;
pub mod std_mpsc;
pub mod workload;

use std::time::Duration;

use crate::harness::{self, Contender, Group, Metric, SampleDone};
use crate::host::Host;
use crate::report::Report;
use crate::BenchError;
use statepipe::{Kind, Wait};
pub use workload::{Mode, Pins, Spec, Topology, BATCH, CAPACITY};

/// What `statepipe bench ring` was asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RingOptions {
    /// Short samples, so that the whole run takes well under a minute.
    pub quick: bool,
    /// Samples per contender and case.
    pub samples: usize,
    /// Pin threads one per CPU in cases where they fit.
    pub pin: bool,
    /// Run only the cases whose name contains this.
    pub filter: Option<String>,
}

impl Default for RingOptions {
    fn default() -> Self {
        RingOptions {
            quick: false,
            samples: 5,
            pin: true,
            filter: None,
        }
    }
}

impl RingOptions {
    /// How long producers publish in one sample.
    pub fn sample_duration(&self) -> Duration {
        if self.quick {
            Duration::from_millis(80)
        } else {
            Duration::from_millis(400)
        }
    }

    fn pins(&self, threads: usize, host: &Host) -> Pins {
        if self.pin {
            Pins::spread(threads, &host.cpus)
        } else {
            Pins::default()
        }
    }
}

/// Lines describing the run's set-up, printed under the host's.
pub fn describe(options: &RingOptions, host: &Host) -> String {
    let pinned: Vec<String> = Topology::MAIN
        .iter()
        .filter(|t| options.pins(t.threads(), host).any())
        .map(|t| t.name())
        .chain(options.pins(2, host).any().then(|| "latency".to_string()))
        .collect();
    let pinning = if !options.pin {
        "off (--no-pin): the OS schedules every thread".to_string()
    } else if pinned.is_empty() {
        "none: no case's threads fit on the usable CPUs one per CPU".to_string()
    } else {
        format!(
            "one CPU per thread in {} (threads fit); other cases OS-scheduled",
            pinned.join(", ")
        )
    };
    let hogs = oversub::hog_cpus(&host.cpus).len();
    format!(
        "ring: payload u64 counter, capacity {CAPACITY}, batch {BATCH}; {} samples per contender, \
         each ~{:.2} s of publishing (time-boxed), round-robin per case\n\
         ring: pinning: {pinning}\n\
         ring: oversubscription: oversub/{}p1c on {} CPU(s); oversub/1p1c+hog with {hogs} busy-loop thread(s)",
        options.samples,
        options.sample_duration().as_secs_f64(),
        oversub::producers(host.cpu_count),
        host.cpu_count,
    )
}

/// Every case of the ring benchmark, ours first in each.
pub fn groups(options: &RingOptions, host: &Host) -> Vec<Group<'static>> {
    let mut groups = groups_with(options.sample_duration(), options, host);
    if let Some(f) = &options.filter {
        groups.retain(|g| g.metrics.iter().any(|m| m.case.contains(f.as_str())));
    }
    groups
}

/// [`groups`] with samples of `duration`.
fn groups_with(duration: Duration, options: &RingOptions, host: &Host) -> Vec<Group<'static>> {
    let mut groups = Vec::new();
    for mode in Mode::ALL {
        for topology in Topology::MAIN {
            let spec = Spec {
                topology,
                mode,
                duration,
                pins: options.pins(topology.threads(), host),
            };
            let case = format!("{}/{}", topology.name(), mode.name());
            let mut contenders = vec![
                ours(Wait::Adaptive, &spec),
                // Like for like with the `disruptor` crate's busy-spin: how
                // much of a gap is the default's waiting, how much the ring.
                ours(Wait::BusySpin, &spec),
            ];
            if topology == Topology::OneToOne {
                // What the stamped kind's lower latency costs in throughput.
                contenders.push(ours_kind(Kind::Stamped, Wait::Adaptive, &spec));
            }
            contenders.extend([throughput(
                disruptor::NAME,
                disruptor::CONFIG,
                &spec,
                disruptor::throughput,
            )]);
            if rtrb::supports(topology) {
                contenders.push(throughput(
                    rtrb::NAME,
                    rtrb::config(mode),
                    &spec,
                    rtrb::throughput,
                ));
            }
            if crossbeam::supports(topology) {
                let config = crossbeam::config(topology, mode);
                contenders.push(throughput(
                    crossbeam::NAME,
                    config,
                    &spec,
                    crossbeam::throughput,
                ));
            }
            if std_mpsc::supports(topology) {
                contenders.push(throughput(
                    std_mpsc::NAME,
                    std_mpsc::config(mode),
                    &spec,
                    std_mpsc::throughput,
                ));
            }
            groups.push(Group {
                metrics: vec![Metric::throughput(&case)],
                name: case,
                contenders,
            });
        }
    }
    groups.push(oversubscribed_producers(duration, host));
    groups.push(hogged(duration, host));
    groups.push(latency(duration, options, host));
    groups
}

/// Runs every wanted case and returns the report.
///
/// # Errors
///
/// The first failed sample (see [`BenchError`]), or a filter that matches no case.
pub fn run(
    options: &RingOptions,
    host: &Host,
    progress: &mut dyn FnMut(&SampleDone<'_>),
) -> Result<Report, BenchError> {
    let groups = groups(options, host);
    if groups.is_empty() {
        let all = RingOptions {
            filter: None,
            ..options.clone()
        };
        let names: Vec<String> = self::groups(&all, host)
            .iter()
            .flat_map(|g| g.metrics.iter().map(|m| m.case.clone()))
            .collect();
        return Err(BenchError::no_case_matches(
            "ring",
            options.filter.as_deref(),
            &names,
        ));
    }
    let rows = harness::run(groups, options.samples, progress)?;
    Ok(Report::new("ring", host, rows))
}

fn throughput(
    imp: &str,
    config: impl Into<String>,
    spec: &Spec,
    sample: impl Fn(&Spec) -> Result<f64, BenchError> + 'static,
) -> Contender<'static> {
    let spec = spec.clone();
    Contender::new(imp, config, move || sample(&spec).map(|v| vec![v]))
}

fn ours(wait: Wait, spec: &Spec) -> Contender<'static> {
    ours_kind(Kind::Single, wait, spec)
}

fn ours_kind(kind: Kind, wait: Wait, spec: &Spec) -> Contender<'static> {
    throughput(statepipe::NAME, kind.config(wait), spec, move |s| {
        statepipe::throughput(kind, wait, s)
    })
}

/// `oversub/Np1c`: unpinned, single publishes.
fn oversubscribed_producers(duration: Duration, host: &Host) -> Group<'static> {
    let topology = Topology::ManyToOne(oversub::producers(host.cpu_count));
    let spec = Spec {
        topology,
        mode: Mode::Single,
        duration,
        pins: Pins::default(),
    };
    let case = format!("oversub/{}", topology.name());
    let mut contenders: Vec<_> = Wait::ALL.iter().map(|w| ours(*w, &spec)).collect();
    contenders.push(throughput(
        disruptor::NAME,
        disruptor::CONFIG,
        &spec,
        disruptor::throughput,
    ));
    contenders.push(throughput(
        crossbeam::NAME,
        crossbeam::config(topology, Mode::Single),
        &spec,
        crossbeam::throughput,
    ));
    Group {
        metrics: vec![Metric::throughput(&case)],
        name: case,
        contenders,
    }
}

/// `oversub/1p1c+hog`: unpinned 1p1c, single publishes, hogs running around each sample
/// (started before the clock, stopped after).
fn hogged(duration: Duration, host: &Host) -> Group<'static> {
    let spec = Spec {
        topology: Topology::OneToOne,
        mode: Mode::Single,
        duration,
        pins: Pins::default(),
    };
    let case = "oversub/1p1c+hog".to_string();
    let hog_cpus = oversub::hog_cpus(&host.cpus);
    let hogged = |sample: fn(&Spec) -> Result<f64, BenchError>| {
        let hog_cpus = hog_cpus.clone();
        move |spec: &Spec| {
            let _hogs = oversub::Hogs::start(&hog_cpus);
            sample(spec)
        }
    };
    let mut contenders: Vec<_> = Wait::ALL
        .iter()
        .map(|&wait| {
            let hog_cpus = hog_cpus.clone();
            throughput(statepipe::NAME, wait.config(), &spec, move |s| {
                let _hogs = oversub::Hogs::start(&hog_cpus);
                statepipe::throughput(Kind::Single, wait, s)
            })
        })
        .collect();
    contenders.push(throughput(
        disruptor::NAME,
        disruptor::CONFIG,
        &spec,
        hogged(disruptor::throughput),
    ));
    contenders.push(throughput(
        rtrb::NAME,
        rtrb::config(Mode::Single),
        &spec,
        hogged(rtrb::throughput),
    ));
    let crossbeam_config = crossbeam::config(Topology::OneToOne, Mode::Single);
    contenders.push(throughput(
        crossbeam::NAME,
        crossbeam_config,
        &spec,
        hogged(crossbeam::throughput),
    ));
    Group {
        metrics: vec![Metric::throughput(&case)],
        name: case,
        contenders,
    }
}

/// `latency/*`: 1p1c, paced, pinned when two threads fit.
fn latency(duration: Duration, options: &RingOptions, host: &Host) -> Group<'static> {
    let spec = latency::Spec {
        duration,
        pins: options.pins(2, host),
    };
    let ours = |kind: Kind, wait: Wait| {
        let spec = spec.clone();
        Contender::new(statepipe::NAME, kind.config(wait), move || {
            latency::statepipe(kind, wait, &spec)
        })
    };
    let disruptor = {
        let spec = spec.clone();
        Contender::new(disruptor::NAME, disruptor::CONFIG, move || {
            latency::disruptor(&spec)
        })
    };
    let crossbeam = {
        let spec = spec.clone();
        Contender::new(
            crossbeam::NAME,
            "bounded(65536); blocking recv",
            move || latency::crossbeam(&spec),
        )
    };
    Group {
        name: "latency".into(),
        metrics: latency::QUANTILES
            .iter()
            .map(|(_, case)| Metric::latency_ns(*case))
            .collect(),
        contenders: vec![
            ours(Kind::Stamped, Wait::Adaptive),
            ours(Kind::Stamped, Wait::BusySpin),
            ours(Kind::Single, Wait::Adaptive),
            ours(Kind::Single, Wait::BusySpin),
            disruptor,
            crossbeam,
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A filter that matches nothing is an error that lists the cases.
    #[test]
    fn a_filter_matching_nothing_names_the_cases() {
        let host = crate::host::measure(Duration::from_millis(2));
        let options = RingOptions {
            quick: true,
            samples: 1,
            pin: false,
            filter: Some("no-such-case".into()),
        };
        let err = run(&options, &host, &mut |_| {}).unwrap_err().to_string();
        assert!(
            err.contains("1p1c/single") && err.contains("latency/p50"),
            "{err}"
        );
    }

    /// Every contender of every case runs (short samples) and its sums check out.
    #[test]
    fn every_contender_runs_with_checked_sums() {
        let host = crate::host::measure(Duration::from_millis(2));
        let options = RingOptions {
            quick: true,
            samples: 1,
            pin: true,
            filter: None,
        };
        let groups = groups_with(Duration::from_millis(20), &options, &host);
        let expected_rows: usize = groups
            .iter()
            .map(|g| g.metrics.len() * g.contenders.len())
            .sum();
        for group in &groups {
            assert_eq!(
                group.contenders[0].imp,
                statepipe::NAME,
                "{}: ours first",
                group.name
            );
        }
        let rows = harness::run(groups, 1, &mut |_| {}).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(rows.len(), expected_rows);
        assert!(
            rows.iter().all(|r| r.median > 0.0 && r.median.is_finite()),
            "{rows:?}"
        );
        let cases: Vec<&str> = rows.iter().map(|r| r.case.as_str()).collect();
        for case in [
            "1p1c/single",
            "3p1c/batch",
            "1p3c/single",
            "pipeline3/batch",
            "diamond/single",
            "oversub/1p1c+hog",
            "latency/p99.9",
        ] {
            assert!(cases.contains(&case), "missing {case}");
        }
    }
}
