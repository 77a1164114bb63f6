//! The exact Kalman filter of the local-level model, to check the particle
//! filter against.

/// Exact log-likelihood and filtered means E[x_t | y_1..y_t] of
/// y_t = x_t + ε (var `var_eps`), x_{t+1} = x_t + η (var `var_eta`),
/// x_1 ~ N(`m0`, `p0`).
///
/// # Examples
/// ```
/// let (ll, means) = statepipe_models::kalman::local_level(&[1.0], 1.0, 1.0, 0.0, 1.0);
/// // y_1 ~ N(0, 2); the filtered mean halves the observation.
/// assert!((ll + 0.5 * (2.0 * std::f64::consts::PI * 2.0).ln() + 0.25).abs() < 1e-12);
/// assert_eq!(means, vec![0.5]);
/// ```
pub fn local_level(y: &[f64], var_eps: f64, var_eta: f64, m0: f64, p0: f64) -> (f64, Vec<f64>) {
    let (mut a, mut p, mut ll) = (m0, p0, 0.0);
    let mut means = Vec::with_capacity(y.len());
    for &yt in y {
        let f = p + var_eps;
        let v = yt - a;
        ll -= 0.5 * ((2.0 * std::f64::consts::PI * f).ln() + v * v / f);
        let k = p / f;
        a += k * v;
        p *= 1.0 - k;
        means.push(a);
        p += var_eta;
    }
    (ll, means)
}
