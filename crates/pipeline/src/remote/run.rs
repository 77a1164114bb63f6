//! What a distributed run is configured with and what it hands back.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::failure::StageState;

/// How a [`Coordinator`](super::Coordinator) runs.
#[derive(Debug, Clone)]
pub struct RemoteConfig {
    pub(crate) members: usize,
    pub(crate) join_timeout: Duration,
    pub(crate) checkpoint_dir: Option<PathBuf>,
    pub(crate) checkpoint_every: Option<Duration>,
    pub(crate) credits: u64,
    pub(crate) resume: bool,
    pub(crate) silence: Duration,
    pub(crate) min_members: Option<usize>,
    pub(crate) notes: Notes,
}

/// What the coordinator tells a person watching: members joining and
/// leaving, parts moving, what it waits for.
#[derive(Clone, Default)]
pub(crate) struct Notes(Option<Arc<Note>>);

type Note = dyn Fn(&str) + Send + Sync;

impl Notes {
    pub(crate) fn say(&self, note: &str) {
        if let Some(f) = &self.0 {
            f(note);
        }
    }
}

impl std::fmt::Debug for Notes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Notes(..)"
        } else {
            "Notes(none)"
        })
    }
}

impl Default for RemoteConfig {
    fn default() -> Self {
        RemoteConfig::new()
    }
}

impl RemoteConfig {
    /// One member, 60 s for it to join, no checkpoints, 65,536 credits per
    /// edge, a member lost after 1 s of silence.
    pub fn new() -> RemoteConfig {
        RemoteConfig {
            members: 1,
            join_timeout: Duration::from_secs(60),
            checkpoint_dir: None,
            checkpoint_every: Some(Duration::from_secs(1)),
            credits: 1 << 16,
            resume: false,
            silence: Duration::from_secs(1),
            min_members: None,
            notes: Notes::default(),
        }
    }

    /// Waits for `n` members before starting (more may join later, as
    /// spares for restores).
    pub fn members(mut self, n: usize) -> RemoteConfig {
        self.members = n;
        self
    }

    /// How long to wait for them.
    pub fn join_timeout(mut self, t: Duration) -> RemoteConfig {
        self.join_timeout = t;
        self
    }

    /// Checkpoints under `dir`, which every member must reach at the same
    /// path (one host, or a shared volume): each part's in `part-NNN`, and
    /// what is committed in `COORDINATOR`. A lost member is then recovered
    /// from the last committed checkpoint.
    pub fn checkpoint_dir(mut self, dir: impl Into<PathBuf>) -> RemoteConfig {
        self.checkpoint_dir = Some(dir.into());
        self
    }

    /// How often the input's edge carries a checkpoint's barrier (1 s by
    /// default; only with a checkpoint folder).
    pub fn checkpoint_every(mut self, every: Duration) -> RemoteConfig {
        self.checkpoint_every = Some(every);
        self
    }

    /// Items a receiving end grants its sender: what may be on the wire
    /// and in buffers per cut edge.
    pub fn credits(mut self, items: u64) -> RemoteConfig {
        self.credits = items.max(1);
        self
    }

    /// Starts from the last checkpoint committed under the checkpoint
    /// folder (as a fresh run if there is none).
    pub fn resume(mut self, yes: bool) -> RemoteConfig {
        self.resume = yes;
        self
    }

    /// How long a member may be silent before it counts as lost.
    pub fn silence(mut self, t: Duration) -> RemoteConfig {
        self.silence = t;
        self
    }

    /// Never runs on fewer than `n` members: with fewer left (lost, or
    /// gone after asking to leave), the coordinator waits, without a
    /// deadline, until enough have joined, then restores from the last
    /// committed checkpoint on them. Without it, the run goes on with
    /// whatever members are left, and ends with
    /// [`RemoteError::NoMembers`](super::RemoteError::NoMembers) when
    /// none is. The run also waits for `n` members to start.
    pub fn min_members(mut self, n: usize) -> RemoteConfig {
        self.min_members = Some(n.max(1));
        self
    }

    /// Calls `f` with each note the coordinator has for a person
    /// watching: a member joining, asking to leave or released, the parts
    /// moving (which member runs which), and what it waits for.
    pub fn on_note(mut self, f: impl Fn(&str) + Send + Sync + 'static) -> RemoteConfig {
        self.notes = Notes(Some(Arc::new(f)));
        self
    }
}

/// An item that failed in some part, as reported across processes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteFailure {
    /// The number of the input it came from.
    pub seq: u64,
    /// The stage that failed it.
    pub stage: String,
    /// The item, as `Debug` shows it.
    pub item: String,
    /// The error, as `Display` shows it.
    pub error: String,
}

/// Why an attempt was stopped and its parts restored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestoreKind {
    /// A member was lost (its connection closed, or it fell silent).
    Lost,
    /// A part failed.
    Failed,
    /// A member asked to leave: its parts moved to the others at a
    /// checkpoint taken after it asked.
    Left,
    /// A member joined: the parts were spread over it too at the next
    /// checkpoint.
    Joined,
}

/// A restore after a loss, or a rescale after a member left or joined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restore {
    /// Why.
    pub kind: RestoreKind,
    /// The member lost, if one was.
    pub lost: Option<String>,
    /// Why the attempt ended.
    pub why: String,
    /// The checkpoint restored (`None`: from the start).
    pub from: Option<u64>,
    /// The input position the run went on from.
    pub position: u64,
    /// From the loss's detection to the attempt's end.
    pub detected_after: std::time::Duration,
}

/// How many [`SkippedCheckpoint`]s a [`RemoteRun`] keeps (the last ones).
pub const SKIPPED_KEPT: usize = 64;

/// A checkpoint that could not be written (a full disk, say): the run
/// went on from its states, and the last committed checkpoint stayed the
/// one a restore starts from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedCheckpoint {
    /// Its number.
    pub id: u64,
    /// The part whose copy could not be written; `None`: every part's was
    /// durable, and writing the commit (`COORDINATOR`) failed.
    pub part: Option<u32>,
    /// The error, as `Display` shows it.
    pub error: String,
}

/// What a finished distributed run hands back.
#[derive(Debug)]
pub struct RemoteRun {
    /// Outputs delivered to the sink (each once).
    pub outputs: u64,
    /// Items that failed, in input order, each once.
    pub failures: Vec<RemoteFailure>,
    /// The final state of every stage with a codec, in description order.
    pub states: Vec<StageState>,
    /// The restores the run went through.
    pub restores: Vec<Restore>,
    /// The last committed checkpoint: its number and input position.
    pub last_checkpoint: Option<(u64, u64)>,
    /// The checkpoints that could not be written, the last
    /// [`SKIPPED_KEPT`] of them (`RemoteMetrics::skipped_checkpoints`
    /// counts them all).
    pub skipped_checkpoints: Vec<SkippedCheckpoint>,
    /// The checkpoint the run resumed from, when it was asked to resume.
    pub resumed_from: Option<u64>,
}
