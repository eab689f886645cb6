//! [`CleanedWriter`]: writes one cleaned segment, `<base>.log.cleaned`, with its indexes
//! `<base>.index.cleaned`, `<base>.timeindex.cleaned` and, if it has aborted transactions,
//! `<base>.txnindex.cleaned`, all durable when
//! [`CleanedWriter::finish`] returns (the swap that follows relies on it).

use super::swap::cleaned_name;
use crate::batch::BatchMeta;
use crate::error::EngineError;
use crate::io::{BlockFile, Clock, OpenMode, Storage};
use crate::prealloc::{Prealloc, PreallocBudget};
use crate::segment::appender::Appender;
use crate::segment::file_name::FileKind;
use crate::segment::txn_index::TxnIndex;
use crate::segment::Segment;
use crate::small_file;
use crate::types::{Offset, TimestampMs};
use std::path::PathBuf;
use std::rc::Rc;

/// A cleaned segment being written, batch by batch, in offset order.
pub(crate) struct CleanedWriter<S: Storage> {
    storage: Rc<S>,
    dir: PathBuf,
    segment: Segment<S::File>,
    index_interval_bytes: u32,
}

impl<S: Storage> CleanedWriter<S> {
    /// Creates (or empties) `<base>.log.cleaned` in `dir`.
    pub(crate) async fn create(
        storage: Rc<S>,
        dir: PathBuf,
        base: Offset,
        index_interval_bytes: u32,
        clock: Rc<dyn Clock>,
    ) -> Result<Self, EngineError> {
        let path = dir.join(cleaned_name(base, FileKind::Log));
        let file = storage.open(&path, OpenMode::CreateReadWrite).await?;
        file.truncate(0).await?;
        let mut segment = Segment::new(base);
        segment.may_have_gaps = true;
        // Written once, front to back, then sealed: its writes extend the file (no
        // preallocation). Segments stay below 4 GiB (positions are u32); the group bound keeps
        // them smaller.
        let no_prealloc = Prealloc::new(PreallocBudget::new(0), clock, 0);
        segment.appender = Some(Appender::new(0, &[], 0, no_prealloc, u64::from(u32::MAX)));
        segment.file = Some(file);
        Ok(CleanedWriter {
            storage,
            dir,
            segment,
            index_interval_bytes,
        })
    }

    /// Appends one whole batch; returns its size.
    pub(crate) async fn append(
        &mut self,
        meta: &BatchMeta,
        bytes: &[u8],
    ) -> Result<usize, EngineError> {
        assert_eq!(meta.total_bytes, bytes.len());
        let segment = &mut self.segment;
        assert!(
            segment.size_bytes + bytes.len() as u64 <= u64::from(u32::MAX),
            "a cleaned segment stays below 4 GiB"
        );
        segment.note_batch(meta, self.index_interval_bytes);
        let file = segment.file.as_ref().expect("open while writing");
        let appender = segment
            .appender
            .as_mut()
            .expect("an appender while writing");
        appender
            .append(file, bytes)
            .await
            .map_err(EngineError::from_io)?;
        assert_eq!(appender.end(), segment.size_bytes);
        Ok(bytes.len())
    }

    /// Writes everything out, trims the file to its batches, syncs and closes it, then writes
    /// the indexes (`txn_index` only if it has entries, as a `.txnindex` exists only then).
    /// Returns the size and max timestamp of the cleaned segment.
    pub(crate) async fn finish(
        mut self,
        txn_index: &TxnIndex,
    ) -> Result<(u64, TimestampMs), EngineError> {
        let segment = &mut self.segment;
        let file = segment.file.take().expect("open while writing");
        let mut appender = segment.appender.take().expect("an appender while writing");
        appender.flush(&file).await.map_err(EngineError::from_io)?;
        file.truncate(segment.size_bytes).await?;
        file.sync().await?;
        file.close().await?;
        segment.seal_time_index();
        let storage = &*self.storage;
        let base = segment.base;
        let time_index = segment.time_index.encode();
        let index = segment.index.encode();
        small_file::write_atomic(
            storage,
            &self.dir,
            &cleaned_name(base, FileKind::TimeIndex),
            &time_index,
        )
        .await?;
        small_file::write_atomic(
            storage,
            &self.dir,
            &cleaned_name(base, FileKind::Index),
            &index,
        )
        .await?;
        if !txn_index.is_empty() {
            let name = cleaned_name(base, FileKind::TxnIndex);
            small_file::write_atomic(storage, &self.dir, &name, &txn_index.encode()).await?;
        }
        Ok((segment.size_bytes, segment.max_timestamp))
    }
}
