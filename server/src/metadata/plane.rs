//! The metadata plane's duties on this node's replica of it (group 0),
//! kept out of the partition actor that hosts the replica: the actor holds
//! a [`MetadataPlane`] for group 0 only and calls it once per settle that
//! committed, when it opens and when it publishes its status.
//!
//! The duties: publish the catalog as of the latest commit for the node's
//! other tasks (routing, rights, local answers), say whether that catalog is
//! current ([`CatalogFreshness`](crate::shared::CatalogFreshness)), and hand
//! the node every partition assignment placed here, changed or dropped
//! ([`Hosted`]). A CreateTopic proposed here is completed first from the
//! node's topic defaults ([`with_topic_defaults`]).

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use strand_host::catalog::{Assignment, Catalog};
use strand_host::group_host::{GroupHost, Progress};
use strand_partition::FileDisk;
use strand_wire::ops::CreateTopic;
use strand_wire::{Body, Msg, RequestHeader};
use tokio::sync::mpsc::UnboundedSender;

use crate::metadata::hosted::Hosted;
use crate::node::config::NodeConfig;
use crate::shared::Shared;

/// What the metadata plane's replica keeps to tell the node of changes.
#[derive(Debug)]
pub struct MetadataPlane {
    /// Where the node hears of the partitions hosted here (`None` when no
    /// node listens, as in tests of one actor).
    hosted: Option<UnboundedSender<Hosted>>,
    /// What was last handed to the node, by group.
    hosted_sent: BTreeMap<u64, Assignment>,
    /// The catalog's deletion mark the node last heard of in a
    /// `Hosted::CatalogLoaded`.
    catalog_announced: Option<(u64, usize)>,
}

impl MetadataPlane {
    /// The plane's duties for a replica just opened over `host`: the
    /// catalog it recovered is published at once.
    pub fn open(
        shared: &Shared,
        host: &GroupHost<FileDisk>,
        hosted: Option<UnboundedSender<Hosted>>,
    ) -> MetadataPlane {
        if let Some(catalog) = host.catalog() {
            shared.publish_catalog(catalog.clone());
        }
        MetadataPlane {
            hosted,
            hosted_sent: BTreeMap::new(),
            catalog_announced: None,
        }
    }

    /// Where the node hears of the partitions hosted here, for opening the
    /// replica again.
    pub fn hosted(&self) -> Option<UnboundedSender<Hosted>> {
        self.hosted.clone()
    }

    /// After a settle that committed: the catalog published, its freshness
    /// said, and the node handed every change of the partitions hosted here.
    pub fn after_commit(&mut self, shared: &Shared, host: &GroupHost<FileDisk>) {
        if let Some(catalog) = host.catalog() {
            shared.publish_catalog(catalog.clone());
        }
        publish_freshness(shared, &host.progress());
        self.hand_over_hosted(shared.config.node, host.catalog());
    }

    /// Hands every assignment hosted on node `me` to the node whenever it is
    /// new or changed (the node starts the group's actor or passes it the
    /// change), and says when one is no longer hosted here.
    pub fn hand_over_hosted(&mut self, me: u32, catalog: Option<&Catalog>) {
        let Some(hosted) = &self.hosted else { return };
        let Some(catalog) = catalog else {
            return;
        };
        let mark = Some(catalog.deletion_mark());
        if self.catalog_announced != mark {
            self.catalog_announced = mark;
            let _ = hosted.send(Hosted::CatalogLoaded);
        }
        let mut still_hosted = BTreeSet::new();
        for assignment in catalog.hosted_on(me) {
            still_hosted.insert(assignment.group);
            if self.hosted_sent.get(&assignment.group) != Some(assignment) {
                self.hosted_sent
                    .insert(assignment.group, assignment.clone());
                let _ = hosted.send(Hosted::Placed(assignment.clone()));
            }
        }
        let dropped: Vec<u64> = self
            .hosted_sent
            .keys()
            .filter(|group| !still_hosted.contains(group))
            .copied()
            .collect();
        for group in dropped {
            if let Some(assignment) = self.hosted_sent.remove(&group) {
                let _ = hosted.send(Hosted::Dropped(assignment));
            }
        }
    }
}

/// Tells the client port whether the catalog the replica published is
/// current: in normal status (it heard from its view's primary, or is it)
/// and every commit it heard of applied (`progress`).
pub fn publish_freshness(shared: &Shared, progress: &Progress) {
    let current = progress.status == strand_consensus::Status::Normal
        && progress.commit >= progress.commit_max;
    shared.set_catalog_current(current);
}

/// A CreateTopic with every policy it leaves unset filled in from this
/// node's `topic_defaults` (the cursor durability follows the topic's
/// durability), so that the replicated request is complete.
pub fn with_topic_defaults(
    config: &NodeConfig,
    request: &Msg<RequestHeader>,
) -> Result<Msg<RequestHeader>, strand_wire::BodyError> {
    let mut topic = CreateTopic::from_bytes(request.body())?;
    let durability = *topic.durability.get_or_insert(config.default_durability);
    topic.confirm.get_or_insert(config.default_confirm);
    topic.consumer_offset_durability.get_or_insert(durability);
    Ok(Msg::new(*request.header(), Bytes::from(topic.to_vec())))
}
