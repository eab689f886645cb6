//! The broker's in-process channels, in two kinds that keep a glommio task's waker on its own
//! thread.
//!
//! glommio 0.9 turns a waker woken or dropped on a foreign thread into a double free (it is
//! what `crate::shard::router` works around). `futures::channel`'s ends are `Send`, so nothing
//! stops one from crossing a thread with a waker in it; clippy's `disallowed-types`
//! (clippy.toml) bans them everywhere but here, where each is wrapped as one of:
//!
//! | kind       | ends   | how the receiver waits               | for                                  |
//! |------------|--------|--------------------------------------|--------------------------------------|
//! | [`local`]  | !Send  | awaits (registers its task's waker)  | replies and mailboxes within a shard |
//! | [`polled`] | Send   | `try_recv` only: no waker, ever      | answers from another thread (agent)  |
//!
//! The wrappers add nothing at run time: each holds the `futures` end, reached through `Deref`
//! for every method that borrows it (`try_recv`, `close`, `StreamExt::next`, `SinkExt::send`).
#![allow(clippy::disallowed_types, clippy::disallowed_methods)] // the one place they are named

/// Channels whose ends cannot leave the thread that made them.
pub mod local {
    use std::marker::PhantomData;
    use std::rc::Rc;

    /// Makes a type `!Send` and `!Sync` at no cost.
    type ThreadBound = PhantomData<Rc<()>>;

    /// Defines a `!Send` wrapper of a `futures` channel end, reaching it through `Deref`.
    macro_rules! bound_end {
        ($(#[$doc:meta])* $name:ident, $inner:ty) => {
            $(#[$doc])*
            pub struct $name<T>(pub(super) $inner, pub(super) super::ThreadBound);

            impl<T> std::ops::Deref for $name<T> {
                type Target = $inner;
                fn deref(&self) -> &Self::Target {
                    &self.0
                }
            }

            impl<T> std::ops::DerefMut for $name<T> {
                fn deref_mut(&mut self) -> &mut Self::Target {
                    &mut self.0
                }
            }

            impl<T> std::fmt::Debug for $name<T> {
                fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str(stringify!($name))
                }
            }
        };
    }

    /// A one-shot reply within a shard.
    pub mod oneshot {
        use std::future::Future;
        use std::pin::Pin;
        use std::task::{Context, Poll};

        pub use futures::channel::oneshot::Canceled;

        bound_end!(
            /// The end that answers once.
            Sender,
            futures::channel::oneshot::Sender<T>
        );
        bound_end!(
            /// The end that awaits the answer (`Err(Canceled)` if the sender was dropped).
            Receiver,
            futures::channel::oneshot::Receiver<T>
        );

        /// A new one-shot channel.
        pub fn channel<T>() -> (Sender<T>, Receiver<T>) {
            let (tx, rx) = futures::channel::oneshot::channel();
            (
                Sender(tx, Default::default()),
                Receiver(rx, Default::default()),
            )
        }

        impl<T> Sender<T> {
            /// Answers; `Err(value)` if the receiver is gone.
            pub fn send(self, value: T) -> Result<(), T> {
                self.0.send(value)
            }
        }

        impl<T> Future for Receiver<T> {
            type Output = Result<T, Canceled>;
            fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
                Pin::new(&mut self.0).poll(cx)
            }
        }
    }

    /// A queue within a shard (a partition's mailbox, a cleaner's events).
    pub mod mpsc {
        bound_end!(
            /// The sending end of a bounded queue.
            Sender,
            futures::channel::mpsc::Sender<T>
        );
        bound_end!(
            /// The receiving end of a bounded queue.
            Receiver,
            futures::channel::mpsc::Receiver<T>
        );
        bound_end!(
            /// The sending end of an unbounded queue.
            UnboundedSender,
            futures::channel::mpsc::UnboundedSender<T>
        );
        bound_end!(
            /// The receiving end of an unbounded queue.
            UnboundedReceiver,
            futures::channel::mpsc::UnboundedReceiver<T>
        );

        /// A queue of `buffer` messages (plus one per sender, as `futures` counts).
        pub fn channel<T>(buffer: usize) -> (Sender<T>, Receiver<T>) {
            let (tx, rx) = futures::channel::mpsc::channel(buffer);
            (
                Sender(tx, Default::default()),
                Receiver(rx, Default::default()),
            )
        }

        /// A queue without a bound (its senders bound what they send).
        pub fn unbounded<T>() -> (UnboundedSender<T>, UnboundedReceiver<T>) {
            let (tx, rx) = futures::channel::mpsc::unbounded();
            (
                UnboundedSender(tx, Default::default()),
                UnboundedReceiver(rx, Default::default()),
            )
        }

        impl<T> Clone for Sender<T> {
            fn clone(&self) -> Self {
                Sender(self.0.clone(), Default::default())
            }
        }

        impl<T> Clone for UnboundedSender<T> {
            fn clone(&self) -> Self {
                UnboundedSender(self.0.clone(), Default::default())
            }
        }
    }
}

/// A one-shot answer from another thread, which the receiver polls for: it has no `Future`, so
/// no waker of a shard's task ever reaches the thread that answers.
pub mod polled {
    /// The one-shot kind.
    pub mod oneshot {
        pub use futures::channel::oneshot::Canceled;

        /// The end that answers once, from any thread.
        pub struct Sender<T>(futures::channel::oneshot::Sender<T>);

        /// The end that polls for the answer.
        pub struct Receiver<T>(futures::channel::oneshot::Receiver<T>);

        /// A new one-shot channel.
        pub fn channel<T>() -> (Sender<T>, Receiver<T>) {
            let (tx, rx) = futures::channel::oneshot::channel();
            (Sender(tx), Receiver(rx))
        }

        impl<T> Sender<T> {
            /// Answers; `Err(value)` if the receiver is gone.
            pub fn send(self, value: T) -> Result<(), T> {
                self.0.send(value)
            }
        }

        impl<T> Receiver<T> {
            /// The answer if it came (`Ok(None)`: not yet; `Err`: the sender was dropped).
            pub fn try_recv(&mut self) -> Result<Option<T>, Canceled> {
                self.0.try_recv()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::executor::block_on;
    use futures::{SinkExt, StreamExt};

    #[test]
    fn a_local_oneshot_answers_and_reports_a_dropped_sender() {
        let (tx, rx) = local::oneshot::channel();
        tx.send(7).unwrap();
        assert_eq!(block_on(rx), Ok(7));
        let (tx, rx) = local::oneshot::channel::<u8>();
        assert!(!tx.is_canceled());
        drop(tx);
        assert_eq!(block_on(rx), Err(local::oneshot::Canceled));
    }

    #[test]
    fn a_local_queue_keeps_order_through_its_clones() {
        let (mut tx, mut rx) = local::mpsc::channel(4);
        let mut other = tx.clone();
        block_on(tx.send(1)).unwrap();
        other.try_send(2).unwrap();
        drop((tx, other));
        assert_eq!(block_on(rx.next()), Some(1));
        assert_eq!(rx.try_recv().ok(), Some(2));
        assert_eq!(block_on(rx.next()), None, "every sender is gone");
    }

    #[test]
    fn a_polled_oneshot_crosses_threads_and_is_read_by_polling() {
        let (tx, mut rx) = polled::oneshot::channel();
        assert_eq!(rx.try_recv(), Ok(None));
        std::thread::spawn(move || tx.send("answer").unwrap())
            .join()
            .unwrap();
        assert_eq!(rx.try_recv(), Ok(Some("answer")));
    }
}
