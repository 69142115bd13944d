//! A node's shards, as the node holds them: started (one thread each), told
//! to host a group (registered at once, opened by its shard), told of peer
//! liveness, and stopped. A group lives on the shard its id mixes to, for
//! its whole life.

use std::sync::Arc;
use std::thread::JoinHandle;

use strand_wal::Wal;
use tokio::sync::mpsc::UnboundedSender;

use crate::group::spec::GroupSpec;
use crate::metadata::hosted::Hosted;
use crate::node::config::SHARDS_MAX;
use crate::runtime::inbox::{Control, GroupInbox, LivenessNotifier, ShardQueues, Start};
use crate::runtime::input::Input;
use crate::runtime::shard::Shard;
use crate::shared::{GroupHandle, Shared};

/// A node's shards.
pub struct Shards {
    queues: Vec<ShardQueues>,
    threads: Vec<JoinHandle<()>>,
}

impl Shards {
    /// Starts `count` shard threads.
    pub fn start(shared: &Arc<Shared>, count: usize) -> std::io::Result<Shards> {
        assert!((1..=SHARDS_MAX).contains(&count), "1..={SHARDS_MAX} shards");
        let mut queues = Vec::with_capacity(count);
        let mut threads = Vec::with_capacity(count);
        for index in 0..count {
            let (shard_queues, inputs, controls) = ShardQueues::new();
            let mut shard = Shard::new(shared, shard_queues.clone(), inputs, controls);
            let thread = std::thread::Builder::new()
                .name(format!("shard-{index}"))
                .spawn(move || {
                    let span = tracing::info_span!("shard", index);
                    let _entered = span.enter();
                    shard.run();
                })?;
            queues.push(shard_queues);
            threads.push(thread);
        }
        Ok(Shards { queues, threads })
    }

    /// Hosts a group on its shard: registers its handle (so frames and
    /// requests reach it from now on) and has the shard open it. False if
    /// the group is hosted already. `hosted` receives, from the metadata
    /// plane's actor only, every partition assignment this node hosts.
    pub fn host(
        &self,
        shared: &Shared,
        wal: Wal,
        spec: GroupSpec,
        hosted: Option<UnboundedSender<Hosted>>,
    ) -> bool {
        let group = spec.group;
        let queues = &self.queues[self.shard_of(group)];
        let inbox = GroupInbox::new(group, queues);
        let handle = GroupHandle {
            inbox: inbox.clone(),
            slots: spec.slots.clone().into(),
            placement: Arc::new(std::sync::Mutex::new(None)),
        };
        if !shared.register(group, handle) {
            return false;
        }
        let start = Start { spec, wal, hosted };
        if queues
            .control
            .send(Control::Start(Box::new(start)))
            .is_err()
        {
            tracing::error!(group, "shard: gone; the group stays down");
            shared.unregister(group);
            return false;
        }
        // A wakeup only: the shard also looks at its control queue every tick.
        let _ = inbox.try_send(Input::Storage);
        true
    }

    /// What tells every shard of a peer node's liveness.
    pub fn liveness_notifier(&self) -> LivenessNotifier {
        LivenessNotifier::new(self.queues.clone())
    }

    /// Closes every group (clean marks where trusted) and joins the shards.
    pub fn stop(self) {
        for queues in &self.queues {
            queues.send_control(Control::Stop);
        }
        for thread in self.threads {
            if thread.join().is_err() {
                tracing::error!("shard: a shard thread panicked");
            }
        }
    }

    /// The shard a group lives on: spread by a mix of its id (ids are
    /// handed out in order, topic by topic).
    fn shard_of(&self, group: u64) -> usize {
        let mut mixed = group.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        mixed ^= mixed >> 31;
        (mixed % self.queues.len() as u64) as usize
    }
}
