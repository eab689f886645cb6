//! Where a new partition's replicas go: Kafka's rack-unaware round-robin
//! (`assignReplicasToBrokersRackUnaware`), so that leaders (first replicas) spread over the
//! brokers and each broker's followers spread too.
//!
//! With brokers `b0..b(n-1)`, a start index `s` and a shift `k`:
//!
//! ```text
//! first replica of partition p:  b[(p + s) % n]
//! replica j+1 of partition p:    b[(first + 1 + (k' + j) % (n - 1)) % n]
//!                                where k' = k + p / n (the shift grows every n partitions)
//! ```
//!
//! Six partitions over three brokers with s = 0, k = 0 lead on b0 b1 b2 b0 b1 b2.

use crate::types::NodeId;

/// Why replicas cannot be placed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlacementError {
    /// INVALID_REPLICATION_FACTOR: more replicas than live brokers, or fewer than one.
    #[error("replication factor {factor} with {brokers} live brokers")]
    ReplicationFactor {
        /// Requested replicas per partition.
        factor: usize,
        /// Live brokers to place on.
        brokers: usize,
    },
}

/// Replica lists for partitions `first_partition..first_partition + count`.
///
/// `brokers` are the live brokers (any order; sorted here so every controller decides alike);
/// `start` and `shift` are Kafka's random start index and replica shift (callers draw them).
pub fn assign(
    brokers: &[NodeId],
    first_partition: usize,
    count: usize,
    replication_factor: usize,
    (start, shift): (usize, usize),
) -> Result<Vec<Vec<NodeId>>, PlacementError> {
    let n = brokers.len();
    if replication_factor < 1 || replication_factor > n {
        return Err(PlacementError::ReplicationFactor {
            factor: replication_factor,
            brokers: n,
        });
    }
    let mut sorted = brokers.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), n, "live brokers are distinct");
    let start = start % n;
    let assignments = (first_partition..first_partition + count)
        .map(|p| {
            let first = (p + start) % n;
            let shift = shift + p / n;
            let mut replicas = Vec::with_capacity(replication_factor);
            replicas.push(sorted[first]);
            for j in 0..replication_factor - 1 {
                let index = (first + 1 + (shift + j) % (n - 1)) % n;
                replicas.push(sorted[index]);
            }
            debug_assert!(distinct(&replicas));
            replicas
        })
        .collect();
    Ok(assignments)
}

fn distinct(ids: &[NodeId]) -> bool {
    ids.iter()
        .enumerate()
        .all(|(i, a)| ids[i + 1..].iter().all(|b| a != b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(ids: &[i32]) -> Vec<NodeId> {
        ids.iter().copied().map(NodeId).collect()
    }

    #[test]
    fn six_partitions_three_replicas_lead_on_every_broker() {
        let replicas = assign(&nodes(&[3, 1, 2]), 0, 6, 3, (0, 0)).unwrap();
        let leaders: Vec<i32> = replicas.iter().map(|r| r[0].0).collect();
        assert_eq!(leaders, vec![1, 2, 3, 1, 2, 3]);
        for r in &replicas {
            assert_eq!(r.len(), 3);
            assert!(distinct(r));
        }
        // The shift moves followers after each round, as Kafka's does.
        assert_ne!(replicas[0][1], replicas[3][1]);
    }

    #[test]
    fn every_start_and_shift_gives_distinct_replicas_and_balanced_leaders() {
        let brokers = nodes(&[0, 1, 2, 3, 4]);
        for start in 0..5 {
            for shift in 0..5 {
                for rf in 1..=5 {
                    let replicas = assign(&brokers, 0, 10, rf, (start, shift)).unwrap();
                    let mut leaders = [0; 5];
                    for r in &replicas {
                        assert_eq!(r.len(), rf);
                        assert!(distinct(r), "{r:?}");
                        leaders[r[0].0 as usize] += 1;
                    }
                    assert_eq!(leaders, [2; 5]);
                }
            }
        }
    }

    #[test]
    fn added_partitions_continue_the_rotation() {
        let brokers = nodes(&[1, 2, 3]);
        let all = assign(&brokers, 0, 6, 2, (1, 0)).unwrap();
        let tail = assign(&brokers, 4, 2, 2, (1, 0)).unwrap();
        assert_eq!(&all[4..], &tail[..]);
    }

    #[test]
    fn refuses_impossible_factors() {
        let err = assign(&nodes(&[1, 2]), 0, 1, 3, (0, 0)).unwrap_err();
        assert_eq!(
            err,
            PlacementError::ReplicationFactor {
                factor: 3,
                brokers: 2
            }
        );
        assert!(assign(&nodes(&[1]), 0, 1, 0, (0, 0)).is_err());
        assert!(assign(&[], 0, 1, 1, (0, 0)).is_err());
    }
}
