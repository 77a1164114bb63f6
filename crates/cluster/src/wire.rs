//! Blocking frame I/O, for workers, handshakes and the threaded master.

use std::io::{self, Read, Write};

use crate::protocol::{self, Kind, HEADER_LEN};

/// The most a frame's buffer takes before its bytes arrive.
const GROW_FROM: usize = 16 << 20;

/// Reads one frame into `buf` (replacing its contents with the payload).
/// `Ok(None)` on a clean end of stream before the first header byte.
///
/// # Errors
/// I/O errors, a stream that ends inside a frame, or an invalid header
/// (as `InvalidData`).
pub(crate) fn read_frame(
    r: &mut impl Read,
    buf: &mut Vec<u8>,
    max: u32,
) -> io::Result<Option<Kind>> {
    let mut h = [0u8; HEADER_LEN];
    let mut got = 0;
    while got < HEADER_LEN {
        match r.read(&mut h[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let header = protocol::parse_header(&h, max)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?
        .expect("a full header was read");
    // Grown as the bytes arrive (doubling from 16 MiB), so that a header
    // claiming more than its sender sends costs no more than was sent; a
    // buffer left large by an earlier frame is given back.
    let len = header.len as usize;
    buf.clear();
    if buf.capacity() > GROW_FROM && len <= GROW_FROM {
        buf.shrink_to(GROW_FROM);
    }
    while buf.len() < len {
        let at = buf.len();
        buf.resize(len.min(at.max(GROW_FROM / 2) * 2), 0);
        r.read_exact(&mut buf[at..])?;
    }
    Ok(Some(header.kind))
}

/// Reads one frame and checks its kind.
///
/// # Errors
/// As [`read_frame`], plus `InvalidData` for another kind and
/// `UnexpectedEof` for an end of stream.
pub(crate) fn expect_frame(
    r: &mut impl Read,
    buf: &mut Vec<u8>,
    max: u32,
    want: Kind,
) -> io::Result<()> {
    match read_frame(r, buf, max)? {
        Some(k) if k == want => Ok(()),
        Some(Kind::Failed) => Err(io::Error::other(format!(
            "peer failed: {}",
            String::from_utf8_lossy(buf)
        ))),
        Some(k) => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("expected a {want:?} frame, got {k:?}"),
        )),
        None => Err(io::ErrorKind::UnexpectedEof.into()),
    }
}

/// Writes one frame.
///
/// # Errors
/// I/O errors.
pub(crate) fn write_frame(w: &mut impl Write, kind: Kind, payload: &[u8]) -> io::Result<()> {
    let mut f = Vec::with_capacity(HEADER_LEN + payload.len());
    protocol::encode(&mut f, kind, payload);
    w.write_all(&f)
}
