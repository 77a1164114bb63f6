//! The errors of the Graph500 benchmark.

/// Why a Graph500 run stopped.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Graph500Error {
    /// The parameters are out of range.
    #[error("bad parameters: {0}")]
    BadConfig(String),
    /// The graph would not fit in the memory available.
    #[error(
        "scale {scale} needs about {needed} bytes ({:.1} GiB), but only {available} bytes \
         ({:.1} GiB) are available (MemAvailable in /proc/meminfo)",
        *needed as f64 / GIB,
        *available as f64 / GIB
    )]
    TooLarge {
        /// The scale asked for.
        scale: u32,
        /// The bytes the run would need.
        needed: u64,
        /// The bytes available.
        available: u64,
    },
    /// The edge list's folder has less free space than the list takes.
    #[error(
        "the edge list takes {needed} bytes ({:.1} GiB) but {} has {available} bytes \
         ({:.1} GiB) free: free space there, give another folder (--edge-dir, TMPDIR), \
         or regenerate the list in each pass instead (--edges regenerate)",
        *needed as f64 / GIB,
        dir.display(),
        *available as f64 / GIB
    )]
    NoRoomForEdges {
        /// The folder.
        dir: std::path::PathBuf,
        /// The bytes the list takes.
        needed: u64,
        /// The bytes free there.
        available: u64,
    },
    /// The edge list's temporary file could not be made, written or read.
    #[error(
        "the edge list's temporary file in {} failed: {error} (free space there, give \
         another folder with --edge-dir or TMPDIR, or regenerate the list in each pass \
         instead with --edges regenerate)",
        dir.display()
    )]
    EdgeFile {
        /// The folder of the file.
        dir: std::path::PathBuf,
        /// What failed.
        error: String,
    },
    /// A BFS tree failed one of the specification's validation checks.
    #[error("BFS from root {root}: {error}")]
    Invalid {
        /// The root of the failed search.
        root: u32,
        /// The failed check.
        error: ValidationError,
    },
}

const GIB: f64 = (1u64 << 30) as f64;

/// A failed validation check, naming the vertex where it failed.
///
/// The numbers are the checks of the Graph500 specification, section
/// "Validation" of kernel 2.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
pub enum ValidationError {
    /// Check 1: the root is not its own parent, or its level is not 0.
    #[error("check 1: the root {root} is not its own parent at level 0")]
    Root {
        /// The root.
        root: u32,
    },
    /// Check 1: following parents from a vertex loops, or leaves the tree.
    #[error("check 1: following parents from vertex {vertex} {why}")]
    NotATree {
        /// Where the walk started.
        vertex: u32,
        /// "loops" or what it met.
        why: String,
    },
    /// Check 2: a tree edge joins levels that do not differ by exactly one.
    #[error(
        "check 2: vertex {vertex} at level {level} has parent {parent} at level {parent_level}"
    )]
    TreeEdgeLevel {
        /// The child.
        vertex: u32,
        /// Its level.
        level: u32,
        /// Its parent.
        parent: u32,
        /// The parent's level.
        parent_level: u32,
    },
    /// Check 3: an input edge joins levels more than one apart.
    #[error("check 3: input edge ({u}, {v}) joins levels {lu} and {lv}")]
    EdgeLevel {
        /// One end.
        u: u32,
        /// The other end.
        v: u32,
        /// The level of `u`.
        lu: u32,
        /// The level of `v`.
        lv: u32,
    },
    /// Check 4: a vertex of the root's component is missing from the tree.
    #[error(
        "check 4: vertex {vertex} is joined to tree vertex {neighbour} but is not in the tree"
    )]
    NotSpanning {
        /// The vertex missing.
        vertex: u32,
        /// Its neighbour in the tree.
        neighbour: u32,
    },
    /// Check 5: a vertex and its parent are not joined by an input edge.
    #[error("check 5: vertex {vertex} and its parent {parent} are not joined by an input edge")]
    NoSuchEdge {
        /// The child.
        vertex: u32,
        /// Its parent.
        parent: u32,
    },
}
