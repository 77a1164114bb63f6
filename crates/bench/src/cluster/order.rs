//! The workers in the order they were started.
//!
//! The master numbers workers in the order they joined, and buddy mode
//! makes each worker's buddies the next ones in that numbering. The fault
//! cases choose whom to kill by start order (`LocalCluster::pids`), and the
//! chaos schedules keep the lost workers from sitting side by side in it.
//! On a loaded host the two orders differ, and "never three side by side"
//! in start order can be three side by side in the master's. So the bench
//! hands the master its workers in start order: each joined connection is
//! matched to the process whose socket it is, through `/proc/net/tcp` (the
//! socket's inode by its local port) and `/proc/PID/fd` (whose inode it
//! is).

use std::collections::HashMap;

use statepipe_cluster::Joined;

/// `joined` reordered to match `pids` (the workers' processes in start
/// order), or as it came where a connection cannot be matched to one of
/// them (no `/proc`, an IPv6 socket): then the bench's kills may fall side
/// by side in the master's numbering, as they may on any host without it.
pub fn in_start_order(joined: Vec<Joined>, pids: &[u32]) -> Vec<Joined> {
    match start_index(&joined, pids) {
        Some(at) => {
            let mut keyed: Vec<(usize, Joined)> = at.into_iter().zip(joined).collect();
            keyed.sort_by_key(|k| k.0);
            keyed.into_iter().map(|k| k.1).collect()
        }
        None => {
            eprintln!(
                "warning: could not match the joined workers to their processes \
                 (/proc/net/tcp): the master numbers them as they joined, and the fault \
                 cases' kills may fall side by side in that order"
            );
            joined
        }
    }
}

/// Each joined connection's position in `pids`, if every one is found.
fn start_index(joined: &[Joined], pids: &[u32]) -> Option<Vec<usize>> {
    let tcp = std::fs::read_to_string("/proc/net/tcp").ok()?;
    let inode_of_port = socket_inodes(&tcp);
    let mut process_of_inode: HashMap<u64, usize> = HashMap::new();
    for (k, pid) in pids.iter().enumerate() {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            let Ok(target) = std::fs::read_link(fd.path()) else {
                continue;
            };
            if let Some(inode) = target
                .to_str()
                .and_then(|t| t.strip_prefix("socket:["))
                .and_then(|t| t.strip_suffix(']'))
                .and_then(|t| t.parse().ok())
            {
                process_of_inode.insert(inode, k);
            }
        }
    }
    let at: Vec<usize> = joined
        .iter()
        .map(|j| {
            let inode = inode_of_port.get(&j.addr().port())?;
            process_of_inode.get(inode).copied()
        })
        .collect::<Option<_>>()?;
    let mut seen = vec![false; pids.len()];
    for &k in &at {
        if std::mem::replace(&mut seen[k], true) {
            return None;
        }
    }
    Some(at)
}

/// Local port → socket inode, for the IPv4 sockets of `/proc/net/tcp`
/// (`sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout
/// inode …`, addresses as `HEXIP:HEXPORT`).
fn socket_inodes(tcp: &str) -> HashMap<u16, u64> {
    let mut out = HashMap::new();
    for line in tcp.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (Some(local), Some(inode)) = (f.get(1), f.get(9)) else {
            continue;
        };
        let port = local
            .split_once(':')
            .and_then(|(_, p)| u16::from_str_radix(p, 16).ok());
        if let (Some(port), Ok(inode)) = (port, inode.parse::<u64>()) {
            if inode != 0 {
                out.insert(port, inode);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_net_tcp_lines_give_port_and_inode() {
        let tcp = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
           0: 0100007F:9C40 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 123456 1 0000000000000000 20 4 30 10 -1\n\
           1: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 654321 1 0000000000000000 100 0 0 10 0\n\
           2: 0100007F:9C41 0100007F:1F90 06 00000000:00000000 03:00000000 00000000     0        0 0 3 0000000000000000\n";
        let m = socket_inodes(tcp);
        assert_eq!(m.get(&0x9C40), Some(&123456));
        assert_eq!(m.get(&0x1F90), Some(&654321));
        // A socket in TIME_WAIT has no inode.
        assert_eq!(m.get(&0x9C41), None);
    }
}
