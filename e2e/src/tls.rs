//! A TLS front for a plain test server (wiremock on 127.0.0.1): clients that send credentials
//! only over HTTPS are tested against a server that speaks HTTPS, whose CA they are given.

use std::net::SocketAddr;

use butler_runtime::webhook::certificates::{issue, new_ca};
use tokio::net::{TcpListener, TcpStream};

pub struct TlsFront {
    /// `127.0.0.1:port`, answering TLS for `127.0.0.1` and `localhost`.
    pub addr: String,
    /// The CA that signed its certificate.
    pub ca_pem: String,
    task: tokio::task::JoinHandle<()>,
}

impl TlsFront {
    /// Terminates TLS on a port of its own and passes every connection on to `upstream`.
    pub async fn start(upstream: SocketAddr) -> TlsFront {
        let now = jiff::Timestamp::now();
        let ca = new_ca("test front CA", now, 1).expect("a CA");
        let serving = issue(&ca, &["127.0.0.1".to_string(), "localhost".to_string()], now, 1)
            .expect("a serving certificate");
        let config =
            butler_runtime::webhook::server_config(&serving.cert, &serving.key).expect("a TLS configuration");
        let acceptor = tokio_rustls::TlsAcceptor::from(config);
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a free port");
        let addr = listener.local_addr().expect("an address").to_string();
        let task = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    // A relay's small writes wait for acknowledgements under Nagle's
                    // algorithm (40 ms a round trip): the API server it stands for, like
                    // every Go server, sends at once.
                    let _ = tcp.set_nodelay(true);
                    let (Ok(mut tls), Ok(mut plain)) =
                        (acceptor.accept(tcp).await, TcpStream::connect(upstream).await)
                    else {
                        return;
                    };
                    let _ = plain.set_nodelay(true);
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                });
            }
        });
        TlsFront { addr, ca_pem: ca.cert, task }
    }
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        self.task.abort();
    }
}
