//! Size-prefixed framing: every Kafka request and response is `int32 size` + `size` bytes.
//!
//! The reader calls [`frame_len`] on whatever bytes it has buffered: `Ok(None)` means "read
//! more" (not an error), `Ok(Some(n))` means the first `n` bytes (prefix included) are one whole
//! frame, and an error means the peer is lying or hostile and the connection should close.
//! The size is checked against a named maximum *before* the caller allocates room for it.

/// Bytes in the size prefix of every frame.
pub const SIZE_PREFIX_BYTES: usize = 4;

/// Kafka's `socket.request.max.bytes` default: the largest request body a broker accepts.
pub const REQUEST_BYTES_MAX_DEFAULT: usize = 100 * 1024 * 1024;

/// Smallest legal request body: api_key (2) + api_version (2) + correlation_id (4).
pub const REQUEST_BODY_BYTES_MIN: usize = 8;

/// Why a size prefix cannot start a valid frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The prefix is negative: no Kafka peer sends that.
    #[error("negative frame size {size}")]
    NegativeSize {
        /// The size as read off the wire.
        size: i32,
    },
    /// The prefix is smaller than the fixed part of a request header.
    #[error("frame size {size} is smaller than a request header ({REQUEST_BODY_BYTES_MIN} bytes)")]
    TooSmall {
        /// The size as read off the wire.
        size: usize,
    },
    /// The prefix exceeds the configured maximum (`socket.request.max.bytes`).
    #[error("frame size {size} exceeds the maximum of {max_bytes} bytes")]
    TooLarge {
        /// The size as read off the wire.
        size: usize,
        /// The configured maximum.
        max_bytes: usize,
    },
}

/// Length of the first whole frame in `buf`, size prefix included, or `None` if more bytes
/// are needed. `max_bytes` bounds the body (the prefix is not counted, as in Kafka).
///
/// ```
/// use rill_protocol::frame::{frame_len, REQUEST_BYTES_MAX_DEFAULT};
/// let frame = [0, 0, 0, 8, 0, 18, 0, 0, 0, 0, 0, 1];
/// assert_eq!(frame_len(&frame[..3], REQUEST_BYTES_MAX_DEFAULT), Ok(None));
/// assert_eq!(frame_len(&frame[..11], REQUEST_BYTES_MAX_DEFAULT), Ok(None));
/// assert_eq!(frame_len(&frame, REQUEST_BYTES_MAX_DEFAULT), Ok(Some(12)));
/// ```
pub fn frame_len(buf: &[u8], max_bytes: usize) -> Result<Option<usize>, FrameError> {
    let Some(prefix) = buf.first_chunk::<SIZE_PREFIX_BYTES>() else {
        return Ok(None);
    };
    let body_bytes = body_len(i32::from_be_bytes(*prefix), max_bytes)?;
    let frame_bytes = SIZE_PREFIX_BYTES + body_bytes;
    debug_assert!(frame_bytes > SIZE_PREFIX_BYTES);
    if buf.len() < frame_bytes {
        return Ok(None);
    }
    Ok(Some(frame_bytes))
}

/// Validates a size prefix and returns the body length it announces.
pub fn body_len(size: i32, max_bytes: usize) -> Result<usize, FrameError> {
    let Ok(size) = usize::try_from(size) else {
        return Err(FrameError::NegativeSize { size });
    };
    if size < REQUEST_BODY_BYTES_MIN {
        return Err(FrameError::TooSmall { size });
    }
    if size > max_bytes {
        return Err(FrameError::TooLarge { size, max_bytes });
    }
    Ok(size)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prefixed(size: i32, body: &[u8]) -> Vec<u8> {
        let mut out = size.to_be_bytes().to_vec();
        out.extend_from_slice(body);
        out
    }

    #[test]
    fn empty_and_partial_prefix_need_more() {
        assert_eq!(frame_len(&[], 100), Ok(None));
        assert_eq!(frame_len(&[0, 0, 0], 100), Ok(None));
    }

    #[test]
    fn whole_frame_with_trailing_bytes_of_next_frame() {
        let mut buf = prefixed(8, &[1; 8]);
        buf.extend_from_slice(&[0, 0]);
        assert_eq!(frame_len(&buf, 100), Ok(Some(12)));
    }

    #[test]
    fn partial_body_needs_more() {
        let buf = prefixed(10, &[1; 9]);
        assert_eq!(frame_len(&buf, 100), Ok(None));
    }

    #[test]
    fn negative_size_is_rejected() {
        let buf = prefixed(-1, &[]);
        assert_eq!(
            frame_len(&buf, 100),
            Err(FrameError::NegativeSize { size: -1 })
        );
        let buf = prefixed(i32::MIN, &[]);
        assert!(frame_len(&buf, 100).is_err());
    }

    #[test]
    fn too_small_and_too_large_are_rejected_before_body_arrives() {
        assert_eq!(
            frame_len(&prefixed(0, &[]), 100),
            Err(FrameError::TooSmall { size: 0 })
        );
        assert_eq!(
            frame_len(&prefixed(7, &[]), 100),
            Err(FrameError::TooSmall { size: 7 })
        );
        let err = frame_len(&prefixed(101, &[]), 100);
        assert_eq!(
            err,
            Err(FrameError::TooLarge {
                size: 101,
                max_bytes: 100
            })
        );
        let err = frame_len(&prefixed(i32::MAX, &[]), REQUEST_BYTES_MAX_DEFAULT);
        assert!(matches!(err, Err(FrameError::TooLarge { .. })));
    }

    #[test]
    fn exactly_max_is_accepted() {
        let buf = prefixed(100, &[0; 100]);
        assert_eq!(frame_len(&buf, 100), Ok(Some(104)));
    }
}
