//! One request frame body (no size prefix) through dispatch: header, body decode, handler and
//! response encode. Cheaper per input than `request_stream`, so it explores single requests deeper.
#![no_main]
use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use rill_server_fuzz::{broker, run_frame};

fuzz_target!(|data: &[u8]| {
    let broker = broker();
    let _ = run_frame(&broker, Bytes::copy_from_slice(data));
});
