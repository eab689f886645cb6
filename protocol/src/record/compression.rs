//! Decompression of a batch's records section (validation, timestamp lookups, compaction) and
//! compression of rebuilt batches (compaction keeps a batch's codec). The append path never
//! touches either: the broker stores batches as the producer compressed them.
//!
//! Output is capped (`decompressed_bytes_max`) so a small "zip bomb" batch cannot make the
//! broker allocate without bound; the cap is checked while streaming, before growing further.
//!
//! Compression writes what Kafka's Java producer writes, so every client reads it back:
//! gzip, snappy in xerial framing (32 KiB blocks), an LZ4 frame of independent 64 KiB blocks,
//! a zstd frame.

use std::io::Read;

use super::attributes::Compression;

/// xerial snappy-java framing, used by Java clients and librdkafka.
const XERIAL_MAGIC: &[u8; 8] = b"\x82SNAPPY\x00";
/// Bytes of the xerial header: magic + version + compatible version.
const XERIAL_HEADER_BYTES: usize = 16;
/// Uncompressed bytes per xerial block (snappy-java's default block size).
const XERIAL_BLOCK_BYTES: usize = 32 << 10;
/// zstd level: the library default, as Kafka's producer uses.
const ZSTD_LEVEL: i32 = 3;

/// Compresses `input` with `codec` (the inverse of [`decompress`]) at its default level.
pub fn compress(codec: Compression, input: &[u8]) -> Result<Vec<u8>, String> {
    compress_with_level(codec, input, None)
}

/// [`compress`] at `level` (Kafka's `compression.{gzip,lz4,zstd}.level`; `None`: the
/// default; ignored by codecs without levels). Out-of-range levels are the caller's to refuse.
pub fn compress_with_level(
    codec: Compression,
    input: &[u8],
    level: Option<i32>,
) -> Result<Vec<u8>, String> {
    use std::io::Write;
    match codec {
        Compression::None => Ok(input.to_vec()),
        Compression::Gzip => {
            let level = level.map_or(flate2::Compression::default(), |l| {
                flate2::Compression::new(l.clamp(0, 9) as u32)
            });
            let mut enc = flate2::write::GzEncoder::new(Vec::new(), level);
            enc.write_all(input).map_err(|e| format!("gzip: {e}"))?;
            enc.finish().map_err(|e| format!("gzip: {e}"))
        }
        Compression::Snappy => snappy_xerial(input),
        Compression::Lz4 => {
            let mut enc = lz4::EncoderBuilder::new()
                .level(level.map_or(0, |l| l.clamp(0, 16) as u32))
                .block_size(lz4::BlockSize::Max64KB)
                .block_mode(lz4::BlockMode::Independent)
                .build(Vec::new())
                .map_err(|e| format!("lz4: {e}"))?;
            enc.write_all(input).map_err(|e| format!("lz4: {e}"))?;
            let (out, result) = enc.finish();
            result.map_err(|e| format!("lz4: {e}"))?;
            Ok(out)
        }
        Compression::Zstd => {
            zstd::encode_all(input, level.unwrap_or(ZSTD_LEVEL)).map_err(|e| format!("zstd: {e}"))
        }
    }
}

/// Snappy in snappy-java's xerial framing: header, then `[u32 BE length][raw block]` blocks.
fn snappy_xerial(input: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(XERIAL_HEADER_BYTES + input.len() / 2);
    out.extend_from_slice(XERIAL_MAGIC);
    out.extend_from_slice(&1i32.to_be_bytes()); // version
    out.extend_from_slice(&1i32.to_be_bytes()); // compatible version
    let mut encoder = snap::raw::Encoder::new();
    for block in input.chunks(XERIAL_BLOCK_BYTES) {
        let compressed = encoder
            .compress_vec(block)
            .map_err(|e| format!("snappy: {e}"))?;
        let len = u32::try_from(compressed.len()).expect("a block is small");
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(&compressed);
    }
    Ok(out)
}

/// Decompresses `input` with `codec`, failing if the output would exceed the cap.
pub fn decompress(
    codec: Compression,
    input: &[u8],
    decompressed_bytes_max: usize,
) -> Result<Vec<u8>, String> {
    match codec {
        Compression::None => capped_copy(input, decompressed_bytes_max),
        Compression::Gzip => read_capped(
            flate2::read::MultiGzDecoder::new(input),
            decompressed_bytes_max,
        ),
        Compression::Snappy => snappy(input, decompressed_bytes_max),
        Compression::Lz4 => lz4_frame(input, decompressed_bytes_max),
        Compression::Zstd => {
            let decoder =
                zstd::stream::read::Decoder::new(input).map_err(|e| format!("zstd: {e}"))?;
            read_capped(decoder, decompressed_bytes_max)
        }
    }
}

fn capped_copy(input: &[u8], max: usize) -> Result<Vec<u8>, String> {
    if input.len() > max {
        return Err(format!("{} bytes exceed the cap of {max}", input.len()));
    }
    Ok(input.to_vec())
}

/// Reads to the end, but at most `max` bytes (one more byte proves the cap was exceeded).
fn read_capped(reader: impl Read, max: usize) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    reader
        .take(limit)
        .read_to_end(&mut out)
        .map_err(|e| e.to_string())?;
    if out.len() > max {
        return Err(format!("decompressed size exceeds the cap of {max} bytes"));
    }
    Ok(out)
}

/// LZ4 frame format. The `lz4` reader returns early on a truncated or garbage frame without
/// an error, so the frame magic is checked up front and `finish` must confirm the frame ended.
fn lz4_frame(input: &[u8], max: usize) -> Result<Vec<u8>, String> {
    const LZ4_FRAME_MAGIC: [u8; 4] = 0x184D_2204u32.to_le_bytes();
    if !input.starts_with(&LZ4_FRAME_MAGIC) {
        return Err("lz4: not an LZ4 frame".to_owned());
    }
    let mut decoder = lz4::Decoder::new(input).map_err(|e| format!("lz4: {e}"))?;
    let out = read_capped(&mut decoder, max)?;
    let (_, finished) = decoder.finish();
    finished.map_err(|e| format!("lz4: {e}"))?;
    Ok(out)
}

/// Snappy: xerial framing (blocks of u32 length + raw snappy) or one raw block.
fn snappy(input: &[u8], max: usize) -> Result<Vec<u8>, String> {
    if !input.starts_with(XERIAL_MAGIC) {
        let mut out = Vec::new();
        snappy_block(input, max, &mut out)?;
        return Ok(out);
    }
    let mut rest = input
        .get(XERIAL_HEADER_BYTES..)
        .ok_or("snappy: short xerial header")?;
    let mut out = Vec::new();
    while !rest.is_empty() {
        let (len, tail) = rest
            .split_first_chunk::<4>()
            .ok_or("snappy: short block length")?;
        let len = u32::from_be_bytes(*len) as usize;
        let block = tail.get(..len).ok_or("snappy: block longer than input")?;
        snappy_block(block, max, &mut out)?;
        rest = &tail[len..];
    }
    Ok(out)
}

/// Appends one raw snappy block to `out`, checking its declared size against the cap first.
fn snappy_block(block: &[u8], max: usize, out: &mut Vec<u8>) -> Result<(), String> {
    let len = snap::raw::decompress_len(block).map_err(|e| format!("snappy: {e}"))?;
    if out.len() + len > max {
        return Err(format!("decompressed size exceeds the cap of {max} bytes"));
    }
    let start = out.len();
    out.resize(start + len, 0);
    let written = snap::raw::Decoder::new()
        .decompress(block, &mut out[start..])
        .map_err(|e| format!("snappy: {e}"))?;
    out.truncate(start + written);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    const TEXT: &[u8] = b"hello hello hello hello rill rill rill";

    #[test]
    fn gzip_and_cap() {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(TEXT).unwrap();
        let gz = enc.finish().unwrap();
        assert_eq!(decompress(Compression::Gzip, &gz, 1024).unwrap(), TEXT);
        assert!(decompress(Compression::Gzip, &gz, 10).is_err());
        assert!(decompress(Compression::Gzip, &gz[..5], 1024).is_err());
    }

    #[test]
    fn zstd_lz4_snappy_round_trip() {
        let z = zstd::encode_all(TEXT, 1).unwrap();
        assert_eq!(decompress(Compression::Zstd, &z, 1024).unwrap(), TEXT);
        let mut enc = lz4::EncoderBuilder::new().build(Vec::new()).unwrap();
        enc.write_all(TEXT).unwrap();
        let (l, res) = enc.finish();
        res.unwrap();
        assert_eq!(decompress(Compression::Lz4, &l, 1024).unwrap(), TEXT);
        assert!(
            decompress(Compression::Lz4, &l[..l.len() - 3], 1024).is_err(),
            "truncated"
        );
        assert!(
            decompress(Compression::Zstd, &z[..z.len() - 3], 1024).is_err(),
            "truncated"
        );
        let raw = snap::raw::Encoder::new().compress_vec(TEXT).unwrap();
        assert_eq!(decompress(Compression::Snappy, &raw, 1024).unwrap(), TEXT);
        let mut xerial = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01".to_vec();
        xerial.extend_from_slice(&(raw.len() as u32).to_be_bytes());
        xerial.extend_from_slice(&raw);
        assert_eq!(
            decompress(Compression::Snappy, &xerial, 1024).unwrap(),
            TEXT
        );
        assert!(decompress(Compression::Snappy, &xerial, 8).is_err());
    }

    #[test]
    fn compress_round_trips_every_codec() {
        let big: Vec<u8> = (0..100_000u32)
            .flat_map(|i| (i % 97).to_be_bytes())
            .collect();
        for codec in [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            for input in [&b""[..], TEXT, &big[..]] {
                let packed = compress(codec, input).unwrap();
                let cap = input.len().max(1);
                assert_eq!(decompress(codec, &packed, cap).unwrap(), input, "{codec:?}");
            }
        }
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for codec in [
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let r = decompress(codec, &[0xde, 0xad, 0xbe, 0xef], 1024);
            assert!(r.is_err(), "{codec:?} {r:?}");
            let _ = decompress(codec, &[], 1024); // empty may be Ok(empty); must not panic
        }
    }
}
