//! The node's own client of its cluster: what the node's metadata duties
//! (epoch reports, expired members' removal, the partition-move checks)
//! use to ask the cluster, bootstrapped from every peer and, with TLS,
//! presenting the node's own certificate so that the nodes it calls know
//! it is a node.

use crate::shared::Shared;

/// A client of this cluster's metadata plane, bootstrapped from the peers.
pub async fn metadata_client(
    shared: &Shared,
) -> Result<strand_client::Client, strand_client::ClientError> {
    strand_client::Client::connect(own_client_config(shared)).await
}

/// The configuration of the node's own clients: every peer to bootstrap
/// from, and (with TLS) the node certificate to present, so that the nodes
/// it calls know it is a node.
pub fn own_client_config(shared: &Shared) -> strand_client::ClientConfig {
    let bootstrap: Vec<String> = shared
        .config
        .peers
        .iter()
        .map(|peer| peer.client_address.clone())
        .collect();
    let mut config = strand_client::ClientConfig::new(bootstrap);
    config.cluster = shared.config.cluster;
    config.tls = shared
        .tls
        .as_ref()
        .map(crate::net::tls::NodeTls::own_client);
    config
}
