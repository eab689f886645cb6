//! Request header + body decoding (length guard, then the generated codec) on arbitrary
//! frame bodies: must return a value or an error, never panic or abort on allocation.
#![no_main]
use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use rill_protocol::request::decode_request;

fuzz_target!(|data: &[u8]| {
    if let Ok(request) = decode_request(Bytes::copy_from_slice(data)) {
        assert!(request.api_version >= 0);
    }
});
