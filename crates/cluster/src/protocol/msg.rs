//! Payload layouts of each frame [`Kind`](super::Kind).
//!
//! All integers are little endian; `bytes` is a u32 length then the bytes.
//!
//! ```text
//! Challenge  nonce[32]                      Auth      mac[32]
//! Setup      seed u64, model bytes, params bytes, heartbeat_ms u32
//! Evolve     step u64, copies u8, n u32, n × (id u64, input bytes)
//! Add        n u32, n × (id u64, state bytes)        (= Removed = Fetched)
//! Remove     n u32, n × id u64                       (= Drop = Fetch)
//! Evolved    busy_ns u64, n u32, n × (parent u64, k u32, k × (child u64, output bytes
//!            [, state bytes if the request said copies]))
//! Added      n u32                               (= Dropped = Given = Promoted)
//! Shipped    n u32 (u32::MAX: the buddy was not reached), state bytes u64
//! SetupOk    empty, or peer address bytes (UTF-8 "ip:port" where the worker
//!            takes `Handoff`s)
//! Give       ticket u64, peer address bytes, n u32, n × id u64
//! Handoff    ticket u64, then `Add`'s layout         Arrived   ticket u64, n u32
//! Failed     message bytes (UTF-8)                    Shutdown: empty
//! Heartbeat  empty (worker to master, unasked)   Leaving: the same
//! Replicate  round u64, origin u32, buddy's peer address bytes
//! Replica    round u64, origin u32, total u32, then `Add`'s layout
//! Held       round u64, origin u32, n u32 (worker to master, unasked)
//! Commit     round u64                                Promote: `Remove`'s layout
//! ```
//!
//! `Removed` has exactly `Add`'s layout so that the master forwards a stolen
//! batch by rewriting the frame kind, never touching the state bytes. A
//! worker answers a `Remove` (as a `Fetch`) with as many `Removed` as
//! [`super::state_runs`] cuts its states into, each forwarded on its own.
//!
//! Decoders borrow from the payload and check every count against the bytes
//! left before allocating, so a hostile length cannot make them allocate more
//! than the payload's size.

use crate::evolve::StateId;

/// Why a payload does not match its kind's layout.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum MsgError {
    #[error("payload truncated")]
    Truncated,
    #[error("{0} unexpected trailing bytes in payload")]
    Trailing(usize),
    #[error("count {0} cannot fit in the payload")]
    Count(u32),
    #[error("string is not UTF-8")]
    Utf8,
}

/// A cursor over a payload.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { buf }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], MsgError> {
        if self.buf.len() < n {
            return Err(MsgError::Truncated);
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    pub(crate) fn u32(&mut self) -> Result<u32, MsgError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(crate) fn u64(&mut self) -> Result<u64, MsgError> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(a))
    }

    pub(crate) fn id(&mut self) -> Result<StateId, MsgError> {
        self.u64().map(StateId)
    }

    pub(crate) fn bytes(&mut self) -> Result<&'a [u8], MsgError> {
        let n = self.u32()? as usize;
        self.take(n)
    }

    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u8; N], MsgError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    /// Reads a count of entries each at least `min_entry` bytes long.
    pub(crate) fn count(&mut self, min_entry: usize) -> Result<usize, MsgError> {
        let n = self.u32()?;
        if (n as usize).saturating_mul(min_entry) > self.buf.len() {
            return Err(MsgError::Count(n));
        }
        Ok(n as usize)
    }

    /// Succeeds only if the whole payload was read.
    pub(crate) fn end(self) -> Result<(), MsgError> {
        match self.buf.len() {
            0 => Ok(()),
            n => Err(MsgError::Trailing(n)),
        }
    }
}

/// Appends a u32 length and the bytes.
///
/// # Panics
/// If `b` is longer than `u32::MAX`.
pub(crate) fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    let n = u32::try_from(b.len()).expect("field over 4 GiB");
    out.extend_from_slice(&n.to_le_bytes());
    out.extend_from_slice(b);
}

pub(crate) fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_count(out: &mut Vec<u8>, n: usize) {
    put_u32(out, u32::try_from(n).expect("more than 2^32 entries"));
}

/// `Setup` payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Setup<'a> {
    pub seed: u64,
    pub model: &'a str,
    pub params: &'a [u8],
    /// Send a `Heartbeat` this often, in milliseconds (0: never).
    pub heartbeat_ms: u32,
}

pub(crate) fn put_setup(out: &mut Vec<u8>, s: &Setup<'_>) {
    put_u64(out, s.seed);
    put_bytes(out, s.model.as_bytes());
    put_bytes(out, s.params);
    put_u32(out, s.heartbeat_ms);
}

pub(crate) fn setup(p: &[u8]) -> Result<Setup<'_>, MsgError> {
    let mut r = Reader::new(p);
    let seed = r.u64()?;
    let model = std::str::from_utf8(r.bytes()?).map_err(|_| MsgError::Utf8)?;
    let params = r.bytes()?;
    let heartbeat_ms = r.u32()?;
    r.end()?;
    Ok(Setup {
        seed,
        model,
        params,
        heartbeat_ms,
    })
}

/// Appends `n × (id, bytes)`: the `Add`, `Removed` and `Fetched` payloads.
pub(crate) fn put_states<'b>(
    out: &mut Vec<u8>,
    items: impl ExactSizeIterator<Item = (StateId, &'b [u8])>,
) {
    put_count(out, items.len());
    for (id, b) in items {
        put_u64(out, id.0);
        put_bytes(out, b);
    }
}

/// Decodes `n × (id, bytes)`.
pub(crate) fn states(p: &[u8]) -> Result<IdBytes<'_>, MsgError> {
    let mut r = Reader::new(p);
    let v = id_bytes_list(&mut r)?;
    r.end()?;
    Ok(v)
}

fn id_bytes_list<'a>(r: &mut Reader<'a>) -> Result<IdBytes<'a>, MsgError> {
    let n = r.count(12)?;
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        v.push((r.id()?, r.bytes()?));
    }
    Ok(v)
}

/// Ids only: the `Remove`, `Drop` and `Fetch` payloads.
pub(crate) fn put_ids(out: &mut Vec<u8>, ids: &[StateId]) {
    put_count(out, ids.len());
    for id in ids {
        put_u64(out, id.0);
    }
}

pub(crate) fn ids(p: &[u8]) -> Result<Vec<StateId>, MsgError> {
    let mut r = Reader::new(p);
    let n = r.count(8)?;
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        v.push(r.id()?);
    }
    r.end()?;
    Ok(v)
}

/// `(id, bytes)` pairs borrowed from a payload.
pub(crate) type IdBytes<'a> = Vec<(StateId, &'a [u8])>;

/// `Evolve` payload: the step, whether to send each child's state bytes
/// with its output (`Recovery::MasterCopy`), and `(id, input)` pairs.
pub(crate) struct EvolveReq<'a> {
    pub step: u64,
    pub copies: bool,
    pub items: IdBytes<'a>,
}

/// Starts an `Evolve` payload: the caller appends `n` × (id, input).
pub(crate) fn put_evolve_head(out: &mut Vec<u8>, step: u64, copies: bool, n: usize) {
    put_u64(out, step);
    out.push(u8::from(copies));
    put_count(out, n);
}

pub(crate) fn evolve(p: &[u8]) -> Result<EvolveReq<'_>, MsgError> {
    let mut r = Reader::new(p);
    let step = r.u64()?;
    let copies = r.array::<1>()?[0] != 0;
    let items = id_bytes_list(&mut r)?;
    r.end()?;
    Ok(EvolveReq {
        step,
        copies,
        items,
    })
}

/// One child of an evolved parent: its id, its output's bytes, and its
/// state's bytes when the worker sends copies (empty otherwise).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Child<'a> {
    pub id: StateId,
    pub output: &'a [u8],
    pub state: &'a [u8],
}

/// `Evolved` payload: the worker's busy time and the children per parent.
/// With copies, each child's output is followed by its state's bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Evolved<'a> {
    pub busy_ns: u64,
    pub parents: Vec<(StateId, Vec<Child<'a>>)>,
}

pub(crate) fn evolved(p: &[u8], copies: bool) -> Result<Evolved<'_>, MsgError> {
    let mut r = Reader::new(p);
    let busy_ns = r.u64()?;
    let n = r.count(12)?;
    let mut parents = Vec::with_capacity(n);
    for _ in 0..n {
        let parent = r.id()?;
        let k = r.count(if copies { 16 } else { 12 })?;
        let mut kids = Vec::with_capacity(k);
        for _ in 0..k {
            let id = r.id()?;
            let output = r.bytes()?;
            let state = if copies { r.bytes()? } else { &[] };
            kids.push(Child { id, output, state });
        }
        parents.push((parent, kids));
    }
    r.end()?;
    Ok(Evolved { busy_ns, parents })
}

/// A u32 count alone: the `Added` and `Dropped` payloads.
pub(crate) fn count(p: &[u8]) -> Result<u32, MsgError> {
    let mut r = Reader::new(p);
    let n = r.u32()?;
    r.end()?;
    Ok(n)
}

/// A 32-byte array alone: the `Challenge` and `Auth` payloads.
pub(crate) fn array32(p: &[u8]) -> Result<[u8; 32], MsgError> {
    let mut r = Reader::new(p);
    let a = r.array::<32>()?;
    r.end()?;
    Ok(a)
}

/// `Give` payload: a transfer ticket, the thief's peer address, the ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Give<'a> {
    pub ticket: u64,
    pub to: &'a str,
    pub ids: Vec<StateId>,
}

pub(crate) fn put_give(out: &mut Vec<u8>, ticket: u64, to: &str, ids: &[StateId]) {
    put_u64(out, ticket);
    put_bytes(out, to.as_bytes());
    put_ids(out, ids);
}

pub(crate) fn give(p: &[u8]) -> Result<Give<'_>, MsgError> {
    let mut r = Reader::new(p);
    let ticket = r.u64()?;
    let to = std::str::from_utf8(r.bytes()?).map_err(|_| MsgError::Utf8)?;
    let n = r.count(8)?;
    let mut ids = Vec::with_capacity(n);
    for _ in 0..n {
        ids.push(r.id()?);
    }
    r.end()?;
    Ok(Give { ticket, to, ids })
}

/// `Handoff` payload: the ticket, then the states (`Add`'s layout).
pub(crate) fn handoff(p: &[u8]) -> Result<(u64, IdBytes<'_>), MsgError> {
    let mut r = Reader::new(p);
    let ticket = r.u64()?;
    let v = id_bytes_list(&mut r)?;
    r.end()?;
    Ok((ticket, v))
}

/// `Arrived` payload: the ticket and the number of states now held.
pub(crate) fn arrived(p: &[u8]) -> Result<(u64, u32), MsgError> {
    let mut r = Reader::new(p);
    let ticket = r.u64()?;
    let n = r.u32()?;
    r.end()?;
    Ok((ticket, n))
}

/// `Replicate` payload: the round, the sender's worker index at the
/// master, and the buddy's peer address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Replicate<'a> {
    pub round: u64,
    pub origin: u32,
    pub to: &'a str,
}

pub(crate) fn put_replicate(out: &mut Vec<u8>, r: &Replicate<'_>) {
    put_u64(out, r.round);
    put_u32(out, r.origin);
    put_bytes(out, r.to.as_bytes());
}

pub(crate) fn replicate(p: &[u8]) -> Result<Replicate<'_>, MsgError> {
    let mut r = Reader::new(p);
    let round = r.u64()?;
    let origin = r.u32()?;
    let to = std::str::from_utf8(r.bytes()?).map_err(|_| MsgError::Utf8)?;
    r.end()?;
    Ok(Replicate { round, origin, to })
}

/// `Replica` payload: the round, the origin, the number of states in the
/// whole replica (it may span several frames), then this frame's states.
pub(crate) struct Replica<'a> {
    pub round: u64,
    pub origin: u32,
    pub total: u32,
    pub states: IdBytes<'a>,
}

pub(crate) fn replica(p: &[u8]) -> Result<Replica<'_>, MsgError> {
    let mut r = Reader::new(p);
    let round = r.u64()?;
    let origin = r.u32()?;
    let total = r.u32()?;
    let states = id_bytes_list(&mut r)?;
    r.end()?;
    Ok(Replica {
        round,
        origin,
        total,
        states,
    })
}

/// `Held` payload: the round, the origin, and how many replicas arrived.
pub(crate) fn held(p: &[u8]) -> Result<(u64, u32, u32), MsgError> {
    let mut r = Reader::new(p);
    let round = r.u64()?;
    let origin = r.u32()?;
    let n = r.u32()?;
    r.end()?;
    Ok((round, origin, n))
}

/// `Shipped` payload: how many states went to the buddy (`u32::MAX`: it
/// could not be reached) and their bytes.
pub(crate) fn shipped(p: &[u8]) -> Result<(u32, u64), MsgError> {
    let mut r = Reader::new(p);
    let n = r.u32()?;
    let bytes = r.u64()?;
    r.end()?;
    Ok((n, bytes))
}

/// `Commit` payload: the round.
pub(crate) fn commit(p: &[u8]) -> Result<u64, MsgError> {
    let mut r = Reader::new(p);
    let round = r.u64()?;
    r.end()?;
    Ok(round)
}

/// `SetupOk` payload: the worker's peer address, if it takes `Handoff`s.
pub(crate) fn setup_ok(p: &[u8]) -> Result<Option<&str>, MsgError> {
    if p.is_empty() {
        return Ok(None);
    }
    let mut r = Reader::new(p);
    let a = std::str::from_utf8(r.bytes()?).map_err(|_| MsgError::Utf8)?;
    r.end()?;
    Ok(Some(a))
}

/// Runs every payload decoder on `payload`, discarding the results: for the
/// fuzz target and the property tests, which must cover each decoder a
/// master or worker may run on bytes from outside (add new ones here).
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) fn decode_with_every_decoder(payload: &[u8]) {
    let _ = setup(payload);
    let _ = evolve(payload);
    let _ = evolved(payload, false);
    let _ = evolved(payload, true);
    let _ = states(payload);
    let _ = ids(payload);
    let _ = count(payload);
    let _ = array32(payload);
    let _ = give(payload);
    let _ = handoff(payload);
    let _ = arrived(payload);
    let _ = setup_ok(payload);
    let _ = replicate(payload);
    let _ = replica(payload);
    let _ = held(payload);
    let _ = shipped(payload);
    let _ = commit(payload);
}
