//! A Python model as a statepipe [`Evolve`]: states, inputs and outputs are
//! bytes of `statepipe._codec` (a numeric numpy array's raw buffer, else a
//! pickle), the parameters are the cloudpickled model.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};

use pyo3::exceptions::{PyKeyboardInterrupt, PyRuntimeError, PyTypeError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyList, PyTuple};
use rand::RngCore as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_bytes::ByteBuf;
use statepipe_cluster::{Evolve, Rng};

/// The pickle protocol of states, inputs and outputs that are not numeric
/// numpy arrays (out-of-band-capable).
pub(crate) const PROTOCOL: u8 = 5;

/// An input as the engine carries it: the call's expected cost (the
/// model's `expected_cost`, computed in the caller's process before the
/// input was pickled; 8 bytes, little-endian), then the pickled input. The
/// master reads the cost without calling into Python.
pub(crate) fn framed_input(cost: f64, pickled: &[u8]) -> ByteBuf {
    let mut v = Vec::with_capacity(8 + pickled.len());
    v.extend_from_slice(&cost.to_le_bytes());
    v.extend_from_slice(pickled);
    ByteBuf::from(v)
}

/// The cost and the pickled input of a [`framed_input`].
fn unframe(input: &[u8]) -> PyResult<(f64, &[u8])> {
    match input.split_first_chunk::<8>() {
        Some((cost, pickled)) => Ok((f64::from_le_bytes(*cost), pickled)),
        None => Err(PyRuntimeError::new_err("an input without its cost")),
    }
}

/// A child's output, or the model's exception with its traceback.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) enum PyOut {
    /// The pickled output.
    Ok(#[serde(with = "serde_bytes")] Vec<u8>),
    /// The formatted exception; `interrupted` when it was a
    /// KeyboardInterrupt.
    Err { message: String, interrupted: bool },
}

/// The user's model: its cloudpickled bytes, and the object they unpickle to.
pub(crate) struct PyModel {
    pickled: Vec<u8>,
    /// The model, or why it could not be unpickled here ([`Evolve::ready`]
    /// reports it: postcard keeps no deserialiser's message).
    obj: Result<Py<PyAny>, String>,
    has_cost: bool,
}

/// Set once a call was interrupted by Ctrl-C (in the caller's process, where
/// an in-process engine runs the model): the remaining calls of the
/// operation return at once.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Clears the interruption at the start of an operation.
pub(crate) fn clear_interrupt() {
    INTERRUPTED.store(false, Ordering::Relaxed);
}

thread_local! {
    /// Whether this thread keeps a Python thread state across calls (see
    /// [`keep_thread_state`]).
    static KEPT: Cell<bool> = const { Cell::new(false) };
}

/// Gives this thread a Python thread state that outlives each call into
/// Python, if it has none: a worker's compute thread (a Rust thread)
/// would otherwise create and destroy one per evolve call, about half a
/// call's cost for a cheap model. The state lives as long as the thread:
/// called only by `evolve`, which runs on a worker's compute thread or on
/// the thread that called the in-process engine (which has a state).
fn keep_thread_state() {
    if KEPT.with(|k| k.replace(true)) {
        return;
    }
    // SAFETY: PyGILState_GetThisThreadState reads this thread's slot and
    // needs no GIL. With no state for this thread, PyGILState_Ensure
    // creates one and takes the GIL, and PyEval_SaveThread releases the
    // GIL keeping the state; the Ensure is never released, so later
    // Ensure/Release pairs (Python::attach) nest inside it and reuse the
    // state. The interpreter is initialised: this runs only from a PyModel
    // method, and a PyModel holds a Python object.
    unsafe {
        if pyo3::ffi::PyGILState_GetThisThreadState().is_null() {
            pyo3::ffi::PyGILState_Ensure();
            pyo3::ffi::PyEval_SaveThread();
        }
    }
}

/// `statepipe._codec`'s `loads` and `dumps`: pickle protocol 5, or a
/// numeric numpy array's raw buffer.
struct Codec {
    loads: Py<PyAny>,
    dumps: Py<PyAny>,
}

static CODEC: PyOnceLock<Codec> = PyOnceLock::new();

fn codec(py: Python<'_>) -> PyResult<&Codec> {
    CODEC.get_or_try_init(py, || {
        let m = py.import("statepipe._codec")?;
        Ok(Codec {
            loads: m.getattr("loads")?.unbind(),
            dumps: m.getattr("dumps")?.unbind(),
        })
    })
}

pub(crate) fn loads<'py>(py: Python<'py>, b: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    codec(py)?.loads.bind(py).call1((PyBytes::new(py, b),))
}

pub(crate) fn dumps(py: Python<'_>, v: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    let b = codec(py)?.dumps.bind(py).call1((v,))?;
    Ok(b.cast::<PyBytes>()?.as_bytes().to_vec())
}

/// The exception with its traceback, as Python prints it.
pub(crate) fn format_exception(py: Python<'_>, e: &PyErr) -> String {
    let formatted = (|| -> PyResult<String> {
        let tb = py.import("traceback")?;
        let lines = tb.getattr("format_exception")?.call1((
            e.get_type(py),
            e.value(py),
            e.traceback(py),
        ))?;
        let s: Vec<String> = lines.extract()?;
        Ok(s.concat())
    })();
    formatted.unwrap_or_else(|_| e.to_string())
}

impl PyModel {
    /// The model `obj`, pickled as `pickled` (in the caller: the object
    /// the user passed).
    pub(crate) fn new(py: Python<'_>, obj: Py<PyAny>, pickled: Vec<u8>) -> Self {
        let has_cost = obj
            .bind(py)
            .hasattr(intern!(py, "expected_cost"))
            .unwrap_or(false);
        PyModel {
            pickled,
            obj: Ok(obj),
            has_cost,
        }
    }

    /// Whether the model has an `expected_cost` method.
    pub(crate) fn has_cost(&self) -> bool {
        self.has_cost
    }

    fn call(
        &self,
        py: Python<'_>,
        state: &[u8],
        input: &[u8],
        rng: &mut Rng,
    ) -> PyResult<Vec<(ByteBuf, PyOut)>> {
        let s = loads(py, state)?;
        let i = loads(py, unframe(input)?.1)?;
        let r = Py::new(py, StateRng::new(rng))?;
        let obj = self
            .obj
            .as_ref()
            .map_err(|m| PyRuntimeError::new_err(m.clone()))?;
        let res = obj
            .bind(py)
            .call_method1(intern!(py, "evolve"), (s, i, r))?;
        let items: Vec<Bound<'_, PyAny>> = if let Ok(l) = res.cast::<PyList>() {
            l.iter().collect()
        } else if let Ok(t) = res.cast::<PyTuple>() {
            t.iter().collect()
        } else {
            return Err(PyTypeError::new_err(format!(
                "evolve must return a list of (state, output) pairs, not {}",
                res.get_type().name()?
            )));
        };
        let mut out = Vec::with_capacity(items.len());
        for (k, it) in items.iter().enumerate() {
            let pair = match it.cast::<PyTuple>() {
                Ok(t) if t.len() == 2 => t,
                _ => {
                    return Err(PyTypeError::new_err(format!(
                        "evolve must return a list of (state, output) pairs; item {k} is {}",
                        it.repr()?
                    )))
                }
            };
            let child = dumps(py, &pair.get_item(0)?)?;
            let output = dumps(py, &pair.get_item(1)?)?;
            out.push((ByteBuf::from(child), PyOut::Ok(output)));
        }
        Ok(out)
    }
}

impl Clone for PyModel {
    fn clone(&self) -> Self {
        Python::attach(|py| PyModel {
            pickled: self.pickled.clone(),
            obj: self
                .obj
                .as_ref()
                .map(|o| o.clone_ref(py))
                .map_err(Clone::clone),
            has_cost: self.has_cost,
        })
    }
}

impl Serialize for PyModel {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(&self.pickled)
    }
}

impl<'de> Deserialize<'de> for PyModel {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let pickled = ByteBuf::deserialize(d)?.into_vec();
        Ok(Python::attach(|py| {
            let obj = py
                .import("cloudpickle")
                .map_err(|e| {
                    format!("this worker cannot import cloudpickle ({e}); pip install cloudpickle")
                })
                .and_then(|cp| {
                    cp.getattr("loads")
                        .and_then(|f| f.call1((PyBytes::new(py, &pickled),)))
                        .map_err(|e| {
                            format!(
                                "cannot unpickle the model (is its module importable here? \
                                 a spawned worker's sys.path is the caller's):\n{}",
                                format_exception(py, &e)
                            )
                        })
                });
            match obj {
                Ok(obj) => PyModel::new(py, obj.unbind(), pickled),
                Err(m) => PyModel {
                    pickled,
                    obj: Err(m),
                    has_cost: false,
                },
            }
        }))
    }
}

impl Evolve for PyModel {
    const NAME: &'static str = "statepipe-python";
    type State = ByteBuf;
    type Input = ByteBuf;
    type Output = PyOut;

    fn evolve(&self, state: &ByteBuf, input: &ByteBuf, rng: &mut Rng) -> Vec<(ByteBuf, PyOut)> {
        keep_thread_state();
        if INTERRUPTED.load(Ordering::Relaxed) {
            return vec![(
                state.clone(),
                PyOut::Err {
                    message: "KeyboardInterrupt".into(),
                    interrupted: true,
                },
            )];
        }
        Python::attach(|py| match self.call(py, state, input, rng) {
            Ok(v) => v,
            Err(e) => {
                let interrupted = e.is_instance_of::<PyKeyboardInterrupt>(py);
                if interrupted {
                    INTERRUPTED.store(true, Ordering::Relaxed);
                }
                // The parent stays (under its child's id), so nothing is lost.
                vec![(
                    state.clone(),
                    PyOut::Err {
                        message: format_exception(py, &e),
                        interrupted,
                    },
                )]
            }
        })
    }

    fn ready(&self) -> Result<(), String> {
        self.obj.as_ref().map(|_| ()).map_err(Clone::clone)
    }

    fn expected_cost(&self, input: &ByteBuf) -> f64 {
        // Computed by the caller (no Python here, on the master's thread).
        unframe(input).map_or(1.0, |(c, _)| c)
    }
}

/// The numpy bit generator a process reuses: its state is set for each
/// call that draws (setting it is far cheaper than seeding a new one).
static BIT_GENERATOR: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// The random numbers of one evolve call: a `numpy.random.Generator`,
/// made on first use from four words of the call's generator (Philox4x32-10)
/// (`statepipe_cluster::call_rng(seed, step, parent)`), so a model that
/// draws nothing pays nothing. Attribute access is forwarded to the
/// generator.
#[pyclass(module = "statepipe._native", name = "Rng", frozen)]
pub(crate) struct StateRng {
    words: [u64; 4],
    generator: PyOnceLock<Py<PyAny>>,
}

impl StateRng {
    pub(crate) fn new(rng: &mut Rng) -> Self {
        let mut words = [0u64; 4];
        for w in &mut words {
            *w = rng.next_u64();
        }
        StateRng {
            words,
            generator: PyOnceLock::new(),
        }
    }

    fn make(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let np_random = py.import("numpy.random")?;
        let bg = BIT_GENERATOR.get_or_try_init(py, || {
            np_random
                .getattr("PCG64")?
                .call1((0u64,))
                .map(Bound::unbind)
        })?;
        let bg = bg.bind(py);
        // PCG64's state: a 128-bit state and a 128-bit odd increment.
        let [a, b, c, d] = self.words;
        let state = (u128::from(a) << 64) | u128::from(b);
        let inc = (u128::from(c) << 64) | u128::from(d) | 1;
        let st = pyo3::types::PyDict::new(py);
        st.set_item("state", state)?;
        st.set_item("inc", inc)?;
        let full = pyo3::types::PyDict::new(py);
        full.set_item("bit_generator", "PCG64")?;
        full.set_item("state", st)?;
        full.set_item("has_uint32", 0)?;
        full.set_item("uinteger", 0)?;
        bg.setattr("state", full)?;
        Ok(np_random.getattr("Generator")?.call1((bg,))?.unbind())
    }
}

#[pymethods]
impl StateRng {
    /// The call's `numpy.random.Generator` (valid during the call).
    #[getter]
    fn generator(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.generator
            .get_or_try_init(py, || self.make(py))
            .map(|g| g.clone_ref(py))
    }

    /// The four 64-bit words drawn from the call's generator (Philox4x32-10) that
    /// seed it.
    #[getter]
    fn words(&self) -> (u64, u64, u64, u64) {
        let [a, b, c, d] = self.words;
        (a, b, c, d)
    }

    fn __getattr__(
        &self,
        py: Python<'_>,
        name: &Bound<'_, pyo3::types::PyString>,
    ) -> PyResult<Py<PyAny>> {
        let g = self.generator.get_or_try_init(py, || self.make(py))?;
        Ok(g.bind(py).getattr(name)?.unbind())
    }
}
