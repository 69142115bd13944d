//! A TCP proxy on each replica-bus link of a test cluster, so a test can cut
//! one node off from its peers while its client port stays up (the node
//! keeps answering clients but hears nothing from the other replicas).
//!
//! The bus has one connection per node pair, dialed by the lower id; the
//! lower node's configuration names the proxy as the higher node's replica
//! address, and the proxy forwards to the real one. A cut link forwards
//! nothing (what is read is dropped: a black hole, not a reset, as when a
//! network splits); a connection that lost bytes that way is closed once the
//! link heals, so both ends redial on a clean stream.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Bytes read per forwarding step.
const CHUNK_BYTES: usize = 64 * 1024;

/// One link's state, shared by its proxy's tasks.
#[derive(Debug, Default)]
struct Link {
    cut: AtomicBool,
    /// Bumped by every heal: a connection that dropped bytes closes once
    /// it sees a newer generation.
    heals: AtomicU64,
}

/// The proxies of every node pair of a cluster.
#[derive(Debug)]
pub struct BusProxies {
    /// By (lower id, higher id).
    links: BTreeMap<(u32, u32), Arc<Link>>,
}

impl BusProxies {
    /// Starts a proxy for each pair in `targets` ((lower, higher) → the
    /// higher node's real replica address) on `runtime`; returns the
    /// proxies and each pair's proxy address.
    pub fn start(
        runtime: &tokio::runtime::Runtime,
        targets: BTreeMap<(u32, u32), String>,
    ) -> (BusProxies, BTreeMap<(u32, u32), String>) {
        let mut links = BTreeMap::new();
        let mut addresses = BTreeMap::new();
        for (pair, target) in targets {
            let link = Arc::new(Link::default());
            let listener = runtime.block_on(async {
                TcpListener::bind("127.0.0.1:0")
                    .await
                    .expect("bind a bus proxy")
            });
            let address = listener.local_addr().expect("proxy address").to_string();
            runtime.spawn(serve(listener, target, Arc::clone(&link)));
            links.insert(pair, link);
            addresses.insert(pair, address);
        }
        (BusProxies { links }, addresses)
    }

    /// Cuts every link of `node`: it hears from no peer, no peer from it.
    pub fn isolate(&self, node: u32) {
        for link in self.links_of(node) {
            link.cut.store(true, Ordering::SeqCst);
        }
    }

    /// Heals every link of `node`.
    pub fn heal(&self, node: u32) {
        for link in self.links_of(node) {
            link.heals.fetch_add(1, Ordering::SeqCst);
            link.cut.store(false, Ordering::SeqCst);
        }
    }

    fn links_of(&self, node: u32) -> impl Iterator<Item = &Arc<Link>> {
        self.links
            .iter()
            .filter(move |((low, high), _)| *low == node || *high == node)
            .map(|(_, link)| link)
    }
}

async fn serve(listener: TcpListener, target: String, link: Arc<Link>) {
    while let Ok((inbound, _)) = listener.accept().await {
        let target = target.clone();
        let link = Arc::clone(&link);
        tokio::spawn(async move {
            let Ok(outbound) = TcpStream::connect(&target).await else {
                return; // the node is down: the dialer sees a close and redials
            };
            let _ = inbound.set_nodelay(true);
            let _ = outbound.set_nodelay(true);
            let (inbound_read, inbound_write) = inbound.into_split();
            let (outbound_read, outbound_write) = outbound.into_split();
            let forward = pump(inbound_read, outbound_write, Arc::clone(&link));
            let back = pump(outbound_read, inbound_write, link);
            tokio::select! {
                () = forward => {}
                () = back => {}
            }
        });
    }
}

/// Copies `from` to `to` while the link is up; drops what it reads while
/// the link is cut; ends when either side closes, or at the first read
/// after a heal if bytes were dropped.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    link: Arc<Link>,
) {
    let mut buffer = vec![0u8; CHUNK_BYTES];
    let mut dropped_in: Option<u64> = None;
    loop {
        let read = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(read) => read,
        };
        let heals = link.heals.load(Ordering::SeqCst);
        if dropped_in.is_some_and(|generation| generation != heals) {
            return; // the stream has a hole: close it, both ends redial
        }
        if link.cut.load(Ordering::SeqCst) {
            dropped_in = Some(heals);
            continue;
        }
        if dropped_in.is_some() {
            return;
        }
        if to.write_all(&buffer[..read]).await.is_err() {
            return;
        }
    }
}
