//! Graph500 without the edge list in memory: kernel 1 against a sequential
//! model, the same graph and the same validation verdicts whether the edge
//! list is in memory, in a file or regenerated, whole runs that agree for
//! any number of workers, and a full disk under the list's file (a real
//! small tmpfs; root only, the skip recorded otherwise: scripts/skip.rs).

use proptest::prelude::*;
use statepipe_apps::graph500::bfs::{bfs, BfsTree, NONE};
use statepipe_apps::graph500::csr::Csr;
use statepipe_apps::graph500::edges::ScanError;
use statepipe_apps::graph500::generator::generate;
use statepipe_apps::graph500::validate::{validate, validate_list};
use statepipe_apps::graph500::{run, Config, EdgeList, Graph500Error, Storage, ValidationError};

#[path = "../../../scripts/skip.rs"]
mod skip;
#[path = "../../../scripts/tmpfs.rs"]
mod tmpfs;

/// Kernel 1 written plainly: each list the tuple ends (loops left out),
/// ordered by the bit length of the neighbour's degree before
/// deduplication (descending), then by label, without repeats.
fn csr_model(n: usize, edges: &[[u32; 2]]) -> (Vec<usize>, Vec<u32>) {
    let mut lists = vec![Vec::new(); n];
    for &[u, v] in edges {
        if u != v {
            lists[u as usize].push(v);
            lists[v as usize].push(u);
        }
    }
    let rank: Vec<u32> = lists
        .iter()
        .map(|l| usize::BITS - l.len().leading_zeros())
        .collect();
    let (mut offsets, mut adjacency) = (vec![0], Vec::new());
    for list in &mut lists {
        list.sort_by_key(|&x| (std::cmp::Reverse(rank[x as usize]), x));
        list.dedup();
        adjacency.extend_from_slice(list);
        offsets.push(adjacency.len());
    }
    (offsets, adjacency)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn kernel_1_matches_a_sequential_model(
        n in 1usize..300,
        tuples in proptest::collection::vec((any::<u32>(), any::<u32>()), 0..2000),
        workers in 1usize..8,
    ) {
        let edges: Vec<[u32; 2]> = tuples
            .iter()
            .map(|&(u, v)| [u % n as u32, v % n as u32])
            .collect();
        let g = Csr::build(n, &edges, workers);
        let (offsets, adjacency) = csr_model(n, &edges);
        prop_assert_eq!(&g.offsets, &offsets);
        prop_assert_eq!(&g.adjacency, &adjacency);
        for v in 0..n {
            let bit = g.isolated[v / 64] >> (v % 64) & 1 == 1;
            prop_assert_eq!(bit, offsets[v] == offsets[v + 1]);
        }
    }
}

fn storages() -> [Storage; 3] {
    [Storage::Memory, Storage::Regenerate, Storage::temp_file()]
}

#[test]
fn every_storage_and_worker_count_builds_the_same_graph() {
    let (scale, n) = (11, 1usize << 11);
    let expected = Csr::build(n, &generate(scale, 16, 9, 1), 1);
    for storage in storages() {
        for workers in [1, 2, 5] {
            let list = EdgeList::generate(scale, 16, 9, workers, &storage).unwrap();
            let g = Csr::from_edges(n, &list, workers).unwrap();
            assert!(g == expected, "{storage:?}, {workers} workers");
        }
    }
}

/// A valid tree of the graph of scale 9 and wrong copies of it, one for
/// each check of the specification, with the check each must fail.
fn wrong_trees() -> (Vec<[u32; 2]>, Vec<(&'static str, BfsTree)>) {
    let edges = generate(9, 16, 3, 2);
    let g = Csr::build(1 << 9, &edges, 2);
    let root = (0..512).find(|&v| g.degree(v) > 2).unwrap();
    let tree = bfs(&g, root, 2);
    let leaf = |min_level: u32| {
        (0..512u32)
            .find(|&v| {
                tree.level[v as usize] != NONE
                    && tree.level[v as usize] >= min_level
                    && !tree.parent.contains(&v)
            })
            .unwrap()
    };
    let mut wrong = Vec::new();
    let mut t = tree.clone();
    t.level[root as usize] = 1;
    wrong.push(("1: root", t));
    let mut t = tree.clone();
    let v = leaf(2);
    let p = t.parent[v as usize];
    t.parent[p as usize] = v;
    wrong.push(("1: loop", t));
    let mut t = tree.clone();
    t.level[leaf(1) as usize] += 1;
    wrong.push(("2: tree edge level", t));
    // A leaf moved under a neighbour one level deeper: its tree edge is
    // consistent, but its edge to its old parent spans three levels.
    let (v, p) = (0..512u32)
        .filter(|&v| tree.level[v as usize] != NONE && v != root && !tree.parent.contains(&v))
        .find_map(|v| {
            let l = tree.level[v as usize];
            g.neighbours(v)
                .iter()
                .find(|&&p| tree.level[p as usize] == l + 1)
                .map(|&p| (v, p))
        })
        .unwrap();
    let mut t = tree.clone();
    t.parent[v as usize] = p;
    t.level[v as usize] += 2;
    wrong.push(("3: edge level", t));
    let mut t = tree.clone();
    let v = leaf(1);
    t.parent[v as usize] = NONE;
    t.level[v as usize] = NONE;
    wrong.push(("4: not spanning", t));
    let mut t = tree.clone();
    let v = leaf(2);
    let l = t.level[v as usize];
    t.parent[v as usize] = (0..512u32)
        .find(|&u| t.level[u as usize] == l - 1 && !g.neighbours(v).contains(&u))
        .unwrap();
    wrong.push(("5: no such edge", t));
    wrong.push(("valid", tree));
    (edges, wrong)
}

#[test]
fn each_kind_of_wrong_tree_is_caught_wherever_the_list_is_kept() {
    let (edges, trees) = wrong_trees();
    for (name, tree) in &trees {
        let expected = validate(&edges, tree, 2);
        let check = name.split(':').next().unwrap();
        match (&expected, check) {
            (Ok(_), "valid") => {}
            (Err(ValidationError::Root { .. } | ValidationError::NotATree { .. }), "1") => {}
            (Err(ValidationError::TreeEdgeLevel { .. }), "2") => {}
            (Err(ValidationError::EdgeLevel { .. }), "3") => {}
            (Err(ValidationError::NotSpanning { .. }), "4") => {}
            (Err(ValidationError::NoSuchEdge { .. }), "5") => {}
            other => panic!("{name}: {other:?}"),
        }
        for storage in storages() {
            for workers in [1, 3] {
                let list = EdgeList::generate(9, 16, 3, workers, &storage).unwrap();
                let got = validate_list(&list, tree, workers).map_err(|e| match e {
                    ScanError::Stopped(e) => e,
                    ScanError::Io { error, .. } => panic!("{error}"),
                });
                match (&got, &expected) {
                    (got, expected) if workers == 2 => {
                        assert_eq!(got, expected, "{name}, {storage:?}")
                    }
                    // Another split of the list may meet another wrong edge
                    // first: the same check fails.
                    (Err(got), Err(expected)) => assert_eq!(
                        std::mem::discriminant(got),
                        std::mem::discriminant(expected),
                        "{name}, {storage:?}, {workers} workers"
                    ),
                    (got, expected) => assert_eq!(got, expected, "{name}, {storage:?}"),
                }
            }
        }
    }
}

#[test]
fn runs_agree_whatever_the_workers_and_the_storage() {
    let summary = |workers: usize, storage: Storage| {
        let config = Config {
            scale: 11,
            roots: 8,
            workers,
            storage,
            ..Config::default()
        };
        let report = run(&config, &mut |_| {}).unwrap();
        assert!(report.memory.peak().is_some() || cfg!(not(target_os = "linux")));
        report
            .searches
            .iter()
            .map(|s| (s.root, s.nedge))
            .collect::<Vec<_>>()
    };
    let expected = summary(1, Storage::Memory);
    assert_eq!(expected.len(), 8);
    for storage in storages() {
        for workers in [1, 2, 3, 5] {
            assert_eq!(
                summary(workers, storage.clone()),
                expected,
                "{workers} workers"
            );
        }
    }
}

#[test]
fn a_disk_too_small_for_the_list_is_refused_and_one_that_fills_fails_naming_it() {
    let Some(fs) = tmpfs::Tmpfs::mount_or_skip("64k") else {
        return;
    };
    // Scale 12: 512 KiB of tuples, refused up front.
    let config = Config {
        scale: 12,
        roots: 2,
        workers: 2,
        storage: Storage::File(fs.path().to_path_buf()),
        ..Config::default()
    };
    match run(&config, &mut |_| {}) {
        Err(e @ Graph500Error::NoRoomForEdges { .. }) => {
            let text = e.to_string();
            assert!(text.contains(&fs.path().display().to_string()), "{text}");
            assert!(text.contains("--edges regenerate"), "{text}");
        }
        other => panic!("{other:?}"),
    }
    // Past the check, a write that meets the full disk fails naming the
    // folder, and leaves nothing there (the file was never linked).
    let err = EdgeList::generate(12, 16, 1, 2, &config.storage).unwrap_err();
    assert!(
        matches!(&err, ScanError::Io { error, .. } if error.raw_os_error() == Some(28)),
        "{err}"
    );
    assert!(
        err.to_string().contains(&fs.path().display().to_string()),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(fs.path()).unwrap().count(), 0);
    // With room, the same run completes.
    fs.resize("4m");
    assert_eq!(run(&config, &mut |_| {}).unwrap().searches.len(), 2);
}
