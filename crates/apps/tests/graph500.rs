//! Graph500: the generator's determinism, validation catching corrupted
//! trees, and the BFS against a sequential queue BFS.

use proptest::prelude::*;
use statepipe_apps::graph500::bfs::{bfs, levels_sequential, NONE};
use statepipe_apps::graph500::csr::Csr;
use statepipe_apps::graph500::generator::{edge_hash, generate};
use statepipe_apps::graph500::validate::validate;
use statepipe_apps::graph500::{run, Config, ValidationError};

#[test]
fn generator_is_deterministic_and_independent_of_workers() {
    let one = generate(10, 16, 7, 1);
    assert_eq!(one.len(), 16 << 10);
    let hash = edge_hash(&one);
    for workers in [2, 3, 5] {
        assert_eq!(
            edge_hash(&generate(10, 16, 7, workers)),
            hash,
            "{workers} workers"
        );
    }
    assert_ne!(edge_hash(&generate(10, 16, 8, 2)), hash, "another seed");
    assert!(one.iter().all(|e| e[0] < 1024 && e[1] < 1024));
}

/// The generator's edge list for `2^scale` vertices, its graph, and the
/// vertex count.
fn graph(scale: u32, edgefactor: u32, seed: u64) -> (Vec<[u32; 2]>, Csr, usize) {
    let n = 1usize << scale;
    let edges = generate(scale, edgefactor, seed, 2);
    let g = Csr::build(n, &edges, 2);
    (edges, g, n)
}

/// A graph, its edge list, and a valid tree from a root of non-zero degree.
fn sample() -> (Vec<[u32; 2]>, Csr, statepipe_apps::graph500::bfs::BfsTree) {
    let edges = generate(9, 16, 3, 2);
    let g = Csr::build(1 << 9, &edges, 2);
    let root = (0..512).find(|&v| g.degree(v) > 2).unwrap();
    let tree = bfs(&g, root, 2);
    assert!(validate(&edges, &tree, 2).is_ok());
    (edges, g, tree)
}

/// A vertex at `level` with no children in the tree.
fn leaf_at_depth(tree: &statepipe_apps::graph500::bfs::BfsTree, min_level: u32) -> u32 {
    (0..tree.parent.len() as u32)
        .find(|&v| {
            tree.level[v as usize] != NONE
                && tree.level[v as usize] >= min_level
                && !tree.parent.contains(&v)
        })
        .unwrap()
}

#[test]
fn validation_reports_a_flipped_parent() {
    let (edges, g, mut tree) = sample();
    // Re-parent a leaf onto a vertex one level up that is not its neighbour.
    let v = leaf_at_depth(&tree, 2);
    let l = tree.level[v as usize];
    let p = (0..512u32)
        .find(|&u| tree.level[u as usize] == l - 1 && !g.neighbours(v).contains(&u))
        .unwrap();
    tree.parent[v as usize] = p;
    assert_eq!(
        validate(&edges, &tree, 2),
        Err(ValidationError::NoSuchEdge {
            vertex: v,
            parent: p
        })
    );
    // A parent loop.
    let (edges, _, mut tree) = sample();
    let v = leaf_at_depth(&tree, 2);
    let p = tree.parent[v as usize];
    tree.parent[p as usize] = v;
    assert!(matches!(
        validate(&edges, &tree, 2),
        Err(ValidationError::NotATree { .. })
    ));
}

#[test]
fn validation_reports_a_dropped_vertex() {
    let (edges, _, mut tree) = sample();
    let v = leaf_at_depth(&tree, 1);
    tree.parent[v as usize] = NONE;
    tree.level[v as usize] = NONE;
    match validate(&edges, &tree, 2) {
        Err(ValidationError::NotSpanning { vertex, .. }) => assert_eq!(vertex, v),
        other => panic!("{other:?}"),
    }
}

#[test]
fn validation_reports_a_wrong_level() {
    let (edges, _, mut tree) = sample();
    let v = leaf_at_depth(&tree, 1);
    tree.level[v as usize] += 1;
    match validate(&edges, &tree, 2) {
        Err(ValidationError::TreeEdgeLevel { vertex, .. }) => assert_eq!(vertex, v),
        other => panic!("{other:?}"),
    }
    let (edges, _, mut tree) = sample();
    tree.level[tree.root as usize] = 1;
    assert_eq!(
        validate(&edges, &tree, 2),
        Err(ValidationError::Root { root: tree.root })
    );
}

#[test]
fn a_small_run_reports_every_search() {
    let config = Config {
        scale: 8,
        roots: 8,
        workers: 2,
        ..Config::default()
    };
    let report = run(&config, &mut |_| {}).unwrap();
    assert_eq!(report.searches.len(), 8);
    assert!(report.searches.iter().all(|s| s.nedge > 0));
    let text = report.to_string();
    for key in [
        "NBFS:",
        "construction_time:",
        "bfs  harmonic_mean_TEPS:",
        "median_nedge:",
    ] {
        assert!(text.contains(key), "{key} missing from\n{text}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn bfs_levels_match_a_sequential_queue_bfs(
        scale in 3u32..9,
        edgefactor in 1u32..17,
        seed in any::<u64>(),
        workers in 1usize..4,
        root_pick in any::<u32>(),
    ) {
        let edges = generate(scale, edgefactor, seed, workers);
        let n = 1usize << scale;
        let g = Csr::build(n, &edges, workers);
        let root = root_pick % n as u32;
        let tree = bfs(&g, root, workers);
        prop_assert_eq!(&tree.level, &levels_sequential(&g, root));
        prop_assert!(validate(&edges, &tree, workers).is_ok());
    }
}

/// Searches back to back on the same workers (more workers than CPUs,
/// so workers are descheduled mid-level and linger into the next search)
/// give every tree the oracle's levels.
#[test]
fn searches_on_the_same_workers_match_the_oracle() {
    let (_, g, n) = graph(12, 16, 3);
    // Hubs with more than 1,024 neighbours, whose edges top-down levels
    // share out in chunks of their own.
    assert!((0..n as u32).any(|v| g.degree(v) > 1024));
    let oracle: Vec<Vec<u32>> = (0..n as u32)
        .map(|root| levels_sequential(&g, root))
        .collect();
    for workers in [1, 2, 5] {
        let mut searcher = statepipe_apps::graph500::bfs::Searcher::new(&g, workers);
        searcher.with_workers(|searches| {
            for root in (0..n as u32).step_by(7) {
                searches.search(root);
                let tree = searches.tree();
                assert_eq!(
                    tree.level, oracle[root as usize],
                    "root {root}, {workers} workers"
                );
                assert_eq!(
                    searches.reached(),
                    tree.level.iter().filter(|&&l| l != u32::MAX).count()
                );
            }
        });
    }
}

/// One searcher reused root after root (the reset level clears the last
/// search in several chunks at this scale) gives every tree the oracle's
/// levels.
#[test]
fn a_reused_searcher_matches_the_oracle_root_after_root() {
    let (edges, g, n) = graph(15, 4, 7);
    for workers in [1, 2, 3] {
        let mut searcher = statepipe_apps::graph500::bfs::Searcher::new(&g, workers);
        for root in [edges[0][0], edges[1][1], 0, (n - 1) as u32] {
            searcher.search(root);
            let tree = searcher.tree();
            assert_eq!(tree.level, levels_sequential(&g, root), "root {root}");
            assert_eq!(
                searcher.reached(),
                tree.level.iter().filter(|&&l| l != u32::MAX).count()
            );
        }
    }
}
