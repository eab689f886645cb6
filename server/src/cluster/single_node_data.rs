//! A cluster node refuses to start on a single node's data directory.
//!
//! A single node keeps its topics in the registry and its coordinators' state in private logs
//! (`__rill_groups/`, `__rill_txn/`); a cluster node takes its topics from the metadata log
//! (the first image replaces the registry, and [`super::deletions`] then deletes every topic
//! the log does not name) and its coordinators' state from the replicated internal topics.
//! Rill does not migrate one into the other, so starting a cluster node on such a directory
//! would delete its topics and silently forget its committed offsets and transactions. It
//! stops at start instead, saying what it found and what to do.
//!
//! A data directory has run as a cluster node once it holds `meta.properties` (written at the
//! first cluster start, before any topic reaches the registry) or the metadata log; only a
//! directory with neither is looked into.

use std::path::Path;

use crate::topics::TopicRegistry;

/// The file every cluster start writes first ([`super::agent::log_dir_id`]).
const CLUSTER_MARK: &str = "meta.properties";

/// Err, naming what it holds, when `data_dir` holds a single node's topics, committed offsets
/// or transaction state and has never run as a cluster node.
pub fn refuse_single_node_data(data_dir: &Path, registry: &TopicRegistry) -> anyhow::Result<()> {
    let clustered = data_dir.join(CLUSTER_MARK).exists()
        || data_dir.join(crate::internal_topics::METADATA_DIR).exists();
    if clustered {
        return Ok(());
    }
    let mut found = Vec::new();
    let topics = registry.list().len();
    if topics > 0 {
        found.push(format!("{topics} topic(s)"));
    }
    for (dir, what) in [
        (crate::internal_topics::OFFSETS_DIR, "committed offsets"),
        (crate::internal_topics::TXN_DIR, "transaction state"),
    ] {
        if holds_data(&data_dir.join(dir)) {
            found.push(format!("{what} in {dir}/"));
        }
    }
    if found.is_empty() {
        return Ok(());
    }
    anyhow::bail!(
        "the data directory {} holds a single node's data ({}), and this node is configured as \
         a cluster node (controller.quorum.voters): Rill does not move a single node's data into \
         a cluster, whose metadata would delete those topics and whose coordinators would not \
         read that state. Start it without controller.quorum.voters to keep serving it, or give \
         the cluster node an empty data directory (log.dirs)",
        data_dir.display(),
        found.join(", ")
    )
}

/// Whether any file under `dir` (any depth) has bytes in it.
fn holds_data(dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|entry| {
        let path = entry.path();
        match entry.metadata() {
            Ok(m) if m.is_dir() => holds_data(&path),
            Ok(m) => m.len() > 0,
            Err(_) => false,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry(dir: &Path) -> TopicRegistry {
        TopicRegistry::open(dir).unwrap()
    }

    #[test]
    fn a_fresh_or_clustered_directory_starts_and_a_single_nodes_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path();
        assert!(
            refuse_single_node_data(path, &registry(path)).is_ok(),
            "fresh"
        );

        // Empty private logs (a single node that never had a group) are nothing to lose.
        let offsets = path
            .join(crate::internal_topics::OFFSETS_DIR)
            .join("__consumer_offsets-0");
        std::fs::create_dir_all(&offsets).unwrap();
        std::fs::write(offsets.join("00000000000000000000.log"), b"").unwrap();
        assert!(refuse_single_node_data(path, &registry(path)).is_ok());

        std::fs::write(offsets.join("00000000000000000000.log"), b"batch").unwrap();
        let why = refuse_single_node_data(path, &registry(path)).unwrap_err();
        assert!(
            why.to_string()
                .contains("committed offsets in __rill_groups/"),
            "{why}"
        );

        let reg = registry(path);
        reg.create("t", 2, Default::default()).unwrap();
        let why = refuse_single_node_data(path, &reg).unwrap_err().to_string();
        assert!(
            why.contains("1 topic(s)") && why.contains("controller.quorum.voters"),
            "{why}"
        );

        // A directory that ran as a cluster node holds topics of its own.
        std::fs::write(path.join(CLUSTER_MARK), b"version=1\n").unwrap();
        assert!(refuse_single_node_data(path, &reg).is_ok());
    }
}
