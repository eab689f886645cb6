//! The partitions a shard owns: opened lazily on first use, each served by its actor.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use futures::channel::{mpsc, oneshot};
use futures::SinkExt;
use rill_engine::io::{Clock, Storage};
use rill_engine::LogManager;

use super::actor::{run_actor, ActorMsg, ActorSetup, PartitionHandle};
use super::ops::{PartitionOp, PartitionReply};
use super::watch::PartitionWatch;
use crate::config::BrokerConfig;
use crate::topic_config::log_config;
use crate::topics::TopicRegistry;
use rill_protocol::ErrorCode;

/// The partition logs one shard owns, keyed by (topic, partition).
pub struct PartitionTable<S: Storage> {
    log_manager: Rc<LogManager<S>>,
    registry: Arc<TopicRegistry>,
    config: Arc<BrokerConfig>,
    clock: Rc<dyn Clock>,
    partitions: RefCell<HashMap<(String, i32), Rc<PartitionHandle>>>,
    actors: RefCell<Vec<glommio::task::JoinHandle<()>>>,
    /// Set by `close_all`: a late request must not reopen a log during shutdown.
    closed: std::cell::Cell<bool>,
}

impl<S: Storage + 'static> PartitionTable<S> {
    /// An empty table; partitions open on first use.
    pub fn new(
        log_manager: Rc<LogManager<S>>,
        registry: Arc<TopicRegistry>,
        config: Arc<BrokerConfig>,
        clock: Rc<dyn Clock>,
    ) -> Self {
        Self {
            log_manager,
            registry,
            config,
            clock,
            partitions: RefCell::new(HashMap::new()),
            actors: RefCell::new(Vec::new()),
            closed: std::cell::Cell::new(false),
        }
    }

    /// The running actor of a partition, starting it if the partition exists but is not open.
    fn handle(&self, topic: &str, partition: i32) -> Result<Rc<PartitionHandle>, ErrorCode> {
        if self.closed.get() {
            return Err(ErrorCode::KafkaStorageError);
        }
        let key = (topic.to_string(), partition);
        if let Some(handle) = self.partitions.borrow().get(&key) {
            if !handle.stopped.get() {
                return Ok(handle.clone());
            }
        }
        let meta = self
            .registry
            .get(topic)
            .ok_or(ErrorCode::UnknownTopicOrPartition)?;
        if partition < 0 || partition >= meta.partitions {
            return Err(ErrorCode::UnknownTopicOrPartition);
        }
        let config = log_config(&self.config.log, &meta.configs).map_err(|e| {
            tracing::error!(topic, error = %e, "stored topic config is invalid");
            ErrorCode::InvalidConfig
        })?;
        let (mailbox, receiver) = mpsc::channel(self.config.partition_queue_max);
        let handle = Rc::new(PartitionHandle {
            mailbox,
            watch: Rc::new(PartitionWatch::default()),
            stopped: Rc::new(std::cell::Cell::new(false)),
        });
        let setup = ActorSetup {
            log_manager: self.log_manager.clone(),
            topic: topic.to_string(),
            partition,
            config,
            clock: self.clock.clone(),
            retention_check_interval_ms: self.config.log.retention_check_interval_ms,
        };
        let task = run_actor(
            setup,
            receiver,
            handle.watch.clone(),
            handle.stopped.clone(),
        );
        let join = glommio::spawn_local(task).detach();
        self.actors.borrow_mut().push(join);
        self.partitions.borrow_mut().insert(key, handle.clone());
        Ok(handle)
    }

    /// Run `op` on a partition this shard owns.
    pub async fn call(&self, topic: &str, partition: i32, op: PartitionOp) -> PartitionReply {
        match op {
            PartitionOp::WaitForData { from, wait_ms } => {
                let handle = match self.handle(topic, partition) {
                    Ok(handle) => handle,
                    Err(code) => return PartitionReply::Error(code),
                };
                let wait = Duration::from_millis(wait_ms);
                handle
                    .watch
                    .wait_for_data(from, glommio::timer::sleep, wait)
                    .await;
                PartitionReply::Waited
            }
            PartitionOp::Delete => self.delete(topic, partition).await,
            op => match self.handle(topic, partition) {
                Ok(handle) => send(&handle, op).await,
                Err(code) => PartitionReply::Error(code),
            },
        }
    }

    async fn delete(&self, topic: &str, partition: i32) -> PartitionReply {
        let key = (topic.to_string(), partition);
        let open = self.partitions.borrow_mut().remove(&key);
        match open {
            Some(handle) if !handle.stopped.get() => send(&handle, PartitionOp::Delete).await,
            _ => match self.log_manager.delete_partition(topic, partition).await {
                Ok(()) => PartitionReply::Deleted,
                Err(e) => {
                    tracing::error!(topic, partition, error = %e, "deleting partition failed");
                    PartitionReply::Error(ErrorCode::KafkaStorageError)
                }
            },
        }
    }

    /// Open every partition this shard owns (recovery runs now, not on the first request).
    pub fn open_owned(&self, owns: impl Fn(&str, i32) -> bool) {
        for (topic, meta) in self.registry.list() {
            for partition in 0..meta.partitions {
                if owns(&topic, partition) {
                    let _ = self.handle(&topic, partition);
                }
            }
        }
    }

    /// Close every log cleanly (shutdown): close the mailboxes, then wait for each actor to
    /// finish its queued work, flush and close.
    pub async fn close_all(&self) {
        self.closed.set(true);
        let handles: Vec<_> = self.partitions.borrow_mut().drain().collect();
        for (_, handle) in handles {
            handle.mailbox.clone().close_channel();
        }
        let actors: Vec<_> = self.actors.borrow_mut().drain(..).collect();
        futures::future::join_all(actors).await;
    }
}

async fn send(handle: &PartitionHandle, op: PartitionOp) -> PartitionReply {
    let (reply, answer) = oneshot::channel();
    let mut mailbox = handle.mailbox.clone();
    if mailbox.send(ActorMsg { op, reply }).await.is_err() {
        return PartitionReply::Error(ErrorCode::KafkaStorageError);
    }
    answer
        .await
        .unwrap_or(PartitionReply::Error(ErrorCode::UnknownTopicOrPartition))
}
