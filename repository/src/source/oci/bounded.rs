//! A writer that keeps at most a given number of bytes: a blob is read through it, so that a
//! registry sending more than the manifest declared fills no memory beyond that.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::AsyncWrite;

pub struct Bounded {
    bytes: Vec<u8>,
    limit: u64,
    exceeded: bool,
}

impl Bounded {
    pub fn new(limit: u64) -> Bounded {
        Bounded { bytes: Vec::new(), limit, exceeded: false }
    }

    /// Whether more than the limit was offered (the write failed there).
    pub fn exceeded(&self) -> bool {
        self.exceeded
    }

    pub fn into_inner(self) -> Vec<u8> {
        self.bytes
    }
}

impl AsyncWrite for Bounded {
    fn poll_write(mut self: Pin<&mut Self>, _: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        if self.bytes.len() as u64 + buf.len() as u64 > self.limit {
            self.exceeded = true;
            let limit = self.limit;
            return Poll::Ready(Err(io::Error::other(format!("more than {limit} bytes"))));
        }
        self.bytes.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[tokio::test]
    async fn writes_stop_at_the_limit() {
        let mut out = Bounded::new(4);
        out.write_all(b"abcd").await.unwrap();
        assert!(!out.exceeded());
        assert!(out.write_all(b"e").await.is_err());
        assert!(out.exceeded());
        assert_eq!(out.into_inner(), b"abcd");
    }
}
