//! The constructors and combinators of [`Pipeline`]: stages, sequence,
//! fan-out, par, choice, merge, N-ary fan-out and choice, shards, costs.

use std::error::Error;
use std::fmt::Debug;
use std::hash::Hash;
use std::marker::PhantomData;

use crate::dot::{Dot, Shape};
use crate::either::Either;
use crate::machine::{self, Machine};
use crate::node::fork::{FanOutN, FanOutNode, ParNode};
use crate::node::route::{ChoiceNode, ChooseNode, MergeNode, ShardByKeyNode, ShardNode};
use crate::node::stage::{CostNode, StageNode, ThenNode, TryStageNode};
use crate::pipeline::Pipeline;
use crate::state::{default_codec, serde_codec};
use serde::de::DeserializeOwned;
use serde::Serialize;

impl<I: Send + 'static, O: Send + 'static> Pipeline<I, O> {
    /// A stage named `name` that runs `machine` from the state `state`.
    ///
    /// # Examples
    ///
    /// ```
    /// use statepipe_pipeline::{machine, Pipeline};
    ///
    /// let total = Pipeline::stage("total", 0u64, machine::step(|sum: &mut u64, x: u64| {
    ///     *sum += x;
    ///     *sum
    /// }));
    /// let run = total.run_sequential([1, 2, 3]);
    /// assert_eq!(run.outputs, vec![1, 3, 6]);
    /// assert_eq!(run.state::<u64>("total"), Some(&6));
    /// ```
    pub fn stage<S, M>(name: &str, state: S, machine: M) -> Self
    where
        S: Send + 'static,
        M: Machine<S, In = I, Out = O> + Send + 'static,
    {
        Pipeline::from_node(StageNode {
            name: name.to_owned(),
            state,
            machine,
            codec: default_codec::<S>(),
        })
    }

    /// A stage like [`stage`](Pipeline::stage) whose state is saved by
    /// checkpoints and restored from them (see [`Checkpoint`](crate::Checkpoint)):
    /// cloned at the barrier, written with `postcard` on a background
    /// thread. Stateless stages (`map`, `try_map`) are saved without
    /// asking; a deployment that checkpoints refuses any other stage that
    /// was not built this way, naming it.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::collections::BTreeMap;
    /// use statepipe_pipeline::{machine, Pipeline};
    ///
    /// let count = Pipeline::durable_stage("count", BTreeMap::new(), machine::step(
    ///     |seen: &mut BTreeMap<String, u64>, word: String| {
    ///         let n = seen.entry(word.clone()).or_insert(0);
    ///         *n += 1;
    ///         (word, *n)
    ///     },
    /// ));
    /// let run = count.run_sequential(["a", "b", "a"].map(String::from));
    /// assert_eq!(run.outputs[2], ("a".to_string(), 2));
    /// ```
    pub fn durable_stage<S, M>(name: &str, state: S, machine: M) -> Self
    where
        S: Serialize + DeserializeOwned + Clone + Send + 'static,
        M: Machine<S, In = I, Out = O> + Send + 'static,
    {
        Pipeline::from_node(StageNode {
            name: name.to_owned(),
            state,
            machine,
            codec: Some(serde_codec::<S>()),
        })
    }

    /// A fallible stage ([`try_stage`](Pipeline::try_stage)) whose state is
    /// checkpointed, like [`durable_stage`](Pipeline::durable_stage).
    pub fn try_durable_stage<S, M, E>(name: &str, state: S, machine: M) -> Self
    where
        I: Clone + Debug,
        S: Serialize + DeserializeOwned + Clone + Send + 'static,
        M: Machine<S, In = I, Out = Result<O, E>> + Send + 'static,
        E: Into<Box<dyn Error + Send + Sync>> + 'static,
    {
        Pipeline::from_node(TryStageNode {
            name: name.to_owned(),
            state,
            machine,
            codec: Some(serde_codec::<S>()),
            _ok: PhantomData,
        })
    }

    /// A stage whose machine emits `Result`s: each `Err` sends the stage's
    /// input, the stage name and the error to the error output
    /// ([`Run::failures`](crate::Run::failures)); later stages never see it.
    ///
    /// Each `Err` output is one failure; `Ok` outputs of the same step still
    /// go on. The input is cloned before each step so it can be handed back;
    /// wrap large items in an `Arc`.
    ///
    /// # Examples
    ///
    /// ```
    /// use statepipe_pipeline::{machine, Pipeline};
    ///
    /// let p = Pipeline::try_stage("budget", 10u32, machine::step(|left: &mut u32, cost: u32| {
    ///     *left = left.checked_sub(cost).ok_or("over budget")?;
    ///     Ok::<_, &str>(*left)
    /// }))
    /// .then(Pipeline::map("show", |left: u32| format!("{left} left")));
    /// let run = p.run_sequential([4, 7, 5]);
    /// assert_eq!(run.outputs, ["6 left", "1 left"]);
    /// assert_eq!(run.failures[0].item::<u32>(), Some(&7));
    /// ```
    pub fn try_stage<S, M, E>(name: &str, state: S, machine: M) -> Self
    where
        I: Clone + Debug,
        S: Send + 'static,
        M: Machine<S, In = I, Out = Result<O, E>> + Send + 'static,
        E: Into<Box<dyn Error + Send + Sync>> + 'static,
    {
        Pipeline::from_node(TryStageNode {
            name: name.to_owned(),
            state,
            machine,
            codec: default_codec::<S>(),
            _ok: PhantomData,
        })
    }

    /// A stateless stage: one output `f(item)` per item.
    pub fn map<F: FnMut(I) -> O + Send + 'static>(name: &str, f: F) -> Self {
        Pipeline::stage(name, (), machine::map(f))
    }

    /// A stateless stage that may fail: see [`try_stage`](Pipeline::try_stage).
    pub fn try_map<E, F>(name: &str, f: F) -> Self
    where
        I: Clone + Debug,
        E: Into<Box<dyn Error + Send + Sync>> + 'static,
        F: FnMut(I) -> Result<O, E> + Send + 'static,
    {
        Pipeline::try_stage(name, (), machine::map(f))
    }

    /// `self`, then `next` on every output of `self` (`:>>>` in arrow notation).
    pub fn then<O2: Send + 'static>(self, next: Pipeline<O, O2>) -> Pipeline<I, O2> {
        Pipeline::from_node(ThenNode { a: self, b: next })
    }

    /// Both pipelines read every item; each pair of their outputs for that
    /// item is emitted, `self`'s outermost.
    ///
    /// Deployed, the branches may run on different workers: the item is
    /// published once, into one slot of a multicast ring that both branches
    /// read (a chain of two pollers on the slot: `self` clones the item out,
    /// then `other` moves it out, so nothing is copied upstream and the one
    /// clone is made on `self`'s worker); a join pairs their outputs per
    /// item. When the plan puts both branches and the join on the worker of
    /// the stage before, the fan-out runs whole there instead, one call per
    /// item. See [`units`](Pipeline::units) for what a plan places.
    pub fn fan_out<O2>(self, other: Pipeline<I, O2>) -> Pipeline<I, (O, O2)>
    where
        I: Clone,
        O: Clone,
        O2: Clone + Send + 'static,
    {
        Pipeline::from_node(FanOutNode {
            a: self,
            b: other,
            left: Vec::new(),
            right: Vec::new(),
        })
    }

    /// `self` on the first half of each pair, `other` on the second; each
    /// pair of their outputs is emitted.
    ///
    /// Deployed like [`fan_out`](Pipeline::fan_out): the pair is published
    /// once, and each branch moves its own half out of the shared slot, so
    /// neither half needs to be `Clone`.
    pub fn par<I2, O2>(self, other: Pipeline<I2, O2>) -> Pipeline<(I, I2), (O, O2)>
    where
        O: Clone,
        I2: Send + 'static,
        O2: Clone + Send + 'static,
    {
        Pipeline::from_node(ParNode {
            a: self,
            b: other,
            left: Vec::new(),
            right: Vec::new(),
        })
    }

    /// `Left` items through `self`, `Right` items through `other`; outputs
    /// keep their side.
    ///
    /// Deployed, the branches may run on different workers: a router sends
    /// each item to its side's edge and logs the choice, and a merge takes
    /// the branches' outputs back in input order (as for a shard). When the
    /// plan puts both branches and the merge on the worker of the stage
    /// before, the choice runs whole there. `merge` and `choose` deploy the
    /// same way.
    pub fn choice<I2, O2>(self, other: Pipeline<I2, O2>) -> Pipeline<Either<I, I2>, Either<O, O2>>
    where
        I2: Send + 'static,
        O2: Send + 'static,
    {
        Pipeline::from_node(ChoiceNode { a: self, b: other })
    }

    /// Like [`choice`](Pipeline::choice), but both sides emit `O`, merged.
    pub fn merge<I2: Send + 'static>(self, other: Pipeline<I2, O>) -> Pipeline<Either<I, I2>, O> {
        Pipeline::from_node(MergeNode { a: self, b: other })
    }

    /// Every branch reads every item; each combination of their outputs is
    /// emitted as a vector (element `k` from branch `k`). Deployed like
    /// [`fan_out`](Pipeline::fan_out): one multicast slot per item, read by
    /// the branches in turn (all but the last clone the item out).
    ///
    /// # Panics
    ///
    /// If `branches` is empty.
    pub fn fan_out_n(branches: Vec<Pipeline<I, O>>) -> Pipeline<I, Vec<O>>
    where
        I: Clone,
        O: Clone,
    {
        assert!(!branches.is_empty(), "fan_out_n needs at least one branch");
        let bufs = branches.iter().map(|_| Vec::new()).collect();
        Pipeline::from_node(FanOutN { branches, bufs })
    }

    /// Each item goes to branch `route(&item)`. An index past the last
    /// branch sends the item to the error output under the name `name`.
    ///
    /// # Examples
    ///
    /// ```
    /// use statepipe_pipeline::Pipeline;
    ///
    /// let p = Pipeline::choose("by size", |x: &u32| (*x as usize) / 10, vec![
    ///     Pipeline::map("small", |x: u32| format!("small {x}")),
    ///     Pipeline::map("large", |x: u32| format!("large {x}")),
    /// ]);
    /// let run = p.run_sequential([3, 15, 40]);
    /// assert_eq!(run.outputs, ["small 3", "large 15"]);
    /// assert_eq!(run.failures[0].stage, "by size");
    /// ```
    pub fn choose<F>(name: &str, route: F, branches: Vec<Pipeline<I, O>>) -> Self
    where
        I: Debug,
        F: FnMut(&I) -> usize + Send + 'static,
    {
        Pipeline::from_node(ChooseNode {
            name: name.to_owned(),
            route,
            branches,
        })
    }

    /// `n` copies of a pipeline (copy `k` built by `make(k)`, with its own
    /// states); the `i`-th item to reach the shard goes to copy `i % n`, and
    /// outputs leave in input order.
    ///
    /// # Panics
    ///
    /// If `n` is 0.
    ///
    /// # Examples
    ///
    /// ```
    /// use statepipe_pipeline::{machine, Pipeline};
    ///
    /// let p = Pipeline::shard(2, |k| {
    ///     Pipeline::stage(&format!("count {k}"), 0u32, machine::step(|n: &mut u32, x: char| {
    ///         *n += 1;
    ///         (x, *n)
    ///     }))
    /// });
    /// let run = p.run_sequential("abc".chars());
    /// assert_eq!(run.outputs, [('a', 1), ('b', 1), ('c', 2)]);
    /// ```
    pub fn shard(n: usize, make: impl FnMut(usize) -> Pipeline<I, O>) -> Self {
        assert!(n > 0, "a shard needs at least one copy");
        Pipeline::from_node(ShardNode {
            copies: (0..n).map(make).collect(),
            next: 0,
        })
    }

    /// `n` copies of a pipeline; every item with the same `key` goes to the
    /// same copy ([`shard_of`](crate::shard_of)), so state is kept per key
    /// and order is kept per key.
    ///
    /// # Panics
    ///
    /// If `n` is 0.
    pub fn shard_by_key<K, F>(n: usize, key: F, make: impl FnMut(usize) -> Pipeline<I, O>) -> Self
    where
        K: Hash + 'static,
        F: FnMut(&I) -> K + Send + 'static,
    {
        assert!(n > 0, "a shard needs at least one copy");
        Pipeline::from_node(ShardByKeyNode {
            copies: (0..n).map(make).collect(),
            key,
        })
    }

    /// The logical graph as Graphviz `dot` text: stages are boxes labelled
    /// with their names (double-bordered when they can fail), splits and
    /// joins are triangles, shard copies are clusters.
    ///
    /// # Examples
    ///
    /// ```
    /// use statepipe_pipeline::Pipeline;
    ///
    /// let p = Pipeline::map("wash", |x: u8| x).then(Pipeline::map("dry", |x: u8| x));
    /// let dot = p.to_dot();
    /// assert!(dot.starts_with("digraph pipeline {"));
    /// assert!(dot.contains("label=\"wash\""));
    /// ```
    pub fn to_dot(&self) -> String {
        let mut dot = Dot::new();
        let input = dot.node("input", Shape::Port);
        let outs = self.draw(&mut dot, &[input]);
        let output = dot.node("output", Shape::Port);
        dot.edges(&outs, output);
        dot.finish()
    }

    /// Declares what one item costs this part, in nanoseconds (spread
    /// evenly over its stages), so the default plan and the simulator can
    /// balance it. Undeclared stages are assumed to cost
    /// [`DEFAULT_COST_NS`](crate::DEFAULT_COST_NS).
    ///
    /// # Examples
    ///
    /// ```
    /// use statepipe_pipeline::Pipeline;
    ///
    /// let p = Pipeline::map("heavy", |x: u64| x).cost(5_000.0);
    /// assert_eq!(p.units()[0].cost_ns, 5_000.0);
    /// ```
    pub fn cost(self, ns_per_item: f64) -> Self {
        Pipeline::from_node(CostNode {
            inner: self,
            ns: ns_per_item,
        })
    }
}
