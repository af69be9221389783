//! The threads that run a server's turns, handed each turn without a
//! wake-up when calls come one after another.
//!
//! A turn blocks (wasmtime runs it on the calling thread), so it cannot run
//! on the protocol's one worker. Handing it to a sleeping thread and
//! waking the worker again when it ends costs two wake-ups per call
//! (`block_in_place` measured ≈ 35 µs each on the build machine, more than
//! a `hello` turn itself). Here a thread that finished a turn keeps
//! looking for the next one for [`LINGER`] before it sleeps, and the
//! worker looks for the answer for up to [`AWAIT_SPIN`] before it yields:
//! with calls arriving back to back, neither sleeps. Both look with
//! `yield_now` between tries, so on a machine with fewer cores than
//! runnable threads the client and the protocol still get the CPU.
//!
//! The worker never waits for a turn beyond [`AWAIT_SPIN`]: it then
//! awaits the answer as any future, free to read a cancel or another call.
//! A turn thread runs in the server runtime's context (its handle entered),
//! as `block_in_place` did: what a turn awaits (an elicitation, a
//! store's I/O) runs as before.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::util::lock;

/// How long a thread that finished a turn looks for the next before it
/// sleeps.
pub const LINGER: Duration = Duration::from_micros(300);

/// How long the protocol's worker looks for a turn's answer before it
/// awaits it.
pub const AWAIT_SPIN: Duration = Duration::from_micros(150);

type Job = Box<dyn FnOnce() + Send>;

/// The jobs waiting, and how many run now.
#[derive(Default)]
struct Queue {
    jobs: VecDeque<Job>,
    running: usize,
}

impl Queue {
    /// The next job, counted as running.
    fn take(&mut self, queued: &AtomicUsize) -> Option<Job> {
        let job = self.jobs.pop_front()?;
        queued.fetch_sub(1, Ordering::AcqRel);
        self.running += 1;
        Some(job)
    }
}

struct Shared {
    queue: Mutex<Queue>,
    /// Jobs in the queue (read without the lock by lingering threads).
    queued: AtomicUsize,
    /// Threads lingering: a job needs no wake-up while one is.
    lingering: AtomicUsize,
    wake: Condvar,
    /// Signalled each time a job ends.
    done: Condvar,
    /// Set when the pool is dropped: sleeping threads end.
    closed: AtomicBool,
}

/// A pool of turn threads (see the module documentation).
pub struct TurnThreads {
    shared: Arc<Shared>,
}

impl TurnThreads {
    /// A pool of `threads` threads (at least one), each in the context of
    /// `runtime`.
    ///
    /// # Errors
    /// When the operating system refuses a thread.
    pub fn new(threads: usize, runtime: tokio::runtime::Handle) -> std::io::Result<TurnThreads> {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue::default()),
            queued: AtomicUsize::new(0),
            lingering: AtomicUsize::new(0),
            wake: Condvar::new(),
            done: Condvar::new(),
            closed: AtomicBool::new(false),
        });
        for i in 0..threads.max(1) {
            let shared = shared.clone();
            let runtime = runtime.clone();
            std::thread::Builder::new()
                .name(format!("gatehouse-turn-{i}"))
                .spawn(move || {
                    let _context = runtime.enter();
                    work(&shared);
                })?;
        }
        Ok(TurnThreads { shared })
    }

    /// Runs `turn` on a turn thread; its value once it returns (an error
    /// when the turn panicked).
    pub async fn run<T: Send + 'static>(
        &self,
        turn: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, String> {
        let (tx, mut rx) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move || {
            let value = std::panic::catch_unwind(std::panic::AssertUnwindSafe(turn));
            let _ = tx.send(value.map_err(|_| "the turn's thread panicked".to_string()));
        });
        let queued = {
            let mut queue = lock(&self.shared.queue);
            queue.jobs.push_back(job);
            self.shared.queued.fetch_add(1, Ordering::AcqRel) + 1
        };
        // A lingering thread takes it without a wake-up; more jobs than
        // lingering threads wake a sleeping one.
        if queued > self.shared.lingering.load(Ordering::Acquire) {
            self.shared.wake.notify_one();
        }
        // Looked for briefly before this task yields its worker.
        let start = Instant::now();
        while start.elapsed() < AWAIT_SPIN {
            match rx.try_recv() {
                Ok(value) => return value,
                Err(tokio::sync::oneshot::error::TryRecvError::Empty) => std::thread::yield_now(),
                Err(tokio::sync::oneshot::error::TryRecvError::Closed) => {
                    return Err("the turn's thread ended".into())
                }
            }
        }
        rx.await
            .map_err(|_| "the turn's thread ended".to_string())?
    }
}

impl TurnThreads {
    /// Waits until no turn runs or waits, for up to `timeout`: whether
    /// they all ended.
    pub fn wait_idle(&self, timeout: Duration) -> bool {
        let until = Instant::now() + timeout;
        let mut queue = lock(&self.shared.queue);
        while queue.running > 0 || !queue.jobs.is_empty() {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            queue = self
                .shared
                .done
                .wait_timeout(queue, left)
                .map(|(q, _)| q)
                .unwrap_or_else(|p| p.into_inner().0);
        }
        true
    }
}

impl Drop for TurnThreads {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::Release);
        let _queue = lock(&self.shared.queue);
        self.shared.wake.notify_all();
    }
}

/// One thread's loop: a job, then lingering for the next, then sleeping.
fn work(shared: &Shared) {
    loop {
        // Sleep until there is a job (or the pool is closed).
        let job = {
            let mut queue = lock(&shared.queue);
            loop {
                if let Some(job) = queue.take(&shared.queued) {
                    break job;
                }
                if shared.closed.load(Ordering::Acquire) {
                    return;
                }
                queue = shared
                    .wake
                    .wait(queue)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
            }
        };
        more(shared);
        run(shared, job);
        // Linger: the next call usually comes within the protocol's round
        // trip.
        let mut since = Instant::now();
        shared.lingering.fetch_add(1, Ordering::AcqRel);
        while since.elapsed() < LINGER {
            if shared.queued.load(Ordering::Acquire) > 0 {
                let next = lock(&shared.queue).take(&shared.queued);
                if let Some(job) = next {
                    // Not lingering while it runs: a job queued meanwhile
                    // wakes a sleeping thread.
                    shared.lingering.fetch_sub(1, Ordering::AcqRel);
                    more(shared);
                    run(shared, job);
                    shared.lingering.fetch_add(1, Ordering::AcqRel);
                    since = Instant::now();
                    continue;
                }
            }
            std::thread::yield_now();
        }
        shared.lingering.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Wakes a sleeping thread if jobs still wait: one queued while this
/// thread still counted as lingering, before it took another, would
/// otherwise wait for this one's.
fn more(shared: &Shared) {
    if shared.queued.load(Ordering::Acquire) > 0 {
        shared.wake.notify_one();
    }
}

/// Runs `job` (taken, so counted as running), then counts it ended.
fn run(shared: &Shared, job: Job) {
    job();
    let mut queue = lock(&shared.queue);
    queue.running -= 1;
    shared.done.notify_all();
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Barrier;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn a_turn_s_value_comes_back_and_a_panic_is_an_error_that_leaves_the_pool_working() {
        let rt = runtime();
        let pool = TurnThreads::new(1, rt.handle().clone()).unwrap();
        rt.block_on(async {
            assert_eq!(pool.run(|| 6 * 7).await, Ok(42));
            let panicked = pool.run(|| -> u8 { panic!("a turn that panics") }).await;
            assert_eq!(panicked, Err("the turn's thread panicked".to_string()));
            assert_eq!(pool.run(|| "after").await, Ok("after"));
        });
    }

    /// Two turns that can only end together (each waits for the other at a
    /// barrier) both end: the second is not left queued behind the first
    /// on a lingering thread while another thread sleeps.
    #[test]
    fn turns_run_at_once_on_as_many_threads() {
        let rt = runtime();
        let pool = Arc::new(TurnThreads::new(2, rt.handle().clone()).unwrap());
        rt.block_on(async {
            // A first turn leaves one thread lingering.
            assert_eq!(pool.run(|| 1).await, Ok(1));
            let barrier = Arc::new(Barrier::new(2));
            let (b1, b2) = (barrier.clone(), barrier.clone());
            let one = tokio::spawn({
                let pool = pool.clone();
                async move { pool.run(move || b1.wait().is_leader()).await }
            });
            let two = tokio::spawn({
                let pool = pool.clone();
                async move { pool.run(move || b2.wait().is_leader()).await }
            });
            let ended = tokio::time::timeout(Duration::from_secs(20), async {
                (one.await.unwrap().unwrap(), two.await.unwrap().unwrap())
            })
            .await
            .expect("the two turns did not run at once");
            // Exactly one of the two is the barrier's leader.
            assert!(ended.0 ^ ended.1);
        });
    }

    #[test]
    fn wait_idle_waits_for_a_running_turn() {
        let rt = runtime();
        let pool = Arc::new(TurnThreads::new(1, rt.handle().clone()).unwrap());
        let done = Arc::new(AtomicBool::new(false));
        let flag = done.clone();
        let running = rt.spawn({
            let pool = pool.clone();
            async move {
                pool.run(move || {
                    std::thread::sleep(Duration::from_millis(200));
                    flag.store(true, Ordering::SeqCst);
                })
                .await
            }
        });
        // The turn has started (or is queued): wait_idle covers both.
        std::thread::sleep(Duration::from_millis(20));
        assert!(pool.wait_idle(Duration::from_secs(20)));
        assert!(done.load(Ordering::SeqCst));
        assert!(rt.block_on(running).unwrap().is_ok());
        // Nothing runs: at once.
        assert!(pool.wait_idle(Duration::ZERO));
    }
}
