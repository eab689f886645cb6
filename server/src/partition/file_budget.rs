//! A shard's open partition files, kept within its budget (`rill.shard.open.files.max`, by
//! default a share of RLIMIT_NOFILE: see `open_files`).
//!
//! Each partition actor publishes how many files its log holds open ([`FileShare`]); the
//! shard's total lives in [`FileBudget`]. When the total passes the budget, the table's keeper
//! task asks the least recently used partitions to release (flush, close their files, trim
//! their preallocation: `PartitionLog::release_idle_memory`) until the total is back under
//! three quarters of the budget, so a burst over it does not cost one release per new file.
//! A released partition reopens its file on its next request.

use std::cell::Cell;
use std::rc::Rc;

use crate::channel::local::mpsc;

/// The open partition files of one shard and their bound.
#[derive(Debug)]
pub struct FileBudget {
    max: usize,
    open: Cell<usize>,
    /// Wakes the keeper when the total passes `max` (one signal until it re-arms).
    keeper: mpsc::UnboundedSender<()>,
    signalled: Cell<bool>,
}

impl FileBudget {
    /// A budget of `max` files and the receiver the keeper task waits on.
    pub fn new(max: usize) -> (Rc<Self>, mpsc::UnboundedReceiver<()>) {
        let (keeper, wake) = mpsc::unbounded();
        let budget = FileBudget {
            max,
            open: Cell::new(0),
            keeper,
            signalled: Cell::new(false),
        };
        (Rc::new(budget), wake)
    }

    /// The bound.
    pub fn max(&self) -> usize {
        self.max
    }

    /// Files the shard's partitions hold open now.
    pub fn open(&self) -> usize {
        self.open.get()
    }

    /// Whether the shard holds more files than its budget.
    pub fn over(&self) -> bool {
        self.open.get() > self.max
    }

    /// Where releases stop: a quarter under the budget.
    pub fn target(&self) -> usize {
        self.max - self.max / 4
    }

    /// A partition went from `before` to `after` open files.
    fn adjust(&self, before: usize, after: usize) {
        let open = (self.open.get() + after)
            .checked_sub(before)
            .expect("a partition releases only files it counted");
        self.open.set(open);
        if open > self.max && !self.signalled.replace(true) {
            let _ = self.keeper.unbounded_send(());
        }
    }

    /// The keeper is done with a round: the next time the total passes the budget wakes it.
    pub fn rearm(&self) {
        self.signalled.set(false);
    }
}

/// One partition's part of the shard's budget: what it holds, published by its actor.
#[derive(Debug)]
pub struct FileShare {
    budget: Rc<FileBudget>,
    held: Rc<Cell<usize>>,
}

impl FileShare {
    /// A share of `budget` reporting through `held` (the table reads it to pick what to release).
    pub fn new(budget: Rc<FileBudget>, held: Rc<Cell<usize>>) -> Self {
        FileShare { budget, held }
    }

    /// The partition now holds `files` open files.
    pub fn publish(&self, files: usize) {
        let before = self.held.replace(files);
        self.budget.adjust(before, files);
    }
}

impl Drop for FileShare {
    fn drop(&mut self) {
        self.publish(0);
    }
}

/// How many of the partitions holding `files` (least recently used first) to release so that
/// `open` files drop to `target`.
pub fn releases_needed(
    files: impl IntoIterator<Item = usize>,
    open: usize,
    target: usize,
) -> usize {
    let mut remaining = open;
    let mut count = 0;
    for held in files {
        if remaining <= target {
            break;
        }
        remaining = remaining.saturating_sub(held);
        count += 1;
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up_and_passing_the_budget_wakes_the_keeper_once() {
        let (budget, mut wake) = FileBudget::new(2);
        let held: Vec<_> = (0..4).map(|_| Rc::new(Cell::new(0))).collect();
        let shares: Vec<_> = held
            .iter()
            .map(|h| FileShare::new(budget.clone(), h.clone()))
            .collect();
        shares[0].publish(1);
        shares[1].publish(1);
        assert!(!budget.over());
        assert!(wake.try_recv().is_err());
        shares[2].publish(1);
        shares[3].publish(2);
        assert_eq!(budget.open(), 5);
        assert!(wake.try_recv().is_ok());
        assert!(wake.try_recv().is_err(), "one signal per round");
        budget.rearm();
        shares[3].publish(3);
        assert!(wake.try_recv().is_ok());
        drop(shares);
        assert_eq!(budget.open(), 0, "a stopped actor holds nothing");
        assert!(held.iter().all(|h| h.get() == 0));
    }

    #[test]
    fn releases_stop_at_the_target() {
        let oldest_first = [1, 3, 1, 1];
        assert_eq!(releases_needed(oldest_first, 6, 2), 2);
        assert_eq!(releases_needed(oldest_first, 2, 2), 0);
        assert_eq!(
            releases_needed(oldest_first, 100, 0),
            4,
            "all of them, no more"
        );
    }
}
