//! [`Rendezvous`]: a barrier of the shard threads at start-up that a failure or a stop signal
//! can break.
//!
//! The mesh connect waits in it with the executor thread blocked ([`Rendezvous::wait`]), on
//! purpose: a blocked thread needs no wake-up. glommio 0.9 can park an executor while one of its
//! tasks is runnable (see [`super::mesh`]), so a connect that waits for a wake-up can wait
//! forever; one that blocks the thread until every shard has arrived cannot. Nothing else runs on
//! a shard's thread before its meshes are connected, so the block costs nothing.
//!
//! Later steps, when a shard must keep serving the others while it waits, [`Rendezvous::arrive`]
//! and poll [`Rendezvous::passed`] on a timer instead: a timer always fires, so such a wait is
//! never lost either.

use std::sync::{Condvar, Mutex};

/// The rendezvous was broken: some shard failed or a stop was requested during start-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("start-up was abandoned (a shard failed or the broker is stopping)")]
pub struct Abandoned;

#[derive(Debug, Default)]
struct State {
    /// Parties arrived in the current generation.
    arrived: usize,
    /// Completed generations (each `wait` call of every party is one generation).
    generation: u64,
    abandoned: bool,
}

/// One party's arrival in one generation of a [`Rendezvous`].
#[derive(Debug, Clone, Copy)]
pub struct Ticket(u64);

/// A reusable barrier for `parties` threads, breakable with [`Rendezvous::abandon`].
#[derive(Debug)]
pub struct Rendezvous {
    parties: usize,
    state: Mutex<State>,
    changed: Condvar,
}

impl Rendezvous {
    /// A barrier for `parties` threads.
    pub fn new(parties: usize) -> Self {
        assert!(parties > 0);
        Self {
            parties,
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
        }
    }

    /// Blocks until all parties have called `wait` (or [`Rendezvous::arrive`]) in this
    /// generation, or the rendezvous is abandoned (before or during the wait).
    pub fn wait(&self) -> Result<(), Abandoned> {
        let Ticket(generation) = self.arrive()?;
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        while state.generation == generation && !state.abandoned {
            state = self.changed.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        if state.generation == generation {
            return Err(Abandoned);
        }
        Ok(())
    }

    /// Arrives in this generation without waiting; [`Rendezvous::passed`] tells when every
    /// party has.
    pub fn arrive(&self) -> Result<Ticket, Abandoned> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.abandoned {
            return Err(Abandoned);
        }
        let generation = state.generation;
        state.arrived += 1;
        assert!(state.arrived <= self.parties, "more parties than expected");
        if state.arrived == self.parties {
            state.arrived = 0;
            state.generation += 1;
            self.changed.notify_all();
        }
        Ok(Ticket(generation))
    }

    /// Whether every party has arrived in `ticket`'s generation; [`Abandoned`] once the
    /// rendezvous is broken before they all did.
    pub fn passed(&self, ticket: Ticket) -> Result<bool, Abandoned> {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        match (state.generation > ticket.0, state.abandoned) {
            (true, _) => Ok(true),
            (false, true) => Err(Abandoned),
            (false, false) => Ok(false),
        }
    }

    /// Breaks the rendezvous for good: every current and later `wait` returns [`Abandoned`].
    pub fn abandon(&self) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.abandoned = true;
        self.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn all_parties_pass_together_generation_after_generation() {
        let r = Arc::new(Rendezvous::new(3));
        let threads: Vec<_> = (0..3)
            .map(|_| {
                let r = r.clone();
                std::thread::spawn(move || (0..50).all(|_| r.wait().is_ok()))
            })
            .collect();
        assert!(threads.into_iter().all(|t| t.join().unwrap()));
    }

    #[test]
    fn abandon_releases_waiters_and_refuses_later_ones() {
        let r = Arc::new(Rendezvous::new(2));
        let waiter = {
            let r = r.clone();
            std::thread::spawn(move || r.wait())
        };
        std::thread::sleep(std::time::Duration::from_millis(20));
        r.abandon();
        assert_eq!(waiter.join().unwrap(), Err(Abandoned));
        assert_eq!(r.wait(), Err(Abandoned));
    }

    #[test]
    fn arrivals_pass_once_all_parties_arrived_and_mix_with_blocking_waits() {
        let r = Arc::new(Rendezvous::new(2));
        let first = r.arrive().unwrap();
        assert_eq!(r.passed(first), Ok(false));
        let waiter = {
            let r = r.clone();
            std::thread::spawn(move || r.wait())
        };
        assert_eq!(waiter.join().unwrap(), Ok(()));
        assert_eq!(r.passed(first), Ok(true));
        let second = r.arrive().unwrap();
        r.abandon();
        assert_eq!(r.passed(second), Err(Abandoned));
        assert_eq!(
            r.passed(first),
            Ok(true),
            "an earlier generation stays passed"
        );
        assert!(r.arrive().is_err());
    }

    #[test]
    fn a_single_party_never_waits() {
        let r = Rendezvous::new(1);
        assert_eq!(r.wait(), Ok(()));
        assert_eq!(r.wait(), Ok(()));
    }
}
