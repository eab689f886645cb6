//! `rill check DATA_DIR --remote-config FILE`: the remote tier of every tiered partition
//! against its remote log metadata (`crate::tiered::metadata`).
//!
//! For each partition directory with a `remote-log-metadata` file, the objects under its key
//! prefix are listed (the object store of FILE's `rill.remote.*`) and compared:
//!
//! ```text
//! ok       remote orders-0: 12 copies, offsets 0..3599, 74 objects
//! DAMAGED  remote orders-1: orphan rill/orders-…/1/00000000000000000400-….log (no record names it)
//! DAMAGED  remote orders-1: dangling 00000000000000000800-… COPY_FINISHED without its .index
//! note     remote orders-2: 1 copy unfinished (COPY_STARTED or DELETE_STARTED): the broker cleans it up at start
//! ```
//! An orphan is an object whose copy id no record names; a dangling record is a finished copy
//! missing one of its objects. Unfinished records are what a crash leaves; the broker deletes
//! their objects at its next start, so they are notes. Exit status as `rill check`'s.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Write};
use std::path::Path;

use crate::tiered::keys::ObjectKind;
use crate::tiered::metadata::{RemoteLogMetadata, RemoteSegment, SegmentState, METADATA_FILE};
use crate::tiered::settings::RemoteStorageSettings;
use crate::tiered::store::{list_blocking, s3_client};
use rill_types::Offset;

use super::check::{EXIT_CLEAN, EXIT_DAMAGED, EXIT_ERROR};

/// What one partition's check found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct RemoteFindings {
    /// Objects no record names.
    pub orphans: Vec<String>,
    /// Finished copies missing an object: (base offset, copy id, the missing kind).
    pub dangling: Vec<(i64, String, ObjectKind)>,
    /// Records left unfinished (cleaned up at the broker's next start).
    pub unfinished: usize,
}

impl RemoteFindings {
    fn is_damaged(&self) -> bool {
        !self.orphans.is_empty() || !self.dangling.is_empty()
    }
}

/// Compares `listed` object keys under `dir` with `meta`'s records.
pub fn compare(meta: &RemoteLogMetadata, dir: &str, listed: &[String]) -> RemoteFindings {
    let copy_of = |key: &str| -> Option<(String, String)> {
        // <dir>/<base>-<id>.<suffix>
        let name = key.strip_prefix(dir)?.strip_prefix('/')?;
        let (stem, suffix) = name.split_once('.')?;
        let (_, id) = stem.split_once('-')?;
        Some((id.to_string(), suffix.to_string()))
    };
    let mut by_copy: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut findings = RemoteFindings::default();
    let named: BTreeSet<String> = meta
        .segments()
        .iter()
        .map(|s| s.id.simple().to_string())
        .collect();
    for key in listed {
        match copy_of(key) {
            Some((id, suffix)) if named.contains(&id) => {
                by_copy.entry(id).or_default().insert(suffix);
            }
            _ => findings.orphans.push(key.clone()),
        }
    }
    for segment in meta.segments() {
        if segment.state != SegmentState::CopyFinished {
            findings.unfinished += 1;
            continue;
        }
        let id = segment.id.simple().to_string();
        let present = by_copy.get(&id);
        for kind in &segment.objects {
            if !present.is_some_and(|p| p.contains(kind.suffix())) {
                findings
                    .dangling
                    .push((segment.base_offset, id.clone(), *kind));
            }
        }
    }
    findings
}

/// Runs the remote check of every tiered partition under `data_dir`.
pub fn run(data_dir: &Path, config: &Path, out: &mut dyn Write) -> io::Result<i32> {
    let settings = match settings_of(config) {
        Ok(settings) => settings,
        Err(why) => {
            writeln!(out, "error: {}: {why}", config.display())?;
            return Ok(EXIT_ERROR);
        }
    };
    let s3 = match s3_client(&settings) {
        Ok(s3) => s3,
        Err(why) => {
            writeln!(out, "error: the object store: {why}")?;
            return Ok(EXIT_ERROR);
        }
    };
    let mut status = EXIT_CLEAN;
    for dir in super::check::partition_dirs(data_dir)? {
        let path = dir.join(METADATA_FILE);
        if !path.exists() {
            continue;
        }
        let name = dir
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        let meta = std::fs::read(&path).map_err(|e| e.to_string());
        let meta = meta.and_then(|bytes| RemoteLogMetadata::decode(Some(&bytes)));
        let checked = meta.and_then(|meta| {
            let dir = meta
                .keys_dir()
                .ok_or("no key prefix recorded yet")?
                .to_string();
            let listed = list_blocking(&s3, &format!("{dir}/")).map_err(|e| e.to_string())?;
            let keys: Vec<String> = listed.into_iter().map(|(k, _)| k).collect();
            Ok((compare(&meta, &dir, &keys), meta, keys.len()))
        });
        match checked {
            Ok((findings, meta, objects)) => {
                print_findings(&name, &findings, &meta, objects, out)?;
                if findings.is_damaged() {
                    status = status.max(EXIT_DAMAGED);
                }
            }
            Err(why) => {
                writeln!(out, "ERROR    remote {name}: {why}")?;
                status = EXIT_ERROR;
            }
        }
    }
    Ok(status)
}

fn settings_of(config: &Path) -> Result<RemoteStorageSettings, String> {
    let properties = crate::config::read_properties_file(config).map_err(|e| e.to_string())?;
    let mut settings = RemoteStorageSettings::default();
    for (key, value) in &properties {
        settings.apply_property(key, value.trim())?;
    }
    Ok(settings)
}

fn print_findings(
    name: &str,
    findings: &RemoteFindings,
    meta: &RemoteLogMetadata,
    objects: usize,
    out: &mut dyn Write,
) -> io::Result<()> {
    for orphan in &findings.orphans {
        writeln!(
            out,
            "DAMAGED  remote {name}: orphan {orphan} (no record names it)"
        )?;
    }
    for (base, id, kind) in &findings.dangling {
        let suffix = kind.suffix();
        writeln!(
            out,
            "DAMAGED  remote {name}: dangling {base:020}-{id} COPY_FINISHED without its .{suffix}"
        )?;
    }
    if findings.unfinished > 0 {
        let n = findings.unfinished;
        writeln!(out, "note     remote {name}: {n} unfinished (COPY_STARTED or DELETE_STARTED): the broker cleans them up at start")?;
    }
    if findings.is_damaged() {
        return Ok(());
    }
    let finished: Vec<&RemoteSegment> = meta
        .segments()
        .iter()
        .filter(|s| s.state == SegmentState::CopyFinished)
        .collect();
    let (first, last) = (
        meta.earliest_offset().unwrap_or(Offset(0)),
        meta.highest_offset().unwrap_or(Offset(-1)),
    );
    writeln!(
        out,
        "ok       remote {name}: {} copies, offsets {}..{}, {objects} objects",
        finished.len(),
        first.0,
        last.0
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use rill_engine::tiering::SealedSegment;
    use rill_types::TimestampMs;

    #[test]
    fn orphans_and_dangling_records_are_found() {
        let mut meta = RemoteLogMetadata::decode(None).unwrap();
        let sealed = SealedSegment {
            base: Offset(0),
            next_offset: Offset(10),
            size_bytes: 10,
            max_timestamp: TimestampMs(1),
        };
        let mut done = RemoteSegment::started(&sealed, vec![]);
        done.objects = vec![ObjectKind::Log, ObjectKind::Index];
        done.state = SegmentState::CopyFinished;
        meta.put(done.clone());
        let id = done.id.simple();
        let ok = [
            format!("d/00000000000000000000-{id}.log"),
            format!("d/00000000000000000000-{id}.index"),
        ];
        assert_eq!(compare(&meta, "d", &ok), RemoteFindings::default());
        let stray = "d/00000000000000000010-0000000000000000000000000000abcd.log".to_string();
        let found = compare(&meta, "d", &[ok[0].clone(), stray.clone()]);
        assert_eq!(found.orphans, vec![stray]);
        assert_eq!(found.dangling, vec![(0, id.to_string(), ObjectKind::Index)]);
        assert!(found.is_damaged());
    }
}
