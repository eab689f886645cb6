//! Non-blocking socket calls glommio 0.9 does not offer: a vectored send of many `Bytes`
//! (a Fetch response's header pieces and record chunks, uncopied) and a receive into a
//! `BytesMut`'s spare capacity (no zero-filling first).
//!
//! Both use `MSG_DONTWAIT` on the connection's raw descriptor and return `Ok(None)` when the
//! socket is not ready; the caller then waits for readiness through glommio and retries.

use std::io;
use std::os::fd::RawFd;

use bytes::{BufMut, Bytes, BytesMut};

/// Most buffers handed to one `sendmsg` (Linux's `IOV_MAX` is 1024).
pub const IOVECS_MAX: usize = 64;

/// Sends as much of `parts` (skipping the first `skip` bytes) as the socket takes now, in one
/// `sendmsg`. `Ok(None)` if it takes nothing now (would block).
pub fn send_vectored(fd: RawFd, parts: &[Bytes], skip: usize) -> io::Result<Option<usize>> {
    let mut iovecs = [libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }; IOVECS_MAX];
    let mut count = 0;
    let mut skip = skip;
    for part in parts {
        if count == IOVECS_MAX {
            break;
        }
        if skip >= part.len() {
            skip -= part.len();
            continue;
        }
        let rest = &part[skip..];
        skip = 0;
        iovecs[count] = libc::iovec {
            iov_base: rest.as_ptr() as *mut libc::c_void,
            iov_len: rest.len(),
        };
        count += 1;
    }
    if count == 0 {
        return Ok(Some(0));
    }
    // SAFETY: a zeroed msghdr is valid (no name, no control data); its iovecs point into
    // `parts`, which outlive the call, and the kernel only reads through them.
    let sent = unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = iovecs.as_mut_ptr();
        msg.msg_iovlen = count;
        libc::sendmsg(fd, &msg, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL)
    };
    would_block_as_none(sent)
}

/// Receives at most `max` bytes into the spare capacity of `buf` (growing it if it has none),
/// without initializing that memory first. `Ok(Some(0))` at end of stream, `Ok(None)` if
/// nothing is there now (would block).
pub fn recv_into(fd: RawFd, buf: &mut BytesMut, max: usize) -> io::Result<Option<usize>> {
    assert!(max > 0);
    buf.reserve(max);
    let spare = buf.chunk_mut();
    let len = spare.len().min(max);
    // SAFETY: `spare` is writable memory of at least `len` bytes owned by `buf`; recv writes
    // at most `len` bytes into it and reads none.
    let got = unsafe {
        libc::recv(
            fd,
            spare.as_mut_ptr() as *mut libc::c_void,
            len,
            libc::MSG_DONTWAIT,
        )
    };
    let got = would_block_as_none(got)?;
    if let Some(n) = got {
        assert!(n <= len);
        // SAFETY: recv initialized the first `n` bytes of the spare capacity.
        unsafe { buf.advance_mut(n) };
    }
    Ok(got)
}

fn would_block_as_none(result: isize) -> io::Result<Option<usize>> {
    if result >= 0 {
        return Ok(Some(result as usize));
    }
    let e = io::Error::last_os_error();
    match e.kind() {
        // Interrupted: nothing happened; waiting for readiness and retrying is right too.
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
        _ => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    #[test]
    fn vectored_send_skips_and_sends_every_part_in_order() {
        let (a, mut b) = UnixStream::pair().unwrap();
        let parts = vec![
            Bytes::from_static(b"head"),
            Bytes::new(),
            Bytes::from(vec![7u8; 3000]),
            Bytes::from_static(b"tail"),
        ];
        let sent = send_vectored(a.as_raw_fd(), &parts, 2).unwrap().unwrap();
        assert_eq!(sent, 2 + 3000 + 4);
        let mut got = vec![0u8; sent];
        b.read_exact(&mut got).unwrap();
        assert_eq!(&got[..2], b"ad");
        assert!(got[2..3002].iter().all(|&x| x == 7));
        assert_eq!(&got[3002..], b"tail");
        assert_eq!(send_vectored(a.as_raw_fd(), &parts, 3011).unwrap(), Some(0));
    }

    #[test]
    fn a_full_socket_would_block_and_recv_fills_spare_capacity() {
        let (a, mut b) = UnixStream::pair().unwrap();
        let big = vec![Bytes::from(vec![1u8; 1 << 20])];
        let mut total = 0;
        while let Some(n) = send_vectored(a.as_raw_fd(), &big, total % (1 << 20)).unwrap() {
            total += n;
            assert!(total < 64 << 20, "the socket never filled");
        }
        let mut buf = BytesMut::with_capacity(16);
        buf.extend_from_slice(b"x");
        assert_eq!(recv_into(a.as_raw_fd(), &mut buf, 100).unwrap(), None);
        b.write_all(b"hello").unwrap();
        assert_eq!(recv_into(a.as_raw_fd(), &mut buf, 3).unwrap(), Some(3));
        assert_eq!(&buf[..], b"xhel");
        assert_eq!(recv_into(a.as_raw_fd(), &mut buf, 100).unwrap(), Some(2));
        let (c, d) = UnixStream::pair().unwrap();
        drop(d);
        assert_eq!(
            recv_into(c.as_raw_fd(), &mut buf, 100).unwrap(),
            Some(0),
            "end of stream"
        );
    }
}
