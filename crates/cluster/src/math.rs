//! Branch-free `exp`, `ln`, `sin` and `cos` kernels in plain arithmetic
//! and bit operations (fdlibm's polynomials), so that loops over slices of
//! them vectorise: the standard library's calls into libm do not. Each
//! is within an ulp or two of the correctly rounded result on the domain
//! it states (tested against the standard library below), and gives the
//! same bits on every x86-64, vectorised or not: nothing here fuses a
//! multiply with an add.

// fdlibm's constants as it publishes them (each the double nearest).
#![allow(clippy::excessive_precision)]

/// 1.5 · 2^52: adding it rounds a number of magnitude below 2^51 to an
/// integer, in the low bits of the sum.
const SHIFT: f64 = 6_755_399_441_055_744.0;
const LN2_HI: f64 = 6.931_471_803_691_238_164_90e-1;
const LN2_LO: f64 = 1.908_214_929_270_587_700_02e-10;

/// e^x for x ≤ 0 (and −∞, which gives 0; NaN gives NaN), subnormal
/// results included: fdlibm's `e_exp.c` reduction and rational
/// approximation, with the scaling by 2^k done in two steps so that
/// results below 2^-1022 are rounded once.
#[inline(always)]
pub(crate) fn exp_nonpos(x: f64) -> f64 {
    const INV_LN2: f64 = std::f64::consts::LOG2_E;
    const P1: f64 = 1.666_666_666_666_660_190_37e-1;
    const P2: f64 = -2.777_777_777_701_559_338_42e-3;
    const P3: f64 = 6.613_756_321_437_934_361_17e-5;
    const P4: f64 = -1.653_390_220_546_525_153_90e-6;
    const P5: f64 = 4.138_136_797_057_238_460_39e-8;
    // Below −746 the result rounds to 0; clamping keeps 2^k in range.
    let x = if x < -746.0 { -746.0 } else { x };
    let t = x * INV_LN2 + SHIFT;
    let kf = t - SHIFT;
    // k + 2048 (in [970, 2048]), from the low bits of `t`.
    let kb = t.to_bits().wrapping_sub(SHIFT.to_bits()).wrapping_add(2048) & 0xFFF;
    let hi = x - kf * LN2_HI;
    let lo = kf * LN2_LO;
    let r = hi - lo;
    let rr = r * r;
    let c = r - rr * (P1 + rr * (P2 + rr * (P3 + rr * (P4 + rr * P5))));
    let y = 1.0 - ((lo - (r * c) / (2.0 - c)) - hi);
    // 2^k as 2^k1 · 2^k2, both normal: k1 = h − 1024, k2 = k − k1.
    let h = kb >> 1;
    let s1 = f64::from_bits(h.wrapping_sub(1) << 52);
    let s2 = f64::from_bits(kb.wrapping_sub(h).wrapping_sub(1) << 52);
    y * s1 * s2
}

/// ln v for v in (0, 1] (and any positive normal number): fdlibm's
/// `e_log.c` polynomial after reducing v to z · 2^k, z in [√2/2, √2).
#[inline(always)]
pub(crate) fn ln_pos(v: f64) -> f64 {
    const LG1: f64 = 6.666_666_666_666_735_130e-1;
    const LG2: f64 = 3.999_999_999_940_941_908e-1;
    const LG3: f64 = 2.857_142_874_366_239_149e-1;
    const LG4: f64 = 2.222_219_843_214_978_396e-1;
    const LG5: f64 = 1.818_357_216_161_805_012e-1;
    const LG6: f64 = 1.531_383_769_920_937_332e-1;
    const LG7: f64 = 1.479_819_860_511_658_591e-1;
    const ONE: u64 = 0x3FF0_0000_0000_0000;
    // The exponent field, plus one where the mantissa is at least √2's.
    let ix = v.to_bits();
    let kb = ix.wrapping_add(ONE - 0x3FE6_9555_0000_0000) >> 52;
    let z = f64::from_bits(ix.wrapping_sub((kb << 52).wrapping_sub(ONE)));
    // k = kb − 1023 as a float, without an integer conversion.
    let k = f64::from_bits(0x4330_0000_0000_0000 | kb) - (4_503_599_627_370_496.0 + 1023.0);
    let f = z - 1.0;
    let hfsq = 0.5 * f * f;
    let s = f / (2.0 + f);
    let z2 = s * s;
    let w = z2 * z2;
    let t1 = w * (LG2 + w * (LG4 + w * LG6));
    let t2 = z2 * (LG1 + w * (LG3 + w * (LG5 + w * LG7)));
    let r = t2 + t1;
    k * LN2_HI - ((hfsq - (s * (hfsq + r) + k * LN2_LO)) - f)
}

/// sin x for |x| ≤ π/4 (fdlibm's `k_sin.c`).
#[inline(always)]
fn sin_small(x: f64) -> f64 {
    const S1: f64 = -1.666_666_666_666_663_243_48e-1;
    const S2: f64 = 8.333_333_333_322_489_461_24e-3;
    const S3: f64 = -1.984_126_982_985_794_931_34e-4;
    const S4: f64 = 2.755_731_370_707_006_767_89e-6;
    const S5: f64 = -2.505_076_025_340_686_341_95e-8;
    const S6: f64 = 1.589_690_995_211_550_102_21e-10;
    let z = x * x;
    let v = z * x;
    let r = S2 + z * (S3 + z * (S4 + z * (S5 + z * S6)));
    x + v * (S1 + z * r)
}

/// cos x for |x| ≤ π/4 (fdlibm's `k_cos.c`).
#[inline(always)]
fn cos_small(x: f64) -> f64 {
    const C1: f64 = 4.166_666_666_666_660_190_37e-2;
    const C2: f64 = -1.388_888_888_887_410_957_49e-3;
    const C3: f64 = 2.480_158_728_947_672_941_78e-5;
    const C4: f64 = -2.755_731_435_139_066_330_35e-7;
    const C5: f64 = 2.087_572_321_298_174_827_90e-9;
    const C6: f64 = -1.135_964_755_778_819_482_65e-11;
    let z = x * x;
    let w = z * z;
    let r = z * (C1 + z * (C2 + z * C3)) + w * w * (C4 + z * (C5 + z * C6));
    let hz = 0.5 * z;
    let w = 1.0 - hz;
    w + (((1.0 - w) - hz) + z * r)
}

/// cos(2π · a / 2^32): the angle reduced to an eighth of a turn in
/// integers (exact), then a sine or a cosine kernel and a sign.
#[inline(always)]
pub(crate) fn cos_turn(a: u32) -> f64 {
    // a = q · 2^30 + half · 2^29 + f: quadrant q, and f within its half.
    let q = a >> 30;
    let half = (a >> 29) & 1;
    let f = a & 0x1FFF_FFFF;
    // The distance to the nearer end of the quadrant, in 2^-32 turns.
    let g = if half == 0 { f } else { 0x2000_0000 - f };
    let b = f64::from(g as i32) * (std::f64::consts::PI / 2_147_483_648.0);
    let (c, s) = (cos_small(b), sin_small(b));
    // cos of the quadrant's angle is C near its start and S near its end;
    // odd quadrants want its sine instead.
    let v = if (q & 1) == half { c } else { s };
    let neg = u64::from((q ^ (q >> 1)) & 1);
    f64::from_bits(v.to_bits() ^ (neg << 63))
}

/// A standard normal from four uniform 32-bit words (a Philox block), by
/// the Box–Muller transform: radius √(−2 ln v) with v in (0, 1] from 52
/// bits of words 0 and 1, angle from word 2 (word 3 is not used).
/// Branch free, so that a loop of them vectorises.
#[inline(always)]
pub(crate) fn normal_of_words(w0: u32, w1: u32, w2: u32) -> f64 {
    let m = (u64::from(w1) << 20) | u64::from(w0 >> 12);
    let v = 2.0 - f64::from_bits(0x3FF0_0000_0000_0000 | m);
    (-2.0 * ln_pos(v)).sqrt() * cos_turn(w2)
}

/// Runs `f` compiled for the widest vector unit the CPU has: AVX-512 (F
/// and DQ), AVX2, or the build's baseline (SSE2 on x86-64), chosen at run
/// time. A model's loops over a batch ([`Evolve::evolve_batch`]) written
/// inside `f` vectorise as wide as the machine allows, without `unsafe`
/// in the model's crate. The bits are the same on each: Rust fuses no
/// multiply with an add unless asked (`mul_add`), and lanes of a loop are
/// independent. What `f` calls is compiled wide only where the compiler
/// inlines it into `f`, as it does small loops and iterator adapters.
///
/// [`Evolve::evolve_batch`]: crate::Evolve::evolve_batch
#[allow(unsafe_code)]
#[inline]
pub fn vectorised<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f,avx512dq")]
        fn avx512<R>(f: impl FnOnce() -> R) -> R {
            f()
        }
        #[target_feature(enable = "avx2")]
        fn avx2<R>(f: impl FnOnce() -> R) -> R {
            f()
        }
        if std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512dq") {
            // SAFETY: the CPU has AVX-512F and DQ (checked just above),
            // the one condition for running code compiled for them.
            return unsafe { avx512(f) };
        }
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above), the one
            // condition for running code compiled for it.
            return unsafe { avx2(f) };
        }
    }
    f()
}

/// `$vis fn $name(args) -> R` calling `$any(args)`, an
/// `#[inline(always)]` loop, compiled for the widest vector unit the CPU
/// has: AVX-512 (F and DQ, whose 64-bit multiplies a hash wants), AVX2,
/// or the build's baseline (SSE2 on x86-64), chosen at run time. The bits
/// are the same on each: nothing here fuses a multiply with an add, and
/// the loops' lanes are independent.
macro_rules! widest {
    ($(#[$m:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? = $any:path;) => {
        $(#[$m])*
        #[allow(unsafe_code)]
        $vis fn $name($($arg: $ty),*) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx512dq")]
                fn avx512($($arg: $ty),*) $(-> $ret)? {
                    $any($($arg),*)
                }
                #[target_feature(enable = "avx2")]
                fn avx2($($arg: $ty),*) $(-> $ret)? {
                    $any($($arg),*)
                }
                if std::is_x86_feature_detected!("avx512f")
                    && std::is_x86_feature_detected!("avx512dq")
                {
                    // SAFETY: the CPU has AVX-512F and DQ (checked just
                    // above), the one condition for running code compiled
                    // for them.
                    return unsafe { avx512($($arg),*) };
                }
                if std::is_x86_feature_detected!("avx2") {
                    // SAFETY: the CPU has AVX2 (checked just above), the
                    // one condition for running code compiled for it.
                    return unsafe { avx2($($arg),*) };
                }
            }
            $any($($arg),*)
        }
    };
}
pub(crate) use widest;

#[cfg(test)]
mod tests {
    use super::*;

    /// Distance in units in the last place (same sign assumed).
    fn ulps(a: f64, b: f64) -> u64 {
        a.to_bits().abs_diff(b.to_bits())
    }

    fn lcg(s: &mut u64) -> u64 {
        *s = s
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        *s ^ (*s >> 29)
    }

    #[test]
    fn exp_is_within_an_ulp_of_the_standard_librarys_on_minus_745_to_0() {
        let mut s = 7u64;
        let mut worst = 0;
        for i in 0..2_000_000u64 {
            // Uniform over the range, and dense near 0 and near the edges.
            let u = (lcg(&mut s) >> 11) as f64 / (1u64 << 53) as f64;
            let x = match i % 4 {
                0 => -745.0 * u,
                1 => -u,
                2 => -708.0 - 38.0 * u,
                _ => -745.0 * u * u * u,
            };
            let (got, want) = (exp_nonpos(x), x.exp());
            let d = ulps(got, want);
            assert!(d <= 1, "exp({x:e}) = {got:e}, std {want:e}: {d} ulps");
            worst = worst.max(d);
        }
        for x in [0.0, -0.0, -1e-300, -745.0, -745.13, -745.2, -746.0, -800.0] {
            assert!(ulps(exp_nonpos(x), x.exp()) <= 1, "exp({x:e})");
        }
        assert_eq!(exp_nonpos(f64::NEG_INFINITY), 0.0);
        assert!(exp_nonpos(f64::NAN).is_nan());
        assert!(worst <= 1);
    }

    #[test]
    fn ln_is_within_an_ulp_of_the_standard_librarys_on_0_to_1() {
        let mut s = 3u64;
        for i in 0..2_000_000u64 {
            let m = lcg(&mut s) >> 12;
            let v = 2.0 - f64::from_bits(0x3FF0_0000_0000_0000 | m);
            let v = if i % 2 == 0 { v } else { v * 1e-290 };
            let (got, want) = (ln_pos(v), v.ln());
            assert!(
                (got - want).abs() <= 2.0 * f64::EPSILON * want.abs().max(1e-300),
                "ln({v:e}) = {got:e}, std {want:e}"
            );
        }
        assert_eq!(ln_pos(1.0), 0.0);
    }

    #[test]
    fn cos_turn_is_the_cosine_of_the_angle() {
        let mut s = 5u64;
        for i in 0..1_000_000u64 {
            let a = if i < 64 {
                (i as u32) << 26
            } else {
                lcg(&mut s) as u32
            };
            let x = 2.0 * std::f64::consts::PI * f64::from(a) / 2f64.powi(32);
            // The reference's angle is itself rounded (by up to 4e-16).
            let (got, want) = (cos_turn(a), x.cos());
            assert!(
                (got - want).abs() <= 1e-15,
                "cos_turn({a}) = {got:e}, std {want:e}"
            );
        }
    }

    #[test]
    fn vectorised_gives_the_bits_of_the_plain_loop() {
        let x: Vec<f64> = (0..1000).map(|i| f64::from(i) * 0.37 - 150.0).collect();
        let f = |x: &[f64]| -> Vec<f64> {
            x.iter()
                .map(|&v| exp_nonpos(-(v * v) * 1e-3) * 3.5 + v / 7.0)
                .collect()
        };
        let plain = f(&x);
        let wide = vectorised(|| f(&x));
        assert!(plain
            .iter()
            .zip(&wide)
            .all(|(a, b)| a.to_bits() == b.to_bits()));
        // It runs the closure once and returns what it returns.
        let mut calls = 0;
        assert_eq!(
            vectorised(|| {
                calls += 1;
                7
            }),
            7
        );
        assert_eq!(calls, 1);
    }

    #[test]
    fn normals_have_the_moments_and_tails_of_a_standard_normal() {
        let mut s = 11u64;
        let n = 2_000_000;
        let (mut m1, mut m2, mut m4, mut tail) = (0.0, 0.0, 0.0, 0);
        for _ in 0..n {
            let w = lcg(&mut s);
            let z = normal_of_words(w as u32, (w >> 32) as u32, lcg(&mut s) as u32);
            m1 += z;
            m2 += z * z;
            m4 += z * z * z * z;
            tail += usize::from(z > 1.959_963_984_540_054);
        }
        let nf = n as f64;
        assert!((m1 / nf).abs() < 0.005, "mean {}", m1 / nf);
        assert!((m2 / nf - 1.0).abs() < 0.01, "variance {}", m2 / nf);
        assert!((m4 / nf - 3.0).abs() < 0.05, "fourth moment {}", m4 / nf);
        let p = tail as f64 / nf;
        assert!((p - 0.025).abs() < 0.001, "P(z > 1.96) = {p}");
    }
}
