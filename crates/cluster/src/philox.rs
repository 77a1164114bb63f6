//! Philox4x32-10 blocks ("Parallel Random Numbers: As Easy as 1, 2, 3",
//! Salmon et al., SC'11) for [`Rng`](crate::Rng): one at a time through
//! the `rand_philox` crate, or sixteen streams' first blocks at once in a
//! lane loop that vectorises, on AVX-512 or AVX2 when the CPU has them.

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
/// run time: with [`avx2`], the only unsafe code of this crate).
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
    const M0: u32 = 0xD251_1F53;
    const M1: u32 = 0xCD9E_8D57;
    const W0: u32 = 0x9E37_79B9;
    const W1: u32 = 0xBB67_AE85;
    let mut x0 = [0u32; LANES];
    let mut x1 = [0u32; LANES];
    let mut x2 = [0u32; LANES];
    let mut x3 = [0u32; LANES];
    for l in 0..LANES {
        x2[l] = streams[l] as u32;
        x3[l] = (streams[l] >> 32) as u32;
    }
    let mut k = key;
    for r in 0..10 {
        if r > 0 {
            k[0] = k[0].wrapping_add(W0);
            k[1] = k[1].wrapping_add(W1);
        }
        for l in 0..LANES {
            let p0 = u64::from(x0[l]) * u64::from(M0);
            let p1 = u64::from(x2[l]) * u64::from(M1);
            let n0 = (p1 >> 32) as u32 ^ x1[l] ^ k[0];
            let n2 = (p0 >> 32) as u32 ^ x3[l] ^ k[1];
            let n1 = x2[l].wrapping_mul(M1);
            let n3 = x0[l].wrapping_mul(M0);
            x0[l] = n0;
            x1[l] = n1;
            x2[l] = n2;
            x3[l] = n3;
        }
    }
    let mut out = [[0u32; 4]; LANES];
    for l in 0..LANES {
        out[l] = [x0[l], x1[l], x2[l], x3[l]];
    }
    out
}
