//! A failed run's recent frames, per lane, written so that `livefuzz --replay DIR` sends them
//! again: each lane's frames in order on its own connection, lanes side by side, and then the
//! usual checks. File format, per frame: shape (u8, `Shape::ALL` index), length (u32 BE), bytes.

use std::fs;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use rill_livefuzz::case::Shape;

use crate::client::{Conn, ReadEnd};
use crate::hostile::Kept;

/// Writes every lane's kept frames under `dir`.
pub fn write(dir: &Path, lanes: &[Kept], reason: &str) -> std::io::Result<()> {
    fs::create_dir_all(dir)?;
    fs::write(dir.join("reason.txt"), format!("{reason}\n"))?;
    for (i, kept) in lanes.iter().enumerate() {
        let mut out = Vec::new();
        for (shape, frame) in kept {
            let index = Shape::ALL.iter().position(|s| s == shape).unwrap_or(0);
            out.push(index as u8);
            out.extend_from_slice(&(frame.len() as u32).to_be_bytes());
            out.extend_from_slice(frame);
        }
        fs::write(dir.join(format!("lane-{i:03}.bin")), out)?;
    }
    Ok(())
}

/// Reads the lanes written by [`write`].
pub fn read(dir: &Path) -> Result<Vec<Kept>, String> {
    let mut names: Vec<_> = fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "bin"))
        .collect();
    names.sort();
    names
        .iter()
        .map(|path| {
            let bytes = fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
            let mut kept = Kept::new();
            let mut at = 0;
            while at + 5 <= bytes.len() {
                let shape = Shape::ALL
                    .get(bytes[at] as usize)
                    .copied()
                    .unwrap_or(Shape::Valid);
                let len =
                    u32::from_be_bytes(bytes[at + 1..at + 5].try_into().expect("4 bytes")) as usize;
                let frame = bytes
                    .get(at + 5..at + 5 + len)
                    .ok_or_else(|| format!("{}: cut", path.display()))?;
                kept.push_back((shape, frame.to_vec()));
                at += 5 + len;
            }
            Ok(kept)
        })
        .collect()
}

/// Sends one lane's frames in order, reconnecting after a close; waits up to `wait` for each
/// answer (a frame that cuts its connection short is followed by a new connection).
pub fn send_lane(addr: SocketAddr, kept: &Kept, wait: Duration) -> (usize, usize) {
    let (mut answered, mut closed) = (0, 0);
    let mut conn = None;
    let mut buf = Vec::new();
    for (shape, frame) in kept {
        if conn.is_none() {
            conn = Conn::connect(addr, Duration::from_secs(5), wait).ok();
        }
        let Some(c) = conn.as_mut() else { continue };
        if c.send(frame).is_err() {
            conn = None;
            closed += 1;
            continue;
        }
        if matches!(shape, Shape::Torn | Shape::BadSize) {
            c.shutdown_write();
        }
        match c.read_frame(&mut buf) {
            Ok(()) => answered += 1,
            Err(ReadEnd::TimedOut) => {}
            Err(_) => {
                conn = None;
                closed += 1;
            }
        }
        if matches!(shape, Shape::Torn | Shape::BadSize) {
            conn = None;
        }
    }
    (answered, closed)
}
