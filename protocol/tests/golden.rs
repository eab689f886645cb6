//! Golden-byte tests: request frames captured from real clients (see tests/golden/README.md)
//! decode, pass the length guard with exactly their own span, re-encode byte-identically, and
//! every record batch they carry validates (CRC, every codec decompressed, every record parsed).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use rill_protocol::api_registry;
use rill_protocol::kafka_protocol::messages::{ApiKey, RequestKind};
use rill_protocol::length_guard::check_request_body;
use rill_protocol::record::{batches, Compression};
use rill_protocol::request::{
    decode_request, decode_request_header, peek_header_prefix, Request, RequestError,
};

const DECOMPRESSED_BYTES_MAX: usize = 64 << 20;

fn frames_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/frames")
}

fn golden_frames() -> Vec<(String, Bytes)> {
    let mut frames: Vec<_> = std::fs::read_dir(frames_dir())
        .expect("golden frames directory")
        .map(|entry| entry.expect("dir entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "bin"))
        .map(|path| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, Bytes::from(std::fs::read(&path).expect("read frame")))
        })
        .collect();
    frames.sort();
    frames
}

/// Decodes a frame whose version is outside Rill's advertised range, through the same guard.
fn decode_outside_registry(frame: Bytes, api_key: ApiKey, api_version: i16) -> Request {
    let mut buf = frame;
    let header_version = api_key.request_header_version(api_version);
    let header = decode_request_header(&mut buf, header_version).expect("header");
    check_request_body(api_key, api_version, &buf).expect("length guard");
    let body = RequestKind::decode(api_key, &mut buf, api_version).expect("body");
    let correlation_id = header.correlation_id;
    Request {
        header,
        api_key,
        api_version,
        correlation_id,
        body,
    }
}

fn check_produce_records(
    name: &str,
    request: &Request,
    codecs: &mut HashSet<Compression>,
) -> usize {
    let RequestKind::Produce(produce) = &request.body else {
        return 0;
    };
    let mut checked = 0;
    for topic in &produce.topic_data {
        for partition in &topic.partition_data {
            let records = partition.records.clone().expect("records present");
            for batch in batches(records) {
                let batch = batch.unwrap_or_else(|e| panic!("{name}: {e}"));
                batch
                    .validate_records(DECOMPRESSED_BYTES_MAX)
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
                codecs.insert(batch.attributes().compression().expect("known codec"));
                checked += 1;
            }
        }
    }
    checked
}

#[test]
fn every_client_frame_decodes_and_reencodes_identically() {
    let frames = golden_frames();
    assert!(
        frames.len() >= 50,
        "golden corpus has {} frames",
        frames.len()
    );
    let (mut decoded, mut identical, mut unknown, mut batches_checked) = (0, 0, 0, 0);
    let mut outside = 0;
    let mut codecs = HashSet::new();
    for (name, frame) in &frames {
        let prefix = peek_header_prefix(frame).expect("8-byte prefix");
        let known = ApiKey::try_from(prefix.api_key)
            .ok()
            .and_then(api_registry::entry);
        match decode_request(frame.clone()) {
            Ok(request) => {
                decoded += 1;
                assert_eq!(request.correlation_id, prefix.correlation_id, "{name}");
                batches_checked += check_produce_records(name, &request, &mut codecs);
                let again = request.encode().expect("re-encodes");
                assert_eq!(&again[..], &frame[..], "{name}: re-encoding differs");
                identical += 1;
            }
            Err(RequestError::UnsupportedVersion {
                api_key,
                api_version,
                ..
            }) => {
                // The capture broker advertised other ranges than Rill; the codec must still
                // handle the real bytes at that version.
                let request = decode_outside_registry(frame.clone(), api_key, api_version);
                batches_checked += check_produce_records(name, &request, &mut codecs);
                assert_eq!(
                    &request.encode().expect("re-encodes")[..],
                    &frame[..],
                    "{name}: re-encoding differs"
                );
                outside += 1;
            }
            Err(RequestError::UnknownApiKey { correlation_id, .. }) => {
                assert!(known.is_none(), "{name}: registered API refused");
                assert_eq!(correlation_id, prefix.correlation_id);
                unknown += 1;
            }
            Err(e) => panic!("{name}: {e}"),
        }
    }
    println!(
        "{} frames: {decoded} decoded + {outside} outside Rill's ranges decoded by the codec, all \
         {identical}+{outside} byte-identical; {unknown} unregistered APIs; {batches_checked} \
         record batches validated",
        frames.len()
    );
    assert!(batches_checked > 10);
    assert_eq!(
        codecs.len(),
        5,
        "every codec captured from a real client: {codecs:?}"
    );
}

#[test]
fn every_truncation_of_every_frame_is_an_error_not_a_panic() {
    for (name, frame) in golden_frames() {
        // Byte-by-byte for small frames, sampled for large ones: keeps the test fast.
        let step = (frame.len() / 200).max(1);
        for len in (0..frame.len()).step_by(step) {
            let result = decode_request(frame.slice(..len));
            if let Ok(request) = result {
                // A prefix can itself be a valid message (e.g. trailing optional tags absent).
                assert!(request.api_version >= 0, "{name} prefix {len}");
            }
        }
    }
}
