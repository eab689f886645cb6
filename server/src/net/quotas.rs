//! Connection quotas, process-wide, as Kafka's `ConnectionQuotas` applies them:
//!
//! | limit                      | when reached                                                 |
//! |----------------------------|--------------------------------------------------------------|
//! | `max.connections`          | the accept loop holds the connection it just accepted and accepts no other until one closes (Kafka's acceptor blocks); the kernel's backlog queues the rest |
//! | `max.connections.per.ip` (`…overrides`) | the new connection is closed at once; the others of that address go on |
//!
//! Every shard accepts on the same port (SO_REUSEPORT), so the counts are shared by all of them
//! behind one mutex, taken once per accepted and once per closed connection, never per request.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

/// The connection limits and the connections open now.
#[derive(Debug)]
pub struct ConnectionQuotas {
    limits: QuotaLimits,
    open: Mutex<OpenCounts>,
}

/// The limits, resolved from the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaLimits {
    /// `max.connections`: open connections over every shard.
    pub max: usize,
    /// `max.connections.per.ip`: open connections from one address.
    pub per_ip: usize,
    /// `max.connections.per.ip.overrides`: addresses with their own limit.
    pub per_ip_overrides: HashMap<IpAddr, usize>,
}

#[derive(Debug, Default)]
struct OpenCounts {
    total: usize,
    by_ip: HashMap<IpAddr, usize>,
}

/// What [`ConnectionQuotas::admit`] decided for a new connection.
#[derive(Debug)]
pub enum Admission {
    /// Serve it; the slot is given back when dropped.
    Admitted(ConnectionSlot),
    /// `max.connections` is reached: try again once a connection closed.
    BrokerFull,
    /// Its address has `limit` connections already: close it.
    AddressFull { limit: usize },
}

/// One admitted connection's place in the counts.
#[derive(Debug)]
pub struct ConnectionSlot {
    quotas: Arc<ConnectionQuotas>,
    ip: IpAddr,
}

impl ConnectionQuotas {
    /// Quotas with nothing open yet.
    pub fn new(limits: QuotaLimits) -> Arc<Self> {
        Arc::new(ConnectionQuotas {
            limits,
            open: Mutex::new(OpenCounts::default()),
        })
    }

    /// The limit of connections from `ip`.
    pub fn limit_for(&self, ip: IpAddr) -> usize {
        let ip = canonical(ip);
        *self
            .limits
            .per_ip_overrides
            .get(&ip)
            .unwrap_or(&self.limits.per_ip)
    }

    /// Counts a new connection from `ip` if both limits allow it (the broker-wide one first,
    /// as Kafka checks it).
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Admission {
        let ip = canonical(ip);
        let limit = self.limit_for(ip);
        let mut open = self.open.lock().expect("not poisoned");
        if open.total >= self.limits.max {
            return Admission::BrokerFull;
        }
        let from_ip = open.by_ip.entry(ip).or_default();
        if *from_ip >= limit {
            if *from_ip == 0 {
                open.by_ip.remove(&ip);
            }
            return Admission::AddressFull { limit };
        }
        *from_ip += 1;
        open.total += 1;
        Admission::Admitted(ConnectionSlot {
            quotas: self.clone(),
            ip,
        })
    }

    /// Whether `max.connections` is reached now (an accept loop waits before accepting more).
    pub fn broker_full(&self) -> bool {
        self.open.lock().expect("not poisoned").total >= self.limits.max
    }

    /// Connections open now, over every shard.
    pub fn open(&self) -> usize {
        self.open.lock().expect("not poisoned").total
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let mut open = self.quotas.open.lock().expect("not poisoned");
        assert!(open.total > 0, "a slot was counted");
        open.total -= 1;
        let from_ip = open
            .by_ip
            .get_mut(&self.ip)
            .expect("a slot's address is counted");
        *from_ip -= 1;
        if *from_ip == 0 {
            open.by_ip.remove(&self.ip);
        }
    }
}

/// An IPv4 address seen through an IPv6 socket counts as the IPv4 address.
fn canonical(ip: IpAddr) -> IpAddr {
    ip.to_canonical()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quotas(max: usize, per_ip: usize, overrides: &[(&str, usize)]) -> Arc<ConnectionQuotas> {
        ConnectionQuotas::new(QuotaLimits {
            max,
            per_ip,
            per_ip_overrides: overrides
                .iter()
                .map(|(ip, n)| (ip.parse().unwrap(), *n))
                .collect(),
        })
    }

    #[test]
    fn the_broker_limit_waits_and_the_address_limit_refuses() {
        let q = quotas(3, 2, &[("10.0.0.9", 0)]);
        let a: IpAddr = "127.0.0.1".parse().unwrap();
        let b: IpAddr = "::ffff:10.0.0.2".parse().unwrap();
        let one = q.admit(a);
        let two = q.admit(a);
        assert!(matches!(one, Admission::Admitted(_)) && matches!(two, Admission::Admitted(_)));
        assert!(matches!(q.admit(a), Admission::AddressFull { limit: 2 }));
        assert!(matches!(
            q.admit("10.0.0.9".parse().unwrap()),
            Admission::AddressFull { limit: 0 }
        ));
        let three = q.admit(b);
        assert!(matches!(three, Admission::Admitted(_)));
        assert!(q.broker_full());
        assert!(matches!(q.admit(b), Admission::BrokerFull));
        assert_eq!(q.open(), 3);
        drop(one);
        assert!(!q.broker_full());
        assert!(
            matches!(q.admit(a), Admission::Admitted(_)),
            "a slot came back"
        );
        drop((two, three));
        assert_eq!(q.open(), 0);
        assert!(
            q.open.lock().unwrap().by_ip.is_empty(),
            "no address left counted"
        );
        assert_eq!(q.limit_for("::ffff:10.0.0.9".parse().unwrap()), 0);
    }
}
