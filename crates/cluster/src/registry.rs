//! How a worker turns a model name from `Setup` into code: a table of
//! [`Evolve`] types, each wrapped to work on serialised bytes.

use std::collections::HashMap;

use crate::evolve::{Evolve, Rng};

/// An [`Evolve`] seen through its serialised states, inputs and outputs.
pub(crate) trait ByteEvolve: Send {
    /// Children of the state in `state` given the input in `input`, serialised.
    ///
    /// # Errors
    /// A message if a state or input does not deserialise.
    fn evolve(&self, state: &[u8], input: &[u8], rng: &mut Rng) -> Result<ByteChildren, String>;
}

/// Serialised `(state, output)` pairs.
pub(crate) type ByteChildren = Vec<(Vec<u8>, Vec<u8>)>;

struct Typed<E>(E);

impl<E: Evolve> ByteEvolve for Typed<E> {
    fn evolve(&self, state: &[u8], input: &[u8], rng: &mut Rng) -> Result<ByteChildren, String> {
        let s: E::State = decode(state).map_err(|e| format!("state: {e}"))?;
        let i: E::Input = decode(input).map_err(|e| format!("input: {e}"))?;
        self.0
            .evolve(&s, &i, rng)
            .into_iter()
            .map(|(c, o)| Ok((encode(&c)?, encode(&o)?)))
            .collect::<Result<_, postcard::Error>>()
            .map_err(|e| format!("encoding a child: {e}"))
    }
}

type Maker = fn(&[u8]) -> Result<Box<dyn ByteEvolve>, String>;

fn make<E: Evolve>(params: &[u8]) -> Result<Box<dyn ByteEvolve>, String> {
    let e: E = decode(params).map_err(|e| format!("{} parameters: {e}", E::NAME))?;
    e.ready()
        .map_err(|m| format!("{} cannot run on this worker: {m}", E::NAME))?;
    Ok(Box::new(Typed(e)))
}

/// The models a worker can run, by [`Evolve::NAME`].
///
/// ```
/// # use statepipe_cluster::{Evolve, Registry, Rng};
/// # #[derive(serde::Serialize, serde::Deserialize)] struct Sir;
/// # impl Evolve for Sir { const NAME: &'static str = "sir"; type State = u8; type Input = u8;
/// #   type Output = u8; fn evolve(&self, _: &u8, _: &u8, _: &mut Rng) -> Vec<(u8, u8)> { vec![] } }
/// let registry = Registry::new().with::<Sir>();
/// ```
#[derive(Default, Clone)]
pub struct Registry {
    makers: HashMap<&'static str, Maker>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `E`.
    pub fn with<E: Evolve>(mut self) -> Self {
        self.makers.insert(E::NAME, make::<E>);
        self
    }

    /// Builds the model `name` from its serialised parameters.
    ///
    /// # Errors
    /// If the name is unknown or the parameters do not deserialise.
    pub(crate) fn build(&self, name: &str, params: &[u8]) -> Result<Box<dyn ByteEvolve>, String> {
        let maker = self
            .makers
            .get(name)
            .ok_or_else(|| format!("this worker does not know model {name:?}"))?;
        maker(params)
    }
}

/// The serialisation of user types: postcard.
///
/// # Errors
/// If `v`'s `Serialize` fails.
pub(crate) fn encode<T: serde::Serialize>(v: &T) -> Result<Vec<u8>, postcard::Error> {
    postcard::to_allocvec(v)
}

/// Inverse of [`encode`].
///
/// # Errors
/// If the bytes are not an encoding of a `T`.
pub(crate) fn decode<T: serde::de::DeserializeOwned>(b: &[u8]) -> Result<T, postcard::Error> {
    postcard::from_bytes(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Serialize, serde::Deserialize)]
    struct NotHere(bool);

    impl Evolve for NotHere {
        const NAME: &'static str = "not-here";
        type State = u8;
        type Input = u8;
        type Output = u8;
        fn evolve(&self, s: &u8, _: &u8, _: &mut Rng) -> Vec<(u8, u8)> {
            vec![(*s, *s)]
        }
        fn ready(&self) -> Result<(), String> {
            if self.0 {
                Ok(())
            } else {
                Err("its code is not installed".into())
            }
        }
    }

    #[test]
    fn build_reports_a_model_that_is_not_ready() {
        let r = Registry::new().with::<NotHere>();
        assert!(r
            .build("not-here", &encode(&NotHere(true)).unwrap())
            .is_ok());
        let e = r
            .build("not-here", &encode(&NotHere(false)).unwrap())
            .err()
            .unwrap();
        assert_eq!(
            e,
            "not-here cannot run on this worker: its code is not installed"
        );
        assert!(r
            .build("other", &[])
            .err()
            .unwrap()
            .contains("does not know"));
    }
}
