//! The bounded pool password checks run on.
//!
//! An Argon2id check costs tens of milliseconds of one core and 19 MiB or
//! more. Unbounded, a flood of sign-ins (no credentials needed) would take
//! every core and as much memory as it liked. So at most `checks_max`
//! checks run at once (default [`checks_default`]: half the cores, at
//! least one), on blocking threads, and at most `queue_max` more wait
//! ([`QUEUE_MAX`]); a sign-in beyond that is refused at once, typed
//! [`PoolBusy`] (answered `Busy` with a retry hint, and counted), without
//! computing anything.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::Semaphore;

/// Sign-ins that may wait for a check at most, beyond those running.
pub const QUEUE_MAX: usize = 32;

/// How long a client refused [`PoolBusy`] is told to wait, in ms.
pub const BUSY_RETRY_AFTER_MS: u32 = 200;

/// Concurrent checks by default: half the machine's cores, at least one,
/// so that sign-ins never take every core from the partitions.
pub fn checks_default() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    (cores / 2).max(1)
}

/// The pool and its queue were full: the sign-in is refused unchecked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the node is checking as many passwords as it may: retry in {BUSY_RETRY_AFTER_MS} ms")]
pub struct PoolBusy;

/// The pool: a semaphore for the running checks, a count of admitted ones.
#[derive(Debug)]
pub struct CheckPool {
    running: Arc<Semaphore>,
    /// Checks running or waiting.
    admitted: Arc<AtomicUsize>,
    admitted_max: usize,
}

/// One admitted check: gives its place back when dropped, wherever (the
/// blocking thread holds it, so a check whose caller went away still
/// counts until it ends).
struct Admission(Arc<AtomicUsize>);

impl Drop for Admission {
    fn drop(&mut self) {
        let before = self.0.fetch_sub(1, Ordering::AcqRel);
        assert!(before > 0, "an admission was given back twice");
    }
}

impl CheckPool {
    /// A pool running `checks_max` checks at once with `queue_max` more
    /// waiting.
    pub fn new(checks_max: usize, queue_max: usize) -> CheckPool {
        assert!(checks_max > 0, "a pool runs at least one check");
        CheckPool {
            running: Arc::new(Semaphore::new(checks_max)),
            admitted: Arc::new(AtomicUsize::new(0)),
            admitted_max: checks_max + queue_max,
        }
    }

    /// Checks running or waiting now.
    pub fn admitted(&self) -> usize {
        self.admitted.load(Ordering::Acquire)
    }

    /// Runs `check` on a blocking thread once a place is free; refused at
    /// once when every place and the queue are taken.
    pub async fn run<T: Send + 'static>(
        &self,
        check: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, PoolBusy> {
        let before = self.admitted.fetch_add(1, Ordering::AcqRel);
        let admission = Admission(Arc::clone(&self.admitted));
        if before >= self.admitted_max {
            return Err(PoolBusy);
        }
        let permit = Arc::clone(&self.running)
            .acquire_owned()
            .await
            .map_err(|_| PoolBusy)?;
        let work = tokio::task::spawn_blocking(move || {
            let _held = (permit, admission);
            check()
        });
        work.await.map_err(|_| PoolBusy)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn beyond_the_running_checks_and_the_queue_a_check_is_refused_at_once() {
        let pool = Arc::new(CheckPool::new(1, 2));
        let (release, gate) = mpsc::channel::<()>();
        let gate = Arc::new(std::sync::Mutex::new(gate));
        let mut held = Vec::new();
        for _ in 0..3 {
            let pool = Arc::clone(&pool);
            let gate = Arc::clone(&gate);
            held.push(tokio::spawn(async move {
                pool.run(move || gate.lock().expect("gate").recv().is_ok())
                    .await
            }));
        }
        while pool.admitted() < 3 {
            tokio::task::yield_now().await;
        }
        assert_eq!(pool.run(|| true).await, Err(PoolBusy), "one runs, two wait");
        for _ in 0..3 {
            release.send(()).expect("release");
        }
        for check in held {
            assert_eq!(check.await.expect("joined"), Ok(true));
        }
        assert_eq!(pool.admitted(), 0, "every place given back");
        assert_eq!(pool.run(|| 7).await, Ok(7));
        assert!(checks_default() >= 1);
    }
}
