//! The first step shared by the offset-commit handlers (OffsetCommit, TxnOffsetCommit): each
//! request partition is refused here when its topic or partition is unknown, or sent on to a
//! coordinator; the answer gives each partition its code in request order.

use rill_protocol::ErrorCode;

use crate::topics::TopicMeta;

/// Per request partition, in request order: refused here, or sent on (one item each).
#[derive(Debug)]
pub struct PartitionVerdicts<T> {
    refused: Vec<Option<ErrorCode>>,
    /// What goes to the coordinator, one per partition not refused, in request order.
    pub sent: Vec<T>,
}

impl<T> Default for PartitionVerdicts<T> {
    fn default() -> Self {
        Self {
            refused: Vec::new(),
            sent: Vec::new(),
        }
    }
}

impl<T> PartitionVerdicts<T> {
    /// Judge the next request partition: unknown (no such topic, or `partition` outside it) is
    /// refused with UNKNOWN_TOPIC_OR_PARTITION; otherwise `item()` is sent on.
    pub fn judge(&mut self, topic: Option<&TopicMeta>, partition: i32, item: impl FnOnce() -> T) {
        let known = topic.is_some_and(|m| (0..m.partitions).contains(&partition));
        if known {
            self.refused.push(None);
            self.sent.push(item());
        } else {
            self.refused.push(Some(ErrorCode::UnknownTopicOrPartition));
        }
    }

    /// Take the items to send, leaving the verdicts to merge with their answers.
    pub fn take_sent(&mut self) -> Vec<T> {
        std::mem::take(&mut self.sent)
    }

    /// Every partition's code in request order: its refusal, else the next of `answers` (one
    /// per sent item; a missing answer is a coordinator bug, reported as UNKNOWN_SERVER_ERROR).
    pub fn codes(self, answers: Vec<ErrorCode>) -> impl Iterator<Item = ErrorCode> {
        let mut answers = answers.into_iter();
        self.refused.into_iter().map(move |refused| {
            refused.unwrap_or_else(|| answers.next().unwrap_or(ErrorCode::UnknownServerError))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic(partitions: i32) -> TopicMeta {
        TopicMeta {
            id: Default::default(),
            partitions,
            configs: Default::default(),
        }
    }

    #[test]
    fn refusals_and_answers_keep_request_order() {
        let t = topic(2);
        let mut v = PartitionVerdicts::default();
        v.judge(Some(&t), 0, || "a");
        v.judge(Some(&t), 2, || "never");
        v.judge(None, 0, || "never");
        v.judge(Some(&t), -1, || "never");
        v.judge(Some(&t), 1, || "b");
        assert_eq!(v.take_sent(), vec!["a", "b"]);
        let codes: Vec<_> = v
            .codes(vec![ErrorCode::None, ErrorCode::IllegalGeneration])
            .collect();
        let unknown = ErrorCode::UnknownTopicOrPartition;
        assert_eq!(
            codes,
            vec![
                ErrorCode::None,
                unknown,
                unknown,
                unknown,
                ErrorCode::IllegalGeneration
            ]
        );
    }

    #[test]
    fn a_missing_answer_is_an_error_not_success() {
        let t = topic(1);
        let mut v = PartitionVerdicts::default();
        v.judge(Some(&t), 0, || ());
        v.take_sent();
        assert_eq!(
            v.codes(Vec::new()).collect::<Vec<_>>(),
            vec![ErrorCode::UnknownServerError]
        );
    }
}
