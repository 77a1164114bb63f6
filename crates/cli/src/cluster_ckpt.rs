//! The file `statepipe pf|master --checkpoint` writes: its contents, the
//! check of one before a run, and what a rollback to one says.

use std::path::Path;

use anyhow::Context as _;

use statepipe_cluster::pf::PfState;
use statepipe_cluster::{Snapshot, WorkerLost};

/// What `--checkpoint` writes: the run's identity, the master's snapshot
/// and the filter's state after the same step.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct Checkpoint {
    /// What must match for a run to resume it (its options).
    pub(crate) run: String,
    pub(crate) snapshot: Snapshot,
    pub(crate) filter: PfState,
}

/// Whether `resume` names a checkpoint of the run `key` and `checkpoint` a
/// file that can be written.
pub(crate) fn check(
    resume: Option<&Path>,
    checkpoint: Option<&Path>,
    key: &str,
) -> anyhow::Result<()> {
    if let Some(path) = resume {
        read(path, key)?;
    }
    if let Some(path) = checkpoint {
        statepipe_sys::durable::check_writable(path)
            .with_context(|| format!("cannot write the checkpoint {}", path.display()))?;
    }
    Ok(())
}

/// The first bytes of a checkpoint file (the last one says the format's
/// version).
const MAGIC: &[u8; 16] = b"statepipe-pf-ck\x01";

/// A checkpoint file's bytes: [`MAGIC`], the checkpoint (postcard), and
/// the CRC-32C of the two, so that a damaged file is refused rather than
/// resumed with other numbers.
pub(crate) fn encode(c: &Checkpoint) -> std::io::Result<Vec<u8>> {
    let mut bytes = MAGIC.to_vec();
    bytes.extend(postcard::to_allocvec(c).map_err(std::io::Error::other)?);
    let crc = crc32c::crc32c(&bytes);
    bytes.extend_from_slice(&crc.to_le_bytes());
    Ok(bytes)
}

/// The checkpoint in `bytes`, or what is wrong with them.
pub(crate) fn decode(bytes: &[u8]) -> Result<Checkpoint, String> {
    if bytes.len() < MAGIC.len() + 4 || !bytes.starts_with(&MAGIC[..15]) {
        return Err("not a statepipe checkpoint (no header)".into());
    }
    if bytes[15] != MAGIC[15] {
        return Err(format!(
            "a checkpoint of format {}, this build reads format {}",
            bytes[15], MAGIC[15]
        ));
    }
    let (framed, crc) = bytes.split_at(bytes.len() - 4);
    if crc32c::crc32c(framed).to_le_bytes() != crc {
        return Err("damaged: checksum mismatch (corrupted or truncated)".into());
    }
    let (c, rest): (Checkpoint, _) =
        postcard::take_from_bytes(&framed[MAGIC.len()..]).map_err(|e| format!("damaged: {e}"))?;
    if !rest.is_empty() {
        return Err(format!(
            "damaged: {} bytes after the checkpoint",
            rest.len()
        ));
    }
    let f = &c.filter;
    let consistent = f.ids.len() == f.log_w.len()
        && !f.log_z.is_empty()
        && f.ids.len() % f.log_z.len() == 0
        && f.means.len() == f.t;
    if !consistent {
        return Err(format!(
            "inconsistent: {} particles, {} weights, {} islands, {} means after {} steps",
            f.ids.len(),
            f.log_w.len(),
            f.log_z.len(),
            f.means.len(),
            f.t
        ));
    }
    Ok(c)
}

/// The checkpoint at `path`, if it is one of the run `key`.
pub(crate) fn read(path: &Path, key: &str) -> anyhow::Result<Checkpoint> {
    let bytes = std::fs::read(path)
        .with_context(|| format!("reading the checkpoint {}", path.display()))?;
    let c = decode(&bytes).map_err(|why| {
        anyhow::anyhow!("the checkpoint {} cannot be resumed: {why}", path.display())
    })?;
    anyhow::ensure!(
        c.run == key,
        "the checkpoint {} is of another run: {}; this run: {key} (give the same options)",
        path.display(),
        c.run,
    );
    Ok(c)
}

/// The line said on stderr when the run rolled back to the checkpoint
/// after step `to` because of `cause`.
pub(crate) fn rolled_back(to: usize, cause: &WorkerLost, rollbacks: u32) -> String {
    let who = if cause.others.is_empty() {
        format!("worker {} ({})", cause.worker, cause.addr)
    } else {
        let all: Vec<String> = std::iter::once(cause.worker)
            .chain(cause.others.iter().map(|o| o.0))
            .map(|w| w.to_string())
            .collect();
        format!("workers {}", all.join(", "))
    };
    format!(
        "statepipe: {who} lost ({}), and no copy of {} states survived; rolled back to the \
         checkpoint after step {to} (rollback {rollbacks} to it), going on with the workers left",
        cause.reason,
        cause.lost.len() + cause.unfinished.len(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use statepipe_cluster::StateId;

    fn checkpoint() -> Checkpoint {
        Checkpoint {
            run: "nile 8 particles, 2 islands, seed 1".into(),
            snapshot: Snapshot {
                seed: 1,
                step: 3,
                epoch: 1,
                states: (0..8).map(|i| (StateId(i), vec![i as u8; 8])).collect(),
            },
            filter: PfState {
                t: 3,
                ids: (0..8).map(StateId).collect(),
                log_w: vec![-1.5; 8],
                log_z: vec![-2.0, -3.0],
                means: vec![1.0, 2.0, 3.0],
            },
        }
    }

    #[test]
    fn a_checkpoint_round_trips_and_every_damage_is_refused() {
        let bytes = encode(&checkpoint()).unwrap();
        let back = decode(&bytes).unwrap();
        assert_eq!(encode(&back).unwrap(), bytes);
        // Every flipped bit and every truncation is refused, saying why.
        for i in 0..bytes.len() {
            for bit in 0..8 {
                let mut b = bytes.clone();
                b[i] ^= 1 << bit;
                assert!(decode(&b).is_err(), "byte {i} bit {bit} flipped, accepted");
            }
        }
        for n in 0..bytes.len() {
            assert!(decode(&bytes[..n]).is_err(), "cut to {n} bytes, accepted");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode(&longer).is_err());
        let mut other = bytes.clone();
        other[15] = 2;
        assert!(decode(&other).unwrap_err().contains("format 2"));
    }

    #[test]
    fn an_inconsistent_checkpoint_is_refused() {
        let mut c = checkpoint();
        c.filter.log_w.pop();
        let e = decode(&encode(&c).unwrap()).map(|_| ()).unwrap_err();
        assert!(e.starts_with("inconsistent: 8 particles, 7 weights"), "{e}");
    }

    proptest! {
        /// Any bytes, bare or framed as a checkpoint with a valid header
        /// and checksum, decode or are refused: nothing panics.
        #[test]
        fn any_bytes_decode_or_are_refused(body in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = decode(&body);
            let mut framed = MAGIC.to_vec();
            framed.extend_from_slice(&body);
            let crc = crc32c::crc32c(&framed);
            framed.extend_from_slice(&crc.to_le_bytes());
            let _ = decode(&framed);
        }
    }
}
