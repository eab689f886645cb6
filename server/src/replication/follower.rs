//! [`fetch_position`]: the offset a follower tells its leader it holds (its next Fetch's
//! `fetch_offset`). The leader counts it toward the high watermark and answers acks=all on it,
//! so it must be what this replica has made durable, not merely appended. Pure logic, no I/O.

use rill_protocol::ErrorCode;
use rill_types::Offset;

/// What the follower's log says of itself when its fetcher asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogPosition {
    /// The offset after its last appended batch.
    pub log_end: Offset,
    /// Every offset below this survives a crash (fdatasync'ed).
    pub durable: Offset,
    /// A write or an fdatasync failed: what the log holds past `durable` may never reach the
    /// disk (fsyncgate), and the log takes no more appends.
    pub failed: bool,
}

/// The offset to fetch from, or the error that keeps this replica from fetching.
///
/// - A failed log fetches nothing (KAFKA_STORAGE_ERROR): its tail may be lost, so reporting
///   it would let the leader count bytes no disk holds. The leader shrinks it out of the ISR
///   once it stops fetching, as Kafka's leader does a replica whose log directory went offline.
/// - Under the default flush policy (an fdatasync per append, `every_append`) the follower
///   reports its durable offset: acks=all is answered only once every ISR member's disk holds
///   the batch. Its replica appends flush before it fetches again, so the two are equal unless
///   a flush is outstanding.
/// - Under a flush policy the operator relaxed (`flush.messages` / `flush.ms`), it reports its
///   log end, as the leader then counts its own (and Kafka's followers always do).
pub fn fetch_position(log: LogPosition, every_append: bool) -> Result<Offset, ErrorCode> {
    assert!(
        log.durable <= log.log_end,
        "a log makes durable only what it holds: durable {} > log end {}",
        log.durable.0,
        log.log_end.0
    );
    if log.failed {
        return Err(ErrorCode::KafkaStorageError);
    }
    Ok(if every_append {
        log.durable
    } else {
        log.log_end
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(log_end: i64, durable: i64, failed: bool) -> LogPosition {
        LogPosition {
            log_end: Offset(log_end),
            durable: Offset(durable),
            failed,
        }
    }

    #[test]
    fn an_empty_log_fetches_from_its_start() {
        assert_eq!(fetch_position(at(0, 0, false), true), Ok(Offset(0)));
        assert_eq!(fetch_position(at(0, 0, false), false), Ok(Offset(0)));
    }

    #[test]
    fn under_every_append_flushing_only_durable_records_count() {
        assert_eq!(fetch_position(at(10, 10, false), true), Ok(Offset(10)));
        assert_eq!(
            fetch_position(at(10, 9, false), true),
            Ok(Offset(9)),
            "one record appended and not yet flushed is not reported"
        );
    }

    #[test]
    fn a_relaxed_flush_policy_reports_the_log_end() {
        assert_eq!(fetch_position(at(10, 4, false), false), Ok(Offset(10)));
    }

    #[test]
    fn a_failed_log_reports_nothing_whatever_it_holds() {
        for every_append in [true, false] {
            for (end, durable) in [(0, 0), (10, 10), (10, 3)] {
                assert_eq!(
                    fetch_position(at(end, durable, true), every_append),
                    Err(ErrorCode::KafkaStorageError)
                );
            }
        }
    }

    #[test]
    #[should_panic(expected = "a log makes durable only what it holds")]
    fn durable_past_the_log_end_is_a_broken_log() {
        let _ = fetch_position(at(5, 6, false), true);
    }
}
