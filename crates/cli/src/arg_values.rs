//! Values the command line parses beyond clap's own.

/// A count of at least one: "must be at least 1" for 0, rather than clap's
/// range with the type's largest value in it.
pub(crate) fn at_least_one<T>(s: &str) -> Result<T, String>
where
    T: std::str::FromStr + PartialEq + From<u8>,
    T::Err: std::fmt::Display,
{
    match s.parse::<T>() {
        Ok(n) if n == T::from(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}
