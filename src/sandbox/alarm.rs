//! Coarse alarms for a run's waits: a future that is ready once an instant
//! has passed or a turn's cancel switch is set, woken by one ticker thread
//! every [`TICK`] instead of by tokio's timer wheel.
//!
//! Why not `tokio::time::sleep`: each bounded wait of a run (a `poll`, a
//! blocking stream call, an HTTP request's connect and first byte, a
//! response body) needs a timer that almost never fires. A tokio timer is
//! registered in, and removed from, the time driver under its lock, and
//! one earlier than the driver's next wake makes it wake another thread.
//! An alarm is a slot in a slab under an uncontended mutex: no system call
//! to set, move or drop one.
//!
//! The price is resolution: an alarm fires within one [`TICK`] (plus the
//! scheduler's delay) after its instant, the resolution of the epoch
//! deadline that stops a guest running wasm code.
//!
//! A process that cannot start the ticker thread (out of threads) still
//! ends every wait: its alarms fall back to tokio timers of at most one
//! [`TICK`] each, looking at the instant and the cancel switch each time.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use super::services::CancelHandle;

/// How often the ticker looks at the alarms: their resolution.
pub const TICK: Duration = Duration::from_millis(10);

/// A waiting alarm: when it is due, what else ends it, whom to wake.
struct Slot {
    at: Instant,
    cancel: Option<CancelHandle>,
    waker: Waker,
}

/// Whether an alarm at `at`, also ended by `cancel`, is due at `now`.
fn due(at: Instant, cancel: Option<&CancelHandle>, now: Instant) -> bool {
    now >= at || cancel.is_some_and(CancelHandle::is_cancelled)
}

/// The waiting alarms: a slab (a freed key is reused).
#[derive(Default)]
struct Slab {
    slots: Vec<Option<Slot>>,
    free: Vec<usize>,
}

static ALARMS: Mutex<Slab> = Mutex::new(Slab {
    slots: Vec::new(),
    free: Vec::new(),
});

/// Starts the ticker thread (once per process): every [`TICK`] it wakes
/// the alarms that are due; their futures see it at their next poll.
/// Whether it runs.
fn start_ticker() -> bool {
    static TICKER: OnceLock<bool> = OnceLock::new();
    *TICKER.get_or_init(|| {
        std::thread::Builder::new()
            .name("gatehouse-alarms".into())
            .spawn(|| loop {
                std::thread::sleep(TICK);
                let now = Instant::now();
                let due: Vec<Waker> = crate::util::lock(&ALARMS)
                    .slots
                    .iter()
                    .flatten()
                    .filter(|s| due(s.at, s.cancel.as_ref(), now))
                    .map(|s| s.waker.clone())
                    .collect();
                // Woken outside the lock: a waker may run a task inline.
                due.into_iter().for_each(Waker::wake);
            })
            .is_ok()
    })
}

/// A future ready once `at` has passed, or once `cancel` (if any) is set:
/// within one [`TICK`] of it. Dropping it removes it.
pub struct Alarm {
    at: Instant,
    cancel: Option<CancelHandle>,
    key: Option<usize>,
    /// Without the ticker: the tokio timer of the current look.
    fallback: Option<Pin<Box<tokio::time::Sleep>>>,
    ticker: bool,
}

impl Alarm {
    /// An alarm at `at`, also ended by `cancel`.
    pub fn new(at: Instant, cancel: Option<CancelHandle>) -> Alarm {
        Alarm {
            at,
            cancel,
            key: None,
            fallback: None,
            ticker: start_ticker(),
        }
    }

    /// An alarm `after` from now (a duration too long to add is an alarm
    /// that never fires on its own).
    pub fn after(after: Duration) -> Alarm {
        let now = Instant::now();
        let at = now
            .checked_add(after)
            .unwrap_or_else(|| now + Duration::from_secs(86_400 * 365));
        Alarm::new(at, None)
    }

    /// Whether it is due now.
    pub fn is_due(&self) -> bool {
        due(self.at, self.cancel.as_ref(), Instant::now())
    }

    /// Moves it to `at` (it stays registered if it is).
    pub fn reset(&mut self, at: Instant) {
        self.at = at;
        if let Some(key) = self.key {
            if let Some(Some(slot)) = crate::util::lock(&ALARMS).slots.get_mut(key) {
                slot.at = at;
            }
        }
    }

    fn remove(&mut self) {
        if let Some(key) = self.key.take() {
            let mut alarms = crate::util::lock(&ALARMS);
            if let Some(slot) = alarms.slots.get_mut(key) {
                *slot = None;
                alarms.free.push(key);
            }
        }
    }
}

impl Future for Alarm {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if this.is_due() {
            this.remove();
            this.fallback = None;
            return Poll::Ready(());
        }
        if !this.ticker {
            // No ticker: a timer to the instant, or to the next look at
            // the cancel switch, whichever is first; looked at again when
            // it fires.
            loop {
                let next = (this.at - Instant::now()).min(TICK);
                let timer = this
                    .fallback
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(next)));
                if timer.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                this.fallback = None;
                if this.is_due() {
                    return Poll::Ready(());
                }
            }
        }
        let mut alarms = crate::util::lock(&ALARMS);
        match this.key.and_then(|k| alarms.slots.get_mut(k)) {
            Some(Some(slot)) => {
                if !slot.waker.will_wake(cx.waker()) {
                    slot.waker = cx.waker().clone();
                }
            }
            _ => {
                let slot = Slot {
                    at: this.at,
                    cancel: this.cancel.clone(),
                    waker: cx.waker().clone(),
                };
                let key = match alarms.free.pop() {
                    Some(k) => {
                        alarms.slots[k] = Some(slot);
                        k
                    }
                    None => {
                        alarms.slots.push(Some(slot));
                        alarms.slots.len() - 1
                    }
                };
                this.key = Some(key);
            }
        }
        Poll::Pending
    }
}

impl Drop for Alarm {
    fn drop(&mut self) {
        self.remove();
    }
}

/// `fut` ran past `at`.
#[derive(Debug, Clone, Copy)]
pub struct Elapsed;

/// Runs `fut` until it is done or `alarm` fires, whichever comes first
/// (`fut` is polled first: one that is ready is never cut short).
pub async fn race<F: Future>(alarm: Alarm, fut: F) -> Result<F::Output, Elapsed> {
    let mut fut = std::pin::pin!(fut);
    let mut alarm = alarm;
    std::future::poll_fn(|cx| {
        if let Poll::Ready(v) = fut.as_mut().poll(cx) {
            return Poll::Ready(Ok(v));
        }
        match Pin::new(&mut alarm).poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(Elapsed)),
            Poll::Pending => Poll::Pending,
        }
    })
    .await
}

/// `fut`, unless it takes longer than `limit`.
pub async fn timeout<F: Future>(limit: Duration, fut: F) -> Result<F::Output, Elapsed> {
    race(Alarm::after(limit), fut).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cancel switch set from another thread in 20 ms.
    fn cancelled_soon() -> CancelHandle {
        let cancel = CancelHandle::new();
        let c = cancel.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            c.cancel();
        });
        cancel
    }

    fn block_on<F: Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn an_alarm_fires_after_its_instant_within_a_few_ticks_and_is_removed() {
        let started = Instant::now();
        let r = block_on(timeout(
            Duration::from_millis(30),
            std::future::pending::<()>(),
        ));
        let took = started.elapsed();
        assert!(r.is_err());
        assert!(took >= Duration::from_millis(30), "{took:?}");
        // Generous: the machine is shared; a lost wake would be forever.
        assert!(took < Duration::from_secs(5), "{took:?}");
    }

    #[test]
    fn without_the_ticker_an_alarm_falls_back_to_timers_and_still_sees_its_cancel() {
        let rt = || {
            tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
                .unwrap()
        };
        let without_ticker = |at: Instant, cancel: Option<CancelHandle>| {
            let mut alarm = Alarm::new(at, cancel);
            alarm.ticker = false;
            alarm
        };
        let started = Instant::now();
        let alarm = without_ticker(Instant::now() + Duration::from_millis(35), None);
        let r = rt().block_on(race(alarm, std::future::pending::<()>()));
        assert!(r.is_err());
        assert!(started.elapsed() >= Duration::from_millis(35));
        let started = Instant::now();
        let alarm = without_ticker(
            Instant::now() + Duration::from_secs(3600),
            Some(cancelled_soon()),
        );
        assert!(rt()
            .block_on(race(alarm, std::future::pending::<()>()))
            .is_err());
        assert!(started.elapsed() < Duration::from_secs(60));
    }

    #[test]
    fn a_ready_future_wins_even_against_an_alarm_already_due() {
        let alarm = Alarm::new(Instant::now() - Duration::from_millis(1), None);
        assert_eq!(block_on(race(alarm, async { 7 })).ok(), Some(7));
    }

    #[test]
    fn a_cancel_ends_the_wait_before_the_instant() {
        let started = Instant::now();
        let alarm = Alarm::new(
            Instant::now() + Duration::from_secs(3600),
            Some(cancelled_soon()),
        );
        assert!(block_on(race(alarm, std::future::pending::<()>())).is_err());
        assert!(started.elapsed() < Duration::from_secs(60));
    }

    #[test]
    fn a_reset_alarm_fires_at_its_new_instant_and_then_leaves_the_slab() {
        let mut alarm = Alarm::after(Duration::from_secs(3600));
        let started = Instant::now();
        block_on(async {
            let mut first = true;
            std::future::poll_fn(|cx| {
                let p = Pin::new(&mut alarm).poll(cx);
                if first {
                    first = false;
                    assert!(alarm.key.is_some());
                    alarm.reset(Instant::now() + Duration::from_millis(20));
                }
                p
            })
            .await
        });
        assert!(started.elapsed() < Duration::from_secs(60));
        assert_eq!(alarm.key, None);
    }
}
