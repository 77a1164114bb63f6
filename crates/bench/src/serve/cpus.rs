//! The CPU sets of `statepipe bench serve --server-cpus LIST`: parsing a
//! CPU list (`0`, `0-3`, `0,2,4-7`, as `taskset -c` takes it), and
//! splitting the usable CPUs into the servers' set and the load
//! generator's (every usable CPU not given to the servers).

use std::fmt;

/// One CPU split: the servers' CPUs and the generator's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuSplit {
    /// The CPUs every server (statepipe and each peer) is pinned to; `k`
    /// is their count.
    pub server: Vec<usize>,
    /// The CPUs the load generators are pinned to.
    pub generator: Vec<usize>,
}

impl CpuSplit {
    /// `k`: how many CPUs the servers get.
    pub fn k(&self) -> usize {
        self.server.len()
    }

    /// A title for the table of this split, e.g.
    /// `k=2 (server CPUs 0-1, generator CPUs 2-3)`.
    pub fn title(&self) -> String {
        format!(
            "k={} (server CPUs {}, generator CPUs {})",
            self.k(),
            CpuList(&self.server),
            CpuList(&self.generator)
        )
    }

    /// The prefix given to the case of each of this split's rows in the
    /// report, e.g. `k=2 cpus 0-1/`.
    pub fn case_prefix(&self) -> String {
        format!("k={} cpus {}/", self.k(), CpuList(&self.server))
    }
}

/// A CPU list written back compactly (`0-3,6`), as `taskset -c` takes it.
#[derive(Debug, Clone, Copy)]
pub struct CpuList<'a>(pub &'a [usize]);

impl fmt::Display for CpuList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("(none)");
        }
        let mut i = 0;
        let mut first = true;
        while i < self.0.len() {
            let start = self.0[i];
            let mut end = start;
            while i + 1 < self.0.len() && self.0[i + 1] == end + 1 {
                i += 1;
                end += 1;
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if end == start {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
            i += 1;
        }
        Ok(())
    }
}

/// Parses a CPU list: comma-separated CPU ids and inclusive ranges
/// (`0`, `0-3`, `0,2,4-7`); spaces around items are allowed. Returns the
/// CPUs sorted, each once.
///
/// # Errors
///
/// An empty list, an item that is not a number or a range, or a range
/// whose end is below its start.
pub fn parse_cpu_list(text: &str) -> Result<Vec<usize>, String> {
    let mut cpus = Vec::new();
    for item in text.split(',') {
        let item = item.trim();
        if item.is_empty() {
            return Err(format!("CPU list {text:?}: an empty item"));
        }
        let number = |s: &str| {
            s.trim()
                .parse::<usize>()
                .map_err(|_| format!("CPU list {text:?}: {s:?} is not a CPU id"))
        };
        match item.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (number(a)?, number(b)?);
                if b < a {
                    return Err(format!(
                        "CPU list {text:?}: range {item} ends below its start"
                    ));
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(number(item)?),
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// Parses each of `values` (one `--server-cpus` each), where a value may
/// hold several lists separated by `;` (`0;0-3`): one set per list, in
/// order.
///
/// # Errors
///
/// As [`parse_cpu_list`], for the first list that does not parse.
pub fn parse_cpu_sets(values: &[String]) -> Result<Vec<Vec<usize>>, String> {
    values
        .iter()
        .flat_map(|v| v.split(';'))
        .filter(|l| !l.trim().is_empty())
        .map(parse_cpu_list)
        .collect()
}

/// Splits `usable` (this process's CPUs) for one server set: the servers
/// get `server`, the generator every usable CPU not in it.
///
/// # Errors
///
/// A CPU of `server` that is not usable (the message lists the usable
/// ones), or no usable CPU left for the generator.
pub fn split(usable: &[usize], server: &[usize]) -> Result<CpuSplit, String> {
    let missing: Vec<usize> = server
        .iter()
        .copied()
        .filter(|c| !usable.contains(c))
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "--server-cpus {}: CPU(s) {} not usable by this process; the usable CPUs are {}",
            CpuList(server),
            CpuList(&missing),
            CpuList(usable)
        ));
    }
    if server.is_empty() {
        return Err("--server-cpus: an empty CPU list".into());
    }
    let generator: Vec<usize> = usable
        .iter()
        .copied()
        .filter(|c| !server.contains(c))
        .collect();
    if generator.is_empty() {
        return Err(format!(
            "--server-cpus {}: no usable CPU is left for the load generator (usable: {}); \
             leave at least one out",
            CpuList(server),
            CpuList(usable)
        ));
    }
    Ok(CpuSplit {
        server: server.to_vec(),
        generator,
    })
}

/// The split without `--server-cpus`: the servers on the first usable CPU,
/// the generator on the second; on a single CPU, the servers on it and the
/// generator unpinned (an empty set).
pub fn default_split(usable: &[usize]) -> CpuSplit {
    CpuSplit {
        server: usable.iter().copied().take(1).collect(),
        generator: usable.iter().copied().skip(1).take(1).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_single_ids_ranges_and_mixes() {
        assert_eq!(parse_cpu_list("0"), Ok(vec![0]));
        assert_eq!(parse_cpu_list("0-3"), Ok(vec![0, 1, 2, 3]));
        assert_eq!(parse_cpu_list("0,2,4-7"), Ok(vec![0, 2, 4, 5, 6, 7]));
        assert_eq!(parse_cpu_list(" 3 , 1-2,1 "), Ok(vec![1, 2, 3]));
        assert_eq!(parse_cpu_list("5-5"), Ok(vec![5]));
    }

    #[test]
    fn rejects_malformed_lists() {
        for bad in ["", ",", "0,", "a", "1-", "-1", "3-1", "0-2-4", "1.5"] {
            assert!(parse_cpu_list(bad).is_err(), "{bad:?} parsed");
        }
        assert!(parse_cpu_list("3-1")
            .unwrap_err()
            .contains("below its start"));
    }

    #[test]
    fn several_lists_in_one_value_or_many() {
        let values = vec!["0".to_string(), "0-1;2,3".to_string()];
        assert_eq!(
            parse_cpu_sets(&values),
            Ok(vec![vec![0], vec![0, 1], vec![2, 3]])
        );
        assert!(parse_cpu_sets(&["0;x".to_string()]).is_err());
    }

    #[test]
    fn writes_lists_back_compactly() {
        assert_eq!(CpuList(&[0, 1, 2, 3, 6, 8, 9]).to_string(), "0-3,6,8-9");
        assert_eq!(CpuList(&[4]).to_string(), "4");
        assert_eq!(CpuList(&[]).to_string(), "(none)");
    }

    #[test]
    fn the_generator_gets_the_cpus_the_servers_do_not() {
        let usable = [0, 1, 2, 3];
        let s = split(&usable, &[0, 2]).unwrap();
        assert_eq!(s.server, [0, 2]);
        assert_eq!(s.generator, [1, 3]);
        assert_eq!(s.k(), 2);
        assert_eq!(s.case_prefix(), "k=2 cpus 0,2/");
        assert_eq!(s.title(), "k=2 (server CPUs 0,2, generator CPUs 1,3)");
        assert_eq!(split(&[0, 1], &[1]).unwrap().generator, [0]);
    }

    #[test]
    fn unusable_cpus_and_no_generator_cpu_are_refused() {
        let e = split(&[0, 1], &[1, 5, 6]).unwrap_err();
        assert!(
            e.contains("5-6") && e.contains("usable CPUs are 0-1"),
            "{e}"
        );
        let e = split(&[0, 1], &[0, 1]).unwrap_err();
        assert!(e.contains("no usable CPU is left"), "{e}");
        assert!(split(&[0, 1], &[]).is_err());
    }

    #[test]
    fn the_default_is_the_first_cpu_and_the_second() {
        assert_eq!(
            default_split(&[2, 5, 7]),
            CpuSplit {
                server: vec![2],
                generator: vec![5]
            }
        );
        assert_eq!(default_split(&[3]).generator, Vec::<usize>::new());
    }
}
