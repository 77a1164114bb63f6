//! The wire format: length-prefixed, versioned binary frames.
//!
//! Every message between master and worker is one frame:
//!
//! ```text
//! offset 0      1        2      3         4..8
//!        MAGIC  VERSION  kind   reserved  payload length (u32, little endian)
//! ```
//!
//! followed by `length` payload bytes. [`decode`] accepts a buffer that may hold
//! a partial frame (it then asks for more bytes) and rejects, with a
//! [`FrameError`], a wrong magic or version, an unknown kind, a non-zero
//! reserved byte, or a length above the connection's maximum. It never panics,
//! whatever the bytes: `tests/protocol.rs` checks that over random and mutated
//! input, starting from the corpus in `tests/corpus/`.
//!
//! The payload layouts live in [`msg`]. State bytes are opaque there: the
//! master moves them between workers without deserialising them.

pub(crate) mod msg;

/// First byte of every frame.
pub(crate) const MAGIC: u8 = 0xA7;
/// Protocol version; a peer speaking another version is refused.
pub(crate) const VERSION: u8 = 9;
/// Bytes in a frame header.
pub(crate) const HEADER_LEN: usize = 8;
/// Default upper bound on one frame's payload (1 GiB). Readers grow their
/// buffer as a frame's bytes arrive, not from the length its header
/// claims, so the bound is what one frame may hold, not what each costs.
pub(crate) const DEFAULT_MAX_FRAME: u32 = 1 << 30;
/// The most state bytes one frame of states (`Add`, `Fetched`, `Replica`)
/// carries (16 MiB), and the most parent bytes the master puts in one
/// `Evolve` batch when it keeps copies: more states take more frames (a
/// single larger state takes one of its own).
pub(crate) const STATE_FRAME_BYTES: usize = 16 << 20;
/// The largest serialised state a cluster places, moves or keeps: the
/// frame limit less room for one frame's own fields.
pub const MAX_STATE_BYTES: usize = DEFAULT_MAX_FRAME as usize - 64;

/// The first frame in `out` (whole frames, as `encode` appends them) whose
/// payload is longer than `max`: its kind and payload length.
pub(crate) fn oversized(out: &[u8], max: usize) -> Option<(Kind, usize)> {
    let mut at = 0;
    while let Some(h) = out.get(at..at + HEADER_LEN) {
        let len = u32::from_le_bytes([h[4], h[5], h[6], h[7]]) as usize;
        if len > max {
            return Kind::from_u8(h[2]).map(|k| (k, len));
        }
        at += HEADER_LEN + len;
    }
    None
}

/// `states` cut into runs of at most [`STATE_FRAME_BYTES`] state bytes
/// each (a larger state is a run of its own), one frame's worth a run;
/// one empty run when there are none.
pub(crate) fn state_runs<'s, 'b>(
    states: &'s [(crate::evolve::StateId, &'b [u8])],
) -> Vec<&'s [(crate::evolve::StateId, &'b [u8])]> {
    let mut runs = Vec::new();
    let mut rest = states;
    loop {
        let (mut k, mut bytes) = (0, 0);
        while k < rest.len() && (k == 0 || bytes + rest[k].1.len() <= STATE_FRAME_BYTES) {
            bytes += rest[k].1.len();
            k += 1;
        }
        let (now, later) = rest.split_at(k);
        runs.push(now);
        rest = later;
        if rest.is_empty() {
            return runs;
        }
    }
}

/// `states` as frames of `kind` (each `n × (id, bytes)`), one a run of
/// [`state_runs`], with the count each holds.
pub(crate) fn state_frames<'b>(
    kind: Kind,
    states: impl IntoIterator<Item = (crate::evolve::StateId, &'b [u8])>,
) -> Vec<(Vec<u8>, u32)> {
    let states: Vec<_> = states.into_iter().collect();
    state_runs(&states)
        .into_iter()
        .map(|run| {
            let mut f = Vec::new();
            let st = begin(&mut f, kind);
            msg::put_states(&mut f, run.iter().copied());
            finish(&mut f, st);
            (f, run.len() as u32)
        })
        .collect()
}

macro_rules! kinds {
    ($($(#[$doc:meta])* $name:ident = $val:expr,)*) => {
        /// What a frame carries. Requests go master to worker, responses back.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub(crate) enum Kind { $($(#[$doc])* $name = $val,)* }

        impl Kind {
            /// The kind for a wire byte, if any.
            pub(crate) fn from_u8(b: u8) -> Option<Kind> {
                match b { $($val => Some(Kind::$name),)* _ => None }
            }
        }
    };
}

kinds! {
    /// Master to worker: a random nonce to prove the shared secret on.
    Challenge = 1,
    /// Master to worker: the model to run (name and parameters) and the run seed.
    Setup = 2,
    /// Master to worker: evolve these states with these inputs, at this step.
    Evolve = 3,
    /// Master to worker: hold these states.
    Add = 4,
    /// Master to worker: give these states back and forget them.
    Remove = 5,
    /// Master to worker: forget these states.
    Drop = 6,
    /// Master to worker: send copies of these states.
    Fetch = 7,
    /// Master to worker: exit.
    Shutdown = 8,
    /// Master to worker: send these states straight to the worker listening
    /// at this address (worker-to-worker stealing).
    Give = 9,
    /// Worker to worker: states handed over by a `Give`, with its ticket.
    Handoff = 10,
    /// Master to worker: send a copy of every state held to the worker
    /// listening at this address, as this replication round's replica
    /// (`Recovery::Buddy`).
    Replicate = 11,
    /// Worker to worker: a replica of every state its sender holds, for a
    /// replication round.
    Replica = 12,
    /// Master to worker, unanswered: the round's replicas are complete;
    /// keep them and drop older ones.
    Commit = 13,
    /// Master to worker: make these replicas live states (their primary's
    /// worker is lost).
    Promote = 14,
    /// Worker to master: HMAC of the challenge.
    Auth = 0x81,
    /// Worker to master: the model is loaded.
    SetupOk = 0x82,
    /// Worker to master: children and outputs of each evolved state.
    Evolved = 0x83,
    /// Worker to master: states added.
    Added = 0x84,
    /// Worker to master: the removed states (same layout as `Add`).
    Removed = 0x85,
    /// Worker to master: states dropped.
    Dropped = 0x86,
    /// Worker to master: the fetched states (same layout as `Add`).
    Fetched = 0x87,
    /// Worker to master: the request failed; the worker closes the connection.
    Failed = 0x88,
    /// Worker to master: how many states of a `Give` went to the peer (0: none, kept).
    Given = 0x89,
    /// Worker to master, unasked: the states of a `Handoff` arrived and are held.
    Arrived = 0x8A,
    /// Worker to master, unasked, empty: still here (every `Setup`'s
    /// heartbeat interval, whatever else it is doing).
    Heartbeat = 0x8B,
    /// Worker to master: how many states a `Replicate` sent to the buddy
    /// (`u32::MAX`: it could not reach the buddy).
    Shipped = 0x8C,
    /// Worker to master, unasked: a `Replica` arrived and is held, pending
    /// the round's `Commit`.
    Held = 0x8D,
    /// Worker to master: how many replicas a `Promote` made live.
    Promoted = 0x8E,
    /// Worker to master, unasked, empty: this worker was asked to leave
    /// (SIGTERM): move its states to the others and shut it down.
    Leaving = 0x8F,
}

/// Why bytes are not a frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum FrameError {
    #[error("bad magic byte {0:#04x} (expected {MAGIC:#04x})")]
    BadMagic(u8),
    #[error("unsupported protocol version {0} (this build speaks {VERSION})")]
    BadVersion(u8),
    #[error("unknown frame kind {0:#04x}")]
    UnknownKind(u8),
    #[error("reserved header byte is {0:#04x}, not zero")]
    Reserved(u8),
    #[error("frame of {len} bytes exceeds the maximum of {max}")]
    TooLarge { len: u32, max: u32 },
}

/// A frame header, as read from the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    pub kind: Kind,
    pub len: u32,
}

impl Header {
    /// Bytes this frame occupies, header included.
    pub(crate) fn frame_len(&self) -> usize {
        HEADER_LEN + self.len as usize
    }
}

/// Parses a header from the start of `buf`; `Ok(None)` if fewer than
/// [`HEADER_LEN`] bytes are there yet.
///
/// # Errors
/// A [`FrameError`] for a header that no valid frame starts with.
pub(crate) fn parse_header(buf: &[u8], max: u32) -> Result<Option<Header>, FrameError> {
    let Some(h) = buf.get(..HEADER_LEN) else {
        return Ok(None);
    };
    if h[0] != MAGIC {
        return Err(FrameError::BadMagic(h[0]));
    }
    if h[1] != VERSION {
        return Err(FrameError::BadVersion(h[1]));
    }
    let kind = Kind::from_u8(h[2]).ok_or(FrameError::UnknownKind(h[2]))?;
    if h[3] != 0 {
        return Err(FrameError::Reserved(h[3]));
    }
    let len = u32::from_le_bytes([h[4], h[5], h[6], h[7]]);
    if len > max {
        return Err(FrameError::TooLarge { len, max });
    }
    Ok(Some(Header { kind, len }))
}

/// A complete frame in a buffer: its kind, its payload, and the bytes it used.
pub(crate) type Decoded<'a> = (Kind, &'a [u8], usize);

/// Splits the first complete frame off `buf`: its kind, its payload, and the
/// number of bytes it used. `Ok(None)` means the frame is not complete yet.
///
/// # Errors
/// A [`FrameError`] if the header is invalid.
pub(crate) fn decode(buf: &[u8], max: u32) -> Result<Option<Decoded<'_>>, FrameError> {
    let Some(h) = parse_header(buf, max)? else {
        return Ok(None);
    };
    let end = h.frame_len();
    Ok(buf.get(HEADER_LEN..end).map(|p| (h.kind, p, end)))
}

/// Appends one frame to `out`.
///
/// # Panics
/// If `payload` is longer than `u32::MAX` bytes.
pub(crate) fn encode(out: &mut Vec<u8>, kind: Kind, payload: &[u8]) {
    let start = begin(out, kind);
    out.extend_from_slice(payload);
    finish(out, start);
}

/// Starts a frame in `out` whose payload the caller appends; returns the
/// position to hand to [`finish`].
pub(crate) fn begin(out: &mut Vec<u8>, kind: Kind) -> usize {
    let start = out.len();
    out.extend_from_slice(&[MAGIC, VERSION, kind as u8, 0, 0, 0, 0, 0]);
    start
}

/// Writes the payload length of the frame started at `start`.
///
/// # Panics
/// If the payload is longer than `u32::MAX` bytes.
pub(crate) fn finish(out: &mut [u8], start: usize) {
    let len = out.len() - start - HEADER_LEN;
    let len = u32::try_from(len).expect("frame payload over 4 GiB");
    out[start + 4..start + 8].copy_from_slice(&len.to_le_bytes());
}
