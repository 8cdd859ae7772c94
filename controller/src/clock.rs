//! The controllers' clock: the system time plus an offset that tests move, so that rules of
//! 30 seconds or 10 minutes are tested in milliseconds. Moving it wakes the controllers that
//! follow its ticks.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use futures::Stream;
use jiff::{SignedDuration, Timestamp};
use tokio::sync::watch;
use tokio_stream::wrappers::WatchStream;

/// The time the controllers read.
#[derive(Debug)]
pub struct Clock {
    offset_ms: AtomicI64,
    ticks: watch::Sender<u64>,
}

impl Default for Clock {
    fn default() -> Clock {
        Clock { offset_ms: AtomicI64::new(0), ticks: watch::Sender::new(0) }
    }
}

impl Clock {
    /// Now, as the controllers see it.
    pub fn now(&self) -> Timestamp {
        let offset = SignedDuration::from_millis(self.offset_ms.load(Ordering::Relaxed));
        Timestamp::now().checked_add(offset).unwrap_or_else(|_| Timestamp::now())
    }

    /// Moves the clock forward and wakes the controllers that follow [`Clock::moved`].
    pub fn advance(&self, by: Duration) {
        let ms = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        self.offset_ms.fetch_add(ms, Ordering::Relaxed);
        self.ticks.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A stream that yields each time the clock is moved (never for the passing of time).
    pub fn moved(&self) -> impl Stream<Item = ()> + Send + 'static + use<> {
        use futures::StreamExt;
        WatchStream::from_changes(self.ticks.subscribe()).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advance_moves_now() {
        let clock = Clock::default();
        let before = clock.now();
        clock.advance(Duration::from_secs(600));
        assert!(clock.now().duration_since(before).as_secs() >= 600);
    }
}
