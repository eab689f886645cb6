//! Stateful sequences against one in-process broker, covering every API: the live fuzzer's
//! spec-driven generator (tests/livefuzz) draws its choices from the fuzz input instead of a
//! seed, so libFuzzer's coverage steers which API, version, shape and values come next. Each
//! case goes through the real dispatcher and handlers on a broker whose coordinators write
//! membership and encode every record (what a cluster node does), and the broker's answers
//! teach the generator member ids and producer ids, so joins, syncs, commits and transactions
//! reach deep states. A closed connection ends the flow; the broker's state carries on.
#![no_main]
use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use rill_livefuzz::case::CaseGen;
use rill_livefuzz::entropy::FromBytes;
use rill_server_fuzz::{broker_writing_records, frame_len, request_bytes_max, run_frame_answer, Next};

/// Most cases one input runs (an input's bytes usually run out first).
const CASES_MAX: usize = 64;

fuzz_target!(|data: &[u8]| {
    let broker = broker_writing_records();
    let max = request_bytes_max(&broker);
    let mut e = FromBytes::new(data);
    let mut gen = CaseGen::new(0);
    for _ in 0..CASES_MAX {
        if e.is_spent() {
            break;
        }
        let case = gen.next(&mut e);
        // A torn frame or a size prefix that cannot start one closes the connection unread.
        let whole = matches!(frame_len(&case.frame, max), Ok(Some(n)) if n == case.frame.len());
        if !whole {
            gen.interrupt();
            continue;
        }
        let (next, answer) = run_frame_answer(&broker, Bytes::copy_from_slice(&case.frame[4..]));
        if let Some(answer) = answer {
            gen.state.learn(case.api_key, case.version, &case.picked, &answer);
        }
        if next == Next::Stop {
            gen.interrupt();
        }
    }
});
