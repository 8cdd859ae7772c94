//! A control-plane restart as its clients meet it: every connection drops, new ones are refused
//! for a while, then the starting server answers 503, then for a moment its authorizer (whose
//! caches are still filling) refuses watches with 403. Objects stay, as etcd keeps them.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// How long each part of a restart lasts.
#[derive(Debug, Clone, Copy)]
pub struct Outage {
    /// New connections are dropped as they come (the port has no server behind it).
    pub refused: Duration,
    /// Every request is answered 503 ServiceUnavailable (the server is starting).
    pub unavailable: Duration,
    /// Watches are answered 403 Forbidden (the authorizer has not synced its caches).
    pub watches_forbidden: Duration,
}

impl Default for Outage {
    /// A quick restart: a second of each.
    fn default() -> Self {
        Outage {
            refused: Duration::from_secs(1),
            unavailable: Duration::from_secs(1),
            watches_forbidden: Duration::from_secs(1),
        }
    }
}

/// Where a restart stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    Up,
    Refusing,
    Unavailable,
    WatchesForbidden,
}

/// The faults every connection and request consults.
pub(crate) struct Faults {
    pub phase: watch::Sender<Phase>,
    /// Grows at every restart: connections of an earlier one are cut.
    epoch: watch::Sender<u64>,
}

impl Default for Faults {
    fn default() -> Self {
        Faults { phase: watch::Sender::new(Phase::Up), epoch: watch::Sender::new(0) }
    }
}

impl Faults {
    pub fn phase(&self) -> Phase {
        *self.phase.borrow()
    }

    /// Cuts every open connection.
    pub fn sever(&self) {
        self.epoch.send_modify(|e| *e += 1);
    }
}

/// A listener whose connections the faults cut, and which drops new ones while refusing.
pub(crate) struct FaultyListener {
    pub inner: TcpListener,
    pub faults: Arc<Faults>,
}

impl axum::serve::Listener for FaultyListener {
    type Io = Severable;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Severable, std::net::SocketAddr) {
        loop {
            let (stream, address) = axum::serve::Listener::accept(&mut self.inner).await;
            if self.faults.phase() == Phase::Refusing {
                drop(stream);
                continue;
            }
            let mut epoch = self.faults.epoch.subscribe();
            let start = *epoch.borrow_and_update();
            let cut = Box::pin(async move {
                let _ = epoch.wait_for(|e| *e != start).await;
            });
            return (Severable { inner: stream, cut, severed: false }, address);
        }
    }

    fn local_addr(&self) -> std::io::Result<std::net::SocketAddr> {
        self.inner.local_addr()
    }
}

/// A connection that fails every read and write once a restart cuts it.
pub(crate) struct Severable {
    inner: TcpStream,
    cut: Pin<Box<dyn Future<Output = ()> + Send>>,
    severed: bool,
}

impl Severable {
    fn check(&mut self, cx: &mut Context<'_>) -> Result<(), std::io::Error> {
        if !self.severed && self.cut.as_mut().poll(cx).is_ready() {
            self.severed = true;
        }
        match self.severed {
            true => Err(std::io::Error::new(std::io::ErrorKind::ConnectionReset, "the API server restarted")),
            false => Ok(()),
        }
    }
}

impl AsyncRead for Severable {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if let Err(e) = self.check(cx) {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Severable {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        if let Err(e) = self.check(cx) {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        if let Err(e) = self.check(cx) {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
