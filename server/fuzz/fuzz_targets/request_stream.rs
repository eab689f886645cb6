//! A connection's byte stream: frames cut by the real framing rule, each dispatched in order to
//! one in-memory broker, so sequences (CreateTopics, Produce, Fetch, group joins...) interact.
//! The seed corpus is each real client's captured session (protocol/tests/golden/frames).
#![no_main]
use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use rill_server_fuzz::{broker, frame_len, request_bytes_max, run_frame, Next};

fuzz_target!(|data: &[u8]| {
    let broker = broker();
    let max = request_bytes_max(&broker);
    let mut rest = data;
    // An error (negative, tiny or oversized size prefix) closes the connection; None waits for
    // bytes that never come: both end the stream.
    while let Ok(Some(n)) = frame_len(rest, max) {
        let body = Bytes::copy_from_slice(&rest[4..n]);
        rest = &rest[n..];
        if run_frame(&broker, body) == Next::Stop {
            break;
        }
    }
});
