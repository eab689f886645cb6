//! Verification guards for transactional appends (KIP-890 part 1, Kafka's VerificationGuard).
//!
//! A transactional producer's first append to a partition since its transaction began must be
//! confirmed by its coordinator (the partition is in the transaction), or an append racing the
//! transaction's end would open a transaction the coordinator never ends, and the last stable
//! offset would stop there for good. The flow:
//!
//! | append                               | partition                                        |
//! |--------------------------------------|--------------------------------------------------|
//! | producer's transaction open here     | append                                           |
//! | no guard, none handed out            | hand out a new guard, append nothing             |
//! | no guard, one handed out             | hand out that one again, append nothing          |
//! | the guard handed out (still current) | append (the transaction opens), guard used up    |
//! | another guard (a marker voided it)   | INVALID_TXN_STATE                                |
//!
//! A marker for the producer voids its guard: a verification that raced the transaction's end
//! can then no longer open a transaction.

use std::collections::HashMap;

use rill_types::ProducerId;

/// Guards handed out and not yet used or voided, per partition; beyond this many the oldest
/// are forgotten (their appends are refused and retried by the client).
pub const GUARDS_MAX: usize = 10_000;

/// What to do with a transactional append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// Append it.
    Append,
    /// Ask the coordinator, then send it again with this guard.
    Verify(u64),
    /// Refuse it: its guard was voided (INVALID_TXN_STATE).
    Refuse,
}

/// The guards of one partition.
#[derive(Debug, Default)]
pub struct TxnGuards {
    by_producer: HashMap<ProducerId, u64>,
    next: u64,
}

impl TxnGuards {
    /// Decides on a transactional append of `producer`; `open_here` says whether its
    /// transaction is already open in this partition.
    pub fn admit(&mut self, producer: ProducerId, open_here: bool, guard: Option<u64>) -> Admit {
        if open_here {
            self.by_producer.remove(&producer);
            return Admit::Append;
        }
        match guard {
            Some(g) if self.by_producer.get(&producer) == Some(&g) => {
                self.by_producer.remove(&producer);
                Admit::Append
            }
            Some(_) => Admit::Refuse,
            // Several appends in flight before the transaction opens here share one guard, as
            // Kafka's verification state entry is shared: a second guard would void the first,
            // and the first append back from its verification would be refused.
            None if self.by_producer.contains_key(&producer) => {
                Admit::Verify(self.by_producer[&producer])
            }
            None => {
                if self.by_producer.len() >= GUARDS_MAX {
                    self.by_producer.clear();
                }
                self.next += 1;
                self.by_producer.insert(producer, self.next);
                Admit::Verify(self.next)
            }
        }
    }

    /// A marker for `producer` was written: its guard, if any, is void.
    pub fn void(&mut self, producer: ProducerId) {
        self.by_producer.remove(&producer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: ProducerId = ProducerId(7);

    #[test]
    fn first_append_is_verified_then_admitted_once() {
        let mut g = TxnGuards::default();
        let Admit::Verify(guard) = g.admit(P, false, None) else {
            panic!("a first append is verified")
        };
        assert_eq!(g.admit(P, false, Some(guard)), Admit::Append);
        assert_eq!(g.admit(P, false, Some(guard)), Admit::Refuse, "used up");
        assert_eq!(
            g.admit(P, true, None),
            Admit::Append,
            "open here: no verification"
        );
    }

    /// franz-go's TestTxnEtl: a producer's appends to one partition in flight at once, before
    /// its transaction opens there, each come back from verification, and each lands.
    #[test]
    fn appends_in_flight_before_the_transaction_opens_share_one_guard() {
        let mut g = TxnGuards::default();
        let Admit::Verify(first) = g.admit(P, false, None) else {
            panic!()
        };
        let Admit::Verify(second) = g.admit(P, false, None) else {
            panic!()
        };
        assert_eq!(first, second);
        assert_eq!(g.admit(P, false, Some(first)), Admit::Append);
        // The transaction is open here now, so the second lands whatever its guard.
        assert_eq!(g.admit(P, true, Some(second)), Admit::Append);
        // Another producer gets a guard of its own.
        let Admit::Verify(other) = g.admit(ProducerId(8), false, None) else {
            panic!()
        };
        assert_ne!(other, first);
    }

    #[test]
    fn a_marker_voids_a_guard_that_raced_it() {
        let mut g = TxnGuards::default();
        let Admit::Verify(guard) = g.admit(P, false, None) else {
            panic!()
        };
        g.void(P);
        assert_eq!(g.admit(P, false, Some(guard)), Admit::Refuse);
        let Admit::Verify(newer) = g.admit(P, false, None) else {
            panic!()
        };
        assert_ne!(newer, guard);
    }
}
