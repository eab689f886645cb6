//! Framing: `frame_len` on arbitrary bytes and maxima never panics and stays consistent.
#![no_main]
use libfuzzer_sys::fuzz_target;
use rill_protocol::frame::frame_len;

fuzz_target!(|data: &[u8]| {
    let max = data.first().map_or(0, |b| usize::from(*b) * 4);
    if let Ok(Some(n)) = frame_len(data, max) {
        assert!(n <= data.len());
        assert!(n - 4 <= max);
    }
});
