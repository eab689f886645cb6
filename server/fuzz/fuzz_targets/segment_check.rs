//! Arbitrary bytes as a segment through `rill dump-log` and `rill check --repair`'s engine code
//! (see `rill_server_fuzz::segment`).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    rill_server_fuzz::segment::check_segment(data);
});
