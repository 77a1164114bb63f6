//! Worker authentication: the shared-secret handshake of
//! [`statepipe_sys::auth`] (HMAC-SHA256 challenge-response), which a
//! distributed pipeline's members use too.

pub(crate) use statepipe_sys::auth::MissingSecret;
pub use statepipe_sys::auth::{Secret, SECRET_ENV};

impl From<MissingSecret> for crate::Error {
    fn from(e: MissingSecret) -> Self {
        crate::Error::Config(e.to_string())
    }
}
