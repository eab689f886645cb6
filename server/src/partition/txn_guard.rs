//! Verification guards for transactional appends (KIP-890 part 1, Kafka's VerificationGuard).
//!
//! A transactional producer's first append to a partition since its transaction began must be
//! confirmed by its coordinator (the partition is in the transaction), or an append racing the
//! transaction's end would open a transaction the coordinator never ends, and the last stable
//! offset would stop there for good. The flow:
//!
//! | append                                 | partition                                    |
//! |----------------------------------------|----------------------------------------------|
//! | no guard, none held, transaction open  | append                                       |
//! | no guard, none held, not open here     | hand out a new guard, append nothing         |
//! | no guard, one held (open here or not)  | hand out that one again, append nothing      |
//! | the guard held (still current)         | append (the transaction opens), one holder back |
//! | another guard, transaction open here   | append                                       |
//! | another guard (a marker voided it)     | INVALID_TXN_STATE                            |
//!
//! A guard lasts while appends hold it: each append handed it is one holder, back when it is
//! sent again with it (whether the log then takes it or not) or given back because its
//! verification failed ([`TxnGuards::give_back`]). Pipelined appends of one producer thus
//! land in the order of their requests: the Produce handler sends the verified ones again in
//! its connection's request order (`request_order.rs`), and no append overtakes them
//! meanwhile.
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
    by_producer: HashMap<ProducerId, Outstanding>,
    next: u64,
}

/// A producer's guard, and how many appends hold it (handed out, not yet back).
#[derive(Debug, Clone, Copy)]
struct Outstanding {
    guard: u64,
    holders: u32,
}

impl TxnGuards {
    /// Decides on a transactional append of `producer`; `open_here` says whether its
    /// transaction is already open in this partition.
    pub fn admit(&mut self, producer: ProducerId, open_here: bool, guard: Option<u64>) -> Admit {
        let outstanding = self.by_producer.get(&producer).copied();
        match (guard, outstanding) {
            (Some(g), Some(o)) if o.guard == g => {
                // Back whatever the log then says of it (an append refused as out of order
                // leaves the guard to the holders still to come).
                self.give_back(producer, g);
                Admit::Append
            }
            (Some(_), _) if open_here => Admit::Append,
            (Some(_), _) => Admit::Refuse,
            // Several appends in flight before the transaction opens here share one guard, as
            // Kafka's verification state entry is shared: a second guard would void the first,
            // and the first append back from its verification would be refused. While any
            // holds it, a later append is verified too, even once the transaction opened here:
            // appended now it would overtake the held ones (their Produce requests came
            // first), and be refused as out of order; verified, it is sent again behind them
            // (`request_order.rs`).
            (None, Some(o)) => {
                self.hold(producer, o);
                Admit::Verify(o.guard)
            }
            (None, None) if open_here => Admit::Append,
            (None, None) => {
                if self.by_producer.len() >= GUARDS_MAX {
                    self.by_producer.clear();
                }
                self.next += 1;
                let fresh = Outstanding {
                    guard: self.next,
                    holders: 0,
                };
                self.hold(producer, fresh);
                Admit::Verify(self.next)
            }
        }
    }

    /// One more append of `producer` holds `o`'s guard.
    fn hold(&mut self, producer: ProducerId, o: Outstanding) {
        let holders = o.holders.saturating_add(1);
        self.by_producer
            .insert(producer, Outstanding { holders, ..o });
    }

    /// An append that held `guard` of `producer` is back (sent again, or dropped because its
    /// verification failed); the last one back ends the guard. A guard voided or replaced
    /// meanwhile is left alone.
    pub fn give_back(&mut self, producer: ProducerId, guard: u64) {
        let Some(o) = self.by_producer.get_mut(&producer) else {
            return;
        };
        if o.guard != guard {
            return;
        }
        assert!(o.holders > 0, "an outstanding guard has holders");
        o.holders -= 1;
        if o.holders == 0 {
            self.by_producer.remove(&producer);
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

    /// franz-go's TestTxnEtl: once the first held append landed (the transaction is open
    /// here), a later request's append must not overtake the requests still holding the
    /// guard; it is verified too, and sent again behind them.
    #[test]
    fn a_later_append_is_verified_while_earlier_ones_hold_the_guard() {
        let mut g = TxnGuards::default();
        let Admit::Verify(guard) = g.admit(P, false, None) else {
            panic!()
        };
        assert_eq!(
            g.admit(P, false, None),
            Admit::Verify(guard),
            "second request"
        );
        assert_eq!(g.admit(P, false, Some(guard)), Admit::Append, "first lands");
        assert_eq!(
            g.admit(P, true, None),
            Admit::Verify(guard),
            "third waits behind the second"
        );
        assert_eq!(g.admit(P, true, Some(guard)), Admit::Append, "second lands");
        assert_eq!(g.admit(P, true, Some(guard)), Admit::Append, "third lands");
        assert_eq!(g.admit(P, true, None), Admit::Append, "none held: appended");
    }

    /// An append the log refuses (out of order) still gives its guard back, and leaves it to
    /// the holders still to come: the earlier request's append lands after it.
    #[test]
    fn a_refused_append_does_not_use_the_guard_up_for_the_others() {
        let mut g = TxnGuards::default();
        let Admit::Verify(guard) = g.admit(P, false, None) else {
            panic!()
        };
        assert_eq!(g.admit(P, false, None), Admit::Verify(guard));
        // The later one comes back first; the log refuses it and the transaction is not open.
        assert_eq!(g.admit(P, false, Some(guard)), Admit::Append);
        assert_eq!(
            g.admit(P, false, Some(guard)),
            Admit::Append,
            "the earlier one"
        );
        assert_eq!(
            g.admit(P, false, Some(guard)),
            Admit::Refuse,
            "no holder left"
        );
    }

    /// An append whose verification failed never comes back: given back, it holds nothing.
    #[test]
    fn a_failed_verification_gives_its_guard_back() {
        let mut g = TxnGuards::default();
        let Admit::Verify(guard) = g.admit(P, false, None) else {
            panic!()
        };
        g.give_back(P, guard + 1); // not its guard: ignored
        assert_eq!(g.admit(P, true, None), Admit::Verify(guard), "still held");
        g.give_back(P, guard);
        g.give_back(P, guard);
        assert_eq!(g.admit(P, true, None), Admit::Append);
        g.give_back(P, guard); // nothing held any more: ignored
    }
}
