//! The shared-secret handshake every statepipe process that joins another
//! proves itself with: HMAC-SHA256 challenge-response.
//!
//! 1. The side that accepts sends a challenge of 32 random bytes.
//! 2. The side that joins answers HMAC-SHA256(secret, context ‖ nonce).
//! 3. The accepting side compares in constant time; on a mismatch it
//!    closes the connection and says who was refused.
//!
//! The secret never crosses the wire, and a fresh nonce per connection makes
//! a recorded answer useless. The channel itself is not encrypted: run
//! clusters and distributed pipelines on a trusted network.
//!
//! ```
//! use statepipe_sys::auth::Secret;
//!
//! let s = Secret::new("hunter2");
//! let nonce = Secret::nonce();
//! assert!(s.verify(&nonce, &s.answer(&nonce)));
//! assert!(!s.verify(&nonce, &Secret::new("hunter3").answer(&nonce)));
//! ```

use std::fmt;

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The environment variable holding the shared secret.
pub const SECRET_ENV: &str = "STATEPIPE_SECRET";

const CONTEXT: &[u8] = b"statepipe worker auth v1";

/// The secret processes of one run share; a joining process proves it
/// knows it (HMAC challenge-response) and it never crosses the wire.
#[derive(Clone)]
pub struct Secret(Vec<u8>);

/// [`Secret::from_env`] found no secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingSecret;

impl fmt::Display for MissingSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "set {SECRET_ENV} to the shared secret (the same in every process of the run)"
        )
    }
}

impl std::error::Error for MissingSecret {}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl Secret {
    /// A secret from its text form.
    pub fn new(text: &str) -> Self {
        Secret(text.as_bytes().to_vec())
    }

    /// 32 random bytes, hex encoded, from the operating system's generator.
    pub fn random() -> Self {
        Secret::new(&hex(&Secret::nonce()))
    }

    /// A fresh challenge: 32 random bytes from the operating system's
    /// generator.
    pub fn nonce() -> [u8; 32] {
        rand::random()
    }

    /// The secret in [`SECRET_ENV`].
    ///
    /// # Errors
    /// [`MissingSecret`] if the variable is unset or empty.
    pub fn from_env() -> Result<Self, MissingSecret> {
        match std::env::var(SECRET_ENV) {
            Ok(s) if !s.is_empty() => Ok(Secret::new(&s)),
            _ => Err(MissingSecret),
        }
    }

    /// The text form, to hand to a child process's environment.
    pub fn as_text(&self) -> String {
        String::from_utf8_lossy(&self.0).into_owned()
    }

    fn mac(&self, nonce: &[u8; 32]) -> Hmac<Sha256> {
        let mut m = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes any key length");
        m.update(CONTEXT);
        m.update(nonce);
        m
    }

    /// The joining side's answer to `nonce`.
    pub fn answer(&self, nonce: &[u8; 32]) -> [u8; 32] {
        self.mac(nonce).finalize().into_bytes().into()
    }

    /// Whether `answer` proves knowledge of this secret (constant time).
    pub fn verify(&self, nonce: &[u8; 32], answer: &[u8; 32]) -> bool {
        self.mac(nonce).verify_slice(answer).is_ok()
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn right_secret_verifies_wrong_does_not() {
        let s = Secret::new("hunter2");
        let nonce = [7u8; 32];
        assert!(s.verify(&nonce, &s.answer(&nonce)));
        assert!(!s.verify(&nonce, &Secret::new("hunter3").answer(&nonce)));
        assert!(!s.verify(&[8u8; 32], &s.answer(&nonce)));
        assert_ne!(Secret::random().as_text(), Secret::random().as_text());
    }
}
