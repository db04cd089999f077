//! A spin-then-park worker pool for the training pass.
//!
//! Why: a training step runs about 1,500 parallel regions (each projection forward and its two
//! backward products, the element-wise ops), most of them a fraction of a millisecond. rayon
//! puts idle workers to sleep soon and wakes them with a futex: 30–80 µs per region on the
//! 2-core machine (timed with a 100 µs region after gaps of 20–500 µs; in `perf`, 8% of a step
//! was in the scheduler). Here the
//! caller runs a share itself and the workers spin for a while after each region before they
//! park, so back-to-back regions cost about a microsecond each.
//!
//! Only code that runs inside [`training`] uses the pool (the fused ops' products and loops
//! check [`active`]); everything else, sampling included, keeps rayon, so no spinning thread
//! competes with rayon's workers there.
//!
//! Architecture invariant: the pool never holds a job past [`SpinPool::execute`]: every worker
//! has finished the job before `execute` returns (or unwinds), which is what makes lending it
//! borrowed data sound.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::thread::Thread;

/// Spins (`spin_loop` hints) a worker makes before it parks: about half a millisecond, longer
/// than the gaps between the regions of a training pass.
const SPIN_LIMIT: u32 = 20_000;

thread_local! {
    static TRAINING: Cell<bool> = const { Cell::new(false) };
    static IN_WORKER: Cell<bool> = const { Cell::new(false) };
}

/// Run `f` with this thread's parallel regions on the spin pool.
pub(crate) fn training<R>(f: impl FnOnce() -> R) -> R {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            TRAINING.with(|t| t.set(self.0));
        }
    }
    let _reset = Reset(TRAINING.with(|t| t.replace(true)));
    f()
}

/// Is this thread inside [`training`] (and not itself a pool worker)?
pub(crate) fn active() -> bool {
    TRAINING.with(|t| t.get()) && !IN_WORKER.with(|w| w.get())
}

/// The job of the current region: a type-erased `&F` and the function that calls it.
#[derive(Clone, Copy)]
struct Job {
    call: unsafe fn(*const (), usize),
    data: *const (),
}

unsafe fn call_job<F: Fn(usize) + Sync>(data: *const (), part: usize) {
    // SAFETY: `data` is the `&F` that `execute` published and keeps alive until every worker
    // has reported done.
    unsafe { (*(data as *const F))(part) }
}

#[repr(align(64))]
struct Slot {
    /// Generation of the last job this worker finished.
    done: AtomicUsize,
}

struct Shared {
    /// Generation of the current job; a worker runs a job when this moves past its `done`.
    generation: AtomicUsize,
    job: Mutex<Option<(usize, JobPtr)>>,
    slots: Box<[Slot]>,
    panicked: AtomicBool,
}

#[derive(Clone, Copy)]
struct JobPtr(Job);
// SAFETY: the pointer is only dereferenced while `execute` keeps the closure (which is `Sync`)
// alive, see the module's invariant.
unsafe impl Send for JobPtr {}

pub(crate) struct SpinPool {
    shared: &'static Shared,
    threads: Vec<Thread>,
    /// One caller at a time; a second caller runs its region on its own thread instead.
    busy: Mutex<()>,
}

impl SpinPool {
    fn new(workers: usize) -> SpinPool {
        let shared: &'static Shared = Box::leak(Box::new(Shared {
            generation: AtomicUsize::new(0),
            job: Mutex::new(None),
            slots: (0..workers)
                .map(|_| Slot {
                    done: AtomicUsize::new(0),
                })
                .collect(),
            panicked: AtomicBool::new(false),
        }));
        let mut threads = Vec::with_capacity(workers);
        for w in 0..workers {
            let spawned = std::thread::Builder::new()
                .name(format!("prod-spin-{w}"))
                .spawn(move || worker(shared, w));
            match spawned {
                Ok(h) => threads.push(h.thread().clone()),
                // Fewer workers than cores still works: the regions are split over those started.
                Err(_) => break,
            }
        }
        SpinPool {
            shared,
            threads,
            busy: Mutex::new(()),
        }
    }

    /// Parts a region is split into: the workers and the caller.
    pub(crate) fn parts(&self) -> usize {
        self.threads.len() + 1
    }

    /// Call `f(part)` for every `part < self.parts()`, the last one on this thread; returns when
    /// all have finished. Falls back to calling every part here when the pool is taken.
    pub(crate) fn execute<F: Fn(usize) + Sync>(&self, f: F) {
        let parts = self.parts();
        let _busy = match self.busy.try_lock() {
            Ok(g) => g,
            // A part that panicked earlier poisoned the lock; the pool itself is intact.
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => {
                (0..parts).for_each(&f);
                return;
            }
        };
        if parts == 1 {
            return f(0);
        }
        let job = Job {
            call: call_job::<F>,
            data: &f as *const F as *const (),
        };
        let gen = self.shared.generation.load(Ordering::Relaxed) + 1;
        *self.shared.job.lock().unwrap_or_else(|e| e.into_inner()) = Some((gen, JobPtr(job)));
        self.shared.generation.store(gen, Ordering::Release);
        for t in &self.threads {
            t.unpark();
        }
        // Wait for the workers even if our own part panics: they hold a pointer to `f`.
        struct WaitAll<'a>(&'a Shared, usize, usize);
        impl Drop for WaitAll<'_> {
            fn drop(&mut self) {
                for s in self.0.slots.iter().take(self.2) {
                    while s.done.load(Ordering::Acquire) < self.1 {
                        std::hint::spin_loop();
                    }
                }
            }
        }
        let wait = WaitAll(self.shared, gen, self.threads.len());
        f(parts - 1);
        drop(wait);
        if self.shared.panicked.swap(false, Ordering::AcqRel) {
            panic!("a spin-pool worker panicked");
        }
    }
}

fn worker(shared: &'static Shared, w: usize) {
    IN_WORKER.with(|x| x.set(true));
    let mut seen = 0usize;
    loop {
        let mut spins = 0u32;
        let gen = loop {
            let g = shared.generation.load(Ordering::Acquire);
            if g != seen {
                break g;
            }
            if spins < SPIN_LIMIT {
                spins += 1;
                std::hint::spin_loop();
            } else {
                // `unpark` before the generation check above is remembered, so no wake-up is lost.
                std::thread::park();
            }
        };
        seen = gen;
        let job = *shared.job.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((g, JobPtr(job))) = job {
            if g == gen {
                // SAFETY: the caller of `execute` waits for this slot's `done` before it lets
                // the closure go (module invariant).
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| unsafe {
                    (job.call)(job.data, w)
                }));
                if r.is_err() {
                    shared.panicked.store(true, Ordering::Release);
                }
            }
        }
        shared.slots[w].done.store(gen, Ordering::Release);
    }
}

/// The process's pool: one worker per core beyond the first (`RAYON_NUM_THREADS` if set).
pub(crate) fn pool() -> &'static SpinPool {
    static POOL: OnceLock<SpinPool> = OnceLock::new();
    POOL.get_or_init(|| {
        crate::packing::pack_for_training();
        let cores = std::env::var("RAYON_NUM_THREADS")
            .ok()
            .and_then(|s| s.parse::<usize>().ok())
            .filter(|&n| n > 0)
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        SpinPool::new(cores.saturating_sub(1))
    })
}

/// `f` over `0..n` in contiguous ranges, on the spin pool (a handful of ranges per part, taken
/// from a shared cursor so that a slow part does not hold the others up).
pub(crate) fn for_ranges(n: usize, f: &(dyn Fn(std::ops::Range<usize>) + Sync)) {
    let p = pool();
    let chunk = n.div_ceil(p.parts() * 4).max(1);
    let next = AtomicUsize::new(0);
    p.execute(|_| loop {
        let a = next.fetch_add(chunk, Ordering::Relaxed);
        if a >= n {
            break;
        }
        f(a..n.min(a + chunk));
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_part_runs_once_per_region_and_borrowed_data_is_safe() {
        let p = pool();
        for round in 0..200usize {
            let hits: Vec<AtomicUsize> = (0..p.parts()).map(|_| AtomicUsize::new(0)).collect();
            p.execute(|part| {
                hits[part].fetch_add(round + 1, Ordering::Relaxed);
            });
            assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == round + 1));
        }
    }

    #[test]
    fn ranges_cover_everything_once_even_from_many_callers() {
        std::thread::scope(|s| {
            for t in 0..4 {
                s.spawn(move || {
                    for n in [0usize, 1, 7, 1000, 4097] {
                        let seen: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
                        for_ranges(n, &|r| {
                            for i in r {
                                seen[i].fetch_add(1, Ordering::Relaxed);
                            }
                        });
                        assert!(
                            seen.iter().all(|x| x.load(Ordering::Relaxed) == 1),
                            "caller {t}, n = {n}"
                        );
                    }
                });
            }
        });
    }

    #[test]
    fn a_panicking_part_reaches_the_caller_and_the_pool_goes_on() {
        let p = pool();
        let r = std::panic::catch_unwind(|| {
            p.execute(|part| {
                if part == 0 {
                    panic!("part 0 fails");
                }
            })
        });
        assert!(r.is_err());
        let hits = AtomicUsize::new(0);
        p.execute(|_| {
            hits.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(hits.load(Ordering::Relaxed), p.parts());
    }

    #[test]
    fn training_scope_is_per_thread_and_restored() {
        assert!(!active());
        training(|| {
            assert!(active());
            training(|| assert!(active()));
            assert!(active());
            std::thread::scope(|s| {
                s.spawn(|| assert!(!active()));
            });
        });
        assert!(!active());
    }
}
