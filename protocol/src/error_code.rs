//! Kafka error codes: [`ErrorCode`] is defined once, in `rill-types` (the engine answers in it
//! too), and re-exported here; what needs `kafka_protocol`'s table lives here.

pub use rill_types::error_code::{ErrorCode, UnknownErrorCode};

/// Whether a client may retry the request that produced `code` (Kafka's `RetriableException`).
pub fn is_retriable(code: ErrorCode) -> bool {
    kafka_protocol::ResponseError::try_from_code(code.code()).is_some_and(|e| e.is_retriable())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_matches_kafka_protocol_table() {
        for &code in &ErrorCode::ALL[1..] {
            let theirs = kafka_protocol::ResponseError::try_from_code(code.code());
            let theirs = theirs.expect("code known to kafka_protocol");
            assert_eq!(format!("{theirs:?}"), format!("{code:?}"));
        }
    }
}
