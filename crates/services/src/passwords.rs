//! Passwords, of links and of people: Argon2id at this product's cost, the check that a
//! stored hash asks no more than that cost, and the few checks allowed to run at once
//! (`memory.budget`'s `password_checks`: each holds Argon2's 19 MiB), shared by visitors
//! unlocking links and people signing in, so that a flood of either stays within the budget.
//! The checks run on threads of their own at a lowered priority, so that a flood of them
//! takes only the CPU the redirects leave.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};

/// How long a check waits for a free slot before the request is told to come back (429).
pub const PASSWORD_CHECK_WAIT: Duration = Duration::from_secs(1);

/// The Argon2id PHC string of `password` (m = 19456 KiB, t = 2, p = 1: `Argon2::default()`).
pub fn argon2id(password: &str) -> Result<String, String> {
    let salt = SaltString::encode_b64(&rand::random::<[u8; 16]>())
        .map_err(|e| format!("cannot salt: {e}"))?;
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|hash| hash.to_string())
        .map_err(|e| e.to_string())
}

/// Whether a stored hash is one this product could have made: an Argon2id PHC string
/// (version 0x13) whose memory, passes, lanes and output length are [`argon2id`]'s or lower.
/// Each guess costs what the hash asks, so a hash from a file (an import) must not ask more:
/// at m = 1 GiB one anonymous guess took 1.4 s and 1 GB. The error says why, for a field's
/// problem.
pub fn check_cost(hash: &str) -> Result<(), String> {
    let parsed = PasswordHash::new(hash).map_err(|e| format!("not a PHC hash: {e}"))?;
    if parsed.algorithm != Algorithm::Argon2id.ident() {
        return Err(format!(
            "the hash is `{}`; this server verifies argon2id only",
            parsed.algorithm
        ));
    }
    if parsed.version != Some(Version::V0x13.into()) {
        return Err("an argon2id hash of version 19 (v=19) is expected".into());
    }
    let params = Params::try_from(&parsed)
        .map_err(|e| format!("the hash's parameters are not Argon2's: {e}"))?;
    let own = Params::default();
    let output = parsed.hash.map_or(0, |h| h.len());
    if params.m_cost() > own.m_cost()
        || params.t_cost() > own.t_cost()
        || params.p_cost() > own.p_cost()
        || output > Params::DEFAULT_OUTPUT_LEN
    {
        return Err(format!(
            "the hash asks m={} KiB, t={}, p={} ({output}-byte output); this server hashes \
             with m={} KiB, t={}, p={} ({}-byte output) and takes no more",
            params.m_cost(),
            params.t_cost(),
            params.p_cost(),
            own.m_cost(),
            own.t_cost(),
            own.p_cost(),
            Params::DEFAULT_OUTPUT_LEN,
        ));
    }
    Ok(())
}

/// Whether `password` is the one `hash` was made from. Slow on purpose (tens of
/// milliseconds): run it through [`PasswordChecks`]. A hash [`check_cost`] refuses verifies
/// nothing: its cost is not this server's to pay for each guess.
pub fn verify(hash: &str, password: &str) -> bool {
    check_cost(hash).is_ok()
        && PasswordHash::new(hash).is_ok_and(|parsed| {
            Argon2::default()
                .verify_password(password.as_bytes(), &parsed)
                .is_ok()
        })
}

/// What a bounded check found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    Right,
    Wrong,
    /// No slot came free within [`PASSWORD_CHECK_WAIT`]: answer 429, check nothing.
    Busy,
}

/// The nice value of the threads that run Argon2: at 10 the kernel gives them about a tenth
/// of the CPU a default thread gets when both want a core, and all of an idle one. Safe here
/// (unlike for a store reader) because Argon2 holds no lock anybody else waits for.
const NICE: i32 = 10;

/// A piece of password work and where its answer goes.
type Job = Box<dyn FnOnce() + Send>;

/// The slots password work runs in: as many threads of their own, each taking jobs from one
/// queue, and a semaphore that keeps at most that many jobs queued or running.
#[derive(Clone)]
pub struct PasswordChecks {
    slots: Arc<tokio::sync::Semaphore>,
    jobs: mpsc::Sender<Job>,
}

impl PasswordChecks {
    /// Starts `slots` threads (at least one); they end when the last clone is dropped.
    pub fn new(slots: usize) -> Self {
        let slots = slots.max(1);
        let (jobs, queue) = mpsc::channel::<Job>();
        let queue = Arc::new(Mutex::new(queue));
        for n in 0..slots {
            let queue = queue.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("vsl-password-{n}"))
                .spawn(move || {
                    // On Linux the nice value is each thread's own: these alone are lowered.
                    #[cfg(target_os = "linux")]
                    if let Err(e) = rustix::process::setpriority_process(None, NICE) {
                        tracing::debug!(error = %e, "password thread: cannot lower its priority");
                    }
                    loop {
                        // The lock is held only while this thread waits for the next job.
                        let job = match queue.lock() {
                            Ok(queue) => queue.recv(),
                            Err(_) => return,
                        };
                        match job {
                            Ok(job) => job(),
                            Err(_) => return,
                        }
                    }
                });
            if let Err(e) = spawned {
                tracing::error!(error = %e, "cannot start a password-check thread");
            }
        }
        Self {
            slots: Arc::new(tokio::sync::Semaphore::new(slots)),
            jobs,
        }
    }

    /// Runs Argon2 work `f` in a slot off the async threads; `None` when no slot came free
    /// in time.
    pub async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Option<T> {
        let permit = tokio::time::timeout(PASSWORD_CHECK_WAIT, self.slots.clone().acquire_owned())
            .await
            .ok()?
            .ok()?;
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move || {
            let _ = tx.send(f());
            drop(permit);
        });
        self.jobs.send(job).ok()?;
        rx.await.ok()
    }

    /// Checks `password` against `hash` in a slot.
    pub async fn verify(&self, hash: String, password: String) -> Check {
        match self.run(move || verify(&hash, &password)).await {
            Some(true) => Check::Right,
            Some(false) => Check::Wrong,
            None => Check::Busy,
        }
    }
}
