//! The wire: length-prefixed frames, the control messages, and the
//! handshake that proves the shared secret.
//!
//! A frame is `len: u32 LE`, then `len` bytes: a kind byte and its body.
//! `len` is checked against [`MAX_FRAME`] before anything is allocated, and
//! every body is decoded from a slice of exactly its length: a frame from a
//! peer can neither make a reader allocate more than the bound nor read
//! past its end.
//!
//! | kind | body | direction |
//! |---|---|---|
//! | `BATCH` (1) | `count: u32 LE`, then `count` × postcard `(seq: u64, item)` | data, downstream |
//! | `BARRIER` (2) | `id: u64 LE` | data, downstream |
//! | `END` (3) | — | data, downstream |
//! | `CREDIT` (4) | `items: u64 LE` | data, upstream |
//! | `CONTROL` (5) | postcard [`Msg`] | control, both ways; data, once after `AUTH` |
//! | `CHALLENGE` (6) | 32 random bytes | the accepting side, first |
//! | `AUTH` (7) | HMAC-SHA256(secret, context ‖ challenge) | the joining side |
//! | `GROUPS` (8) | `count: u32 LE`, then `count` × postcard `(seq: u64, last: bool, Option<item>)` | a keyed copy's outputs, downstream |
//! | `ROUTE` (9) | `count: u32 LE`, then `count` × postcard `copy: u32` | a split's route log, to its merge |
//! | `RAW` (10) | `count: u32 LE`, then `count` × an item's bytes (`bytemuck::Pod`) | a [`RawLink`](super::RawLink), downstream |

use std::io::{self, Read, Write};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use statepipe_sys::auth::Secret;

/// How often a member tells its coordinator it is alive.
pub(crate) const HEARTBEAT: std::time::Duration = std::time::Duration::from_millis(200);
/// How long a member hears nothing from its coordinator (which beats
/// every [`HEARTBEAT`]) before it takes it for lost: stopped, or its host
/// cut off, where no close would ever come.
pub(crate) const COORDINATOR_SILENCE: std::time::Duration = std::time::Duration::from_secs(5);

/// How long a connection between the processes of a run may take to
/// come up (a peer still starting).
pub(crate) const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The largest frame accepted (kind and body).
pub(crate) const MAX_FRAME: usize = 4 << 20;
/// A batch is sent once its body reaches this many bytes.
pub(crate) const BATCH_BYTES: usize = 64 << 10;

pub(crate) const BATCH: u8 = 1;
pub(crate) const BARRIER: u8 = 2;
pub(crate) const END: u8 = 3;
pub(crate) const CREDIT: u8 = 4;
pub(crate) const CONTROL: u8 = 5;
pub(crate) const CHALLENGE: u8 = 6;
pub(crate) const AUTH: u8 = 7;
pub(crate) const GROUPS: u8 = 8;
pub(crate) const ROUTE: u8 = 9;
pub(crate) const RAW: u8 = 10;

/// What a peer sent that this side cannot take.
#[derive(Debug)]
pub(crate) enum WireError {
    /// The connection failed or closed.
    Io(io::Error),
    /// A malformed frame: what is wrong with it.
    Malformed(String),
}

impl From<io::Error> for WireError {
    fn from(e: io::Error) -> Self {
        WireError::Io(e)
    }
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WireError::Io(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                f.write_str("connection closed by the peer")
            }
            WireError::Io(e) => write!(f, "{e}"),
            WireError::Malformed(m) => write!(f, "malformed frame: {m}"),
        }
    }
}

fn malformed(m: impl Into<String>) -> WireError {
    WireError::Malformed(m.into())
}

/// A final state crossing the wire: a stage's name and its postcard bytes.
pub(crate) type EncodedState = (String, Vec<u8>);

/// An item that failed in a part, as its coordinator reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct WireFailure {
    pub(crate) seq: u64,
    pub(crate) stage: String,
    pub(crate) item: String,
    pub(crate) error: String,
}

/// Where one of a part's edges goes: the address of the process running
/// the receiving part (or the coordinator), that part, and which of its
/// incoming edges this is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Target {
    pub(crate) addr: String,
    pub(crate) part: u32,
    pub(crate) slot: u32,
}

/// One part a member runs in one attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Assign {
    pub(crate) part: u32,
    /// The checkpoint its states come from (`None`: the initial ones).
    pub(crate) restore: Option<u64>,
    /// Where its outputs go: one edge, or a keyed stage's copies and then
    /// the merge after them.
    pub(crate) outputs: Vec<Target>,
    /// How many edges come in: one, or a keyed stage's copies and its
    /// route log.
    pub(crate) inputs: u32,
    /// The number of the attempt's first barrier: past every one sent
    /// before, so that a lost member still finishing a checkpoint never
    /// writes one of the numbers this attempt's parts write.
    pub(crate) next_checkpoint: u64,
}

/// The control messages, and a data connection's hello.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Msg {
    /// Coordinator → member after `AUTH`: what to build.
    Welcome { app: String, member: u32 },
    /// Member → coordinator: the build it runs and where its parts listen.
    Ready { build: String, data: String },
    /// Coordinator → member: the build differs; the member exits.
    Refused { reason: String },
    /// Coordinator → member: run these parts in attempt `epoch`.
    Start {
        epoch: u64,
        parts: Vec<Assign>,
        checkpoints: Option<String>,
        credits: u64,
    },
    /// Member → coordinator: every part of `epoch` is deployed.
    Started { epoch: u64 },
    /// Member → coordinator: a part's checkpoint `id` is durable.
    Checkpointed { epoch: u64, part: u32, id: u64 },
    /// Member → coordinator: items that failed in a part.
    Failures {
        epoch: u64,
        part: u32,
        failures: Vec<WireFailure>,
    },
    /// Member → coordinator: a part finished; its final states.
    Done {
        epoch: u64,
        part: u32,
        states: Vec<EncodedState>,
    },
    /// Member → coordinator: a part cannot go on.
    Failed {
        epoch: u64,
        part: u32,
        error: String,
    },
    /// Coordinator → member: stop the parts of `epoch`.
    Abort { epoch: u64 },
    /// Member → coordinator: the parts of `epoch` are stopped.
    Aborted { epoch: u64 },
    /// Coordinator → member: the run is over; leave.
    Finish,
    /// Either way, every [`HEARTBEAT`].
    Heartbeat,
    /// The joining side of a data connection, after `AUTH`: the part
    /// it feeds and which of its incoming edges it is.
    Hello { epoch: u64, part: u32, slot: u32 },
    /// The sending side of a [`Link`](super::Link), after `AUTH`: the
    /// type name of its items, which the receiving side must share.
    Link { item: String },
    /// Member → coordinator: a part's checkpoint `id` could not be
    /// written (a full disk, say); the part goes on from its states.
    CheckpointFailed {
        epoch: u64,
        part: u32,
        id: u64,
        error: String,
    },
    /// Member → coordinator: it asks to leave. The coordinator moves its
    /// parts to the other members at the next committed checkpoint, then
    /// lets it go with [`Msg::Finish`].
    Leave,
}

/// Writes one frame.
pub(crate) fn write_frame(w: &mut impl Write, kind: u8, body: &[u8]) -> io::Result<()> {
    let len = u32::try_from(body.len() + 1)
        .ok()
        .filter(|&l| l as usize <= MAX_FRAME)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "frame too large"))?;
    let mut head = [0u8; 5];
    head[..4].copy_from_slice(&len.to_le_bytes());
    head[4] = kind;
    w.write_all(&head)?;
    w.write_all(body)
}

/// Writes a control message.
pub(crate) fn write_msg(w: &mut impl Write, msg: &Msg) -> io::Result<()> {
    let body = postcard::to_allocvec(msg)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
    write_frame(w, CONTROL, &body)
}

/// Reads one frame into `buf`; returns its kind, the body in `buf`.
///
/// # Errors
/// [`WireError::Io`] if the stream fails or ends (also inside a frame),
/// [`WireError::Malformed`] for an empty or oversized frame.
pub(crate) fn read_frame(r: &mut impl Read, buf: &mut Vec<u8>) -> Result<u8, WireError> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len)?;
    let len = u32::from_le_bytes(len) as usize;
    if len == 0 || len > MAX_FRAME {
        return Err(malformed(format!(
            "a frame of {len} bytes (1..={MAX_FRAME})"
        )));
    }
    let mut kind = [0u8; 1];
    r.read_exact(&mut kind)?;
    buf.clear();
    // Grows only as bytes arrive: a peer announcing 4 MiB and sending
    // nothing costs nothing.
    let got = r.take(len as u64 - 1).read_to_end(buf)?;
    if got != len - 1 {
        return Err(WireError::Io(io::ErrorKind::UnexpectedEof.into()));
    }
    Ok(kind[0])
}

/// A control message from a `CONTROL` frame's body.
pub(crate) fn decode_msg(body: &[u8]) -> Result<Msg, WireError> {
    postcard::from_bytes(body).map_err(|e| malformed(format!("control message: {e}")))
}

/// Reads frames until a control message; any other kind is malformed here.
pub(crate) fn read_msg(r: &mut impl Read, buf: &mut Vec<u8>) -> Result<Msg, WireError> {
    match read_frame(r, buf)? {
        CONTROL => decode_msg(buf),
        k => Err(malformed(format!(
            "frame kind {k} where a control message belongs"
        ))),
    }
}

/// A body that is exactly one `u64 LE`.
pub(crate) fn decode_u64(body: &[u8]) -> Result<u64, WireError> {
    let b: [u8; 8] = body
        .try_into()
        .map_err(|_| malformed(format!("{} bytes where a u64 belongs", body.len())))?;
    Ok(u64::from_le_bytes(b))
}

/// Decodes the records of a batch body (`count`, then postcard records),
/// handing each to `f` in order.
pub(crate) fn decode_records<R: DeserializeOwned>(
    body: &[u8],
    mut f: impl FnMut(R) -> Result<(), WireError>,
) -> Result<(), WireError> {
    let (count, mut rest) = body
        .split_first_chunk::<4>()
        .map(|(c, r)| (u32::from_le_bytes(*c), r))
        .ok_or_else(|| malformed("a batch without its count"))?;
    for i in 0..count {
        let (rec, r): (R, _) = postcard::take_from_bytes(rest)
            .map_err(|e| malformed(format!("record {i} of {count}: {e}")))?;
        rest = r;
        f(rec)?;
    }
    if !rest.is_empty() {
        return Err(malformed(format!(
            "{} bytes after the batch's {count} records",
            rest.len()
        )));
    }
    Ok(())
}

/// Checks that `seq` does not go back after `last`.
pub(crate) fn in_order(last: &mut Option<u64>, seq: u64) -> Result<(), WireError> {
    if last.is_some_and(|l| seq < l) {
        return Err(malformed(format!(
            "an item numbered {seq} after {}",
            last.unwrap_or(0)
        )));
    }
    *last = Some(seq);
    Ok(())
}

/// Decodes a `BATCH` body, handing each `(seq, item)` to `f` in order.
/// Sequence numbers never go back (`after` is the last one seen; the
/// outputs of one input share its number).
pub(crate) fn decode_batch<T: DeserializeOwned>(
    body: &[u8],
    after: Option<u64>,
    mut f: impl FnMut(u64, T),
) -> Result<Option<u64>, WireError> {
    let (count, mut rest) = body
        .split_first_chunk::<4>()
        .map(|(c, r)| (u32::from_le_bytes(*c), r))
        .ok_or_else(|| malformed("a batch without its count"))?;
    let mut last = after;
    for i in 0..count {
        let ((seq, item), r): ((u64, T), _) = postcard::take_from_bytes(rest)
            .map_err(|e| malformed(format!("item {i} of {count}: {e}")))?;
        if last.is_some_and(|l| seq < l) {
            return Err(malformed(format!(
                "item {i} numbered {seq} after {}",
                last.unwrap_or(0)
            )));
        }
        last = Some(seq);
        rest = r;
        f(seq, item);
    }
    if !rest.is_empty() {
        return Err(malformed(format!(
            "{} bytes after the batch's {count} items",
            rest.len()
        )));
    }
    Ok(last)
}

/// A batch being built: the frame header's room first, records after.
/// Decodes a `RAW` batch of `T`s, handing each to `f`; returns how many.
///
/// # Errors
/// [`WireError::Malformed`] unless the body is its count and exactly that
/// many `T`s.
pub(crate) fn decode_raw<T: bytemuck::Pod>(
    body: &[u8],
    mut f: impl FnMut(T) -> Result<(), WireError>,
) -> Result<u64, WireError> {
    let (count, rest) = body
        .split_first_chunk::<4>()
        .map(|(c, r)| (u32::from_le_bytes(*c), r))
        .ok_or_else(|| malformed("a raw batch without its count"))?;
    let size = std::mem::size_of::<T>();
    if size == 0 || rest.len() != count as usize * size {
        return Err(malformed(format!(
            "a raw batch of {count} items of {size} bytes in {} bytes",
            rest.len()
        )));
    }
    for chunk in rest.chunks_exact(size) {
        f(bytemuck::pod_read_unaligned(chunk))?;
    }
    Ok(u64::from(count))
}

/// A postcard flavor that appends to a `Vec`, pushing short runs (a
/// varint is at most 10 bytes) byte by byte: `postcard::to_extend` copies
/// each through `extend_from_slice`, a `memcpy` call per integer, which
/// cost a batch of 64-byte items more than the rest of the encoding.
struct Tail<'a>(&'a mut Vec<u8>);

impl postcard::ser_flavors::Flavor for Tail<'_> {
    type Output = ();

    #[inline]
    fn try_extend(&mut self, data: &[u8]) -> postcard::Result<()> {
        if data.len() <= 16 {
            for &b in data {
                self.0.push(b);
            }
        } else {
            self.0.extend_from_slice(data);
        }
        Ok(())
    }

    #[inline]
    fn try_push(&mut self, data: u8) -> postcard::Result<()> {
        self.0.push(data);
        Ok(())
    }

    fn finalize(self) -> postcard::Result<()> {
        Ok(())
    }
}

pub(crate) struct BatchBuf {
    pub(crate) bytes: Vec<u8>,
    pub(crate) count: u32,
    kind: u8,
}

impl BatchBuf {
    /// A batch of `BATCH`, `GROUPS` or `ROUTE` records.
    pub(crate) fn new(kind: u8) -> Self {
        let mut b = BatchBuf {
            bytes: Vec::with_capacity(BATCH_BYTES + 1024),
            count: 0,
            kind,
        };
        b.clear();
        b
    }

    fn clear(&mut self) {
        self.bytes.clear();
        self.bytes.extend_from_slice(&[0u8; 9]);
        self.count = 0;
    }

    /// Appends one item.
    pub(crate) fn push<T: Serialize>(&mut self, seq: u64, item: &T) -> Result<(), WireError> {
        self.record(seq, &(seq, item))
    }

    /// Appends one record.
    pub(crate) fn record<R: Serialize>(&mut self, seq: u64, rec: &R) -> Result<(), WireError> {
        let before = self.bytes.len();
        postcard::serialize_with_flavor(rec, Tail(&mut self.bytes))
            .map_err(|e| malformed(format!("item {seq} does not encode: {e}")))?;
        if self.bytes.len() - before + 10 > MAX_FRAME {
            return Err(malformed(format!(
                "item {seq} encodes to more than a frame's {MAX_FRAME} bytes"
            )));
        }
        self.count += 1;
        Ok(())
    }

    /// Whether the batch should go now.
    /// Appends one item's bytes (a `RAW` batch).
    #[inline]
    pub(crate) fn raw(&mut self, item: &[u8]) {
        self.bytes.extend_from_slice(item);
        self.count += 1;
    }

    pub(crate) fn full(&self) -> bool {
        self.bytes.len() >= BATCH_BYTES
    }

    /// The body's length (what an edge counts as bytes).
    pub(crate) fn len(&self) -> usize {
        self.bytes.len() - 9
    }

    /// Writes the batch as one frame (if it has items) and starts anew.
    pub(crate) fn write_to(&mut self, w: &mut impl Write) -> io::Result<()> {
        if self.count == 0 {
            return Ok(());
        }
        let len = (self.bytes.len() - 4) as u32;
        self.bytes[..4].copy_from_slice(&len.to_le_bytes());
        self.bytes[4] = self.kind;
        self.bytes[5..9].copy_from_slice(&self.count.to_le_bytes());
        let r = w.write_all(&self.bytes);
        self.clear();
        r
    }
}

/// The accepting side of the handshake: challenge, check the answer.
///
/// # Errors
/// [`WireError::Malformed`] naming the refusal when the answer is wrong.
pub(crate) fn challenge(
    s: &mut (impl Read + Write),
    secret: &Secret,
    buf: &mut Vec<u8>,
) -> Result<(), WireError> {
    let nonce = Secret::nonce();
    write_frame(s, CHALLENGE, &nonce)?;
    match read_frame(s, buf)? {
        AUTH => {}
        k => {
            return Err(malformed(format!(
                "frame kind {k} where the answer belongs"
            )))
        }
    }
    let answer: [u8; 32] = buf
        .as_slice()
        .try_into()
        .map_err(|_| malformed("an answer that is not 32 bytes"))?;
    if !secret.verify(&nonce, &answer) {
        let _ = write_msg(
            s,
            &Msg::Refused {
                reason: format!(
                    "wrong secret: {} differs from this process's",
                    statepipe_sys::auth::SECRET_ENV
                ),
            },
        );
        return Err(malformed("the peer does not know the shared secret"));
    }
    Ok(())
}

/// The joining side of the handshake: answer the challenge.
pub(crate) fn answer(
    s: &mut (impl Read + Write),
    secret: &Secret,
    buf: &mut Vec<u8>,
) -> Result<(), WireError> {
    match read_frame(s, buf)? {
        CHALLENGE => {}
        CONTROL => {
            return Err(match decode_msg(buf)? {
                Msg::Refused { reason } => malformed(format!("refused: {reason}")),
                m => malformed(format!("{m:?} where the challenge belongs")),
            })
        }
        k => {
            return Err(malformed(format!(
                "frame kind {k} where the challenge belongs"
            )))
        }
    }
    let nonce: [u8; 32] = buf
        .as_slice()
        .try_into()
        .map_err(|_| malformed("a challenge that is not 32 bytes"))?;
    write_frame(s, AUTH, &secret.answer(&nonce))?;
    Ok(())
}

/// Every decoder over `bytes` from a peer (the fuzz target): frames, then
/// each body as a control message, a batch of `u64`s and of `String`s, a
/// `u64`. Nothing may panic.
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) fn decode_all(bytes: &[u8]) {
    let mut r = bytes;
    let mut buf = Vec::new();
    while let Ok(kind) = read_frame(&mut r, &mut buf) {
        let _ = kind;
        let _ = decode_msg(&buf);
        let _ = decode_batch::<u64>(&buf, None, |_, _| {});
        let _ = decode_batch::<String>(&buf, Some(3), |_, _| {});
        let _ = decode_batch::<(u64, u64, u64, u64)>(&buf, None, |_, _| {});
        let _ = decode_u64(&buf);
        let _ = decode_records::<(u64, bool, Option<String>)>(&buf, |_| Ok(()));
        let _ = decode_records::<u32>(&buf, |_| Ok(()));
        let _ = decode_raw::<[u64; 8]>(&buf, |_| Ok(()));
        let _ = decode_raw::<u8>(&buf, |_| Ok(()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_raw_batch_round_trips_and_a_wrong_length_is_refused() {
        let mut b = BatchBuf::new(RAW);
        for i in 0..100u64 {
            b.raw(bytemuck::bytes_of(&[i, !i]));
        }
        let mut out = Vec::new();
        b.write_to(&mut out).unwrap();
        let mut buf = Vec::new();
        assert_eq!(read_frame(&mut out.as_slice(), &mut buf).unwrap(), RAW);
        let mut got = Vec::new();
        let n = decode_raw::<[u64; 2]>(&buf, |x| {
            got.push(x);
            Ok(())
        })
        .unwrap();
        assert_eq!(n, 100);
        assert_eq!(got[37], [37, !37]);
        // Items of another size, a short body, a missing count.
        assert!(decode_raw::<[u64; 3]>(&buf, |_| Ok(())).is_err());
        assert!(decode_raw::<[u64; 2]>(&buf[..buf.len() - 1], |_| Ok(())).is_err());
        assert!(decode_raw::<u8>(&buf[..3], |_| Ok(())).is_err());
    }

    #[test]
    fn a_batch_round_trips_in_order() {
        let mut b = BatchBuf::new(BATCH);
        for i in 0..100u64 {
            b.push(i * 3, &format!("item {i}")).unwrap();
        }
        let mut out = Vec::new();
        b.write_to(&mut out).unwrap();
        let mut buf = Vec::new();
        assert_eq!(read_frame(&mut out.as_slice(), &mut buf).unwrap(), BATCH);
        let mut got = Vec::new();
        let last = decode_batch::<String>(&buf, None, |s, x| got.push((s, x))).unwrap();
        assert_eq!(last, Some(297));
        assert_eq!(got.len(), 100);
        assert_eq!(got[7], (21, "item 7".to_string()));
    }

    #[test]
    fn bad_frames_are_refused_with_what_is_wrong() {
        let mut buf = Vec::new();
        let huge = ((MAX_FRAME + 1) as u32).to_le_bytes();
        let e = read_frame(&mut huge.as_slice(), &mut buf).unwrap_err();
        assert!(e.to_string().contains("malformed frame"), "{e}");
        // A frame cut short.
        let mut f = Vec::new();
        write_frame(&mut f, CREDIT, &7u64.to_le_bytes()).unwrap();
        f.truncate(f.len() - 2);
        let e = read_frame(&mut f.as_slice(), &mut buf).unwrap_err();
        assert!(e.to_string().contains("closed"), "{e}");
        // Items that go back in number.
        let mut b = BatchBuf::new(BATCH);
        b.push(5u64, &1u64).unwrap();
        let mut out = Vec::new();
        b.write_to(&mut out).unwrap();
        read_frame(&mut out.as_slice(), &mut buf).unwrap();
        let e = decode_batch::<u64>(&buf, Some(9), |_, _| {}).unwrap_err();
        assert!(e.to_string().contains("numbered 5 after 9"), "{e}");
        // Trailing bytes.
        buf.push(0);
        assert!(decode_batch::<u64>(&buf, None, |_, _| {}).is_err());
        assert!(decode_u64(&[1, 2, 3]).is_err());
    }

    #[test]
    fn the_handshake_refuses_a_wrong_secret() {
        use std::net::{TcpListener, TcpStream};
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let t = std::thread::spawn(move || {
            let mut c = TcpStream::connect(addr).unwrap();
            answer(&mut c, &Secret::new("wrong"), &mut Vec::new()).unwrap();
            let mut buf = Vec::new();
            read_msg(&mut c, &mut buf)
        });
        let (mut s, _) = l.accept().unwrap();
        let e = challenge(&mut s, &Secret::new("right"), &mut Vec::new()).unwrap_err();
        assert!(e.to_string().contains("secret"), "{e}");
        match t.join().unwrap() {
            Ok(Msg::Refused { reason }) => assert!(reason.contains("STATEPIPE_SECRET")),
            other => panic!("{other:?}"),
        }
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            decode_all(&bytes);
        }

        #[test]
        fn control_messages_round_trip(epoch in any::<u64>(), part in any::<u32>(), s in ".{0,20}") {
            for m in [
                Msg::Hello { epoch, part, slot: part },
                Msg::Failed { epoch, part, error: s.clone() },
                Msg::Leave,
                Msg::Start { epoch, parts: vec![Assign { part, restore: Some(epoch), outputs: vec![Target { addr: s.clone(), part, slot: 0 }], inputs: 1, next_checkpoint: epoch + 1 }], checkpoints: None, credits: 3 },
            ] {
                let mut out = Vec::new();
                write_msg(&mut out, &m).unwrap();
                let mut buf = Vec::new();
                prop_assert_eq!(read_msg(&mut out.as_slice(), &mut buf).unwrap(), m);
            }
        }
    }
}
