//! Segment file names: the base offset in 20 zero-padded digits plus an extension, as Kafka names them.

use crate::types::Offset;

/// The kinds of file a segment has.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum FileKind {
    /// `.log`: the record batches.
    Log,
    /// `.index`: sparse offset index.
    Index,
    /// `.timeindex`: sparse time index.
    TimeIndex,
    /// `.txnindex`: aborted transactions whose ABORT marker is in the segment.
    TxnIndex,
}

impl FileKind {
    /// Every kind, `.log` first (the order files of a segment are removed in).
    pub const ALL: [FileKind; 4] = [
        FileKind::Log,
        FileKind::Index,
        FileKind::TimeIndex,
        FileKind::TxnIndex,
    ];

    /// The file extension without the dot.
    pub fn extension(self) -> &'static str {
        match self {
            FileKind::Log => "log",
            FileKind::Index => "index",
            FileKind::TimeIndex => "timeindex",
            FileKind::TxnIndex => "txnindex",
        }
    }
}

/// `00000000000000001234.log` for base 1234.
pub fn segment_file_name(base: Offset, kind: FileKind) -> String {
    assert!(base.0 >= 0);
    format!("{:020}.{}", base.0, kind.extension())
}

/// Parses a segment file name back into its base offset and kind.
pub fn parse_segment_file_name(name: &str) -> Option<(Offset, FileKind)> {
    let (digits, ext) = name.split_once('.')?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let kind = FileKind::ALL.into_iter().find(|k| k.extension() == ext)?;
    let base: i64 = digits.parse().ok()?;
    Some((Offset(base), kind))
}

/// Base offsets of the `.log` files among `names` (a directory listing), in order.
pub fn log_bases(names: &[String]) -> Vec<Offset> {
    let mut bases: Vec<Offset> = names
        .iter()
        .filter_map(|n| parse_segment_file_name(n))
        .filter(|(_, k)| *k == FileKind::Log)
        .map(|(b, _)| b)
        .collect();
    bases.sort_unstable();
    bases
}

/// Whether recovery deletes `name` on open: a `.tmp` an interrupted replacement left, or a
/// segment file whose `.log` is not among `bases` (sorted, from [`log_bases`]).
pub(crate) fn is_leftover(name: &str, bases: &[Offset]) -> bool {
    let orphan =
        parse_segment_file_name(name).is_some_and(|(b, _)| bases.binary_search(&b).is_err());
    name.ends_with(crate::small_file::TMP_SUFFIX) || orphan
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        let name = segment_file_name(Offset(1234), FileKind::TimeIndex);
        assert_eq!(name, "00000000000000001234.timeindex");
        assert_eq!(
            parse_segment_file_name(&name),
            Some((Offset(1234), FileKind::TimeIndex))
        );
        assert_eq!(
            parse_segment_file_name("00000000000000001234.log.deleted"),
            None
        );
        assert_eq!(parse_segment_file_name("1234.log"), None);
        assert_eq!(
            parse_segment_file_name("00000000000000000007.txnindex"),
            Some((Offset(7), FileKind::TxnIndex))
        );
        assert_eq!(parse_segment_file_name("producer.snapshot"), None);
        let max = segment_file_name(Offset(i64::MAX), FileKind::Log);
        assert_eq!(
            parse_segment_file_name(&max),
            Some((Offset(i64::MAX), FileKind::Log))
        );
    }
}
