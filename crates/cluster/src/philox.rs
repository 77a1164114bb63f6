//! Philox4x32-10 blocks ("Parallel Random Numbers: As Easy as 1, 2, 3",
//! Salmon et al., SC'11) for [`Rng`](crate::Rng): one at a time through
//! the `rand_philox` crate, or sixteen streams' blocks at once in a lane
//! loop that vectorises, on AVX-512 or AVX2 when the CPU has them: the
//! first blocks of sixteen parents' generators, or sixteen children's
//! normal draws ([`fill_normals`]).

use crate::ids::{child_id_keyed, StateId};
use crate::math::normal_of_words;

/// Block `block` of stream `stream` under `key`: Philox4x32-10 of the
/// counter (block low, block high, stream low, stream high).
#[inline]
pub(crate) fn philox(key: [u32; 2], stream: u64, block: u64) -> [u32; 4] {
    rand_philox::philox4x32_10(
        [
            block as u32,
            (block >> 32) as u32,
            stream as u32,
            (stream >> 32) as u32,
        ],
        key,
    )
}

/// Parents whose first blocks [`Batch::rngs`](crate::Batch::rngs) makes together: the
/// rounds of that many independent blocks vectorise (SSE2 and up).
pub(crate) const LANES: usize = 16;

/// [`philox`]'s block 0 of streams `streams` under `key`: the same words
/// as `LANES` scalar calls, on the widest vector unit the CPU has (see
/// [`avx512`], [`avx2`]).
#[inline]
pub(crate) fn philox_lanes(key: [u32; 2], streams: &[u64; LANES]) -> [[u32; 4]; LANES] {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx512f") {
            return avx512(key, streams);
        }
        if std::is_x86_feature_detected!("avx2") {
            return avx2(key, streams);
        }
    }
    philox_lanes_any(key, streams)
}

/// [`philox_lanes_any`] on AVX-512 (the lane loop compiled for a wider
/// vector unit than the build's baseline, SSE2 on x86-64, and chosen at
/// run time: with [`avx2`] and `math`'s `widest!` and `vectorised`, the
/// only unsafe code of this crate).
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
pub(crate) fn avx512(key: [u32; 2], streams: &[u64; LANES]) -> [[u32; 4]; LANES] {
    #[target_feature(enable = "avx512f")]
    fn run(key: [u32; 2], streams: &[u64; LANES]) -> [[u32; 4]; LANES] {
        philox_lanes_any(key, streams)
    }
    assert!(std::is_x86_feature_detected!("avx512f"));
    // SAFETY: the CPU has AVX-512F (checked just above), the one
    // condition for running code compiled for it.
    unsafe { run(key, streams) }
}

/// [`philox_lanes_any`] on AVX2.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
pub(crate) fn avx2(key: [u32; 2], streams: &[u64; LANES]) -> [[u32; 4]; LANES] {
    #[target_feature(enable = "avx2")]
    fn run(key: [u32; 2], streams: &[u64; LANES]) -> [[u32; 4]; LANES] {
        philox_lanes_any(key, streams)
    }
    assert!(std::is_x86_feature_detected!("avx2"));
    // SAFETY: the CPU has AVX2 (checked just above), the one condition
    // for running code compiled for it.
    unsafe { run(key, streams) }
}

/// The lane loop, lane by lane: a loop the compiler turns into vector
/// multiplies of whatever width the calling function is compiled for.
#[inline(always)]
pub(crate) fn philox_lanes_any(key: [u32; 2], streams: &[u64; LANES]) -> [[u32; 4]; LANES] {
    let w = philox_words_any(key, streams, &[0; LANES]);
    let mut out = [[0u32; 4]; LANES];
    for l in 0..LANES {
        out[l] = [w[0][l], w[1][l], w[2][l], w[3][l]];
    }
    out
}

/// Block `blocks[l]` of stream `streams[l]` under `key` for every lane
/// `l`, word by word: `w[i][l]` is word `i` of lane `l`'s block (the
/// layout the lanes are computed in, which the vector loops that use them
/// read without shuffling).
#[inline(always)]
pub(crate) fn philox_words_any(
    key: [u32; 2],
    streams: &[u64; LANES],
    blocks: &[u32; LANES],
) -> [[u32; LANES]; 4] {
    const M0: u32 = 0xD251_1F53;
    const M1: u32 = 0xCD9E_8D57;
    const W0: u32 = 0x9E37_79B9;
    const W1: u32 = 0xBB67_AE85;
    // Each word in a 64-bit lane whose high half is junk: the 32×32→64
    // multiply (`vpmuludq`) reads only the low halves, and a word whose
    // high half is junk only ever reaches a multiply or an exclusive or,
    // so the rounds never pack and unpack the lanes. Masked once, at the
    // end.
    const LO: u64 = 0xFFFF_FFFF;
    let mut x0 = [0u64; LANES];
    let mut x1 = [0u64; LANES];
    let mut x2 = [0u64; LANES];
    let mut x3 = [0u64; LANES];
    for l in 0..LANES {
        x0[l] = u64::from(blocks[l]);
        x2[l] = streams[l];
        x3[l] = streams[l] >> 32;
    }
    let mut k = key;
    for r in 0..10 {
        if r > 0 {
            k[0] = k[0].wrapping_add(W0);
            k[1] = k[1].wrapping_add(W1);
        }
        let (k0, k1) = (u64::from(k[0]), u64::from(k[1]));
        for l in 0..LANES {
            let p0 = (x0[l] & LO) * u64::from(M0);
            let p1 = (x2[l] & LO) * u64::from(M1);
            // The products' low halves are the next x3 and x1 as they
            // are (not separate 32-bit multiplies, which cost as much
            // again in vector registers).
            x0[l] = (p1 >> 32) ^ x1[l] ^ k0;
            x2[l] = (p0 >> 32) ^ x3[l] ^ k1;
            x1[l] = p1;
            x3[l] = p0;
        }
    }
    let mut w = [[0u32; LANES]; 4];
    for l in 0..LANES {
        w[0][l] = x0[l] as u32;
        w[1][l] = x1[l] as u32;
        w[2][l] = x2[l] as u32;
        w[3][l] = x3[l] as u32;
    }
    w
}

/// The children's ids [`fill_normals`] may make beside their draws: the
/// step's child-id key, and where each child's id goes.
pub(crate) type KidIds<'a> = Option<(u64, &'a mut [StateId])>;

/// For each child `j`: `z[j]` is the standard normal
/// ([`normal_of_words`](crate::math::normal_of_words)) of block
/// `index[j]` of stream `ids[parent[j]]` under `key`, sixteen children at
/// a time, on the widest vector unit the CPU has (the same bits on any).
/// With `kids`, also each child's id, [`child_id_keyed`] of that parent
/// and child index: the parent's id is in a register already.
///
/// # Panics
/// If the child slices differ in length or a parent is out of range.
pub(crate) fn fill_normals(
    key: [u32; 2],
    ids: &[StateId],
    parent: &[u32],
    index: &[u32],
    z: &mut [f64],
    kids: KidIds<'_>,
) {
    assert!(parent.len() == z.len() && index.len() == z.len());
    assert!(kids.as_ref().map_or(true, |(_, k)| k.len() == z.len()));
    fill_normals_widest(key, ids, parent, index, z, kids);
}

crate::math::widest! {
    /// [`fill_normals_any`] on the widest vector unit (AVX-512 with DQ for
    /// the ids' 64-bit multiplies, or AVX2).
    fn fill_normals_widest(
        key: [u32; 2],
        ids: &[StateId],
        parent: &[u32],
        index: &[u32],
        z: &mut [f64],
        kids: KidIds<'_>,
    ) = fill_normals_any;
}

/// [`fill_normals`]' loop, for whatever vector unit the caller is
/// compiled for: full chunks of [`LANES`] children, then the rest padded.
#[inline(always)]
pub(crate) fn fill_normals_any(
    key: [u32; 2],
    ids: &[StateId],
    parent: &[u32],
    index: &[u32],
    z: &mut [f64],
    kids: KidIds<'_>,
) {
    /// One chunk's streams (its parents' ids) and draws.
    #[inline(always)]
    fn chunk(
        key: [u32; 2],
        ids: &[StateId],
        parent: &[u32],
        index: &[u32],
        z: &mut [f64],
    ) -> [u64; LANES] {
        let mut streams = [0u64; LANES];
        let mut blocks = [0u32; LANES];
        for l in 0..parent.len() {
            streams[l] = ids[parent[l] as usize].0;
            blocks[l] = index[l];
        }
        let w = philox_words_any(key, &streams, &blocks);
        let mut out = [0.0f64; LANES];
        for l in 0..LANES {
            out[l] = normal_of_words(w[0][l], w[1][l], w[2][l]);
        }
        z.copy_from_slice(&out[..z.len()]);
        streams
    }
    let mut zs = z.chunks_exact_mut(LANES);
    let mut ps = parent.chunks_exact(LANES);
    let mut is = index.chunks_exact(LANES);
    match kids {
        None => {
            for ((z, p), i) in (&mut zs).zip(&mut ps).zip(&mut is) {
                chunk(key, ids, p, i, z);
            }
        }
        Some((kid_key, kids)) => {
            let mut ks = kids.chunks_exact_mut(LANES);
            for (((z, p), i), k) in (&mut zs).zip(&mut ps).zip(&mut is).zip(&mut ks) {
                let streams = chunk(key, ids, p, i, z);
                for l in 0..LANES {
                    k[l] = child_id_keyed(kid_key, StateId(streams[l]), i[l]);
                }
            }
            let (z, p, i) = (zs.into_remainder(), ps.remainder(), is.remainder());
            if !z.is_empty() {
                let streams = chunk(key, ids, p, i, z);
                for (l, k) in ks.into_remainder().iter_mut().enumerate() {
                    *k = child_id_keyed(kid_key, StateId(streams[l]), i[l]);
                }
            }
            return;
        }
    }
    let z = zs.into_remainder();
    if !z.is_empty() {
        chunk(key, ids, ps.remainder(), is.remainder(), z);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{mix64, step_key};

    /// Random123's published known-answer vectors for Philox4x32-10
    /// (`kat_vectors`), through the counter layout `philox` uses.
    #[test]
    fn philox_matches_the_random123_known_answers() {
        let words = |b: u64, s: u64| [b as u32, (b >> 32) as u32, s as u32, (s >> 32) as u32];
        let cases: [([u32; 4], [u32; 2], [u32; 4]); 3] = [
            (
                [0; 4],
                [0, 0],
                [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8],
            ),
            (
                [0xffff_ffff; 4],
                [0xffff_ffff; 2],
                [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd],
            ),
            (
                [0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344],
                [0xa409_3822, 0x299f_31d0],
                [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1],
            ),
        ];
        for (ctr, key, want) in cases {
            let block = u64::from(ctr[0]) | (u64::from(ctr[1]) << 32);
            let stream = u64::from(ctr[2]) | (u64::from(ctr[3]) << 32);
            assert_eq!(words(block, stream), ctr);
            assert_eq!(philox(key, stream, block), want);
            // The lanes give the same block 0 of each stream.
            if block == 0 {
                let mut streams = [stream; LANES];
                streams[1] = stream ^ 1;
                let got = philox_lanes(key, &streams);
                assert_eq!(got[0], want);
                assert_eq!(got[1], philox(key, stream ^ 1, 0));
            }
        }
    }

    #[test]
    fn lanes_are_the_scalar_blocks() {
        let key = step_key(7, 3);
        let mut streams = [0u64; LANES];
        for (i, s) in streams.iter_mut().enumerate() {
            *s = mix64(i as u64);
        }
        let got = philox_lanes(key, &streams);
        for (s, block) in streams.iter().zip(got) {
            assert_eq!(block, philox(key, *s, 0));
        }
        assert_eq!(philox_lanes_any(key, &streams), got);
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("avx2") {
                assert_eq!(avx2(key, &streams), got);
            }
            if std::is_x86_feature_detected!("avx512f") {
                assert_eq!(avx512(key, &streams), got);
            }
        }
    }
}
