//! How a worker turns a model name from `Setup` into code: a table of
//! [`Evolve`] types, each wrapped to work on serialised bytes.

use std::collections::HashMap;

use crate::evolve::{Batch, Evolve, Offspring, StateId};

/// An [`Evolve`] seen through its serialised states, inputs and outputs.
pub(crate) trait ByteEvolve: Send {
    /// Each parent's children, serialised, for a batch of `(parent, state,
    /// input)` at `step` of a run seeded `seed`: one
    /// [`Evolve::evolve_batch`] call.
    ///
    /// # Errors
    /// A message if a state or input does not deserialise.
    fn evolve_batch(
        &self,
        seed: u64,
        step: u64,
        items: &[(StateId, Vec<u8>, &[u8])],
    ) -> Result<Vec<ByteChildren>, String>;
}

/// Serialised `(state, output)` pairs.
pub(crate) type ByteChildren = Vec<(Vec<u8>, Vec<u8>)>;

struct Typed<E>(E);

impl<E: Evolve> ByteEvolve for Typed<E> {
    fn evolve_batch(
        &self,
        seed: u64,
        step: u64,
        items: &[(StateId, Vec<u8>, &[u8])],
    ) -> Result<Vec<ByteChildren>, String> {
        let mut ids = Vec::with_capacity(items.len());
        let mut states = Vec::with_capacity(items.len());
        let mut inputs = Vec::with_capacity(items.len());
        for (id, s, i) in items {
            ids.push(*id);
            states.push(decode::<E::State>(s).map_err(|e| format!("state: {e}"))?);
            inputs.push(decode::<E::Input>(i).map_err(|e| format!("input: {e}"))?);
        }
        let mut out = Offspring::<E>::new();
        self.0
            .evolve_batch(&Batch::new(seed, step, &ids, &states, &inputs), &mut out);
        if out.counts.len() != items.len() {
            return Err(format!(
                "{}'s evolve_batch closed {} parents of {}",
                E::NAME,
                out.counts.len(),
                items.len()
            ));
        }
        let mut kids = out.states.iter().zip(&out.outputs);
        out.counts
            .iter()
            .map(|&c| {
                kids.by_ref()
                    .take(c as usize)
                    .map(|(c, o)| Ok((encode(c)?, encode(o)?)))
                    .collect::<Result<ByteChildren, postcard::Error>>()
            })
            .collect::<Result<_, _>>()
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
    use crate::Rng;

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
