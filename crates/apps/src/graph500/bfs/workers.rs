//! Workers kept up between searches: the caller is worker 0, the others
//! park until the next search starts.

use std::sync::atomic::Ordering;

use super::{par, BfsTree, Searcher, Searches, RESET, RESET_CHUNK};

impl<'g> Searcher<'g> {
    /// Starts the workers, runs `f`, whose [`Searches::search`] calls
    /// reuse them, and stops them: the calling thread is worker 0 (pinned
    /// for the while, as the others are, where the process may use a CPU
    /// per worker), and the others wait, parked, between searches.
    pub fn with_workers<R>(&mut self, f: impl FnOnce(&mut Searches<'_, 'g>) -> R) -> R {
        *self.stop.get_mut() = false;
        let cpus = par::cpus_for(self.workers);
        let this = &*self;
        std::thread::scope(|scope| {
            let cpus = &cpus;
            let helpers: Vec<std::thread::Thread> = (1..this.workers)
                .map(|w| {
                    scope
                        .spawn(move || {
                            par::pin(cpus.as_deref(), w);
                            this.help();
                        })
                        .thread()
                        .clone()
                })
                .collect();
            // Stops the helpers however `f` ends, so the scope can join them.
            struct Stop<'s, 'g>(&'s Searcher<'g>, Vec<std::thread::Thread>);
            impl Drop for Stop<'_, '_> {
                fn drop(&mut self) {
                    // Release: pairs with the Acquire load in `help`.
                    self.0.stop.store(true, Ordering::Release);
                    self.1.iter().for_each(std::thread::Thread::unpark);
                }
            }
            let _stop = Stop(this, helpers.clone());
            let _pinned = cpus
                .as_ref()
                .and_then(|cpus| statepipe_sys::pin::pin_current_thread_for_now(cpus[0]));
            f(&mut Searches {
                searcher: this,
                helpers,
            })
        })
    }

    /// A helper worker: takes part in every search started until stopped.
    fn help(&self) {
        let mut seen = 0;
        loop {
            // Acquire: pairs with the Release store in `Stop::drop`.
            if self.stop.load(Ordering::Acquire) {
                return;
            }
            // Acquire: pairs with the Release `fetch_add` in `Searches::search`.
            let started = self.searches.load(Ordering::Acquire);
            if started != seen {
                seen = started;
                self.work();
            } else {
                // `unpark` after the load above makes this return at once.
                std::thread::park();
            }
        }
    }
}

impl Searches<'_, '_> {
    /// Searches from `root`: afterwards the parent of every vertex found
    /// is set. Everything kernel 2 must compute happens here (time this);
    /// [`tree`](Searches::tree) then copies the result out.
    ///
    /// # Panics
    ///
    /// If `root` is not a vertex of the graph.
    pub fn search(&mut self, root: u32) {
        let s = self.searcher;
        let n = s.g.vertices();
        assert!((root as usize) < n, "root {root} outside 0..{n}");
        // The first level clears the bitmaps (`reset_chunk`), then plants
        // the root (`plant_root`). No worker holds a chunk of the last
        // search: its last level had none, and `done` was stored after
        // every other store of it.
        let generation = s.close((s.claim.load(Ordering::Relaxed) >> 32) as u32);
        s.root.store(root, Ordering::Relaxed);
        s.mode.store(RESET, Ordering::Relaxed);
        s.chunks.store(n.div_ceil(RESET_CHUNK), Ordering::Relaxed);
        s.finished.store(0, Ordering::Relaxed);
        s.done.store(false, Ordering::Relaxed);
        // Level numbers go on from the last search's, so a helper still
        // holding that search's last level never takes this one's for it.
        s.open(generation);
        // Release: pairs with the Acquire load of `searches` in `help`.
        s.searches.fetch_add(1, Ordering::Release);
        self.helpers.iter().for_each(std::thread::Thread::unpark);
        s.work();
    }

    /// How many vertices the last search reached (its root included).
    pub fn reached(&self) -> usize {
        self.searcher.reached()
    }

    /// The tree of the last search (as [`Searcher::tree`]).
    pub fn tree(&self) -> BfsTree {
        self.searcher.tree()
    }
}
