//! The five validation checks of a BFS tree, from the Graph500
//! specification (kernel 2, "Validation").

use std::sync::atomic::{AtomicBool, Ordering};

use super::bfs::{BfsTree, NONE};
use super::edges::{EdgeList, ScanError, Source};
use super::error::ValidationError;

/// Checks `tree` against the input edge list on `workers` threads and
/// returns the number of input tuples within the traversed component (the
/// `nedge` of the TEPS figure: both ends in the tree, self-loops and
/// repeated tuples included).
///
/// 1. the parents form a tree rooted at the root (`parent[root] = root`,
///    level 0, and following parents from any tree vertex reaches the root);
/// 2. each tree edge joins vertices whose levels differ by exactly one;
/// 3. each input edge joins vertices whose levels differ by at most one,
///    or neither end is in the tree;
/// 4. the tree spans exactly the root's connected component (no input edge
///    has exactly one end in the tree);
/// 5. each vertex and its parent are joined by an input edge.
///
/// # Errors
///
/// The first failed check found, naming the vertex.
pub fn validate(
    edges: &[[u32; 2]],
    tree: &BfsTree,
    workers: usize,
) -> Result<u64, ValidationError> {
    match check(Source::Slice(edges), tree, workers) {
        Ok(nedge) => Ok(nedge),
        Err(ScanError::Stopped(error)) => Err(error),
        Err(ScanError::Io { .. }) => unreachable!("a slice is not read from a file"),
    }
}

/// [`validate`] against an [`EdgeList`] wherever it is kept, in one pass
/// over it.
///
/// # Errors
///
/// The first failed check found ([`ScanError::Stopped`]), or reading the
/// list's file failed.
pub fn validate_list(
    edges: &EdgeList,
    tree: &BfsTree,
    workers: usize,
) -> Result<u64, ScanError<ValidationError>> {
    check(edges.source(), tree, workers)
}

fn check(
    edges: Source<'_>,
    tree: &BfsTree,
    workers: usize,
) -> Result<u64, ScanError<ValidationError>> {
    let stop = ScanError::Stopped;
    let (parent, level, root) = (&tree.parent, &tree.level, tree.root);
    let n = parent.len();
    if parent.get(root as usize) != Some(&root) || level.get(root as usize) != Some(&0) {
        return Err(stop(ValidationError::Root { root }));
    }
    // Check 1: walk up from each vertex, marking vertices known to reach the
    // root; a walk longer than n loops.
    let mut reaches = vec![false; n];
    reaches[root as usize] = true;
    let mut path = Vec::new();
    for start in 0..n {
        if parent[start] == NONE || reaches[start] {
            continue;
        }
        path.clear();
        let mut v = start;
        while !reaches[v] {
            let p = parent[v];
            if p as usize >= n {
                return Err(stop(ValidationError::NotATree {
                    vertex: start as u32,
                    why: format!("meets vertex {v} whose parent {p} is outside the tree"),
                }));
            }
            path.push(v);
            if path.len() > n {
                return Err(stop(ValidationError::NotATree {
                    vertex: start as u32,
                    why: "loops without reaching the root".into(),
                }));
            }
            v = p as usize;
        }
        for &u in &path {
            reaches[u] = true;
        }
    }
    // Check 2: tree edges.
    for v in 0..n {
        let p = parent[v];
        if p == NONE || v == root as usize {
            continue;
        }
        let (lv, lp) = (level[v], level[p as usize]);
        if lp == NONE || lv != lp.wrapping_add(1) {
            return Err(stop(ValidationError::TreeEdgeLevel {
                vertex: v as u32,
                level: lv,
                parent: p,
                parent_level: lp,
            }));
        }
    }
    // Checks 3 and 4 on every input edge, marking tree edges for check 5.
    let joined: Vec<AtomicBool> = (0..n).map(|_| AtomicBool::new(false)).collect();
    let parts = edges.scan(
        workers,
        |_| 0u64,
        |nedge, chunk| {
            for &[u, v] in chunk {
                let (iu, iv) = (parent[u as usize] != NONE, parent[v as usize] != NONE);
                match (iu, iv) {
                    (false, false) => {}
                    (true, false) => {
                        return Err(ValidationError::NotSpanning {
                            vertex: v,
                            neighbour: u,
                        })
                    }
                    (false, true) => {
                        return Err(ValidationError::NotSpanning {
                            vertex: u,
                            neighbour: v,
                        })
                    }
                    (true, true) => {
                        let (lu, lv) = (level[u as usize], level[v as usize]);
                        if lu.abs_diff(lv) > 1 {
                            return Err(ValidationError::EdgeLevel { u, v, lu, lv });
                        }
                        *nedge += 1;
                        if parent[u as usize] == v {
                            joined[u as usize].store(true, Ordering::Relaxed);
                        }
                        if parent[v as usize] == u {
                            joined[v as usize].store(true, Ordering::Relaxed);
                        }
                    }
                }
            }
            Ok(())
        },
    )?;
    let nedge = parts.into_iter().sum();
    // Check 5 (the workers are joined: their relaxed stores are visible).
    for v in 0..n {
        if parent[v] != NONE && v != root as usize && !joined[v].load(Ordering::Relaxed) {
            return Err(stop(ValidationError::NoSuchEdge {
                vertex: v as u32,
                parent: parent[v],
            }));
        }
    }
    Ok(nedge)
}
